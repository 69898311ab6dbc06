//! Rules in policies, written in CEL (the Common Expression Language Kubernetes uses for
//! ValidatingAdmissionPolicy and CRD validation): filter rules (a boolean expression and the
//! reason shown when it rejects a node) and score rules (an integer expression and a weight),
//! over `pod` and `node` in Kubernetes' object shape. See `docs/custom-logic.md`.
//!
//! Expressions are compiled when the policy loads, and refused there when they break a limit:
//! [`MAX_EXPRESSION_BYTES`] of source, [`MAX_NESTING`] levels of nesting, [`MAX_AST_NODES`]
//! nodes and [`MAX_COMPREHENSION_NESTING`] comprehensions (`all`, `exists`, `map`, `filter`, …)
//! inside one another. At run time every evaluation has a cost budget
//! ([`rule_cost::PER_CALL_LIMIT`], as Kubernetes bounds CEL): one that spends it stops, and the
//! node is rejected with `rule <name> failed: operation cancelled: actual cost limit exceeded`.

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr, LiteralValue};
use cel::{Context, Env, IdedExpr, Program, Value};
use serde::{Deserialize, Serialize};

use super::model::{NodeSpec, PodSpec, TaintEffect};
use super::resources::Resources;
use super::rule_cost::{self, Metered};
use super::snapshot::{NodeUsage, Snapshot, NODE_UNIQUE_LABELS};

/// Longest expression source accepted, in bytes.
pub const MAX_EXPRESSION_BYTES: usize = 2048;
/// Deepest nesting of the expression's syntax accepted (the parser's recursion limit).
pub const MAX_NESTING: u16 = 32;
/// Most nodes of an expression's syntax tree accepted (macros expanded).
pub const MAX_AST_NODES: usize = 1000;
/// Most comprehensions (macros iterating a list or map) nested inside one another.
pub const MAX_COMPREHENSION_NESTING: usize = 2;
/// Stack of the thread that compiles rules.
pub const COMPILE_STACK_BYTES: usize = 64 << 20;
/// Most rules of each kind (filters, scores) in one policy.
pub const MAX_RULES: usize = 16;
/// Largest weight of a score rule (as kube-scheduler's plugin weights in a profile, 1 to 100).
pub const MAX_RULE_WEIGHT: i64 = 100;

/// A filter rule: a node passes when `expression` is true.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FilterRule {
    /// The rule's name, unique among the policy's rules.
    pub name: String,
    /// A CEL expression of type bool over `pod` and `node`.
    pub expression: String,
    /// What `0/N nodes are available: K <reason>` says of the nodes it rejects.
    #[serde(default)]
    pub reason: String,
}

/// A score rule: an integer per feasible node, normalized to 0..100 and weighed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScoreRule {
    /// The rule's name, unique among the policy's rules.
    pub name: String,
    /// A CEL expression of type int over `pod` and `node`.
    pub expression: String,
    /// The weight of the normalized score (1 to 100; 1 when omitted).
    #[serde(default = "one")]
    pub weight: i64,
}

fn one() -> i64 {
    1
}

/// A policy's rules.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Rules {
    /// Filter rules, run in order after the built-in filters.
    pub filters: Vec<FilterRule>,
    /// Score rules, added to the built-in plugins' weighted scores.
    pub scores: Vec<ScoreRule>,
}

/// Why a rule cannot be used: the field (relative to the policy, e.g.
/// `rules.filters[1].expression`) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct RuleError {
    /// Path of the field within the policy.
    pub field: String,
    /// What is wrong, with the line and column for a syntax error.
    pub message: String,
}

impl Rules {
    /// Whether the policy has no rule.
    pub fn is_empty(&self) -> bool {
        self.filters.is_empty() && self.scores.is_empty()
    }

    /// Checks names, weights and limits, and compiles every expression.
    pub fn validate(&self) -> Result<(), RuleError> {
        self.compile().map(|_| ())
    }

    /// Compiles every rule (see [`Rules::validate`] for what is refused). The parser recurses
    /// once per level of nesting with large frames, so it runs on a thread of its own with a
    /// stack ([`COMPILE_STACK_BYTES`]) that holds [`MAX_NESTING`] levels and the parser's refusal
    /// of the next one.
    pub fn compile(&self) -> Result<CompiledRules, RuleError> {
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("cel-compile".into())
                .stack_size(COMPILE_STACK_BYTES)
                .spawn_scoped(s, || self.compile_here())
                .map_err(|e| RuleError {
                    field: "rules".into(),
                    message: format!("cannot start the compiler thread: {e}"),
                })?
                .join()
                .unwrap_or_else(|_| {
                    Err(RuleError {
                        field: "rules".into(),
                        message: "the expression compiler failed".into(),
                    })
                })
        })
    }

    fn compile_here(&self) -> Result<CompiledRules, RuleError> {
        let err = |field: String, message: String| RuleError { field, message };
        for (kind, n) in [("filters", self.filters.len()), ("scores", self.scores.len())] {
            if n > MAX_RULES {
                return Err(err(
                    format!("rules.{kind}"),
                    format!("at most {MAX_RULES} rules, got {n}"),
                ));
            }
        }
        let names = self
            .filters
            .iter()
            .map(|r| ("filters", &r.name))
            .chain(self.scores.iter().map(|r| ("scores", &r.name)));
        let mut seen: Vec<&str> = Vec::new();
        let mut counts = HashMap::<&str, usize>::new();
        for (kind, name) in names {
            let i = counts.entry(kind).or_default();
            let field = format!("rules.{kind}[{i}].name");
            *i += 1;
            if name.is_empty() {
                return Err(err(field, "required".into()));
            }
            if seen.contains(&name.as_str()) {
                return Err(err(field, format!("duplicate value {name:?}")));
            }
            seen.push(name);
        }
        let mut env = Env::stdlib();
        rule_cost::register(&mut env).map_err(|e| err("rules".into(), format!("cannot set up the evaluation: {e}")))?;
        let env = Arc::new(env);
        let mut filters = Vec::with_capacity(self.filters.len());
        for (i, r) in self.filters.iter().enumerate() {
            let program = compile(&env, &r.expression).map_err(|m| err(format!("rules.filters[{i}].expression"), m))?;
            let reason = if r.reason.is_empty() {
                format!("node(s) didn't match rule {}", r.name)
            } else {
                r.reason.clone()
            };
            filters.push(CompiledFilter {
                name: Arc::from(r.name.as_str()),
                class_level: reads_only_class(program.expression()),
                reads_pod: reads_pod(program.expression()),
                pod_paths: pod_paths(program.expression()),
                node_paths: node_paths(program.expression()),
                program: Metered::new(program.expression()),
                reason: Arc::from(reason),
            });
        }
        let mut scores = Vec::with_capacity(self.scores.len());
        for (i, r) in self.scores.iter().enumerate() {
            if !(1..=MAX_RULE_WEIGHT).contains(&r.weight) {
                return Err(err(
                    format!("rules.scores[{i}].weight"),
                    format!("must be within 1..={MAX_RULE_WEIGHT}, got {}", r.weight),
                ));
            }
            let program = compile(&env, &r.expression).map_err(|m| err(format!("rules.scores[{i}].expression"), m))?;
            scores.push(CompiledScore {
                name: Arc::from(r.name.as_str()),
                class_level: reads_only_class(program.expression()),
                reads_pod: reads_pod(program.expression()),
                pod_paths: pod_paths(program.expression()),
                node_paths: node_paths(program.expression()),
                program: Metered::new(program.expression()),
                weight: r.weight,
            });
        }
        // Every path into the pod some rule reads, or `None` when one reads it otherwise.
        let pod_reads = filters
            .iter()
            .map(|f| (f.reads_pod, &f.pod_paths))
            .chain(scores.iter().map(|s| (s.reads_pod, &s.pod_paths)))
            .filter(|(reads, _)| *reads)
            .try_fold(Vec::new(), |mut all: Vec<Vec<String>>, (_, paths)| {
                all.extend(paths.as_ref()?.iter().cloned());
                Some(all)
            });
        Ok(CompiledRules {
            env,
            filters,
            scores,
            pod_reads,
        })
    }
}

/// Compiles one expression within the limits; the error names the line and column.
fn compile(env: &Env, source: &str) -> Result<Program, String> {
    if source.trim().is_empty() {
        return Err("required".into());
    }
    if source.len() > MAX_EXPRESSION_BYTES {
        return Err(format!(
            "expression is {} bytes, over the limit of {MAX_EXPRESSION_BYTES}",
            source.len()
        ));
    }
    let syntax = |e: cel::ParseErrors| match e.errors.first() {
        Some(first) if first.msg.contains("Recursion limit") => {
            format!("expression nests deeper than the limit of {MAX_NESTING} levels")
        }
        Some(first) if first.pos.0 > 0 => format!(
            "line {} column {}: {}",
            first.pos.0,
            first.pos.1,
            first.msg.lines().next().unwrap_or_default()
        ),
        Some(first) => first.msg.lines().next().unwrap_or_default().to_string(),
        None => "invalid expression".to_string(),
    };
    // The parser's recursion limit bounds the nesting; the program is then compiled with the
    // standard macros.
    cel::parser::Parser::new()
        .max_recursion_depth(MAX_NESTING)
        .parse(source)
        .map_err(syntax)?;
    let program = env.compile(source).map_err(syntax)?;
    let mut size = Size::default();
    size.walk(program.expression(), 0);
    if size.nodes > MAX_AST_NODES {
        return Err(format!(
            "expression has {} syntax nodes, over the limit of {MAX_AST_NODES}",
            size.nodes
        ));
    }
    if size.comprehension_depth > MAX_COMPREHENSION_NESTING {
        return Err(format!(
            "expression nests {} comprehensions (all, exists, exists_one, map, filter), over the limit of \
             {MAX_COMPREHENSION_NESTING}",
            size.comprehension_depth
        ));
    }
    Ok(program)
}

/// The size of an expression: its nodes and its deepest nesting of comprehensions.
#[derive(Default)]
struct Size {
    nodes: usize,
    comprehension_depth: usize,
}

impl Size {
    fn walk(&mut self, e: &IdedExpr, depth: usize) {
        self.nodes += 1;
        if self.nodes > MAX_AST_NODES {
            return;
        }
        match &e.expr {
            Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => {}
            Expr::Call(c) => {
                if let Some(t) = &c.target {
                    self.walk(t, depth);
                }
                for a in &c.args {
                    self.walk(a, depth);
                }
            }
            Expr::Comprehension(c) => {
                let inner = depth + 1;
                self.comprehension_depth = self.comprehension_depth.max(inner);
                self.walk(&c.iter_range, depth);
                for part in [&c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                    self.walk(part, inner);
                }
            }
            Expr::List(l) => {
                for x in &l.elements {
                    self.walk(x, depth);
                }
            }
            Expr::Map(m) => self.entries(m.entries.iter().map(|e| &e.expr), depth),
            Expr::Struct(s) => self.entries(s.entries.iter().map(|e| &e.expr), depth),
            Expr::Select(s) => self.walk(&s.operand, depth),
        }
    }

    fn entries<'e>(&mut self, entries: impl Iterator<Item = &'e EntryExpr>, depth: usize) {
        for e in entries {
            match e {
                EntryExpr::StructField(f) => self.walk(&f.value, depth),
                EntryExpr::MapEntry(m) => {
                    self.walk(&m.key, depth);
                    self.walk(&m.value, depth);
                }
            }
        }
    }
}

/// Whether `e` reads of `node` only what a node class shares: `node.metadata.labels` by a
/// literal key that is not per node (`labels['k']`, `labels.k`, `'k' in labels`, `has(labels.k)`)
/// and `node.spec.taints` / `node.spec.unschedulable`. Such a rule's verdict is the same on every
/// node of a class, so it is evaluated once per class and pod.
pub fn reads_only_class(e: &IdedExpr) -> bool {
    fn is_ident(e: &IdedExpr, name: &str) -> bool {
        matches!(&e.expr, Expr::Ident(n) if n == name)
    }
    fn select<'e>(e: &'e IdedExpr, field: &str) -> Option<&'e IdedExpr> {
        match &e.expr {
            Expr::Select(s) if !s.test && s.field == field => Some(&s.operand),
            _ => None,
        }
    }
    fn node_labels(e: &IdedExpr) -> bool {
        select(e, "labels")
            .and_then(|m| select(m, "metadata"))
            .is_some_and(|n| is_ident(n, "node"))
    }
    fn shared_key(e: &IdedExpr) -> bool {
        matches!(&e.expr, Expr::Literal(LiteralValue::String(k)) if !NODE_UNIQUE_LABELS.contains(&k.inner()))
    }
    fn ok(e: &IdedExpr) -> bool {
        match &e.expr {
            Expr::Ident(n) => n != "node",
            Expr::Literal(_) | Expr::Unspecified => true,
            // node.spec.taints and node.spec.unschedulable: the class's own.
            Expr::Select(s)
                if !s.test
                    && matches!(s.field.as_str(), "taints" | "unschedulable")
                    && select(&s.operand, "spec").is_some_and(|n| is_ident(n, "node")) =>
            {
                true
            }
            // node.metadata.labels.k and has(node.metadata.labels.k).
            Expr::Select(s) if node_labels(&s.operand) => !NODE_UNIQUE_LABELS.contains(&s.field.as_str()),
            Expr::Select(s) => ok(&s.operand),
            Expr::Call(c) => {
                match (c.func_name.as_str(), c.target.as_deref(), c.args.as_slice()) {
                    ("_[_]", None, [m, k]) if node_labels(m) => return shared_key(k),
                    ("@in", None, [k, m]) if node_labels(m) => return shared_key(k),
                    _ => {}
                }
                c.target.as_deref().is_none_or(ok) && c.args.iter().all(ok)
            }
            Expr::Comprehension(c) => {
                // A loop variable named `node` hides the node: refused, to stay simple.
                c.iter_var != "node"
                    && c.iter_var2.as_deref() != Some("node")
                    && c.accu_var != "node"
                    && [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result]
                        .into_iter()
                        .all(ok)
            }
            Expr::List(l) => l.elements.iter().all(ok),
            Expr::Map(m) => m.entries.iter().all(|e| entry_ok(&e.expr)),
            Expr::Struct(s) => s.entries.iter().all(|e| entry_ok(&e.expr)),
        }
    }
    fn entry_ok(e: &EntryExpr) -> bool {
        match e {
            EntryExpr::StructField(f) => ok(&f.value),
            EntryExpr::MapEntry(m) => ok(&m.key) && ok(&m.value),
        }
    }
    ok(e)
}

/// Whether `e` mentions `pod` anywhere (a comprehension variable of that name included: the
/// answer errs towards "reads the pod"). A rule that does not is the same for every pod, so its
/// outcome on a node is kept until the node's usage changes.
pub fn reads_pod(e: &IdedExpr) -> bool {
    fn any(e: &IdedExpr) -> bool {
        match &e.expr {
            Expr::Ident(n) => n == "pod",
            Expr::Literal(_) | Expr::Unspecified => false,
            Expr::Select(s) => any(&s.operand),
            Expr::Call(c) => c.target.as_deref().is_some_and(any) || c.args.iter().any(any),
            Expr::Comprehension(c) => {
                c.iter_var == "pod"
                    || c.iter_var2.as_deref() == Some("pod")
                    || c.accu_var == "pod"
                    || [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result]
                        .into_iter()
                        .any(any)
            }
            Expr::List(l) => l.elements.iter().any(any),
            Expr::Map(m) => m.entries.iter().any(|e| entry(&e.expr)),
            Expr::Struct(s) => s.entries.iter().any(|e| entry(&e.expr)),
        }
    }
    fn entry(e: &EntryExpr) -> bool {
        match e {
            EntryExpr::StructField(f) => any(&f.value),
            EntryExpr::MapEntry(m) => any(&m.key) || any(&m.value),
        }
    }
    any(e)
}

/// The paths into `pod` that `e` reads (`pod.metadata.labels['team']` is `metadata`, `labels`,
/// `team`), when it reads the pod only through such paths of literal names and keys, one at
/// least a field deep; `None` when it reads the pod another way (whole, or a comprehension
/// variable named `pod`). A class-level rule's outcome for a pod depends on the pod only
/// through the values at these paths, so pods agreeing on them share its outcomes per class.
pub fn pod_paths(e: &IdedExpr) -> Option<Vec<Vec<String>>> {
    var_paths(e, "pod")
}

/// The paths into `node` that `e` reads, as [`pod_paths`] finds them into `pod`: a rule that
/// reads the node only through them is evaluated on the node's value cut down to them
/// ([`project`]), which is all the evaluation converts.
pub fn node_paths(e: &IdedExpr) -> Option<Vec<Vec<String>>> {
    var_paths(e, "node")
}

/// The paths into the variable `var` that `e` reads (see [`pod_paths`]).
fn var_paths(e: &IdedExpr, var: &str) -> Option<Vec<Vec<String>>> {
    fn path(e: &IdedExpr, var: &str) -> Option<Vec<String>> {
        match &e.expr {
            Expr::Ident(n) if n == var => Some(Vec::new()),
            Expr::Select(s) => path(&s.operand, var).map(|mut p| {
                p.push(s.field.clone());
                p
            }),
            Expr::Call(c) if c.func_name == "_[_]" && c.target.is_none() => match c.args.as_slice() {
                [m, k] => match &k.expr {
                    Expr::Literal(LiteralValue::String(k)) => path(m, var).map(|mut p| {
                        p.push(k.inner().to_string());
                        p
                    }),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        }
    }
    fn walk(e: &IdedExpr, var: &str, out: &mut Vec<Vec<String>>) -> Option<()> {
        if let Some(p) = path(e, var) {
            if p.is_empty() {
                return None;
            }
            out.push(p);
            return Some(());
        }
        match &e.expr {
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Some(()),
            Expr::Select(s) => walk(&s.operand, var, out),
            Expr::Call(c) => {
                if let Some(t) = c.target.as_deref() {
                    walk(t, var, out)?;
                }
                c.args.iter().try_for_each(|a| walk(a, var, out))
            }
            Expr::Comprehension(c) => {
                if c.iter_var == var || c.iter_var2.as_deref() == Some(var) || c.accu_var == var {
                    return None;
                }
                [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result]
                    .into_iter()
                    .try_for_each(|x| walk(x, var, out))
            }
            Expr::List(l) => l.elements.iter().try_for_each(|x| walk(x, var, out)),
            Expr::Map(m) => m.entries.iter().try_for_each(|x| entry(&x.expr, var, out)),
            Expr::Struct(s) => s.entries.iter().try_for_each(|x| entry(&x.expr, var, out)),
        }
    }
    fn entry(e: &EntryExpr, var: &str, out: &mut Vec<Vec<String>>) -> Option<()> {
        match e {
            EntryExpr::StructField(f) => walk(&f.value, var, out),
            EntryExpr::MapEntry(m) => {
                walk(&m.key, var, out)?;
                walk(&m.value, var, out)
            }
        }
    }
    let mut out = Vec::new();
    walk(e, var, &mut out)?;
    out.sort();
    out.dedup();
    Some(out)
}

/// `value` cut down to what lies at `paths` (see [`var_paths`]): the maps along each path with
/// only the keys the paths name, and whole whatever a path ends at (or reaches that is not a
/// map). An expression that reads the value only through these paths reads the same from it:
/// what a path names exists in both or in neither.
pub fn project(value: &Value, paths: &[Vec<String>]) -> Value {
    fn insert(out: &mut HashMap<cel::objects::Key, Value>, from: &Value, path: &[String]) {
        let (Value::Map(m), Some((first, rest))) = (from, path.split_first()) else {
            return;
        };
        let Some(v) = m.get(&cel::objects::KeyRef::String(first.as_str())) else {
            return;
        };
        let key = cel::objects::Key::from(first.as_str());
        if rest.is_empty() || !matches!(v, Value::Map(_)) {
            out.insert(key, v.clone());
            return;
        }
        let at = out
            .entry(key)
            .or_insert_with(|| Value::from(HashMap::<String, Value>::new()));
        if let Value::Map(sub) = at {
            insert(Arc::make_mut(&mut sub.map), v, rest);
        }
    }
    let mut out = HashMap::new();
    for p in paths {
        insert(&mut out, value, p);
    }
    Value::Map(cel::objects::Map { map: Arc::new(out) })
}

/// The values of `pod` at `paths` (see [`pod_paths`]), written out: pods with equal keys read
/// alike through those paths.
fn pod_key(pod: &Value, paths: &[Vec<String>]) -> String {
    use std::fmt::Write;
    let mut key = String::new();
    for p in paths {
        let mut at = Some(pod);
        for step in p {
            at = match at {
                Some(Value::Map(m)) => m.get(&cel::objects::KeyRef::String(step.as_str())),
                _ => None,
            };
        }
        match at {
            // A string as its length and bytes (no escaping to do); anything else as it
            // prints. Maps print in no fixed order: equal maps may give other keys (and share
            // less), never unequal ones the same key.
            Some(Value::String(v)) => {
                let _ = write!(key, "s{}:", v.len());
                key.push_str(v);
                key.push(';');
            }
            Some(v) => {
                let _ = write!(key, "{v:?};");
            }
            None => key.push_str("-;"),
        }
    }
    key
}

/// A compiled filter rule.
#[derive(Debug)]
pub struct CompiledFilter {
    /// The rule's name.
    pub name: Arc<str>,
    /// Whether it reads only what a node class shares (see [`reads_only_class`]).
    pub class_level: bool,
    /// Whether it reads the pod (see [`reads_pod`]).
    pub reads_pod: bool,
    /// The paths into the pod it reads (see [`pod_paths`]).
    pod_paths: Option<Vec<Vec<String>>>,
    /// The paths into the node it reads (see [`node_paths`]).
    node_paths: Option<Vec<Vec<String>>>,
    /// The expression, charging its cost as it evaluates (see [`rule_cost`]).
    program: Metered,
    /// The reason shown for the nodes it rejects.
    pub reason: Arc<str>,
}

/// A compiled score rule.
#[derive(Debug)]
pub struct CompiledScore {
    /// The rule's name.
    pub name: Arc<str>,
    /// Whether it reads only what a node class shares (see [`reads_only_class`]).
    pub class_level: bool,
    /// Whether it reads the pod (see [`reads_pod`]).
    pub reads_pod: bool,
    /// The paths into the pod it reads (see [`pod_paths`]).
    pod_paths: Option<Vec<Vec<String>>>,
    /// The paths into the node it reads (see [`node_paths`]).
    node_paths: Option<Vec<Vec<String>>>,
    /// The expression, charging its cost as it evaluates (see [`rule_cost`]).
    program: Metered,
    /// The weight of its normalized score.
    pub weight: i64,
}

/// A policy's rules, compiled.
pub struct CompiledRules {
    env: Arc<Env>,
    /// The filter rules, in order.
    pub filters: Vec<CompiledFilter>,
    /// The score rules, in order.
    pub scores: Vec<CompiledScore>,
    /// The paths into the pod the rules read ([`pod_paths`] of each), or `None` when one reads
    /// it some other way.
    pod_reads: Option<Vec<Vec<String>>>,
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
    /// kept in [`NodeRuleValues`]).
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
    /// outcomes per class with the pods that read alike (see [`pod_paths`]); `None` when the
    /// rule reads the pod whole.
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

    /// Runs the rules for `pod` (its [`pod_value`]) on a node (its [`node_value`]): the raw score
    /// of each score rule, written to `scores`, or the reason the node is rejected (a filter rule
    /// false, or an evaluation error of any rule).
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

    /// The evaluation context of a rule that does not read the pod (see [`reads_pod`]) on
    /// `node`: without the pod's value (the context converts whatever it is given, which costs
    /// more than most evaluations).
    pub fn node_context(&self, node: Value) -> Context<'static, 'static> {
        let mut context = Context::with_env(Arc::clone(&self.env));
        context.add_variable_from_value("node", node);
        context
    }

    /// The paths into the node rule `k` reads (see [`node_paths`]), when it reads it only
    /// through such paths.
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

/// The outcomes, on every node of one snapshot as it stands, of a policy's rules that are
/// evaluated node by node but do not read the pod: the same for every pod, so each is evaluated
/// once per snapshot (on first use), and again only for a node whose usage a batch changed.
#[derive(Debug)]
pub struct NodeRuleValues {
    /// Rules per node: the policy's filter rules, then its score rules.
    width: usize,
    values: Vec<std::sync::OnceLock<RuleOutcome>>,
}

impl NodeRuleValues {
    /// Room for `nodes` nodes and `width` rules each, none evaluated yet.
    pub fn new(nodes: usize, width: usize) -> Self {
        Self {
            width,
            values: (0..nodes * width).map(|_| std::sync::OnceLock::new()).collect(),
        }
    }

    /// Rule `k`'s outcome on node `i`, evaluated by `eval` the first time.
    pub fn get_or_eval(&self, i: usize, k: usize, eval: impl FnOnce() -> RuleOutcome) -> RuleOutcome {
        match self.values.get(i * self.width + k) {
            Some(cell) => cell.get_or_init(eval).clone(),
            None => eval(),
        }
    }

    /// Rule `k`'s outcome on node `i`, if evaluated.
    #[inline]
    pub fn get(&self, i: usize, k: usize) -> Option<&RuleOutcome> {
        self.values.get(i * self.width + k).and_then(std::sync::OnceLock::get)
    }

    /// Bytes this holds (reasons are shared with the compiled rules or short).
    pub fn bytes(&self) -> usize {
        self.values.len() * std::mem::size_of::<std::sync::OnceLock<RuleOutcome>>()
    }
}

/// A class-level rule's outcomes for one pod (or the pods reading alike) per node class of a
/// snapshot, each evaluated on first use.
#[derive(Debug)]
pub struct ClassOutcomes(Vec<std::sync::OnceLock<RuleOutcome>>);

impl ClassOutcomes {
    /// Room for `classes` classes, none evaluated yet.
    pub fn new(classes: usize) -> Self {
        Self((0..classes).map(|_| std::sync::OnceLock::new()).collect())
    }

    /// The outcome on class `class`, evaluated by `eval` the first time.
    pub fn get_or_eval(&self, class: usize, eval: impl FnOnce() -> RuleOutcome) -> RuleOutcome {
        match self.0.get(class) {
            Some(cell) => cell.get_or_init(eval).clone(),
            None => eval(),
        }
    }

    /// The outcome on class `class` if evaluated.
    pub fn get(&self, class: usize) -> Option<&RuleOutcome> {
        self.0.get(class).and_then(std::sync::OnceLock::get)
    }

    /// Bytes this holds.
    pub fn bytes(&self) -> usize {
        self.0.len() * std::mem::size_of::<std::sync::OnceLock<RuleOutcome>>()
    }
}

/// Most pod keys a snapshot keeps class outcomes for, per policy (then it starts over).
pub const MAX_POD_KEYS: usize = 512;

/// What one snapshot keeps of a policy's rules: the pod-free node rules' outcomes per node, and
/// the class-level rules' outcomes per class for each pod key (see [`CompiledRules::pod_key`]).
#[derive(Debug)]
pub struct SnapshotRules {
    /// The pod-free node rules' outcomes.
    pub nodes: NodeRuleValues,
    classes: usize,
    by_key: std::sync::Mutex<HashMap<(u32, String), Arc<ClassOutcomes>>>,
}

/// What `snapshot` keeps of `rules` (see [`SnapshotRules`]), made on first use and kept with the
/// snapshot (its bytes counted with the snapshot's derived parts).
pub(super) fn snapshot_rules(snapshot: &Snapshot, rules: &Arc<CompiledRules>) -> Arc<SnapshotRules> {
    snapshot.kept(
        rules,
        |s| SnapshotRules::new(rules, s.nodes().len(), s.classes().len()),
        SnapshotRules::bytes,
    )
}

impl SnapshotRules {
    /// Room for a snapshot of `nodes` nodes and `classes` classes under `rules`.
    pub fn new(rules: &CompiledRules, nodes: usize, classes: usize) -> Self {
        let pod_free = rules.pod_free_per_node();
        Self {
            nodes: NodeRuleValues::new(if pod_free { nodes } else { 0 }, rules.width()),
            classes,
            by_key: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// Rule `k`'s outcomes per class for the pods of key `key`, the bytes newly held and the
    /// bytes let go (the kept keys start over past [`MAX_POD_KEYS`]).
    pub fn class_outcomes(&self, k: usize, key: String) -> (Arc<ClassOutcomes>, usize, usize) {
        let mut kept = self.by_key.lock().unwrap_or_else(|e| e.into_inner());
        let id = (k as u32, key);
        if let Some(o) = kept.get(&id) {
            return (Arc::clone(o), 0, 0);
        }
        let mut freed = 0;
        if kept.len() >= MAX_POD_KEYS {
            freed = kept.iter().map(|((_, key), o)| o.bytes() + key.len()).sum();
            kept.clear();
        }
        let outcomes = Arc::new(ClassOutcomes::new(self.classes));
        let bytes = outcomes.bytes() + id.1.len();
        kept.insert(id, Arc::clone(&outcomes));
        (outcomes, bytes, freed)
    }

    /// Bytes held: the node outcomes and the class outcomes kept.
    pub fn bytes(&self) -> usize {
        let kept = self.by_key.lock().unwrap_or_else(|e| e.into_inner());
        self.nodes.bytes() + kept.iter().map(|((_, key), o)| o.bytes() + key.len()).sum::<usize>()
    }
}

/// Resources as a CEL map: `cpu` in millicores, `memory` and `ephemeral-storage` in bytes
/// (always present, 0 when none), extended resources in their units (present when not 0).
fn resources_value(r: &Resources) -> Value {
    let mut map: HashMap<String, Value> = HashMap::new();
    for (name, v) in [
        ("cpu", r.milli_cpu),
        ("memory", r.memory),
        ("ephemeral-storage", r.ephemeral_storage),
    ] {
        map.insert(name.into(), Value::Int(v));
    }
    for (name, v) in &r.scalars {
        map.insert(name.to_string(), Value::Int(*v));
    }
    Value::from(map)
}

fn string_map<'s>(pairs: impl Iterator<Item = (&'s String, &'s String)>) -> Value {
    Value::from(
        pairs
            .map(|(k, v)| (k.clone(), Value::from(v.clone())))
            .collect::<HashMap<String, Value>>(),
    )
}

fn object(fields: Vec<(&str, Value)>) -> Value {
    Value::from(
        fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect::<HashMap<String, Value>>(),
    )
}

/// The pod as CEL sees it: `metadata` (`name`, `namespace`, `uid`, `labels`, `annotations`) and
/// `spec` (`priority`, `nodeName`, `nodeSelector`, `containers` with `name`, `image` and
/// `resources.requests`), plus `requests`: the effective requests the scheduler counts.
pub fn pod_value(pod: &PodSpec) -> Value {
    pod_value_reading(pod, None)
}

/// [`pod_value`] with only the fields `paths` (see [`pod_paths`]) lead into, down to the second
/// level (`metadata.labels` whole for `pod.metadata.labels['team']`); all of it for `None`. An
/// expression that reads the pod only through these paths reads the same from it, and the pod
/// of each Schedule under a policy with rules is built without what its rules never read.
pub fn pod_value_reading(pod: &PodSpec, paths: Option<&[Vec<String>]>) -> Value {
    let wants = |field: &str, sub: &str| {
        paths.is_none_or(|paths| {
            paths
                .iter()
                .any(|p| p.first().is_some_and(|f| f == field) && p.get(1).is_none_or(|s| s == sub))
        })
    };
    let section = |field: &str, subs: Vec<(&str, &dyn Fn() -> Value)>| -> Option<(String, Value)> {
        let fields: HashMap<String, Value> = subs
            .into_iter()
            .filter(|(sub, _)| wants(field, sub))
            .map(|(sub, value)| (sub.to_string(), value()))
            .collect();
        (!fields.is_empty()).then(|| (field.to_string(), Value::from(fields)))
    };
    let containers = || {
        let containers: Vec<Value> = pod
            .containers
            .iter()
            .map(|c| {
                object(vec![
                    ("name", Value::from(c.name.clone())),
                    ("image", Value::from(c.image.clone())),
                    ("resources", object(vec![("requests", resources_value(&c.requests))])),
                ])
            })
            .collect();
        Value::from(containers)
    };
    let mut fields: HashMap<String, Value> = [
        section(
            "metadata",
            vec![
                ("name", &|| Value::from(pod.name.clone())),
                ("namespace", &|| Value::from(pod.namespace.clone())),
                ("uid", &|| Value::from(pod.uid.to_string())),
                ("labels", &|| string_map(pod.labels.iter())),
                ("annotations", &|| string_map(pod.annotations.iter())),
            ],
        ),
        section(
            "spec",
            vec![
                ("priority", &|| Value::Int(i64::from(pod.priority))),
                ("nodeName", &|| Value::from(pod.node_name.clone().unwrap_or_default())),
                ("nodeSelector", &|| {
                    string_map(pod.node_selector.iter().map(|(k, v)| (k, v)))
                }),
                ("containers", &containers),
            ],
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    if paths.is_none_or(|ps| ps.iter().any(|p| p.first().is_some_and(|f| f == "requests"))) {
        fields.insert("requests".to_string(), resources_value(&pod.requests));
    }
    Value::from(fields)
}

/// The parts of a node's CEL value that do not change with its usage.
#[derive(Debug, Clone)]
pub struct NodeStatic {
    metadata: Value,
    spec: Value,
    allocatable: Value,
}

/// [`node_value`] cut down to `paths` (see [`node_paths`] and [`project`]), built without the
/// parts no path leads into: what a rule that reads the node only through these paths is
/// evaluated on, without a [`NodeStatic`] kept for the node.
pub fn node_value_reading(node: &NodeSpec, usage: &NodeUsage, paths: &[Vec<String>]) -> Value {
    let reads = |section: &[&str]| paths.iter().any(|p| p.iter().zip(section).all(|(a, b)| a == b));
    let part = |wanted: bool, build: fn(&NodeSpec) -> Value| if wanted { build(node) } else { object(vec![]) };
    let built = NodeStatic {
        metadata: part(reads(&["metadata"]), NodeStatic::metadata_of),
        spec: part(reads(&["spec"]), NodeStatic::spec_of),
        allocatable: part(reads(&["status", "allocatable"]), NodeStatic::allocatable_of),
    };
    project(&node_value(&built, usage), paths)
}

impl NodeStatic {
    /// The node's `metadata` (`name`, `labels`), `spec` (`taints`, `unschedulable`) and
    /// `status.allocatable` (with `pods`).
    pub fn of(node: &NodeSpec) -> Self {
        Self {
            metadata: Self::metadata_of(node),
            spec: Self::spec_of(node),
            allocatable: Self::allocatable_of(node),
        }
    }

    /// The node's `metadata`: `name` and `labels`.
    fn metadata_of(node: &NodeSpec) -> Value {
        object(vec![
            ("name", Value::from(node.name.clone())),
            (
                "labels",
                Value::from(
                    node.labels
                        .iter()
                        .map(|(k, v)| (k.clone(), Value::from(v.clone())))
                        .collect::<HashMap<String, Value>>(),
                ),
            ),
        ])
    }

    /// The node's `status.allocatable`, with `pods`.
    fn allocatable_of(node: &NodeSpec) -> Value {
        let mut allocatable = resources_value(&node.allocatable);
        if let Value::Map(m) = &mut allocatable {
            Arc::make_mut(&mut m.map).insert("pods".to_string().into(), Value::Int(node.allowed_pods));
        }
        allocatable
    }

    /// The node's `spec`: `taints` and `unschedulable`.
    fn spec_of(node: &NodeSpec) -> Value {
        let taints: Vec<Value> = node
            .taints
            .iter()
            .map(|t| {
                let effect = match t.effect {
                    TaintEffect::NoSchedule => "NoSchedule",
                    TaintEffect::PreferNoSchedule => "PreferNoSchedule",
                    TaintEffect::NoExecute => "NoExecute",
                };
                object(vec![
                    ("key", Value::from(t.key.clone())),
                    ("value", Value::from(t.value.clone())),
                    ("effect", Value::from(effect)),
                ])
            })
            .collect();
        object(vec![
            ("taints", Value::from(taints)),
            ("unschedulable", Value::Bool(node.unschedulable)),
        ])
    }
}

/// The node as CEL sees it: [`NodeStatic`]'s fields and `status.requested` (what its pods,
/// those placed earlier in the batch included, request, with `pods`: their count).
pub fn node_value(node: &NodeStatic, usage: &NodeUsage) -> Value {
    let mut requested = resources_value(&usage.requested);
    if let Value::Map(m) = &mut requested {
        Arc::make_mut(&mut m.map).insert("pods".to_string().into(), Value::Int(usage.pod_count));
    }
    object(vec![
        ("metadata", node.metadata.clone()),
        ("spec", node.spec.clone()),
        (
            "status",
            object(vec![
                ("allocatable", node.allocatable.clone()),
                ("requested", requested),
            ]),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rules of these (name, expression) pairs, with the default reason and weight.
    pub(super) fn rules(filters: &[(&str, &str)], scores: &[(&str, &str)]) -> Rules {
        Rules {
            filters: filters
                .iter()
                .map(|(n, e)| FilterRule {
                    name: n.to_string(),
                    expression: e.to_string(),
                    reason: String::new(),
                })
                .collect(),
            scores: scores
                .iter()
                .map(|(n, e)| ScoreRule {
                    name: n.to_string(),
                    expression: e.to_string(),
                    weight: 1,
                })
                .collect(),
        }
    }

    #[test]
    fn syntax_errors_name_the_field_line_and_column() {
        let e = rules(&[("ok", "true"), ("bad", "pod.metadata.name ==\n  )")], &[])
            .validate()
            .unwrap_err();
        assert_eq!(e.field, "rules.filters[1].expression");
        assert!(e.message.starts_with("line 2 column 3: "), "{}", e.message);
        let e = rules(&[], &[("s", "1 +")]).validate().unwrap_err();
        assert_eq!(e.field, "rules.scores[0].expression");
        assert!(e.message.starts_with("line 1 column "), "{}", e.message);
    }

    #[test]
    fn limits_are_refused_at_compile_time() {
        let long = format!("'{}' == ''", "a".repeat(MAX_EXPRESSION_BYTES));
        let e = rules(&[("long", &long)], &[]).validate().unwrap_err();
        assert!(e.message.contains("over the limit of 2048"), "{}", e.message);
        let deep = format!("{}true{}", "(".repeat(60), ")".repeat(60));
        let e = rules(&[("deep", &deep)], &[]).validate().unwrap_err();
        assert_eq!(e.message, "expression nests deeper than the limit of 32 levels");
        // Within the limit the expression compiles and evaluates (on a test thread's stack).
        let ok = format!("{}true{}", "(".repeat(20), ")".repeat(20));
        let compiled = rules(&[("ok", &ok)], &[]).compile().unwrap();
        let node = NodeStatic::of(&NodeSpec::default());
        compiled
            .evaluate(
                &pod_value(&PodSpec::default()),
                node_value(&node, &NodeUsage::default()),
                &mut [],
            )
            .unwrap();
        let nested = "[1].all(a, [2].all(b, [3].all(c, a < b + c)))";
        let e = rules(&[("nested", nested)], &[]).validate().unwrap_err();
        assert!(e.message.contains("nests 3 comprehensions"), "{}", e.message);
        rules(&[("two", "[1].all(a, [2].all(b, a < b))")], &[])
            .validate()
            .unwrap();
        let many = (0..=MAX_RULES).map(|i| (format!("r{i}"), "true")).collect::<Vec<_>>();
        let many: Vec<(&str, &str)> = many.iter().map(|(n, e)| (n.as_str(), *e)).collect();
        assert_eq!(rules(&many, &[]).validate().unwrap_err().field, "rules.filters");
    }

    #[test]
    fn names_and_weights_are_checked() {
        assert_eq!(
            rules(&[("a", "true")], &[("a", "1")]).validate().unwrap_err().field,
            "rules.scores[0].name"
        );
        assert_eq!(
            rules(&[("", "true")], &[]).validate().unwrap_err().field,
            "rules.filters[0].name"
        );
        let mut r = rules(&[], &[("s", "1")]);
        r.scores[0].weight = 0;
        assert_eq!(r.validate().unwrap_err().field, "rules.scores[0].weight");
    }

    #[test]
    fn rules_read_pod_and_node_in_kubernetes_shape() {
        let mut pod = PodSpec {
            name: "web-1".into(),
            namespace: "shop".into(),
            requests: Resources {
                milli_cpu: 250,
                ..Default::default()
            },
            ..Default::default()
        };
        pod.labels.insert("workload_name".into(), "nginx".into());
        pod.annotations.insert("team".into(), "a".into());
        pod.containers.push(super::super::model::Container {
            name: "c".into(),
            image: "nginx".into(),
            requests: Resources {
                milli_cpu: 250,
                ..Default::default()
            },
        });
        let mut node = NodeSpec {
            name: "n1".into(),
            allowed_pods: 110,
            allocatable: Resources {
                milli_cpu: 4000,
                ..Default::default()
            },
            ..Default::default()
        };
        node.labels.insert("test/test".into(), "".into());
        let usage = NodeUsage {
            pod_count: 3,
            requested: Resources {
                milli_cpu: 1000,
                ..Default::default()
            },
            ..Default::default()
        };
        let compiled = rules(
            &[
                (
                    "label",
                    "pod.metadata.labels['workload_name'] != 'nginx' || 'test/test' in node.metadata.labels",
                ),
                ("annotation", "pod.metadata.annotations.team == 'a'"),
                (
                    "containers",
                    "pod.spec.containers.all(c, c.resources.requests.cpu <= node.status.allocatable.cpu)",
                ),
            ],
            &[(
                "free",
                "node.status.allocatable.cpu - node.status.requested.cpu - pod.requests.cpu",
            )],
        )
        .compile()
        .unwrap();
        let mut scores = [0];
        let pv = pod_value(&pod);
        compiled
            .evaluate(&pv, node_value(&NodeStatic::of(&node), &usage), &mut scores)
            .unwrap();
        assert_eq!(scores, [4000 - 1000 - 250]);
        node.labels.clear();
        let e = compiled
            .evaluate(&pv, node_value(&NodeStatic::of(&node), &usage), &mut scores)
            .unwrap_err();
        assert_eq!(&*e.0, "node(s) didn't match rule label");
    }

    #[test]
    fn rules_reading_only_shared_labels_and_taints_are_class_level() {
        let class = |e: &str| reads_only_class(Program::compile(e).unwrap().expression());
        assert!(class(
            "pod.metadata.labels['workload_name'] != 'nginx' || 'test/test' in node.metadata.labels"
        ));
        assert!(class("node.metadata.labels['zone'] == pod.metadata.labels['zone']"));
        assert!(class(
            "has(node.metadata.labels.zone) && node.metadata.labels.zone == 'a'"
        ));
        assert!(class(
            "!node.spec.taints.exists(t, t.effect == 'NoExecute') && !node.spec.unschedulable"
        ));
        assert!(!class("node.metadata.name == 'a'"), "the name is per node");
        assert!(
            !class("node.metadata.labels['kubernetes.io/hostname'] == 'a'"),
            "a per-node label"
        );
        assert!(
            !class("node.metadata.labels[pod.metadata.labels['k']] == 'a'"),
            "a computed key"
        );
        assert!(!class("node.metadata.labels.exists(k, k == 'x')"), "every label");
        assert!(!class("node.status.requested.cpu < 1000"));
        assert!(!class("size(node) > 0"));
    }

    #[test]
    fn pods_reading_alike_share_a_key() {
        let paths = |e: &str| pod_paths(Program::compile(e).unwrap().expression());
        let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            paths("pod.metadata.labels['team'] != 'ml' || 'ssd' in node.metadata.labels"),
            Some(vec![path(&["metadata", "labels", "team"])])
        );
        assert_eq!(
            paths("has(pod.metadata.labels.team) && pod.requests.cpu > 100"),
            Some(vec![path(&["metadata", "labels", "team"]), path(&["requests", "cpu"])])
        );
        assert_eq!(
            paths("pod.spec.containers.all(c, c.image != '')"),
            Some(vec![path(&["spec", "containers"])])
        );
        // A computed key reads the whole map; the whole pod, or a variable named pod, no path.
        assert_eq!(
            paths("node.metadata.labels[pod.metadata.labels['k']] == 'a'"),
            Some(vec![path(&["metadata", "labels", "k"])])
        );
        assert_eq!(
            paths("pod.metadata.labels[node.metadata.labels['k']] == 'a'"),
            Some(vec![path(&["metadata", "labels"])])
        );
        assert_eq!(paths("size(pod) > 0"), None);
        assert_eq!(paths("[1].all(pod, pod > 0)"), None);
        assert_eq!(paths("node.metadata.labels['zone'] == 'a'"), Some(vec![]));

        let compiled = rules(
            &[(
                "team",
                "pod.metadata.labels['team'] != 'ml' || 'ssd' in node.metadata.labels",
            )],
            &[],
        )
        .compile()
        .unwrap();
        let with = |name: &str, team: Option<&str>| {
            let mut p = PodSpec {
                name: name.into(),
                ..Default::default()
            };
            if let Some(t) = team {
                p.labels.insert("team".into(), t.into());
            }
            compiled.pod_key(0, &pod_value(&p))
        };
        assert_eq!(with("a", Some("ml")), with("b", Some("ml")), "names are not read");
        assert_ne!(with("a", Some("ml")), with("a", Some("data")));
        assert_ne!(
            with("a", Some("")),
            with("a", None),
            "an empty label is not a missing one"
        );
    }

    #[test]
    fn rules_read_the_same_from_the_values_cut_to_their_paths() {
        let mut pod = PodSpec {
            name: "p".into(),
            namespace: "team-a".into(),
            priority: 7,
            ..Default::default()
        };
        pod.labels.insert("team".into(), "ml".into());
        pod.labels.insert("tier".into(), "gold".into());
        pod.annotations.insert("note".into(), "x".repeat(100));
        pod.requests.milli_cpu = 1500;
        let mut node = NodeSpec {
            name: "n".into(),
            unschedulable: true,
            ..Default::default()
        };
        node.labels.insert("disktype".into(), "ssd".into());
        node.allocatable.milli_cpu = 4000;
        let usage = NodeUsage::default();
        let expressions = [
            "pod.metadata.labels['team'] == 'ml' && node.metadata.labels['disktype'] == 'ssd'",
            "has(pod.metadata.labels.tier) && !has(pod.metadata.labels.absent)",
            "'team' in pod.metadata.labels && size(pod.metadata.labels) == 2",
            "pod.spec.priority > 5 && pod.requests.cpu < node.status.allocatable.cpu",
            "node.spec.unschedulable && node.metadata.name == 'n'",
            "node.metadata.labels['absent'] == 'x'",
            "pod.metadata.namespace.startsWith('team-') && node.status.requested.cpu == 0",
        ];
        for e in expressions {
            let compiled = rules(&[("rule", e)], &[]).compile().unwrap();
            let full = compiled.run(
                0,
                &compiled.context(&pod_value(&pod), node_value(&NodeStatic::of(&node), &usage)),
            );
            let cut = compiled.run(
                0,
                &compiled.context(&compiled.pod_value(&pod), {
                    let paths = compiled.node_paths(0).unwrap();
                    node_value_reading(&node, &usage, paths)
                }),
            );
            assert_eq!(full, cut, "{e}");
        }
        // What is cut away: the annotations and the spec for a rule reading one label.
        let compiled = rules(&[("team", "pod.metadata.labels['team'] == 'ml'")], &[])
            .compile()
            .unwrap();
        let Value::Map(cut) = compiled.pod_value(&pod) else {
            panic!("a map");
        };
        let keys: Vec<String> = cut.map.keys().map(|k| format!("{k:?}")).collect();
        assert_eq!(keys.len(), 1, "{keys:?}");
        let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let projected = project(
            &node_value(&NodeStatic::of(&node), &usage),
            &[path(&["status", "allocatable", "cpu"])],
        );
        assert_eq!(
            format!("{projected:?}"),
            format!(
                "{:?}",
                object(vec![(
                    "status",
                    object(vec![("allocatable", object(vec![("cpu", Value::Int(4000))]))])
                )])
            )
        );
        assert_eq!(
            node_paths(Program::compile("[1].all(node, node > 0)").unwrap().expression()),
            None,
            "a variable named node"
        );
    }

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

    use super::tests::rules as tests_rules;
    use super::*;
    use crate::engine::framework::tests::with_rules;
    use crate::engine::framework::{Deadline, Decision, EvalError, Evaluator};
    use crate::engine::model::Container;
    use crate::engine::plugins::testing::{node, pod, snapshot};
    use crate::engine::rule_cost::{self, Metered, PER_CALL_LIMIT};

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
