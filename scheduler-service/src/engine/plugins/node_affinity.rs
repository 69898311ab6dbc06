//! NodeAffinity: a pod's `nodeSelector` and required node affinity pick the nodes it may run on;
//! its preferred node affinity terms add their weights to the nodes they match.
//!
//! Mirrors kube-scheduler's `pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go`:
//! Filter (`RequiredNodeAffinity.Match`), Score (the weights of the matching preferred terms) and
//! NormalizeScore (`DefaultNormalizeScore`). Both depend on the node's class alone: the class
//! cache keeps them per class (`StaticEval::mismatched` and `StaticEval::affinity_weight`), and
//! evaluates a pod's terms once per distinct label value through the class label columns
//! (`PodPlan::class_statics`, the same answers as these functions class by class).

use super::MAX_NODE_SCORE;
use crate::engine::model::{NodeSpec, PodSpec};

/// kube-scheduler's `ErrReasonPod`.
pub const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";

impl PodSpec {
    /// Filter: whether the node satisfies the pod's nodeSelector and required node affinity
    /// (Kubernetes' `RequiredNodeAffinity.Match`).
    pub fn matches_node_selector_and_affinity(&self, node: &NodeSpec) -> bool {
        let selector_ok = self
            .node_selector
            .iter()
            .all(|(k, v)| node.labels.get(k).is_some_and(|x| x == v));
        selector_ok
            && self
                .required_affinity
                .as_ref()
                .is_none_or(|terms| terms.iter().any(|t| t.matches(node)))
    }
}

/// Score: the sum of the weights of the pod's preferred terms that the node matches.
#[inline]
pub fn score(pod: &PodSpec, node: &NodeSpec) -> i64 {
    pod.preferred_affinity
        .iter()
        .filter(|p| p.term.matches(node))
        .map(|p| p.weight)
        .sum()
}

/// NormalizeScore: `DefaultNormalizeScore(MaxNodeScore, reverse=false)` given the highest raw
/// score `max`: `100 × raw / max`, the raw scores as they are when every one is 0.
#[inline]
pub fn normalize(raw: i64, max: i64) -> i64 {
    if max == 0 {
        raw
    } else {
        MAX_NODE_SCORE * raw / max
    }
}

/// The plugin in the framework's contract; its inputs are the filter's verdict and [`score`]'s
/// raw score on the node's class (the class cache's or the label columns', or the node's own).
#[derive(Debug, Clone, Copy)]
pub struct NodeAffinity;

impl crate::engine::plugins::contract::Filter for NodeAffinity {
    type In<'a> = bool;
    type Rejection = ();
    #[inline(always)]
    fn filter(mismatched: bool, _: &crate::engine::snapshot::NodeView<'_>, reject: &mut impl FnMut(())) -> bool {
        if mismatched {
            reject(());
        }
        !mismatched
    }
}

impl crate::engine::plugins::contract::Score for NodeAffinity {
    type In<'a> = i64;
    #[inline(always)]
    fn score(raw: i64, _: &crate::engine::snapshot::NodeView<'_>) -> i64 {
        raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::model::{PreferredTerm, Requirement, SelectorOp, SelectorTerm};
    use crate::engine::plugins::testing::{label_term, node, only, pod, rank, scores, snapshot};
    use crate::engine::policy::{ScorePlugin as S, ScoringStrategy};

    /// `node_affinity_test.go`'s filter cases: nodeSelector and required terms against labels.
    #[test]
    fn filter_table() {
        let mut labeled = node("n", 1000, 1000);
        labeled.labels.insert("foo".into(), "bar".into());
        labeled.labels.insert("zone".into(), "z1".into());
        let term = |op| label_term("foo", op);
        let selector = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        type Case = (&'static str, Vec<(String, String)>, Option<Vec<SelectorTerm>>, bool);
        let cases: Vec<Case> = vec![
            ("no selector, no affinity", vec![], None, true),
            ("matching selector", selector(&[("foo", "bar")]), None, true),
            ("selector with another value", selector(&[("foo", "baz")]), None, false),
            ("selector with a missing key", selector(&[("gpu", "true")]), None, false),
            (
                "matching In term",
                vec![],
                Some(vec![term(SelectorOp::In(vec!["bar".into(), "value2".into()]))]),
                true,
            ),
            (
                "NotIn term",
                vec![],
                Some(vec![term(SelectorOp::NotIn(vec!["bar".into()]))]),
                false,
            ),
            (
                "DoesNotExist term",
                vec![],
                Some(vec![term(SelectorOp::DoesNotExist)]),
                false,
            ),
            (
                "terms are ORed",
                vec![],
                Some(vec![label_term("gpu", SelectorOp::Exists), term(SelectorOp::Exists)]),
                true,
            ),
            ("an empty term list matches nothing", vec![], Some(vec![]), false),
            (
                "an empty term matches nothing",
                vec![],
                Some(vec![SelectorTerm::default()]),
                false,
            ),
            (
                "selector ANDed with the terms",
                selector(&[("zone", "z2")]),
                Some(vec![term(SelectorOp::Exists)]),
                false,
            ),
        ];
        for (name, node_selector, required_affinity, fits) in cases {
            let mut p = pod("p", 0, 0);
            p.node_selector = node_selector;
            p.required_affinity = required_affinity;
            assert_eq!(p.matches_node_selector_and_affinity(&labeled), fits, "{name}");
        }
    }

    /// `node_affinity_test.go`'s score cases: matched preferred weights, then normalized to the best.
    #[test]
    fn score_table() {
        let with = |labels: &[(&str, &str)]| {
            let mut n = node("n", 1000, 1000);
            for (k, v) in labels {
                n.labels.insert(k.to_string(), v.to_string());
            }
            n
        };
        let nodes = [
            with(&[("foo", "bar")]),
            with(&[("foo", "bar"), ("key", "value")]),
            with(&[("az", "az1")]),
        ];
        let preferred = |key: &str, weight| PreferredTerm {
            weight,
            term: SelectorTerm {
                match_expressions: vec![Requirement {
                    key: key.into(),
                    op: SelectorOp::Exists,
                }],
                match_fields: vec![],
            },
        };
        let cases = [
            ("no preferred terms", vec![], [0, 0, 0], [0, 0, 0]),
            ("one term", vec![preferred("foo", 2)], [2, 2, 0], [100, 100, 0]),
            (
                "two terms",
                vec![preferred("foo", 2), preferred("key", 3)],
                [2, 5, 0],
                [40, 100, 0],
            ),
            (
                "a term no node matches",
                vec![preferred("gpu", 5)],
                [0, 0, 0],
                [0, 0, 0],
            ),
        ];
        for (name, terms, raw, normalized) in cases {
            let mut p = pod("p", 0, 0);
            p.preferred_affinity = terms;
            let got: Vec<i64> = nodes.iter().map(|n| score(&p, n)).collect();
            assert_eq!(got, raw, "{name}: raw");
            let max = got.iter().copied().max().unwrap_or(0);
            let got: Vec<i64> = got.iter().map(|&r| normalize(r, max)).collect();
            assert_eq!(got, normalized, "{name}: normalized");
        }
    }

    #[test]
    fn required_terms_are_ored_and_selector_is_anded() {
        let mut node = NodeSpec::default();
        node.labels.insert("zone".into(), "a".into());
        let zone = |z: &str| SelectorTerm {
            match_expressions: vec![Requirement {
                key: "zone".into(),
                op: SelectorOp::In(vec![z.into()]),
            }],
            match_fields: vec![],
        };
        let mut pod = PodSpec {
            required_affinity: Some(vec![zone("b"), zone("a")]),
            ..Default::default()
        };
        assert!(pod.matches_node_selector_and_affinity(&node));
        pod.node_selector = vec![("zone".into(), "b".into())];
        assert!(!pod.matches_node_selector_and_affinity(&node));
        pod.node_selector.clear();
        pod.required_affinity = Some(vec![]);
        assert!(
            !pod.matches_node_selector_and_affinity(&node),
            "an empty term list matches nothing"
        );
    }

    #[test]
    fn node_affinity_filter_ands_selector_with_required_terms() {
        let mut a = node("a", 1000, 1000);
        a.labels.insert("zone".into(), "us-1".into());
        a.labels.insert("cores".into(), "64".into());
        let mut b = node("b", 1000, 1000);
        b.labels.insert("zone".into(), "us-2".into());
        b.labels.insert("cores".into(), "8".into());
        let snap = snapshot(vec![a, b]);
        let feasible = |p: &PodSpec| rank(&snap, p).feasible.into_iter().map(|n| n.node).collect::<Vec<_>>();
        let mut p = pod("p", 0, 0);
        p.required_affinity = Some(vec![label_term("cores", SelectorOp::Gt(16))]);
        assert_eq!(feasible(&p), ["a"]);
        p.required_affinity = Some(vec![label_term("cores", SelectorOp::Lt(16))]);
        assert_eq!(feasible(&p), ["b"]);
        p.required_affinity = Some(vec![label_term("zone", SelectorOp::NotIn(vec!["us-1".into()]))]);
        assert_eq!(feasible(&p), ["b"]);
        p.required_affinity = Some(vec![label_term("gpu", SelectorOp::DoesNotExist)]);
        assert_eq!(feasible(&p).len(), 2);
        p.required_affinity = Some(vec![label_term("gpu", SelectorOp::Exists)]);
        let r = rank(&snap, &p);
        assert_eq!(
            r.diagnosis.message(),
            "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
        );
        // Terms are ORed; the nodeSelector is ANDed with them.
        p.required_affinity = Some(vec![
            label_term("gpu", SelectorOp::Exists),
            label_term("zone", SelectorOp::In(vec!["us-1".into(), "us-2".into()])),
        ]);
        assert_eq!(feasible(&p).len(), 2);
        p.node_selector = vec![("zone".into(), "us-2".into())];
        assert_eq!(feasible(&p), ["b"]);
    }

    #[test]
    fn preferred_node_affinity_is_normalized_to_the_best_node() {
        let mut a = node("a", 1000, 1000);
        a.labels.insert("zone".into(), "z1".into());
        a.labels.insert("disk".into(), "ssd".into());
        let mut b = node("b", 1000, 1000);
        b.labels.insert("zone".into(), "z1".into());
        let c = node("c", 1000, 1000);
        let snap = snapshot(vec![a, b, c]);
        let mut p = pod("p", 0, 0);
        p.preferred_affinity = vec![
            PreferredTerm {
                weight: 20,
                term: label_term("zone", SelectorOp::In(vec!["z1".into()])),
            },
            PreferredTerm {
                weight: 60,
                term: label_term("disk", SelectorOp::Exists),
            },
        ];
        // Raw 80, 20, 0 → 100 × raw / 80.
        let prof = only(S::NodeAffinity, ScoringStrategy::LeastAllocated);
        assert_eq!(
            scores(&prof, &snap, &p),
            [("a".into(), 100), ("b".into(), 25), ("c".into(), 0)]
        );
    }
}
