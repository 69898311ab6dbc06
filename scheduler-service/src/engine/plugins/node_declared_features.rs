//! NodeDeclaredFeatures: a pod that needs node features (GA in Kubernetes 1.37) fits only nodes
//! that declare every one of them in `status.declaredFeatures`.
//!
//! Mirrors kube-scheduler's `pkg/scheduler/framework/plugins/nodedeclaredfeatures/
//! nodedeclaredfeatures.go`. What a pod needs is inferred from its spec by
//! `k8s.io/component-helpers/nodedeclaredfeatures` (`InferForPodScheduling`): the binder and the
//! clients send those names as the pod's `required_features`, and the plugin's PreFilter skips a
//! pod that needs none. The filter is `FeatureSet.IsSubset`; a node that does not declare one is
//! `UnschedulableAndUnresolvable` (no preemption helps). The plugin has no score.

use crate::engine::model::{NodeSpec, PodSpec};

/// kube-scheduler's `errReasonUnsatisfiedRequirements`.
pub const ERR_REASON: &str = "node(s) didn't match Pod's required features";

/// Whether every feature the pod needs is among the node's declared ones (both sorted).
#[inline]
pub fn fits(pod: &PodSpec, node: &NodeSpec) -> bool {
    pod.required_features
        .iter()
        .all(|f| node.declared_features.binary_search(f).is_ok())
}

/// The plugin in the framework's contract: [`fits`] on the node.
#[derive(Debug, Clone, Copy)]
pub struct NodeDeclaredFeatures;

impl crate::engine::plugins::contract::Filter for NodeDeclaredFeatures {
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
    use std::sync::Arc;

    use super::*;
    use crate::engine::plugins::testing::{node, pod, rank, snapshot};

    fn names(list: &[&str]) -> Vec<Arc<str>> {
        let mut v: Vec<Arc<str>> = list.iter().map(|s| Arc::from(*s)).collect();
        v.sort();
        v
    }

    /// `nodedeclaredfeatures_test.go`'s Filter cases: the pod's requirements against the node's
    /// declared features.
    #[test]
    fn filter_table() {
        let cases: [(&str, &[&str], &[&str], bool); 5] = [
            ("no requirement, no feature", &[], &[], true),
            ("no requirement, features", &[], &["FeatureA"], true),
            ("requirement declared", &["FeatureA"], &["FeatureA", "FeatureB"], true),
            ("requirement not declared", &["FeatureA"], &["FeatureB"], false),
            ("one of two declared", &["FeatureA", "FeatureB"], &["FeatureA"], false),
        ];
        for (name, needs, declared, fit) in cases {
            let mut p = pod("p", 0, 0);
            p.required_features = names(needs).into();
            let mut n = node("n", 1000, 1000);
            n.declared_features = names(declared);
            assert_eq!(fits(&p, &n), fit, "{name}");
        }
    }

    #[test]
    fn a_pod_lands_only_where_its_features_are_declared_in_kubes_words() {
        let mut with = node("with", 1000, 1000);
        with.declared_features = names(&[
            "RestartAllContainersOnContainerExits",
            "UserNamespacesHostNetworkSupport",
        ]);
        let without = node("without", 4000, 4000);
        let snap = snapshot(vec![with.clone(), without.clone()]);
        let mut p = pod("p", 100, 0);
        p.required_features = names(&["UserNamespacesHostNetworkSupport"]).into();
        let r = rank(&snap, &p);
        assert_eq!(r.feasible.iter().map(|n| n.node.as_str()).collect::<Vec<_>>(), ["with"]);
        let snap = snapshot(vec![without]);
        let r = rank(&snap, &p);
        // UnschedulableAndUnresolvable: kube's message has no node that preemption may help.
        assert_eq!(
            r.diagnosis.message(),
            "0/1 nodes are available: 1 node(s) didn't match Pod's required features. \
             preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        );
        // A pod that needs nothing goes anywhere.
        let snap = snapshot(vec![with, node("without", 4000, 4000)]);
        assert_eq!(rank(&snap, &pod("q", 100, 0)).feasible.len(), 2);
    }
}
