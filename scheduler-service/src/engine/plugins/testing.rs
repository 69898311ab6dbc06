//! What the plugins' tests share: nodes, pods and snapshots to build, and the cycle's answers
//! to read (ranks and scores through [`Evaluator`], as kube-scheduler's plugin tests run the
//! framework).

use std::sync::Arc;

use crate::engine::framework::{Deadline, Evaluator, Profile, Ranking};
use crate::engine::model::{
    NodeSpec, PodSpec, Requirement, SelectorOp, SelectorTerm, Taint, TaintEffect, Toleration, TolerationOperator,
};
use crate::engine::policy::{Policy, ScorePlugin as S, ScoringStrategy, WeightedScore};
use crate::engine::resources::Resources;
use crate::engine::snapshot::Snapshot;

pub(crate) fn node(name: &str, milli_cpu: i64, memory: i64) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        allocatable: Resources {
            milli_cpu,
            memory,
            ..Default::default()
        },
        allowed_pods: 110,
        ..Default::default()
    }
}

pub(crate) fn pod(uid: &str, milli_cpu: i64, memory: i64) -> PodSpec {
    let requests = Resources {
        milli_cpu,
        memory,
        ..Default::default()
    };
    PodSpec {
        uid: Arc::from(uid),
        namespace: "default".into(),
        name: uid.into(),
        non_zero_requests: requests.clone(),
        requests,
        ..Default::default()
    }
}

pub(crate) fn snapshot(nodes: Vec<NodeSpec>) -> Snapshot {
    Snapshot::build(nodes, vec![]).unwrap()
}

/// A policy with only the given score plugin (weight 1) and every filter.
pub(crate) fn only(plugin: S, strategy: ScoringStrategy) -> Profile {
    Profile::new(Policy {
        scores: vec![WeightedScore { plugin, weight: 1 }],
        scoring_strategy: strategy,
        ..Policy::kube_default()
    })
}

/// Scores of every feasible node, by node name.
pub(crate) fn scores(profile: &Profile, snap: &Snapshot, p: &PodSpec) -> Vec<(String, i64)> {
    let r = Evaluator::new(profile, snap).rank(p, 0, 0, Deadline::none()).unwrap();
    let mut v: Vec<_> = r.feasible.into_iter().map(|n| (n.node, n.total)).collect();
    v.sort();
    v
}

pub(crate) fn rank(snap: &Snapshot, p: &PodSpec) -> Ranking {
    let profile = Profile::new(Policy::kube_default());
    Evaluator::new(&profile, snap).rank(p, 0, 0, Deadline::none()).unwrap()
}

pub(crate) fn taint(key: &str, value: &str, effect: TaintEffect) -> Taint {
    Taint {
        key: key.into(),
        value: value.into(),
        effect,
    }
}

pub(crate) fn toleration(key: &str, value: &str, effect: Option<TaintEffect>) -> Toleration {
    Toleration {
        key: key.into(),
        operator: TolerationOperator::Equal,
        value: value.into(),
        effect,
    }
}

pub(crate) fn label_term(key: &str, op: SelectorOp) -> SelectorTerm {
    SelectorTerm {
        match_expressions: vec![Requirement { key: key.into(), op }],
        match_fields: vec![],
    }
}
