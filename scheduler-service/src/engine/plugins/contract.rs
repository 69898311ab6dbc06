//! The contract between the general path and the plugins (kube-scheduler's
//! `framework/interface.go`, trimmed to what the engine calls): [`Filter`] and [`Score`], each
//! implemented by a unit type in the plugin's file and registered by one line in `framework.rs`.
//!
//! Static dispatch, no cost: the framework's `run_filter` matches the profile's plugin (an enum,
//! as before) and each arm calls `P::filter` for a concrete `P`, whose `#[inline(always)]` body
//! compiles into the arm as the direct call it replaced did; no trait object, no vtable.

use crate::engine::snapshot::NodeView;

/// kube-scheduler's `FilterPlugin` (`framework/interface.go`) as the general path calls it: a
/// unit type in the plugin's file, registered by one line of `run_filter` in `framework.rs`
/// (`docs/engine.md`, "Adding a plugin"). Static dispatch: each call compiles to the plugin's
/// code inlined in that line, as a direct call would.
pub trait Filter {
    /// What the plugin reads of the pod being placed, for one node: what its PreFilter resolved
    /// for the pod (kube-scheduler's `CycleState` entry), borrowed from the pod's plan.
    type In<'a>;
    /// Why the plugin rejects a node (the framework words it as a `Reason`).
    type Rejection;
    /// Filter: whether `node` passes; each reason it does not is given to `reject`.
    fn filter(input: Self::In<'_>, node: &NodeView<'_>, reject: &mut impl FnMut(Self::Rejection)) -> bool;
}

/// A filter's verdict from the one rejection it found, if any: gives it to `reject` and fails.
#[inline(always)]
pub fn verdict<R>(found: Option<R>, reject: &mut impl FnMut(R)) -> bool {
    match found {
        Some(r) => {
            reject(r);
            false
        }
        None => true,
    }
}

/// kube-scheduler's `ScorePlugin` (`framework/interface.go`) as the general path calls it: the
/// raw score of a node that passed the filters (normalized by the plugin's `normalize`),
/// registered by one line of `Evaluator::eval_node` in `framework.rs`.
pub trait Score {
    /// What the plugin reads of the pod being placed, for one node (its PreScore state).
    type In<'a>;
    /// Score: the node's raw score.
    fn score(input: Self::In<'_>, node: &NodeView<'_>) -> i64;
}
