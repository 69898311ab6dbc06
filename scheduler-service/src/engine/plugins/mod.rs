//! kube-scheduler's plugins (`pkg/scheduler/framework/plugins`), one module per plugin, each with
//! its filter, its reason strings, its raw score and its normalization, as kube-scheduler has them.
//!
//! The general path ([`super::framework`]) calls each plugin through the contract here
//! ([`contract`]); the fast paths call the plugins' primitives. This module holds what
//! the plugins share ([`MAX_NODE_SCORE`], [`scaled`]) and imports none of them; a node reaches
//! them as a [`crate::engine::snapshot::NodeView`].

pub mod contract;
pub mod defaultpreemption;
pub mod dynamicresources;
pub mod gangscheduling;
pub mod image_locality;
pub mod interpodaffinity;
pub mod node_affinity;
pub mod node_declared_features;
pub mod node_name;
pub mod node_ports;
pub mod node_unschedulable;
pub mod noderesources;
pub mod nodevolumelimits;
pub mod podgrouppodscount;
pub mod podtopologyspread;
pub mod taint_toleration;
#[cfg(test)]
pub(crate) mod testing;
pub mod topologyaware;
#[cfg(test)]
pub(crate) mod volume_testing;
pub mod volumebinding;
pub mod volumerestrictions;
pub mod volumezone;

/// kube-scheduler's `MaxNodeScore` (`framework/interface.go`): the highest normalized score.
pub const MAX_NODE_SCORE: i64 = 100;

/// `n · MAX_NODE_SCORE / d` for `0 ≤ n ≤ d`: kube-scheduler's int64 arithmetic where it does not
/// overflow (`n` below 2⁶³ / 100), and the exact quotient, always in `[0, 100]`, where Go's would
/// wrap (capacities the API accepts reach 2⁶³ − 1).
#[inline]
pub fn scaled(n: i64, d: i64) -> i64 {
    match n.checked_mul(MAX_NODE_SCORE) {
        Some(p) => p / d,
        None => (i128::from(n) * i128::from(MAX_NODE_SCORE) / i128::from(d)) as i64,
    }
}
