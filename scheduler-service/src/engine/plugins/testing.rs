//! What the plugins' tests share: nodes, pods and snapshots to build, and the cycle's answers
//! to read (ranks and scores through [`Evaluator`], as kube-scheduler's plugin tests run the
//! framework).

use std::sync::Arc;

use crate::engine::framework::{Deadline, Evaluator, Ranking};
use crate::engine::model::{
    NodeSpec, PodSpec, Requirement, SelectorOp, SelectorTerm, Taint, TaintEffect, Toleration, TolerationOperator,
};
use crate::engine::policy::{Policy, ScorePlugin as S, ScoringStrategy, WeightedScore};
use crate::engine::profile::Profile;
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

/// A node with labels and room for any pod (the topology plugins' tests).
pub(crate) fn labelled_node(name: &str, labels: &[(&str, &str)]) -> NodeSpec {
    NodeSpec {
        labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        allowed_pods: 1000,
        ..node(name, 64_000, 1 << 40)
    }
}

/// A pod with labels, in `default`, asking for nothing.
pub(crate) fn labelled_pod(uid: &str, labels: &[(&str, &str)]) -> PodSpec {
    PodSpec {
        labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ..pod(uid, 0, 0)
    }
}

/// A pod labelled `labels` bound to `node`.
pub(crate) fn labelled_pod_on(node: &str, uid: &str, labels: &[(&str, &str)]) -> PodSpec {
    PodSpec {
        node_name: Some(node.into()),
        ..labelled_pod(uid, labels)
    }
}

/// `n` pods labelled `foo` bound to `node`.
pub(crate) fn foo_pods_on(node: &str, n: usize) -> Vec<PodSpec> {
    (0..n)
        .map(|i| PodSpec {
            node_name: Some(node.into()),
            ..labelled_pod(&format!("{node}-p{i}"), &[("foo", "")])
        })
        .collect()
}

/// kube's topology tests' cluster: `node-a` and `node-b` in `zone1`, `node-x` and `node-y` in
/// `zone2`, each with its hostname label.
pub(crate) fn zone_nodes() -> Vec<NodeSpec> {
    [
        ("node-a", "zone1"),
        ("node-b", "zone1"),
        ("node-x", "zone2"),
        ("node-y", "zone2"),
    ]
    .into_iter()
    .map(|(n, z)| labelled_node(n, &[("zone", z), ("kubernetes.io/hostname", n)]))
    .collect()
}

/// A selector requiring the label `key`.
pub(crate) fn exists(key: &str) -> crate::engine::model::LabelSelector {
    crate::engine::model::LabelSelector {
        requirements: vec![Requirement {
            key: key.into(),
            op: SelectorOp::Exists,
        }],
    }
}

/// A selector requiring `key` in `values`.
pub(crate) fn is_in(key: &str, values: &[&str]) -> crate::engine::model::LabelSelector {
    crate::engine::model::LabelSelector {
        requirements: vec![Requirement {
            key: key.into(),
            op: SelectorOp::In(values.iter().map(|v| v.to_string()).collect()),
        }],
    }
}
