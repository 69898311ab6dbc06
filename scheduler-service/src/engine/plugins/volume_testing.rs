//! What the volume plugins' tests share: nodes, pods, claims, volumes and classes to build, and
//! the engine's answers to read (where a batch goes, the nodes a pod may go to), in the style of
//! kube-scheduler's plugin tests (1.34, `pkg/scheduler/framework/plugins/{volumerestrictions,
//! nodevolumelimits,volumebinding,volumezone}`) with clusters of our own.

pub(crate) use std::sync::Arc;

pub(crate) use crate::engine::framework::{Deadline, Decision, Evaluator};
pub(crate) use crate::engine::model::{NodeSpec, PodSpec, Requirement, SelectorOp, SelectorTerm};
pub(crate) use crate::engine::plugins::volumebinding::binder::NO_PROVISIONER;
pub(crate) use crate::engine::policy::Policy;
pub(crate) use crate::engine::profile::Profile;
pub(crate) use crate::engine::quantity::Quantity;
use crate::engine::resources::Resources;
pub(crate) use crate::engine::snapshot::Snapshot;
pub(crate) use crate::engine::volumes::*;

pub(crate) const GI: i128 = 1 << 30;

pub(crate) fn gi(n: i128) -> Quantity {
    Quantity::parse(&(n * GI).to_string()).unwrap()
}

pub(crate) fn node(name: &str, labels: &[(&str, &str)]) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .chain([("kubernetes.io/hostname".to_string(), name.to_string())])
            .collect(),
        allocatable: Resources {
            milli_cpu: 4000,
            memory: 8 << 30,
            ..Default::default()
        },
        allowed_pods: 110,
        ..Default::default()
    }
}

pub(crate) fn claim_volume(name: &str, claim: &str) -> PodVolume {
    PodVolume {
        name: Arc::from(name),
        source: VolumeSource::Claim {
            claim_name: Arc::from(claim),
            ephemeral: false,
        },
    }
}

pub(crate) fn pod(uid: &str, volumes: Vec<PodVolume>) -> PodSpec {
    PodSpec {
        uid: Arc::from(uid),
        namespace: "ns".into(),
        name: uid.into(),
        volumes,
        ..Default::default()
    }
}

pub(crate) fn bound_pod(uid: &str, node: &str, volumes: Vec<PodVolume>) -> PodSpec {
    PodSpec {
        node_name: Some(node.into()),
        ..pod(uid, volumes)
    }
}

pub(crate) fn claim(name: &str, class: &str) -> Claim {
    Claim {
        namespace: "ns".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        class: class.into(),
        access_modes: vec![AccessMode::ReadWriteOnce],
        request: gi(1),
        request_set: true,
        ..Default::default()
    }
}

pub(crate) fn bound_claim(name: &str, pv: &str) -> Claim {
    Claim {
        volume_name: pv.into(),
        bind_completed: true,
        ..claim(name, "local")
    }
}

pub(crate) fn on_host(host: &str) -> Option<Vec<SelectorTerm>> {
    Some(vec![SelectorTerm {
        match_expressions: vec![Requirement {
            key: "kubernetes.io/hostname".into(),
            op: SelectorOp::In(vec![host.into()]),
        }],
        match_fields: vec![],
    }])
}

pub(crate) fn pv(name: &str, class: &str, size: i128, host: Option<&str>) -> PersistentVolume {
    PersistentVolume {
        name: name.into(),
        class: class.into(),
        capacity: gi(size),
        access_modes: vec![AccessMode::ReadWriteOnce],
        node_affinity: host.and_then(on_host),
        phase: VolumePhase::Available,
        ..Default::default()
    }
}

pub(crate) fn class(name: &str, provisioner: &str, mode: BindingMode) -> StorageClass {
    StorageClass {
        name: name.into(),
        provisioner: provisioner.into(),
        binding_mode: Some(mode),
        allowed_topologies: vec![],
    }
}

pub(crate) fn local_wffc() -> StorageClass {
    class("local", NO_PROVISIONER, BindingMode::WaitForFirstConsumer)
}

pub(crate) struct Cluster {
    pub(crate) nodes: Vec<NodeSpec>,
    pub(crate) bound: Vec<PodSpec>,
    pub(crate) storage: StorageParts,
}

impl Cluster {
    pub(crate) fn snapshot(&self) -> Snapshot {
        Snapshot::build(self.nodes.clone(), self.bound.clone())
            .and_then(|s| s.with_storage(self.storage.clone()))
            .unwrap()
    }
}

/// Where each pod of the batch goes, or its message.
pub(crate) fn schedule(c: &Cluster, pods: &[PodSpec]) -> Vec<Result<String, String>> {
    let profile = Profile::new(Policy::kube_default());
    let snap = c.snapshot();
    Evaluator::new(&profile, &snap)
        .schedule(pods, 0, Deadline::none())
        .unwrap()
        .into_iter()
        .map(|d| match d {
            Decision::Node { node, .. } => Ok(node),
            Decision::Unschedulable(diag) => Err(diag.message()),
        })
        .collect()
}

/// The nodes a pod may go to, by name.
pub(crate) fn feasible(c: &Cluster, p: &PodSpec) -> Vec<String> {
    let profile = Profile::new(Policy::kube_default());
    let snap = c.snapshot();
    let mut names: Vec<String> = Evaluator::new(&profile, &snap)
        .rank(p, 100, 0, Deadline::none())
        .unwrap()
        .feasible
        .into_iter()
        .map(|n| n.node)
        .collect();
    names.sort();
    names
}

pub(crate) fn three_nodes() -> Vec<NodeSpec> {
    vec![node("n1", &[]), node("n2", &[]), node("n3", &[])]
}

pub(crate) const NOT_HELPFUL: &str = "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.";

pub(crate) fn pv_free(name: &str) -> PersistentVolume {
    pv(name, "local", 10, None)
}

#[test]
fn pods_without_volumes_are_untouched_by_the_volume_plugins() {
    // A snapshot full of storage objects, a pod with none: every node, as without them.
    let cluster = Cluster {
        nodes: three_nodes(),
        bound: vec![],
        storage: StorageParts {
            claims: vec![claim("data", "fast")],
            volumes: vec![pv("pv-1", "local", 1, Some("nowhere"))],
            classes: vec![class("fast", "x", BindingMode::Immediate)],
            csi_nodes: vec![CsiNode {
                name: "n1".into(),
                drivers: vec![("ebs.csi.aws.com".into(), Some(0))],
            }],
            ..Default::default()
        },
    };
    assert_eq!(feasible(&cluster, &pod("p", vec![])), ["n1", "n2", "n3"]);
}
