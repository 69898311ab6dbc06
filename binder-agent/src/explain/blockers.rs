//! What stands between a pod and one node, re-checked from the snapshot for the filters that are
//! cheap to re-check: cordon (NodeUnschedulable), `spec.nodeName` (NodeName), taints
//! (TaintToleration), node selector and required node affinity (NodeAffinity), host ports
//! (NodePorts) and resources (NodeResourcesFit). Each check uses the engine's own rules (its
//! toleration and selector matching, its effective requests and node usage), and every failing
//! check is listed, not only the first: Rank names the first filter that refused a node, this
//! says everything else in the way too. PodTopologySpread and InterPodAffinity are not re-checked.

use placement_scheduler::engine::model::{tolerated, NodeSpec, PodSpec, Protocol, Requirement, SelectorOp, Taint};
use placement_scheduler::engine::model::{SelectorTerm, TaintEffect};
use placement_scheduler::engine::resources::ResourceName;
use placement_scheduler::engine::snapshot::NodeUsage;
use serde::Serialize;

/// The taint a cordoned node carries for tolerations (kube-scheduler's `NodeUnschedulable`).
pub const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";

/// One thing that keeps a pod off a node.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "filter")]
pub enum Blocker {
    /// NodeUnschedulable: the node is cordoned and the pod does not tolerate
    /// `node.kubernetes.io/unschedulable:NoSchedule`.
    NodeUnschedulable,
    /// NodeName: the pod names another node.
    NodeName {
        /// The node the pod names.
        wanted: String,
    },
    /// TaintToleration: NoSchedule or NoExecute taints the pod does not tolerate.
    TaintToleration {
        /// Each taint as `key=value:Effect`.
        taints: Vec<String>,
    },
    /// NodeAffinity: nodeSelector entries or required node affinity the node does not match.
    NodeAffinity {
        /// What the pod requires and the node lacks.
        unmet: Vec<LabelMiss>,
    },
    /// NodePorts: host ports the pod asks for that a pod on the node already uses.
    NodePorts {
        /// Each port as `port/PROTOCOL` (with the host IP when one is set).
        ports: Vec<String>,
    },
    /// NodeResourcesFit: resources (or pod slots) the node lacks.
    NodeResourcesFit {
        /// One entry per resource short.
        shortfalls: Vec<Shortfall>,
    },
}

impl Blocker {
    /// kube-scheduler's name of the filter this blocker is about.
    pub fn filter(&self) -> &'static str {
        match self {
            Self::NodeUnschedulable => "NodeUnschedulable",
            Self::NodeName { .. } => "NodeName",
            Self::TaintToleration { .. } => "TaintToleration",
            Self::NodeAffinity { .. } => "NodeAffinity",
            Self::NodePorts { .. } => "NodePorts",
            Self::NodeResourcesFit { .. } => "NodeResourcesFit",
        }
    }

    /// In words, for a person.
    pub fn describe(&self) -> String {
        match self {
            Self::NodeUnschedulable => "cordoned (spec.unschedulable), and the pod does not tolerate \
                                       node.kubernetes.io/unschedulable:NoSchedule"
                .to_string(),
            Self::NodeName { wanted } => format!("the pod names node {wanted} (spec.nodeName)"),
            Self::TaintToleration { taints } => {
                let s = if taints.len() == 1 { "" } else { "s" };
                format!("untolerated taint{s} {}", taints.join(", "))
            }
            Self::NodeAffinity { unmet } => {
                let parts: Vec<String> = unmet.iter().map(LabelMiss::describe).collect();
                format!("does not match {}", parts.join("; "))
            }
            Self::NodePorts { ports } => format!("host port {} already in use", ports.join(", ")),
            Self::NodeResourcesFit { shortfalls } => {
                let parts: Vec<String> = shortfalls.iter().map(Shortfall::describe).collect();
                format!("short of {}", parts.join(", "))
            }
        }
    }
}

/// A node selector requirement the node does not meet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LabelMiss {
    /// The requirement, e.g. `nodeSelector disk=ssd` or `nodeAffinity zone In [a, b]`.
    pub requirement: String,
    /// The node's value of the label (or its name, for `metadata.name`); `None` when absent.
    pub node_value: Option<String>,
    /// The label key (or field name).
    pub key: String,
}

impl LabelMiss {
    /// `nodeSelector disk=ssd (node has disk=hdd)`.
    pub fn describe(&self) -> String {
        match &self.node_value {
            Some(v) => format!("{} (node has {}={v})", self.requirement, self.key),
            None => format!("{} (node has no label {})", self.requirement, self.key),
        }
    }
}

/// How much of one resource a node lacks for the pod.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Shortfall {
    /// Resource name (`cpu`, `memory`, `pods`, `nvidia.com/gpu`, …).
    pub resource: String,
    /// What the pod requests (1 for `pods`).
    pub requested: String,
    /// What is free on the node: allocatable minus the requests of the pods bound to it.
    pub free: String,
    /// The node's allocatable amount.
    pub allocatable: String,
    /// How much more the node would need.
    pub short: String,
    /// `short` as a fraction of `allocatable` (how far the node is from fitting).
    #[serde(skip)]
    pub fraction: f64,
}

impl Shortfall {
    /// `500m cpu (free 1500m of 4, requested 2)`.
    pub fn describe(&self) -> String {
        format!(
            "{} {} (free {} of {}, requested {})",
            self.short, self.resource, self.free, self.allocatable, self.requested
        )
    }
}

/// A resource amount as `kubectl` would write it: millicores for cpu, binary suffixes for bytes.
pub fn quantity(resource: &str, amount: i64) -> String {
    match resource {
        "cpu" => {
            if amount % 1000 == 0 {
                format!("{}", amount / 1000)
            } else {
                format!("{amount}m")
            }
        }
        "memory" | "ephemeral-storage" => bytes(amount),
        r if r.starts_with("hugepages-") => bytes(amount),
        _ => amount.to_string(),
    }
}

fn bytes(amount: i64) -> String {
    const UNITS: [(&str, i64); 4] = [("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)];
    if amount == 0 {
        return "0".into();
    }
    for (suffix, size) in UNITS {
        if amount % size == 0 {
            return format!("{}{suffix}", amount / size);
        }
    }
    // Not a whole number of any unit: two decimals of the largest unit it reaches.
    for (suffix, size) in UNITS {
        if amount.abs() >= size {
            return format!("{:.2}{suffix}", amount as f64 / size as f64);
        }
    }
    amount.to_string()
}

fn taint_text(t: &Taint) -> String {
    let effect = match t.effect {
        TaintEffect::NoSchedule => "NoSchedule",
        TaintEffect::PreferNoSchedule => "PreferNoSchedule",
        TaintEffect::NoExecute => "NoExecute",
    };
    if t.value.is_empty() {
        format!("{}:{effect}", t.key)
    } else {
        format!("{}={}:{effect}", t.key, t.value)
    }
}

fn requirement_text(r: &Requirement) -> String {
    let list = |v: &[String]| format!("[{}]", v.join(", "));
    match &r.op {
        SelectorOp::In(v) => format!("{} In {}", r.key, list(v)),
        SelectorOp::NotIn(v) => format!("{} NotIn {}", r.key, list(v)),
        SelectorOp::Exists => format!("{} Exists", r.key),
        SelectorOp::DoesNotExist => format!("{} DoesNotExist", r.key),
        SelectorOp::Gt(n) => format!("{} Gt {n}", r.key),
        SelectorOp::Lt(n) => format!("{} Lt {n}", r.key),
    }
}

/// The first requirement of a term the node fails, as a [`LabelMiss`] (`None` when it matches).
fn term_miss(term: &SelectorTerm, node: &NodeSpec, prefix: &str) -> Option<LabelMiss> {
    if term.match_expressions.is_empty() && term.match_fields.is_empty() {
        return Some(LabelMiss {
            requirement: format!("{prefix}(an empty term, which matches no node)"),
            node_value: None,
            key: String::new(),
        });
    }
    for r in &term.match_expressions {
        let value = node.labels.get(&r.key).map(String::as_str);
        if !r.matches(value) {
            return Some(LabelMiss {
                requirement: format!("{prefix}{}", requirement_text(r)),
                node_value: value.map(str::to_string),
                key: r.key.clone(),
            });
        }
    }
    for r in &term.match_fields {
        if !r.matches(Some(&node.name)) {
            return Some(LabelMiss {
                requirement: format!("{prefix}field {}", requirement_text(r)),
                node_value: Some(node.name.clone()),
                key: r.key.clone(),
            });
        }
    }
    None
}

fn protocol(p: Protocol) -> &'static str {
    match p {
        Protocol::Tcp => "TCP",
        Protocol::Udp => "UDP",
        Protocol::Sctp => "SCTP",
    }
}

/// How much of each resource the node lacks for the pod, by the engine's `fitsRequest` rule: the
/// pod count first, then every requested resource whose request exceeds allocatable minus the
/// requests of the pods already on the node.
pub fn shortfalls(pod: &PodSpec, node: &NodeSpec, usage: &NodeUsage) -> Vec<Shortfall> {
    let mut out = Vec::new();
    if usage.pod_count + 1 > node.allowed_pods {
        let free = node.allowed_pods - usage.pod_count;
        out.push(Shortfall {
            resource: "pods".into(),
            requested: "1".into(),
            free: free.to_string(),
            allocatable: node.allowed_pods.to_string(),
            short: (1 - free).to_string(),
            fraction: if node.allowed_pods > 0 {
                (1 - free) as f64 / node.allowed_pods as f64
            } else {
                1.0
            },
        });
    }
    let req = &pod.requests;
    if req.is_zero() {
        return out;
    }
    let mut names = vec![ResourceName::Cpu, ResourceName::Memory, ResourceName::EphemeralStorage];
    names.extend(req.scalars.iter().map(|(n, _)| ResourceName::Scalar(n.clone())));
    for name in names {
        let want = req.get(&name);
        let have = node.allocatable.get(&name);
        let free = have.saturating_sub(usage.requested.get(&name));
        if want > 0 && want > free {
            let short = want - free;
            let r = name.as_str();
            out.push(Shortfall {
                resource: r.to_string(),
                requested: quantity(r, want),
                free: quantity(r, free),
                allocatable: quantity(r, have),
                short: quantity(r, short),
                fraction: if have > 0 { short as f64 / have as f64 } else { 1.0 },
            });
        }
    }
    out
}

/// Everything of the cheap filters that keeps `pod` off `node` (with `usage`, the pods bound to
/// it), in kube-scheduler's filter order; empty when none of them refuses the node.
pub fn blockers(pod: &PodSpec, node: &NodeSpec, usage: &NodeUsage) -> Vec<Blocker> {
    let mut out = Vec::new();
    if node.unschedulable {
        let taint = Taint {
            key: UNSCHEDULABLE_TAINT_KEY.into(),
            value: String::new(),
            effect: TaintEffect::NoSchedule,
        };
        if !tolerated(&pod.tolerations, &taint) {
            out.push(Blocker::NodeUnschedulable);
        }
    }
    if let Some(wanted) = pod.node_name.as_ref().filter(|n| !n.is_empty() && **n != node.name) {
        out.push(Blocker::NodeName { wanted: wanted.clone() });
    }
    let taints: Vec<String> = node
        .taints
        .iter()
        .filter(|t| matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute))
        .filter(|t| !tolerated(&pod.tolerations, t))
        .map(taint_text)
        .collect();
    if !taints.is_empty() {
        out.push(Blocker::TaintToleration { taints });
    }
    let mut unmet: Vec<LabelMiss> = pod
        .node_selector
        .iter()
        .filter(|(k, v)| node.labels.get(k) != Some(v))
        .map(|(k, v)| LabelMiss {
            requirement: format!("nodeSelector {k}={v}"),
            node_value: node.labels.get(k).cloned(),
            key: k.clone(),
        })
        .collect();
    if let Some(terms) = &pod.required_affinity {
        if !terms.iter().any(|t| t.matches(node)) {
            let many = terms.len() > 1;
            unmet.extend(terms.iter().enumerate().filter_map(|(i, t)| {
                let prefix = if many {
                    format!("nodeAffinity term {} ", i + 1)
                } else {
                    "nodeAffinity ".to_string()
                };
                term_miss(t, node, &prefix)
            }));
            if terms.is_empty() {
                unmet.push(LabelMiss {
                    requirement: "nodeAffinity (no terms, which matches no node)".into(),
                    node_value: None,
                    key: String::new(),
                });
            }
        }
    }
    if !unmet.is_empty() {
        out.push(Blocker::NodeAffinity { unmet });
    }
    let mut ports: Vec<String> = pod
        .host_ports
        .iter()
        .filter(|w| usage.host_ports.iter().any(|u| w.conflicts(u)))
        .map(|p| {
            if &*p.ip == "0.0.0.0" {
                format!("{}/{}", p.port, protocol(p.protocol))
            } else {
                format!("{}:{}/{}", p.ip, p.port, protocol(p.protocol))
            }
        })
        .collect();
    ports.dedup();
    if !ports.is_empty() {
        out.push(Blocker::NodePorts { ports });
    }
    let shortfalls = shortfalls(pod, node, usage);
    if !shortfalls.is_empty() {
        out.push(Blocker::NodeResourcesFit { shortfalls });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use placement_scheduler::grpc::convert;
    use placement_scheduler::proto;

    fn node(f: impl FnOnce(&mut proto::Node)) -> NodeSpec {
        let mut n = proto::Node {
            name: "n1".into(),
            labels: [("disk".to_string(), "hdd".to_string())].into(),
            allocatable: [("cpu", "4"), ("memory", "8Gi"), ("pods", "110")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        };
        f(&mut n);
        convert::node("node", &n).unwrap()
    }

    fn pod(f: impl FnOnce(&mut proto::Pod)) -> PodSpec {
        let mut p = proto::Pod {
            uid: "u".into(),
            namespace: "ns".into(),
            name: "p".into(),
            containers: vec![proto::Container {
                name: "c".into(),
                requests: [("cpu", "2"), ("memory", "1Gi")]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        };
        f(&mut p);
        convert::pod("pod", &p).unwrap()
    }

    fn used(cpu_millis: i64, pods: i64) -> NodeUsage {
        let mut u = NodeUsage::default();
        u.requested.milli_cpu = cpu_millis;
        u.pod_count = pods;
        u
    }

    #[test]
    fn quantities_read_like_kubectl() {
        assert_eq!(quantity("cpu", 1500), "1500m");
        assert_eq!(quantity("cpu", 2000), "2");
        assert_eq!(quantity("memory", 8 << 30), "8Gi");
        assert_eq!(quantity("memory", 64 << 20), "64Mi");
        assert_eq!(quantity("memory", (3 << 30) / 2 + 1), "1.50Gi");
        assert_eq!(quantity("memory", -(512 << 20)), "-512Mi");
        assert_eq!(quantity("nvidia.com/gpu", 2), "2");
    }

    #[test]
    fn a_node_with_room_has_no_blocker() {
        assert!(blockers(&pod(|_| {}), &node(|_| {}), &used(1000, 3)).is_empty());
    }

    #[test]
    fn resources_say_how_much_is_missing() {
        let b = blockers(&pod(|_| {}), &node(|_| {}), &used(2500, 3));
        let [Blocker::NodeResourcesFit { shortfalls }] = &b[..] else {
            panic!("{b:?}")
        };
        assert_eq!(shortfalls.len(), 1);
        let s = &shortfalls[0];
        assert_eq!(
            (&*s.resource, &*s.requested, &*s.free, &*s.allocatable, &*s.short),
            ("cpu", "2", "1500m", "4", "500m")
        );
        assert!((s.fraction - 0.125).abs() < 1e-9);
        assert_eq!(b[0].describe(), "short of 500m cpu (free 1500m of 4, requested 2)");
        // A full node lacks a pod slot.
        let b = blockers(&pod(|_| {}), &node(|_| {}), &used(0, 110));
        assert!(
            matches!(&b[..], [Blocker::NodeResourcesFit { shortfalls }] if shortfalls[0].resource == "pods" && shortfalls[0].short == "1")
        );
    }

    #[test]
    fn every_failing_filter_is_listed_in_filter_order() {
        let n = node(|n| {
            n.unschedulable = true;
            n.taints = vec![
                proto::Taint {
                    key: "gpu".into(),
                    value: "true".into(),
                    effect: "NoSchedule".into(),
                },
                proto::Taint {
                    key: "soft".into(),
                    value: String::new(),
                    effect: "PreferNoSchedule".into(),
                },
            ];
        });
        let p = pod(|p| {
            p.node_selector = [("disk".to_string(), "ssd".to_string())].into();
        });
        let b = blockers(&p, &n, &used(3000, 1));
        let filters: Vec<&str> = b.iter().map(Blocker::filter).collect();
        assert_eq!(
            filters,
            [
                "NodeUnschedulable",
                "TaintToleration",
                "NodeAffinity",
                "NodeResourcesFit"
            ]
        );
        assert_eq!(b[1].describe(), "untolerated taint gpu=true:NoSchedule");
        assert_eq!(
            b[2].describe(),
            "does not match nodeSelector disk=ssd (node has disk=hdd)"
        );
    }

    #[test]
    fn tolerations_clear_taints_and_cordons() {
        let n = node(|n| {
            n.unschedulable = true;
            n.taints = vec![proto::Taint {
                key: "gpu".into(),
                value: "true".into(),
                effect: "NoExecute".into(),
            }];
        });
        let p = pod(|p| {
            p.tolerations = vec![proto::Toleration {
                operator: "Exists".into(),
                ..Default::default()
            }];
        });
        assert!(blockers(&p, &n, &used(0, 0)).is_empty());
    }

    #[test]
    fn affinity_names_the_failing_requirement_of_each_term() {
        let req = |key: &str, op: &str, values: &[&str]| proto::NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        };
        let p = pod(|p| {
            p.node_affinity = Some(proto::NodeAffinity {
                required: Some(proto::NodeSelector {
                    terms: vec![
                        proto::NodeSelectorTerm {
                            match_expressions: vec![req("disk", "Exists", &[]), req("zone", "In", &["a", "b"])],
                            ..Default::default()
                        },
                        proto::NodeSelectorTerm {
                            match_expressions: vec![req("gen", "Gt", &["3"])],
                            ..Default::default()
                        },
                    ],
                }),
                preferred: vec![],
            });
        });
        let b = blockers(&p, &node(|_| {}), &used(0, 0));
        let [Blocker::NodeAffinity { unmet }] = &b[..] else {
            panic!("{b:?}")
        };
        let texts: Vec<String> = unmet.iter().map(LabelMiss::describe).collect();
        assert_eq!(
            texts,
            [
                "nodeAffinity term 1 zone In [a, b] (node has no label zone)",
                "nodeAffinity term 2 gen Gt 3 (node has no label gen)"
            ]
        );
        // A node matching one term passes.
        let n = node(|n| {
            n.labels.insert("gen".into(), "4".into());
        });
        assert!(blockers(&p, &n, &used(0, 0)).is_empty());
    }

    #[test]
    fn host_ports_in_use_are_named() {
        let p = pod(|p| {
            p.containers[0].ports = vec![proto::ContainerPort {
                container_port: 80,
                host_port: 8080,
                ..Default::default()
            }];
        });
        let other = pod(|p| {
            p.uid = "other".into();
            p.containers[0].ports = vec![proto::ContainerPort {
                container_port: 80,
                host_port: 8080,
                protocol: "TCP".into(),
                ..Default::default()
            }];
        });
        let mut u = used(0, 1);
        u.host_ports = other.host_ports.clone();
        let b = blockers(&p, &node(|_| {}), &u);
        assert_eq!(
            b,
            [Blocker::NodePorts {
                ports: vec!["8080/TCP".into()]
            }]
        );
    }
}
