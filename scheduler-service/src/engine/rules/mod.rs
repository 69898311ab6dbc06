//! Rules in policies, written in CEL (the Common Expression Language Kubernetes uses for
//! ValidatingAdmissionPolicy and CRD validation): filter rules (a boolean expression and the reason
//! shown when it rejects a node) and score rules (an integer expression and a weight), over `pod`
//! and `node` in Kubernetes' object shape. See `docs/custom-logic.md`.
//!
//! Expressions are compiled when the policy loads, and refused there when they break a limit:
//! [`MAX_EXPRESSION_BYTES`] of source, [`MAX_NESTING`] levels of nesting, [`MAX_AST_NODES`] nodes
//! and [`MAX_COMPREHENSION_NESTING`] comprehensions (`all`, `exists`, `map`, `filter`, …) inside
//! one another. At run time every evaluation has a cost budget
//! ([`rule_cost::PER_CALL_LIMIT`](crate::engine::rule_cost::PER_CALL_LIMIT), as Kubernetes bounds
//! CEL): one that spends it stops, and the node is rejected with `rule <name> failed: operation
//! cancelled: actual cost limit exceeded`.
//!
//! `compile.rs` holds the rules as a policy writes them and their compilation within the limits,
//! `reads.rs` what an expression reads of the pod and the node, `values.rs` the pod's and the
//! node's values, `evaluate.rs` the compiled rules and their evaluation within the cost budget,
//! `outcomes.rs` the outcomes a snapshot keeps. This module declares them and re-exports their
//! public items.

mod compile;
mod evaluate;
mod outcomes;
mod reads;
mod values;

pub use compile::{
    FilterRule, RuleError, Rules, ScoreRule, COMPILE_STACK_BYTES, MAX_AST_NODES, MAX_COMPREHENSION_NESTING,
    MAX_EXPRESSION_BYTES, MAX_NESTING, MAX_RULES, MAX_RULE_WEIGHT,
};
pub use evaluate::{CompiledFilter, CompiledRules, CompiledScore, RuleOutcome, RuleRejection};
pub(super) use outcomes::snapshot_rules;
pub use outcomes::{ClassOutcomes, NodeRuleValues, SnapshotRules, MAX_POD_KEYS};
pub use reads::{node_paths, pod_paths, project, reads_only_class, reads_pod};
pub use values::{node_value, node_value_reading, pod_value, pod_value_reading, NodeStatic};
