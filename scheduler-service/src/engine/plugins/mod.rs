//! kube-scheduler's plugins (`pkg/scheduler/framework/plugins`), one module per plugin, each with
//! its filter, its reason strings, its raw score and its normalization, as kube-scheduler has them.
//!
//! The scheduling cycle ([`super::framework`]) and its fast paths call these functions; this
//! module holds what they share and imports none of them.

/// kube-scheduler's `MaxNodeScore` (`framework/interface.go`): the highest normalized score.
pub const MAX_NODE_SCORE: i64 = 100;

pub mod node_affinity;
pub mod node_name;
pub mod node_ports;
pub mod node_unschedulable;
pub mod taint_toleration;
#[cfg(test)]
pub(crate) mod testing;
