//! NodeName: a pod that names a node (`spec.nodeName`) fits that node only.
//!
//! Mirrors kube-scheduler's `pkg/scheduler/framework/plugins/nodename/node_name.go`. The plugin
//! has no score. A pod naming a node is evaluated node by node (the plain pass leaves it out).

use crate::engine::model::{NodeSpec, PodSpec};

/// kube-scheduler's `ErrReason`.
pub const ERR_REASON: &str = "node(s) didn't match the requested node name";

/// kube-scheduler's `Fits`: the pod names no node (or an empty name), or this node.
#[inline]
pub fn fits(pod: &PodSpec, node: &NodeSpec) -> bool {
    pod.node_name.as_deref().is_none_or(|n| n.is_empty() || n == node.name)
}

/// The plugin in the framework's contract: [`fits`] on the node.
#[derive(Debug, Clone, Copy)]
pub struct NodeName;

impl crate::engine::plugins::contract::Filter for NodeName {
    type In<'a> = &'a PodSpec;
    type Rejection = ();
    #[inline(always)]
    fn filter(pod: &PodSpec, node: &crate::engine::snapshot::NodeView<'_>, reject: &mut impl FnMut(())) -> bool {
        let fits = fits(pod, &node.entry.spec);
        if !fits {
            reject(());
        }
        fits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::plugins::testing::{node, pod, rank, snapshot};

    /// `node_name_test.go`'s table: the pod's `spec.nodeName` against the node's name.
    #[test]
    fn filter_table() {
        let cases = [
            ("no node name", None, "foo", true),
            ("empty node name", Some(""), "foo", true),
            ("the same node", Some("foo"), "foo", true),
            ("another node", Some("bar"), "foo", false),
        ];
        for (name, wanted, node_name, fit) in cases {
            let mut p = pod("p", 0, 0);
            p.node_name = wanted.map(String::from);
            assert_eq!(fits(&p, &node(node_name, 1000, 1000)), fit, "{name}");
        }
    }

    #[test]
    fn node_name_pins_the_pod() {
        let snap = snapshot(vec![node("a", 1000, 1000), node("b", 1000, 1000)]);
        let mut p = pod("p", 500, 0);
        p.node_name = Some("b".into());
        let r = rank(&snap, &p);
        assert_eq!(r.feasible.iter().map(|n| n.node.as_str()).collect::<Vec<_>>(), ["b"]);
        // kube-scheduler 1.37's NodeName PreFilter restricts the pod to its node: every other
        // node gets the framework's status for nodes outside a PreFilterResult.
        assert_eq!(
            r.rejected[0].reasons[0].to_string(),
            "node(s) didn't satisfy plugin(s) [NodeName]"
        );
        assert_eq!(
            r.diagnosis.message(),
            "0/2 nodes are available: 1 node(s) didn't satisfy plugin(s) [NodeName]."
        );
        // A cordoned node outside it too; a node name and `metadata.name` terms name both.
        let mut cordoned = node("c", 1000, 1000);
        cordoned.unschedulable = true;
        let snap = snapshot(vec![node("a", 1000, 1000), node("b", 10, 1000), cordoned]);
        let r = rank(&snap, &p);
        assert_eq!(
            r.diagnosis.message().split(" preemption:").next(),
            Some("0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeName].")
        );
        p.required_affinity = Some(vec![crate::engine::model::SelectorTerm {
            match_expressions: vec![],
            match_fields: vec![crate::engine::model::Requirement {
                key: "metadata.name".into(),
                op: crate::engine::model::SelectorOp::In(vec!["a".into(), "b".into()]),
            }],
        }]);
        let r = rank(&snap, &p);
        assert_eq!(
            r.diagnosis.message().split(" preemption:").next(),
            Some(
                "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeAffinity \
                 NodeName]."
            )
        );
        p.node_name = None;
        let r = rank(&snap, &p);
        assert_eq!(
            r.diagnosis.message().split(" preemption:").next(),
            Some("0/3 nodes are available: 1 Insufficient cpu, 1 node(s) didn't satisfy plugin(s) [NodeAffinity].")
        );
    }
}
