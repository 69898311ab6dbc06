//! Policies' rules as written (filter and score rules, their names, weights and expressions) and
//! their compilation: every expression within the limits on its size, nesting and
//! comprehensions, into [`CompiledRules`].

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr};
use cel::{Env, IdedExpr, Program};
use serde::{Deserialize, Serialize};

use super::evaluate::{CompiledFilter, CompiledRules, CompiledScore};
use super::reads::{node_paths, pod_paths, reads_only_class, reads_pod};
use crate::engine::rule_cost::{self, Metered};

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

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::engine::model::{NodeSpec, PodSpec};
    use crate::engine::rules::values::{node_value, pod_value, NodeStatic};
    use crate::engine::snapshot::NodeUsage;

    /// Rules of these (name, expression) pairs, with the default reason and weight.
    pub(in crate::engine::rules) fn rules(filters: &[(&str, &str)], scores: &[(&str, &str)]) -> Rules {
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
}
