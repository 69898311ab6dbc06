//! Compiled rules and their evaluation: the evaluation context of a pod on a node, each filter
//! rule's verdict and score rule's raw score, every expression charged against its cost budget
//! as it runs.

use std::sync::Arc;

use cel::{Context, Env, Value};

use super::reads::pod_key;
use super::values::pod_value_reading;
use crate::engine::model::PodSpec;
use crate::engine::rule_cost::Metered;

/// A compiled filter rule.
#[derive(Debug)]
pub struct CompiledFilter {
    /// The rule's name.
    pub name: Arc<str>,
    /// Whether it reads only what a node class shares (see
    /// [`reads_only_class`](super::reads_only_class)).
    pub class_level: bool,
    /// Whether it reads the pod (see [`reads_pod`](super::reads_pod)).
    pub reads_pod: bool,
    /// The paths into the pod it reads (see [`pod_paths`](super::pod_paths)).
    pub(super) pod_paths: Option<Vec<Vec<String>>>,
    /// The paths into the node it reads (see [`node_paths`](super::node_paths)).
    pub(super) node_paths: Option<Vec<Vec<String>>>,
    /// The expression, charging its cost as it evaluates (see
    /// [`rule_cost`](crate::engine::rule_cost)).
    pub(super) program: Metered,
    /// The reason shown for the nodes it rejects.
    pub reason: Arc<str>,
}

/// A compiled score rule.
#[derive(Debug)]
pub struct CompiledScore {
    /// The rule's name.
    pub name: Arc<str>,
    /// Whether it reads only what a node class shares (see
    /// [`reads_only_class`](super::reads_only_class)).
    pub class_level: bool,
    /// Whether it reads the pod (see [`reads_pod`](super::reads_pod)).
    pub reads_pod: bool,
    /// The paths into the pod it reads (see [`pod_paths`](super::pod_paths)).
    pub(super) pod_paths: Option<Vec<Vec<String>>>,
    /// The paths into the node it reads (see [`node_paths`](super::node_paths)).
    pub(super) node_paths: Option<Vec<Vec<String>>>,
    /// The expression, charging its cost as it evaluates (see
    /// [`rule_cost`](crate::engine::rule_cost)).
    pub(super) program: Metered,
    /// The weight of its normalized score.
    pub weight: i64,
}

/// A policy's rules, compiled.
pub struct CompiledRules {
    pub(super) env: Arc<Env>,
    /// The filter rules, in order.
    pub filters: Vec<CompiledFilter>,
    /// The score rules, in order.
    pub scores: Vec<CompiledScore>,
    /// The paths into the pod the rules read ([`pod_paths`](super::pod_paths) of each), or `None`
    /// when one reads it some other way.
    pub(super) pod_reads: Option<Vec<Vec<String>>>,
}

impl std::fmt::Debug for CompiledRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledRules")
            .field("filters", &self.filters)
            .field("scores", &self.scores)
            .finish_non_exhaustive()
    }
}

/// Why the rules turned a node down: the reason shown in the pod's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleRejection(pub Arc<str>);

impl CompiledRules {
    /// Whether there is no rule.
    pub fn is_empty(&self) -> bool {
        self.filters.is_empty() && self.scores.is_empty()
    }

    /// Whether every rule is evaluated once per node class and pod, or once per node for every
    /// pod (it does not read the pod): the engine's plain pass then applies to the policy's pods.
    pub fn plain(&self) -> bool {
        self.filters.iter().all(|f| f.class_level || !f.reads_pod)
            && self.scores.iter().all(|s| s.class_level || !s.reads_pod)
    }

    /// Whether some rule is evaluated node by node and does not read the pod (its outcomes are
    /// kept in [`NodeRuleValues`](super::NodeRuleValues)).
    pub fn pod_free_per_node(&self) -> bool {
        self.filters.iter().any(|f| !f.class_level && !f.reads_pod)
            || self.scores.iter().any(|s| !s.class_level && !s.reads_pod)
    }

    /// Whether rule `k` (filters first, then scores) is evaluated once per node class.
    pub fn class_level(&self, k: usize) -> bool {
        match self.filters.get(k) {
            Some(f) => f.class_level,
            None => self.scores.get(k - self.filters.len()).is_some_and(|s| s.class_level),
        }
    }

    /// The pod's value for these rules: what they read of it ([`pod_value_reading`]).
    pub fn pod_value(&self, pod: &PodSpec) -> Value {
        pod_value_reading(pod, self.pod_reads.as_deref())
    }

    /// For rule `k` (filters first, then scores), the key under which a pod shares the rule's
    /// outcomes per class with the pods that read alike (see [`pod_paths`](super::pod_paths));
    /// `None` when the rule reads the pod whole.
    pub fn pod_key(&self, k: usize, pod: &Value) -> Option<String> {
        let paths = match self.filters.get(k) {
            Some(f) => f.pod_paths.as_deref(),
            None => self.scores.get(k - self.filters.len())?.pod_paths.as_deref(),
        }?;
        Some(pod_key(pod, paths))
    }

    /// The number of rules: filters and scores.
    pub fn width(&self) -> usize {
        self.filters.len() + self.scores.len()
    }

    /// Runs the rules for `pod` (its [`pod_value`](super::pod_value)) on a node (its
    /// [`node_value`](super::node_value)): the raw score of each score rule, written to `scores`,
    /// or the reason the node is rejected (a filter rule false, or an evaluation error of any
    /// rule).
    pub fn evaluate(&self, pod: &Value, node: Value, scores: &mut [i64]) -> Result<(), RuleRejection> {
        let context = self.context(pod, node);
        for k in 0..self.filters.len() {
            self.filter(k, &context)?;
        }
        for (k, out) in scores.iter_mut().enumerate().take(self.scores.len()) {
            *out = self.score(k, &context)?;
        }
        Ok(())
    }

    /// The evaluation context of `pod` on `node`.
    pub fn context(&self, pod: &Value, node: Value) -> Context<'static, 'static> {
        let mut context = Context::with_env(Arc::clone(&self.env));
        context.add_variable_from_value("pod", pod.clone());
        context.add_variable_from_value("node", node);
        context
    }

    /// The evaluation context of a rule that does not read the pod (see
    /// [`reads_pod`](super::reads_pod)) on `node`: without the pod's value (the context converts
    /// whatever it is given, which costs more than most evaluations).
    pub fn node_context(&self, node: Value) -> Context<'static, 'static> {
        let mut context = Context::with_env(Arc::clone(&self.env));
        context.add_variable_from_value("node", node);
        context
    }

    /// The paths into the node rule `k` reads (see [`node_paths`](super::node_paths)), when it
    /// reads it only through such paths.
    pub fn node_paths(&self, k: usize) -> Option<&[Vec<String>]> {
        match self.filters.get(k) {
            Some(f) => f.node_paths.as_deref(),
            None => self.scores.get(k - self.filters.len())?.node_paths.as_deref(),
        }
    }

    /// Runs filter rule `k`: `Ok` when it keeps the node.
    pub fn filter(&self, k: usize, context: &Context<'_, '_>) -> Result<(), RuleRejection> {
        let Some(f) = self.filters.get(k) else {
            return Ok(());
        };
        match f.program.execute(context) {
            Ok(Value::Bool(true)) => Ok(()),
            Ok(Value::Bool(false)) => Err(RuleRejection(Arc::clone(&f.reason))),
            Ok(other) => Err(RuleRejection(Arc::from(format!(
                "rule {} returned {}, not bool",
                f.name,
                other.type_of()
            )))),
            Err(e) => Err(RuleRejection(Arc::from(format!("rule {} failed: {e}", f.name)))),
        }
    }

    /// Runs rule `k` counting the filter rules first, then the score rules: its
    /// [`RuleOutcome`].
    pub fn run(&self, k: usize, context: &Context<'_, '_>) -> RuleOutcome {
        if k < self.filters.len() {
            self.filter(k, context).map(|()| 0).map_err(|r| r.0)
        } else {
            self.score(k - self.filters.len(), context).map_err(|r| r.0)
        }
    }

    /// Runs score rule `k`: its raw score.
    pub fn score(&self, k: usize, context: &Context<'_, '_>) -> Result<i64, RuleRejection> {
        let Some(s) = self.scores.get(k) else {
            return Ok(0);
        };
        match s.program.execute(context) {
            Ok(Value::Int(n)) => Ok(n),
            Ok(Value::UInt(n)) => Ok(i64::try_from(n).unwrap_or(i64::MAX)),
            Ok(other) => Err(RuleRejection(Arc::from(format!(
                "rule {} returned {}, not int",
                s.name,
                other.type_of()
            )))),
            Err(e) => Err(RuleRejection(Arc::from(format!("rule {} failed: {e}", s.name)))),
        }
    }
}

/// A rule's outcome on a node: a score rule's raw score (0 for a filter rule that keeps the
/// node), or the reason the node is rejected.
pub type RuleOutcome = Result<i64, Arc<str>>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::model::NodeSpec;
    use crate::engine::rules::compile::tests::rules;
    use crate::engine::rules::values::{node_value, pod_value, NodeStatic};
    use crate::engine::snapshot::NodeUsage;

    #[test]
    fn evaluation_errors_reject_with_the_rules_name() {
        let compiled = rules(&[("missing", "node.metadata.labels['absent'] == 'x'")], &[])
            .compile()
            .unwrap();
        let empty = NodeStatic::of(&NodeSpec::default());
        let on_empty = rules(
            &[(
                "room",
                "node.status.requested.cpu + pod.requests.cpu <= node.status.allocatable.cpu",
            )],
            &[],
        )
        .compile()
        .unwrap();
        assert!(
            on_empty
                .evaluate(
                    &pod_value(&PodSpec::default()),
                    node_value(&empty, &NodeUsage::default()),
                    &mut []
                )
                .is_ok(),
            "cpu, memory and ephemeral-storage are present at 0"
        );
        let node = NodeStatic::of(&NodeSpec::default());
        let e = compiled
            .evaluate(
                &pod_value(&PodSpec::default()),
                node_value(&node, &NodeUsage::default()),
                &mut [],
            )
            .unwrap_err();
        assert!(e.0.starts_with("rule missing failed: "), "{}", e.0);
        let compiled = rules(&[], &[("text", "'a'")]).compile().unwrap();
        let e = compiled
            .evaluate(
                &pod_value(&PodSpec::default()),
                node_value(&node, &NodeUsage::default()),
                &mut [0],
            )
            .unwrap_err();
        assert_eq!(&*e.0, "rule text returned string, not int");
    }
}

#[cfg(test)]
mod cost_tests {
    use std::time::{Duration, Instant};

    use cel::Program;

    use super::*;
    use crate::engine::framework::tests::with_rules;
    use crate::engine::framework::{Deadline, Decision, EvalError, Evaluator};
    use crate::engine::model::Container;
    use crate::engine::model::NodeSpec;
    use crate::engine::plugins::testing::{node, pod, snapshot};
    use crate::engine::resources::Resources;
    use crate::engine::rule_cost::{self, Metered, PER_CALL_LIMIT};
    use crate::engine::rules::compile::tests::rules as tests_rules;
    use crate::engine::rules::values::{node_value, pod_value, NodeStatic};
    use crate::engine::snapshot::{NodeUsage, Snapshot};

    const LIMIT_REASON: &str = "operation cancelled: actual cost limit exceeded";

    /// An O(n) `in` over a list inside two comprehensions over it: n³ comparisons of containers.
    const HOSTILE: &str = "pod.spec.containers.all(a, pod.spec.containers.all(b, a in pod.spec.containers))";

    fn compiled(filters: &[(&str, &str)], scores: &[(&str, &str)]) -> CompiledRules {
        tests_rules(filters, scores).compile().unwrap()
    }

    /// A pod as large as its author can make one the API server accepts: 1,000 containers,
    /// 1,000 labels, and annotations of 256 KiB (one of them, `big`, nearly all of it).
    fn hostile_pod() -> PodSpec {
        let mut pod = PodSpec {
            name: "hostile".into(),
            namespace: "default".into(),
            ..Default::default()
        };
        for i in 0..1000 {
            pod.containers.push(Container {
                name: format!("c{i}"),
                image: format!("registry.example/team/image-{i}:v1"),
                requests: Resources::default(),
            });
            pod.labels.insert(format!("label-{i}"), format!("value-{i}"));
        }
        pod.annotations.insert("big".into(), "a".repeat((256 << 10) - 3));
        pod
    }

    /// The stack of the threads the engine evaluates rules on (the blocking pool's, the pass
    /// helper's): 2 MiB. Unoptimized builds take several times the stack per level of an
    /// expression (the interpreter itself, charged or not, overflows 2 MiB on the deepest
    /// expressions the parser accepts); optimized ones evaluate the deepest charged expressions
    /// within 256 KiB.
    const ENGINE_STACK: usize = if cfg!(debug_assertions) { 32 << 20 } else { 2 << 20 };

    /// Runs `rules` for `pod` on an empty node, on a thread with [`ENGINE_STACK`]: the outcome
    /// and how long it took. A minute without an answer fails the test.
    fn evaluate_bounded(rules: CompiledRules, pod: PodSpec) -> (Result<Vec<i64>, RuleRejection>, Duration) {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .stack_size(ENGINE_STACK)
            .spawn(move || {
                let value = pod_value(&pod);
                let node = NodeStatic::of(&NodeSpec::default());
                let started = Instant::now();
                let mut scores = vec![0; rules.scores.len()];
                let out = rules
                    .evaluate(&value, node_value(&node, &NodeUsage::default()), &mut scores)
                    .map(|()| scores);
                let _ = tx.send((out, started.elapsed()));
            })
            .unwrap();
        rx.recv_timeout(Duration::from_secs(60))
            .expect("the evaluation answers within a minute")
    }

    /// Runs `f` on a thread with [`ENGINE_STACK`]; a minute without it returning fails the test
    /// (its panic fails it as its own).
    fn within_a_minute(f: impl FnOnce() + Send + 'static) {
        let (tx, rx) = std::sync::mpsc::channel();
        let worker = std::thread::Builder::new()
            .stack_size(ENGINE_STACK)
            .spawn(move || {
                f();
                let _ = tx.send(());
            })
            .unwrap();
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(()) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                if let Err(panic) = worker.join() {
                    std::panic::resume_unwind(panic)
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("no answer within a minute"),
        }
    }

    #[test]
    fn hostile_rules_on_a_hostile_pod_stop_at_the_cost_limit() {
        let hostile = [
            // An O(n) `in` on a list inside two comprehensions: n³ map comparisons.
            ("list-in", HOSTILE),
            // Lists compared whole, n² times.
            (
                "list-equality",
                "pod.metadata.labels.all(k, pod.metadata.labels.all(j, pod.spec.containers == pod.spec.containers))",
            ),
            // The 256 KiB annotation scanned n² times.
            (
                "annotation-scan",
                "!pod.spec.containers.exists(a, pod.spec.containers.exists(b, \
                 pod.metadata.annotations['big'].contains(a.name + b.name)))",
            ),
            // And copied n² times.
            (
                "concatenation",
                "pod.spec.containers.all(a, pod.spec.containers.all(b, \
                 size(pod.metadata.annotations['big'] + b.name) > 0))",
            ),
            // n² copies of an element into a list of lists.
            (
                "copies",
                "size(pod.spec.containers.map(a, pod.spec.containers.map(b, b.image))) > 0",
            ),
            // A pattern built from the pod, n² times.
            (
                "patterns",
                "pod.spec.containers.all(a, pod.spec.containers.all(b, !b.image.matches('^' + a.name + '$')))",
            ),
        ];
        for (name, expression) in hostile {
            let rules = compiled(&[(name, expression)], &[]);
            let (out, took) = evaluate_bounded(rules, hostile_pod());
            println!("{name}: {out:?} after {took:?}");
            let reason = out.unwrap_err();
            assert_eq!(&*reason.0, format!("rule {name} failed: {LIMIT_REASON}"), "{name}");
        }
        // A score rule stops alike.
        let rules = compiled(
            &[],
            &[(
                "score",
                "pod.spec.containers.filter(a, pod.spec.containers.exists(b, a in pod.spec.containers)).size()",
            )],
        );
        let (out, took) = evaluate_bounded(rules, hostile_pod());
        println!("score: {out:?} after {took:?}");
        assert_eq!(&*out.unwrap_err().0, format!("rule score failed: {LIMIT_REASON}"));
    }

    #[test]
    fn matches_with_a_256_kib_pattern_from_an_annotation_fails_briefly() {
        let named = |name: &str, pattern: String| {
            let mut pod = hostile_pod();
            pod.annotations.clear();
            pod.annotations.insert("pattern".into(), pattern);
            pod.name = name.into();
            pod
        };
        let rules = || {
            compiled(
                &[(
                    "pattern",
                    "pod.metadata.name.matches(pod.metadata.annotations['pattern'])",
                )],
                &[],
            )
        };
        // 256 KiB of a pattern (the most annotations hold) is refused before it is compiled.
        let pattern = "(a|b)*c".repeat((256 << 10) / 7);
        let (out, took) = evaluate_bounded(rules(), named("abc", pattern.clone()));
        println!("256 KiB pattern: {out:?} after {took:?}");
        assert_eq!(
            &*out.unwrap_err().0,
            format!(
                "rule pattern failed: Error executing function 'matches': the pattern is {} bytes, over the limit of 4096",
                pattern.len()
            )
        );
        // Within the length limit: an invalid pattern or one compiling too large fails without
        // quoting the pattern, a valid one matches as before.
        let (out, _) = evaluate_bounded(rules(), named("abc", format!("({}", "a".repeat(4000))));
        assert_eq!(
            &*out.unwrap_err().0,
            "rule pattern failed: Error executing function 'matches': invalid pattern: unclosed group"
        );
        let (out, _) = evaluate_bounded(rules(), named("abc", r"(\w{100}){40}".into()));
        assert_eq!(
            &*out.unwrap_err().0,
            "rule pattern failed: Error executing function 'matches': the compiled pattern is over the limit of 1048576 bytes"
        );
        let (out, _) = evaluate_bounded(rules(), named("abc", "^a(b|x)c$".into()));
        assert_eq!(out, Ok(vec![]));
        let (out, _) = evaluate_bounded(rules(), named("abd", "^a(b|x)c$".into()));
        assert_eq!(&*out.unwrap_err().0, "node(s) didn't match rule pattern");
        // A 4 KiB pattern (within the limit) on every container: the matches' cost stops it.
        let rules = compiled(
            &[(
                "each",
                "pod.spec.containers.all(c, !c.image.matches(pod.metadata.annotations['pattern']))",
            )],
            &[],
        );
        let (out, took) = evaluate_bounded(rules, named("p", format!("^{}$", "x".repeat(4094))));
        println!("4 KiB pattern on 1,000 containers: {out:?} after {took:?}");
        assert_eq!(&*out.unwrap_err().0, format!("rule each failed: {LIMIT_REASON}"));
    }

    #[test]
    fn matches_compiles_each_pattern_once() {
        let a = rule_cost::compiled("^compiled-once-[0-9]+$").unwrap();
        let b = rule_cost::compiled("^compiled-once-[0-9]+$").unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(a.is_match("compiled-once-42"));
        let e = rule_cost::compiled("(").unwrap_err();
        assert_eq!(&*e, "invalid pattern: unclosed group");
    }

    /// A pod and a node as the examples of docs/custom-logic.md read them.
    fn ordinary() -> (Value, Value) {
        let mut p = pod("web-1", 250, 1 << 20);
        p.labels.insert("workload_name".into(), "nginx".into());
        p.labels.insert("team".into(), "a".into());
        p.annotations.insert("team".into(), "a".into());
        p.containers.push(Container {
            name: "web".into(),
            image: "nginx:1.27".into(),
            requests: p.requests.clone(),
        });
        let mut n = node("node-1", 4000, 8 << 30);
        n.labels.insert("test/test".into(), String::new());
        n.labels.insert("team".into(), "a".into());
        n.taints.push(crate::engine::model::Taint {
            key: "dedicated".into(),
            value: "gpu".into(),
            effect: crate::engine::model::TaintEffect::NoSchedule,
        });
        let usage = NodeUsage {
            pod_count: 3,
            ..Default::default()
        };
        (pod_value(&p), node_value(&NodeStatic::of(&n), &usage))
    }

    #[test]
    fn charged_expressions_evaluate_as_the_crates_own() {
        let (pod, node) = ordinary();
        let context = compiled(&[("r", "true")], &[]).context(&pod, node);
        let expressions = [
            "pod.metadata.labels['workload_name'] != 'nginx' || 'test/test' in node.metadata.labels",
            "!node.spec.taints.exists(t, t.effect == 'NoExecute')",
            "node.status.requested.cpu + pod.requests.cpu <= node.status.allocatable.cpu * 9 / 10",
            "!('team' in pod.metadata.annotations) || node.metadata.labels['team'] == pod.metadata.annotations['team']",
            "20 - size(node.metadata.name)",
            "pod.metadata.name.size() + size(pod.spec.containers) + size(pod.metadata.labels)",
            "pod.spec.containers.map(c, c.name)",
            "pod.spec.containers.map(c, c.image.startsWith('nginx'), c.name + '!')",
            "pod.spec.containers.filter(c, c.image.endsWith(':1.27'))",
            "pod.spec.containers.exists_one(c, c.name == 'web')",
            "pod.spec.containers.all(c, c.resources.requests.cpu <= node.status.allocatable.cpu)",
            "pod.metadata.labels.all(k, k in node.metadata.labels && node.metadata.labels[k] == pod.metadata.labels[k])",
            "pod.metadata.labels.map(k, pod.metadata.labels[k]).exists(v, v.contains('ngi'))",
            "'web' in pod.spec.containers.map(c, c.name)",
            "pod.spec.containers == pod.spec.containers && pod.metadata != node.metadata",
            "pod.metadata.name < pod.metadata.namespace",
            "[1, 2] + [pod.spec.priority] == [1, 2, 0]",
            "{'a': pod.metadata.name, pod.metadata.namespace: 1}",
            "pod.metadata.name + '-' + pod.metadata.namespace",
            "pod.metadata.name.matches('^web-[0-9]+$') && matches(node.metadata.name, 'node')",
            "string(pod.spec.priority) + string(b'x') == '0x'",
            "int('12') + uint(3) == 15",
            "optional.of(pod.metadata.name).hasValue() && pod.metadata.?absent.orValue('x') == 'x'",
            "type(pod) == map && dyn(1) + 1 == 2",
            "{'a': 1}.all(k, k == 'a')",
            "[pod.spec.containers].all(l, l.all(c, c.name != ''))",
            // Errors, and errors an operator absorbs.
            "pod.metadata.labels['absent'] == 'x'",
            "1 / 0 == 1",
            "pod.spec.containers.all(c, c.absent)",
            "[1, 2].all(x, 1 / 0 == 1) || true",
            "[1, 2].exists(x, x / 0 == 1 || x == 2)",
            "1.matches('a') || matches(2, 'b')",
            "'a'.contains(1)",
            "{'a': 1, 'a': 2}",
            "size(1)",
        ];
        let env = Env::stdlib();
        for e in expressions {
            let program = env.compile(e).unwrap();
            let plain = program.execute(&context).map_err(|e| e.to_string());
            let charged = Metered::new(program.expression())
                .execute(&context)
                .map_err(|e| e.to_string());
            assert_eq!(plain, charged, "{e}");
        }
    }

    #[test]
    fn ordinary_rules_spend_a_small_part_of_the_budget() {
        let (pod, node) = ordinary();
        let context = compiled(&[("r", "true")], &[]).context(&pod, node);
        // A hundred units at most, a ten-thousandth of the budget.
        for e in [
            "pod.metadata.labels['workload_name'] != 'nginx' || 'test/test' in node.metadata.labels",
            "node.status.requested.cpu + pod.requests.cpu <= node.status.allocatable.cpu * 9 / 10",
            "!node.spec.taints.exists(t, t.effect == 'NoExecute')",
            "pod.spec.containers.all(c, c.resources.requests.cpu <= node.status.allocatable.cpu)",
            "pod.metadata.name.matches('^web-[0-9]+$')",
            "!('team' in pod.metadata.annotations) || node.metadata.labels['team'] == pod.metadata.annotations['team']",
        ] {
            let program = Program::compile(e).unwrap();
            let (out, cost) = Metered::new(program.expression()).execute_within(&context, PER_CALL_LIMIT);
            println!("{e}: {cost} units");
            assert!(out.is_ok(), "{e}: {out:?}");
            assert!(cost <= 100, "{e}: {cost} units");
        }
        // The budget is the evaluation's own: one that needs more than a lower limit stops, the
        // same one within the standard limit does not.
        let e = "pod.spec.containers.all(c, c.resources.requests.cpu <= node.status.allocatable.cpu)";
        let program = Metered::new(Program::compile(e).unwrap().expression());
        let (out, cost) = program.execute_within(&context, 5);
        assert_eq!(out.unwrap_err().to_string(), LIMIT_REASON);
        assert!(cost > 5);
        assert!(program.execute(&context).is_ok());
    }

    /// A pod as [`hostile_pod`] with `requests` to fit the test nodes.
    fn hostile_request() -> PodSpec {
        let mut p = pod("hostile", 100, 1 << 20);
        let h = hostile_pod();
        p.containers = h.containers;
        p.labels = h.labels;
        p.annotations = h.annotations;
        p
    }

    #[test]
    fn every_evaluation_path_stops_at_the_cost_limit() {
        within_a_minute(|| {
            let mut zoned = node("zoned", 4000, 8 << 30);
            zoned.labels.insert("zone".into(), "a".into());
            let snap = snapshot(vec![node("n1", 4000, 8 << 30), zoned, node("n2", 4000, 8 << 30)]);
            let limit = |rule: &str| format!("rule {rule} failed: {LIMIT_REASON}");
            // Read per class (the plain pass): the zoned node's class passes before the hostile part.
            let class = format!("'zone' in node.metadata.labels || {HOSTILE}");
            // Read per node without the pod (kept with the snapshot): a hostile node's labels.
            let labels =
                "node.metadata.labels.all(a, node.metadata.labels.all(b, node.metadata.labels == node.metadata.labels))";
            // Read per node and per pod (the general pass).
            let general = format!("node.metadata.name == 'zoned' || {HOSTILE}");
            let mut crowded = node("crowded", 4000, 8 << 30);
            for i in 0..1000 {
                crowded.labels.insert(format!("label-{i}"), format!("value-{i}"));
            }
            let labelled = snapshot(vec![node("plain", 4000, 8 << 30), crowded]);
            let cases: Vec<(&str, String, &Snapshot, Vec<&str>, String)> = vec![
                ("class", class, &snap, vec!["zoned"], limit("class")),
                ("labels", labels.to_string(), &labelled, vec!["plain"], limit("labels")),
                ("general", general, &snap, vec!["zoned"], limit("general")),
            ];
            for (name, expression, snap, feasible, reason) in cases {
                // As a filter rule, then as a score rule (an error rejects the node alike).
                let profiles = [
                    with_rules(&[(name, &expression, "")], &[]),
                    with_rules(&[], &[(name, &format!("{expression} ? 1 : 0"), 1)]),
                ];
                for profile in &profiles {
                    let started = Instant::now();
                    let r = Evaluator::new(profile, snap)
                        .rank(&hostile_request(), 0, 0, Deadline::none())
                        .unwrap();
                    println!("{name}: Rank in {:?}", started.elapsed());
                    let names: Vec<&str> = r.feasible.iter().map(|n| n.node.as_str()).collect();
                    assert_eq!(names, feasible, "{name}");
                    assert!(!r.rejected.is_empty(), "{name}");
                    for n in &r.rejected {
                        let reasons: Vec<String> = n.reasons.iter().map(|r| r.to_string()).collect();
                        assert_eq!(reasons.as_slice(), std::slice::from_ref(&reason), "{name}");
                    }
                    // Schedule too; without the feasible nodes the message names the limit.
                    let decisions = Evaluator::new(profile, snap)
                        .schedule(&[hostile_request(), hostile_request()], 0, Deadline::none())
                        .unwrap();
                    for d in &decisions {
                        assert!(
                            matches!(d, Decision::Node { node, .. } if node == feasible[0]),
                            "{name}: {d:?}"
                        );
                    }
                }
            }
            let only_hostile = snapshot(vec![node("n1", 4000, 8 << 30), node("n2", 4000, 8 << 30)]);
            let profile = with_rules(
                &[("general", &format!("node.metadata.name == 'zoned' || {HOSTILE}"), "")],
                &[],
            );
            let decisions = Evaluator::new(&profile, &only_hostile)
                .schedule(&[hostile_request()], 0, Deadline::none())
                .unwrap();
            let Decision::Unschedulable(d) = &decisions[0] else {
                panic!("{decisions:?}")
            };
            let message = d.message();
            assert!(
                message.starts_with(&format!(
                    "0/2 nodes are available: 2 rule general failed: {LIMIT_REASON}."
                )),
                "{message}"
            );
        });
    }

    #[test]
    fn the_deepest_charged_expressions_evaluate_on_an_engine_threads_stack() {
        // Each shape nested as deep as the parser accepts, its charging calls doubling the depth
        // the evaluation recurses to.
        type Nest = fn(&str) -> String;
        let shapes: [(&str, Nest); 4] = [
            ("concatenation", |inner| format!("pod.metadata.name + ({inner})")),
            ("list", |inner| format!("[pod.metadata.name, {inner}]")),
            ("function", |inner| format!("string({inner})")),
            ("map", |inner| format!("{{pod.metadata.name: {inner}}}")),
        ];
        for (name, nest) in shapes {
            let mut expression = "pod.metadata.name".to_string();
            let mut deepest = None;
            for depth in 1.. {
                let next = nest(&expression);
                let wrapped = format!("size([{next}]) > 0");
                if tests_rules(&[("deep", &wrapped)], &[]).validate().is_err() {
                    break;
                }
                expression = next;
                deepest = Some((depth, wrapped));
            }
            let (depth, expression) = deepest.unwrap();
            let rules = compiled(&[("deep", &expression)], &[]);
            let (out, took) = evaluate_bounded(rules, hostile_pod());
            println!("{name}: {depth} levels: {:?} after {took:?}", out.as_ref().map(|_| ()));
            match out {
                Ok(_) => {}
                Err(e) => assert!(!e.0.contains("cost limit"), "{name}: {}", e.0),
            }
        }
    }

    #[test]
    fn a_pass_with_rules_stops_at_its_deadline_within_a_node() {
        within_a_minute(|| {
            let nodes = (0..20).map(|i| node(&format!("n{i}"), 4000, 8 << 30)).collect();
            let snap = snapshot(nodes);
            let profile = with_rules(
                &[("general", &format!("node.metadata.name == 'x' || {HOSTILE}"), "")],
                &[],
            );
            let started = Instant::now();
            let r = Evaluator::new(&profile, &snap).rank(
                &hostile_request(),
                0,
                0,
                Deadline::at(started + Duration::from_millis(50)),
            );
            println!("20 nodes, a deadline in 50 ms: stopped after {:?}", started.elapsed());
            assert!(matches!(r, Err(EvalError::DeadlineExceeded { .. })), "{r:?}");
        });
    }
}
