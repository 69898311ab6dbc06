//! TaintToleration: a node's NoSchedule and NoExecute taints keep off the pods that do not
//! tolerate them; its PreferNoSchedule taints lower its score for those pods.
//!
//! Mirrors kube-scheduler's `pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go`:
//! Filter, PreScore (the pod's PreferNoSchedule tolerations), Score (the intolerable
//! PreferNoSchedule taints) and NormalizeScore (`DefaultNormalizeScore`, reversed). Filter and
//! Score depend on the node's class alone, so the class cache keeps them per class
//! (`StaticEval::untolerated` and `StaticEval::prefer_taints`).

use super::MAX_NODE_SCORE;
use crate::engine::model::{tolerated, NodeSpec, Taint, TaintEffect, Toleration};

/// The reason of a node with a NoSchedule or NoExecute taint the pod does not tolerate.
pub const ERR_REASON: &str = "node(s) had untolerated taint(s)";

/// Filter: whether some NoSchedule or NoExecute taint is not tolerated (kube-scheduler's
/// `FindMatchingUntoleratedTaint` over the taints `DoNotScheduleTaintsFilterFunc` keeps).
#[inline]
pub fn untolerated(tolerations: &[Toleration], taints: &[Taint]) -> bool {
    taints
        .iter()
        .any(|t| matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute) && !tolerated(tolerations, t))
}

/// PreScore: the tolerations with effect PreferNoSchedule or none, which Score reads
/// (`getAllTolerationPreferNoSchedule`).
pub fn prefer_no_schedule_tolerations(tolerations: &[Toleration]) -> Vec<Toleration> {
    tolerations
        .iter()
        .filter(|t| t.effect.is_none() || t.effect == Some(TaintEffect::PreferNoSchedule))
        .cloned()
        .collect()
}

/// Score: the node's PreferNoSchedule taints that `prefer_tolerations` (see
/// [`prefer_no_schedule_tolerations`]) do not tolerate (`countIntolerableTaintsPreferNoSchedule`).
#[inline]
pub fn score(prefer_tolerations: &[Toleration], node: &NodeSpec) -> i64 {
    node.taints
        .iter()
        .filter(|t| t.effect == TaintEffect::PreferNoSchedule && !tolerated(prefer_tolerations, t))
        .count() as i64
}

/// NormalizeScore: `DefaultNormalizeScore(MaxNodeScore, reverse=true)` given the highest raw
/// score `max`: fewer intolerable taints score higher; every node scores 100 when none has any.
#[inline]
pub fn normalize(raw: i64, max: i64) -> i64 {
    if max == 0 {
        MAX_NODE_SCORE
    } else {
        MAX_NODE_SCORE - MAX_NODE_SCORE * raw / max
    }
}

/// The plugin in the framework's contract; its inputs are [`untolerated`]'s verdict and
/// [`score`]'s raw score on the node's class (the class cache's, or the node's own).
#[derive(Debug, Clone, Copy)]
pub struct TaintToleration;

impl crate::engine::plugins::contract::Filter for TaintToleration {
    type In<'a> = bool;
    type Rejection = ();
    #[inline(always)]
    fn filter(untolerated: bool, _: &crate::engine::snapshot::NodeView<'_>, reject: &mut impl FnMut(())) -> bool {
        if untolerated {
            reject(());
        }
        !untolerated
    }
}

impl crate::engine::plugins::contract::Score for TaintToleration {
    type In<'a> = i64;
    #[inline(always)]
    fn score(raw: i64, _: &crate::engine::snapshot::NodeView<'_>) -> i64 {
        raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::plugins::testing::{node, only, pod, rank, scores, snapshot, taint, toleration};
    use crate::engine::policy::{FilterPlugin as F, ScorePlugin as S, ScoringStrategy};

    /// `taint_toleration_test.go`'s filter cases: the node's taints against the pod's tolerations.
    #[test]
    fn filter_table() {
        use TaintEffect::*;
        let cases = [
            ("no taints", vec![], vec![], false),
            (
                "untolerated NoSchedule",
                vec![taint("dedicated", "user1", NoSchedule)],
                vec![],
                true,
            ),
            (
                "untolerated NoExecute",
                vec![taint("dedicated", "user1", NoExecute)],
                vec![],
                true,
            ),
            (
                "PreferNoSchedule only scores",
                vec![taint("dedicated", "user1", PreferNoSchedule)],
                vec![],
                false,
            ),
            (
                "tolerated by key, value and effect",
                vec![taint("dedicated", "user1", NoSchedule)],
                vec![toleration("dedicated", "user1", Some(NoSchedule))],
                false,
            ),
            (
                "another value",
                vec![taint("dedicated", "user1", NoSchedule)],
                vec![toleration("dedicated", "user2", Some(NoSchedule))],
                true,
            ),
            (
                "a toleration with no effect tolerates every effect",
                vec![taint("foo", "bar", NoExecute)],
                vec![toleration("foo", "bar", None)],
                false,
            ),
            (
                "a NoSchedule toleration does not tolerate NoExecute",
                vec![taint("foo", "bar", NoExecute)],
                vec![toleration("foo", "bar", Some(NoSchedule))],
                true,
            ),
        ];
        for (name, taints, tolerations, rejected) in cases {
            assert_eq!(untolerated(&tolerations, &taints), rejected, "{name}");
        }
    }

    /// `taint_toleration_test.go`'s score cases, raw then normalized: intolerable PreferNoSchedule
    /// taints, fewer being better.
    #[test]
    fn score_table() {
        use TaintEffect::*;
        let with = |taints: Vec<Taint>| {
            let mut n = node("n", 1000, 1000);
            n.taints = taints;
            n
        };
        let nodes = [
            with(vec![]),
            with(vec![taint("foo", "bar", PreferNoSchedule)]),
            with(vec![
                taint("foo", "bar", PreferNoSchedule),
                taint("cpu-type", "arm64", PreferNoSchedule),
            ]),
            with(vec![taint("foo", "bar", NoSchedule)]),
        ];
        let cases = [
            ("no tolerations", vec![], [0, 1, 2, 0], [100, 50, 0, 100]),
            (
                "tolerating foo=bar",
                vec![toleration("foo", "bar", Some(PreferNoSchedule))],
                [0, 0, 1, 0],
                [100, 100, 0, 100],
            ),
            (
                "a NoSchedule toleration does not count",
                vec![toleration("foo", "bar", Some(NoSchedule))],
                [0, 1, 2, 0],
                [100, 50, 0, 100],
            ),
        ];
        for (name, tolerations, raw, normalized) in cases {
            let prefer = prefer_no_schedule_tolerations(&tolerations);
            let got: Vec<i64> = nodes.iter().map(|n| score(&prefer, n)).collect();
            assert_eq!(got, raw, "{name}: raw");
            let max = got.iter().copied().max().unwrap_or(0);
            let got: Vec<i64> = got.iter().map(|&r| normalize(r, max)).collect();
            assert_eq!(got, normalized, "{name}: normalized");
        }
        assert_eq!(normalize(0, 0), MAX_NODE_SCORE, "no node has any: every node 100");
    }

    #[test]
    fn every_taint_effect_follows_kube_scheduler() {
        let mut no_schedule = node("no-schedule", 1000, 1000);
        no_schedule.taints = vec![taint("dedicated", "gpu", TaintEffect::NoSchedule)];
        let mut no_execute = node("no-execute", 1000, 1000);
        no_execute.taints = vec![taint("dedicated", "gpu", TaintEffect::NoExecute)];
        let mut prefer = node("prefer", 1000, 1000);
        prefer.taints = vec![taint("dedicated", "gpu", TaintEffect::PreferNoSchedule)];
        let snap = snapshot(vec![no_schedule, no_execute, prefer]);

        // NoSchedule and NoExecute filter; PreferNoSchedule only scores.
        let r = rank(&snap, &pod("p", 0, 0));
        assert_eq!(
            r.feasible.iter().map(|n| n.node.as_str()).collect::<Vec<_>>(),
            ["prefer"]
        );
        assert!(r.rejected.iter().all(|n| n.plugin == F::TaintToleration));
        assert_eq!(
            r.diagnosis.message(),
            "0/3 nodes are available: 2 node(s) had untolerated taint(s)."
        );

        // A toleration with no effect tolerates every effect of the key.
        let mut p = pod("p", 0, 0);
        p.tolerations = vec![toleration("dedicated", "gpu", None)];
        assert_eq!(rank(&snap, &p).feasible_count, 3);

        // A NoSchedule toleration does not tolerate NoExecute.
        p.tolerations = vec![toleration("dedicated", "gpu", Some(TaintEffect::NoSchedule))];
        let r = rank(&snap, &p);
        assert_eq!(
            r.rejected.iter().map(|n| n.name(&snap)).collect::<Vec<_>>(),
            ["no-execute"]
        );
    }

    #[test]
    fn prefer_no_schedule_taints_are_normalized_in_reverse() {
        let mut one = node("one", 1000, 1000);
        one.taints = vec![taint("a", "", TaintEffect::PreferNoSchedule)];
        let mut two = node("two", 1000, 1000);
        two.taints = vec![
            taint("a", "", TaintEffect::PreferNoSchedule),
            taint("b", "", TaintEffect::PreferNoSchedule),
        ];
        let snap = snapshot(vec![node("zero", 1000, 1000), one, two]);
        let prof = only(S::TaintToleration, ScoringStrategy::LeastAllocated);
        assert_eq!(
            scores(&prof, &snap, &pod("p", 0, 0)),
            [("one".into(), 50), ("two".into(), 0), ("zero".into(), 100)]
        );
        // Tolerating "a" (with no effect, so it counts for PreferNoSchedule) leaves "two" with one.
        let mut p = pod("p", 0, 0);
        p.tolerations = vec![toleration("a", "", None)];
        assert_eq!(
            scores(&prof, &snap, &p),
            [("one".into(), 100), ("two".into(), 0), ("zero".into(), 100)]
        );
        // A NoSchedule toleration does not count for PreferNoSchedule taints.
        p.tolerations = vec![toleration("a", "", Some(TaintEffect::NoSchedule))];
        assert_eq!(
            scores(&prof, &snap, &p),
            [("one".into(), 50), ("two".into(), 0), ("zero".into(), 100)]
        );
    }
}
