//! The fast paths: ways to reach the plugins' answers with less work, each naming the plugin
//! function it gives the same answers as and owning the property test that compares them.
//!
//! - [`class_cache`]: a pod's static predicates (NodeUnschedulable, TaintToleration,
//!   NodeAffinity) per node class, kept per snapshot lineage.
//! - [`class_labels`]: the node classes' labels by column, so a selector is matched once per
//!   distinct value.
//! - [`columns`]: the nodes' hot fields by column, and the plain pass's AVX2 kernel.
//! - [`image_sums`]: ImageLocality's per-node sums, per set of images for a batch.
//! - [`rule_columns`]: CEL rules' per-node values by column for the kernel.
//! - [`plain`]: the plain pass and its sinks (every candidate, Rank's totals, Schedule's best
//!   node, the score rules' extrema), through the kernel where it applies.
//! - [`class_replay`]: a class's reasons given to its other nodes when the class alone rejects
//!   them.
//! - [`top_k`]: Rank's `k`-th best total in one pass.
//! - [`state`]: what the fast paths keep in an evaluator from one pod to the next, each field
//!   naming the fast path that reads it.

pub(in crate::engine) mod class_cache;
pub mod class_labels;
pub(in crate::engine) mod class_replay;
pub mod columns;
pub(in crate::engine) mod image_sums;
pub(in crate::engine) mod plain;
pub(in crate::engine) mod resource_scores;
pub(in crate::engine) mod rule_columns;
pub(in crate::engine) mod sinks;
pub(in crate::engine) mod state;
pub(in crate::engine) mod top_k;
