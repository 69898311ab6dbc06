//! NodeUnschedulable: a cordoned node (`spec.unschedulable`) takes only the pods that tolerate
//! the `node.kubernetes.io/unschedulable:NoSchedule` taint.
//!
//! Mirrors kube-scheduler's `pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go`.
//! The plugin has no score. Its verdict depends on the node's class alone, so the class cache
//! keeps it per class (`StaticEval::cordoned`).

use crate::engine::model::{tolerated, NodeSpec, Taint, TaintEffect, Toleration};

/// kube-scheduler's `ErrReasonUnschedulable`.
pub const ERR_REASON_UNSCHEDULABLE: &str = "node(s) were unschedulable";

/// The taint kube-scheduler checks cordoned nodes' tolerations against (`v1.TaintNodeUnschedulable`).
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// Whether tolerations tolerate `node.kubernetes.io/unschedulable:NoSchedule` (once per pod).
pub fn tolerates_unschedulable(tolerations: &[Toleration]) -> bool {
    let taint = Taint {
        key: TAINT_NODE_UNSCHEDULABLE.into(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    };
    tolerated(tolerations, &taint)
}

/// kube-scheduler's Filter: whether the node rejects a pod, given whether the pod
/// [`tolerates_unschedulable`].
#[inline]
pub fn rejects(node: &NodeSpec, tolerates: bool) -> bool {
    node.unschedulable && !tolerates
}

/// The plugin in the framework's contract; its input is [`rejects`]'s verdict on the node's
/// class (the class cache's, or the node's own for a pod evaluated node by node).
#[derive(Debug, Clone, Copy)]
pub struct NodeUnschedulable;

impl crate::engine::plugins::contract::Filter for NodeUnschedulable {
    type In<'a> = bool;
    type Rejection = ();
    #[inline(always)]
    fn filter(rejected: bool, _: &crate::engine::snapshot::NodeView<'_>, reject: &mut impl FnMut(())) -> bool {
        if rejected {
            reject(());
        }
        !rejected
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::model::TolerationOperator;
    use crate::engine::plugins::testing::{node, pod, rank, snapshot};
    use crate::engine::policy::FilterPlugin as F;

    /// `node_unschedulable_test.go`'s table: a node's cordon against the pod's tolerations.
    #[test]
    fn filter_table() {
        let tol = |key: &str, operator, effect| Toleration {
            key: key.into(),
            operator,
            value: String::new(),
            effect,
        };
        let unschedulable = tol(
            TAINT_NODE_UNSCHEDULABLE,
            TolerationOperator::Exists,
            Some(TaintEffect::NoSchedule),
        );
        let cases = [
            ("schedulable node", false, vec![], false),
            ("cordoned node", true, vec![], true),
            ("cordoned node, toleration", true, vec![unschedulable.clone()], false),
            (
                "cordoned node, toleration of another key",
                true,
                vec![tol("other", TolerationOperator::Exists, Some(TaintEffect::NoSchedule))],
                true,
            ),
            (
                "cordoned node, toleration of every taint",
                true,
                vec![tol("", TolerationOperator::Exists, None)],
                false,
            ),
            (
                "cordoned node, PreferNoSchedule toleration",
                true,
                vec![tol(
                    TAINT_NODE_UNSCHEDULABLE,
                    TolerationOperator::Exists,
                    Some(TaintEffect::PreferNoSchedule),
                )],
                true,
            ),
            ("schedulable node, toleration", false, vec![unschedulable], false),
        ];
        for (name, cordoned, tolerations, rejected) in cases {
            let mut n = node("n", 1000, 1000);
            n.unschedulable = cordoned;
            assert_eq!(rejects(&n, tolerates_unschedulable(&tolerations)), rejected, "{name}");
        }
    }

    #[test]
    fn node_unschedulable_rejects_cordoned_nodes_unless_tolerated() {
        let mut n = node("n1", 1000, 1000);
        n.unschedulable = true;
        let snap = snapshot(vec![n]);
        let r = rank(&snap, &pod("p", 0, 0));
        assert_eq!(r.rejected[0].plugin, F::NodeUnschedulable);
        assert_eq!(
            r.diagnosis.message(),
            "0/1 nodes are available: 1 node(s) were unschedulable. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        );
        let mut tolerant = pod("p", 0, 0);
        tolerant.tolerations = vec![Toleration {
            key: "node.kubernetes.io/unschedulable".into(),
            operator: TolerationOperator::Exists,
            value: String::new(),
            effect: Some(TaintEffect::NoSchedule),
        }];
        assert_eq!(rank(&snap, &tolerant).feasible_count, 1);
    }
}
