//! Plain domain types for pods and nodes, already validated and parsed, and the Kubernetes
//! matching rules on them (label selectors, taints and tolerations, host ports).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::resources::Resources;

/// Labels of a node or pod.
pub type Labels = BTreeMap<String, String>;

/// A taint's or toleration's effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaintEffect {
    /// Pods that do not tolerate the taint are not scheduled on the node.
    NoSchedule,
    /// The scheduler tries to avoid the node for pods that do not tolerate the taint.
    PreferNoSchedule,
    /// Like NoSchedule, and running pods that do not tolerate it are evicted.
    NoExecute,
}

impl TaintEffect {
    /// Parses Kubernetes' spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "NoSchedule" => Some(Self::NoSchedule),
            "PreferNoSchedule" => Some(Self::PreferNoSchedule),
            "NoExecute" => Some(Self::NoExecute),
            _ => None,
        }
    }
}

/// A node taint.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Taint {
    /// Key.
    pub key: String,
    /// Value (may be empty).
    pub value: String,
    /// Effect.
    pub effect: TaintEffect,
}

/// How a toleration compares values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TolerationOperator {
    /// Key and value must be equal.
    Equal,
    /// Any value matches (and an empty key matches every key).
    Exists,
}

/// A pod toleration.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Toleration {
    /// Key; empty only with `Exists`.
    pub key: String,
    /// Operator.
    pub operator: TolerationOperator,
    /// Value for `Equal`.
    pub value: String,
    /// Effect to match; `None` matches every effect.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    /// Kubernetes' `Toleration.ToleratesTaint`.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if let Some(effect) = self.effect {
            if effect != taint.effect {
                return false;
            }
        }
        if !self.key.is_empty() && self.key != taint.key {
            return false;
        }
        match self.operator {
            TolerationOperator::Exists => true,
            TolerationOperator::Equal => self.value == taint.value,
        }
    }
}

/// True when some toleration tolerates the taint.
pub fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| t.tolerates(taint))
}

/// A node selector operator.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SelectorOp {
    /// The label's value is one of the values.
    In(Vec<String>),
    /// The label is absent or its value is none of the values.
    NotIn(Vec<String>),
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// The label's value, parsed as an integer, is greater.
    Gt(i64),
    /// The label's value, parsed as an integer, is less.
    Lt(i64),
}

/// One requirement of a node selector term.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Requirement {
    /// Label key (or field name).
    pub key: String,
    /// Operator and values.
    pub op: SelectorOp,
}

impl Requirement {
    /// Whether a value (or its absence) satisfies the requirement.
    pub fn matches(&self, value: Option<&str>) -> bool {
        match (&self.op, value) {
            (SelectorOp::In(vals), Some(v)) => vals.iter().any(|x| x == v),
            (SelectorOp::In(_), None) => false,
            (SelectorOp::NotIn(vals), Some(v)) => !vals.iter().any(|x| x == v),
            (SelectorOp::NotIn(_), None) => true,
            (SelectorOp::Exists, v) => v.is_some(),
            (SelectorOp::DoesNotExist, v) => v.is_none(),
            (SelectorOp::Gt(n), Some(v)) => v.parse::<i64>().is_ok_and(|x| x > *n),
            (SelectorOp::Lt(n), Some(v)) => v.parse::<i64>().is_ok_and(|x| x < *n),
            (SelectorOp::Gt(_) | SelectorOp::Lt(_), None) => false,
        }
    }
}

/// A node selector term: all requirements must match. An empty term matches no node.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct SelectorTerm {
    /// Requirements on labels.
    pub match_expressions: Vec<Requirement>,
    /// Requirements on `metadata.name`.
    pub match_fields: Vec<Requirement>,
}

impl SelectorTerm {
    /// Kubernetes' `nodeaffinity` term matching.
    pub fn matches(&self, node: &NodeSpec) -> bool {
        if self.match_expressions.is_empty() && self.match_fields.is_empty() {
            return false;
        }
        self.match_expressions
            .iter()
            .all(|r| r.matches(node.labels.get(&r.key).map(String::as_str)))
            && self.match_fields.iter().all(|r| r.matches(Some(&node.name)))
    }
}

/// A weighted preferred term.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PreferredTerm {
    /// 1 to 100.
    pub weight: i64,
    /// The term.
    pub term: SelectorTerm,
}

/// Transport protocol of a host port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// TCP (the default).
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

impl Protocol {
    /// The name Kubernetes gives it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tcp => "TCP",
            Self::Udp => "UDP",
            Self::Sctp => "SCTP",
        }
    }
}

/// A host port a pod uses.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    /// Host IP; "0.0.0.0" when unset (kube-scheduler's default).
    pub ip: Arc<str>,
    /// Protocol.
    pub protocol: Protocol,
    /// Port number (1 to 65535).
    pub port: u16,
}

impl HostPort {
    /// kube-scheduler's `HostPortInfo` conflict rule: same protocol and port, and the same IP or
    /// either side bound to every address.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || &*self.ip == "0.0.0.0" || &*other.ip == "0.0.0.0")
    }
}

/// A Kubernetes label selector (`metav1.LabelSelector`): requirements ANDed, `matchLabels` as
/// `In` with one value. An empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    /// Requirements (only In, NotIn, Exists and DoesNotExist).
    pub requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// A selector of exact label values (`matchLabels`).
    pub fn from_labels<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Self {
            requirements: pairs
                .into_iter()
                .map(|(k, v)| Requirement {
                    key: k.to_string(),
                    op: SelectorOp::In(vec![v.to_string()]),
                })
                .collect(),
        }
    }

    /// Whether the labels satisfy every requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.requirements
            .iter()
            .all(|r| r.matches(labels.get(&r.key).map(String::as_str)))
    }
}

/// Whether an optional selector matches: `None` (a nil selector) matches nothing, as
/// `metav1.LabelSelectorAsSelector(nil)` does.
pub fn selector_matches(selector: Option<&LabelSelector>, labels: &Labels) -> bool {
    selector.is_some_and(|s| s.matches(labels))
}

/// A pod (anti-)affinity term (`v1.PodAffinityTerm`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodAffinityTerm {
    /// labelSelector; `None` matches no pod.
    pub selector: Option<LabelSelector>,
    /// namespaces.
    pub namespaces: Vec<String>,
    /// namespaceSelector; `None` selects no namespace, an empty one every namespace.
    pub namespace_selector: Option<LabelSelector>,
    /// topologyKey.
    pub topology_key: String,
}

impl PodAffinityTerm {
    /// kube-scheduler's `AffinityTerm.Matches` for a term of a pod in `owner_ns`: the other pod's
    /// namespace is one of the term's (the owner's own when none is named and there is no
    /// namespace selector) or its labels `ns_labels` (`None`: unknown namespace) match the
    /// namespace selector, and its labels match the label selector.
    pub fn matches(&self, owner_ns: &str, pod_ns: &str, pod_labels: &Labels, ns_labels: Option<&Labels>) -> bool {
        let in_list = if self.namespaces.is_empty() && self.namespace_selector.is_none() {
            owner_ns == pod_ns
        } else {
            self.namespaces.iter().any(|n| n == pod_ns)
        };
        let by_selector = || match (&self.namespace_selector, ns_labels) {
            (Some(sel), Some(labels)) => sel.matches(labels),
            _ => false,
        };
        (in_list || by_selector()) && selector_matches(self.selector.as_ref(), pod_labels)
    }
}

/// A weighted pod (anti-)affinity term.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WeightedPodAffinityTerm {
    /// 1 to 100.
    pub weight: i64,
    /// The term.
    pub term: PodAffinityTerm,
}

/// `spec.affinity.podAffinity` or `podAntiAffinity`: required and preferred terms.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodAffinityTerms {
    /// requiredDuringSchedulingIgnoredDuringExecution.
    pub required: Vec<PodAffinityTerm>,
    /// preferredDuringSchedulingIgnoredDuringExecution.
    pub preferred: Vec<WeightedPodAffinityTerm>,
}

impl PodAffinityTerms {
    /// True when there is no term.
    pub fn is_empty(&self) -> bool {
        self.required.is_empty() && self.preferred.is_empty()
    }

    /// Approximate heap bytes, for the snapshot cache's memory budget.
    pub fn approx_bytes(&self) -> usize {
        let required: usize = self.required.iter().map(PodAffinityTerm::approx_bytes).sum();
        let preferred: usize = self.preferred.iter().map(|w| 8 + w.term.approx_bytes()).sum();
        required + preferred
    }
}

/// Heap bytes of a string (allocator rounding included).
pub fn string_bytes(s: &str) -> usize {
    if s.is_empty() {
        0
    } else {
        s.len() + 16
    }
}

/// Approximate heap bytes of a label map (a B-tree of string pairs).
pub fn labels_bytes(labels: &Labels) -> usize {
    labels
        .iter()
        .map(|(k, v)| 2 * std::mem::size_of::<String>() + 16 + string_bytes(k) + string_bytes(v))
        .sum()
}

impl Requirement {
    /// Approximate bytes, inline and heap.
    pub fn approx_bytes(&self) -> usize {
        let values = match &self.op {
            SelectorOp::In(v) | SelectorOp::NotIn(v) => {
                v.iter().map(|x| std::mem::size_of::<String>() + string_bytes(x)).sum()
            }
            _ => 0,
        };
        std::mem::size_of::<Self>() + string_bytes(&self.key) + values
    }
}

impl LabelSelector {
    /// Approximate bytes, inline and heap.
    pub fn approx_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.requirements.iter().map(Requirement::approx_bytes).sum::<usize>()
    }
}

impl PodAffinityTerm {
    /// Approximate bytes, inline and heap.
    pub fn approx_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.selector.as_ref().map_or(0, LabelSelector::approx_bytes)
            + self.namespace_selector.as_ref().map_or(0, LabelSelector::approx_bytes)
            + self
                .namespaces
                .iter()
                .map(|n| std::mem::size_of::<String>() + string_bytes(n))
                .sum::<usize>()
            + string_bytes(&self.topology_key)
    }
}

/// What a topology spread constraint does when it cannot be satisfied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WhenUnsatisfiable {
    /// A filter: nodes that would break maxSkew are rejected.
    DoNotSchedule,
    /// A score: nodes that reduce the skew are preferred.
    ScheduleAnyway,
}

/// A topology spread constraint's node inclusion policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeInclusionPolicy {
    /// Only nodes passing the pod's node affinity (or tolerating the taints) count.
    Honor,
    /// Every node counts.
    Ignore,
}

/// A topology spread constraint (`v1.TopologySpreadConstraint`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpreadConstraint {
    /// maxSkew (at least 1).
    pub max_skew: i32,
    /// topologyKey.
    pub topology_key: String,
    /// whenUnsatisfiable.
    pub when_unsatisfiable: WhenUnsatisfiable,
    /// labelSelector; `None` matches no pod.
    pub selector: Option<LabelSelector>,
    /// minDomains (1 when unset).
    pub min_domains: i32,
    /// nodeAffinityPolicy (Honor when unset).
    pub node_affinity_policy: NodeInclusionPolicy,
    /// nodeTaintsPolicy (Ignore when unset).
    pub node_taints_policy: NodeInclusionPolicy,
    /// matchLabelKeys.
    pub match_label_keys: Vec<String>,
}

/// A container of a pod, as rules see it.
#[derive(Debug, Clone, Default)]
pub struct Container {
    /// Container name.
    pub name: String,
    /// Image reference.
    pub image: String,
    /// resources.requests.
    pub requests: super::resources::Resources,
}

/// spec.preemptionPolicy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PreemptionPolicy {
    /// May preempt lower-priority pods (Kubernetes' default).
    #[default]
    PreemptLowerPriority,
    /// Never preempts.
    Never,
}

/// A PodGroup (`scheduling.k8s.io/v1beta1`) as kube-scheduler's PodGroup cycle reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodGroup {
    /// metadata.namespace.
    pub namespace: Arc<str>,
    /// metadata.name.
    pub name: Arc<str>,
    /// metadata.uid.
    pub uid: Arc<str>,
    /// metadata.generation.
    pub generation: i64,
    /// spec.schedulingPolicy.gang.minCount; `None` for the basic policy.
    pub min_count: Option<u32>,
    /// spec.schedulingConstraints.topology[0].key: every pod in one domain of this node label.
    pub topology_key: Option<Arc<str>>,
    /// spec.priority (0 when unset, as kube reads a group without one).
    pub priority: i32,
    /// spec.preemptionPolicy.
    pub preemption_policy: PreemptionPolicy,
    /// spec.disruptionMode is All: preemption evicts its bound pods together or none of them
    /// (Single, or unset: each pod on its own).
    pub disruption_all: bool,
    /// The PodGroupInitiallyScheduled condition is True.
    pub initially_scheduled: bool,
    /// spec.parentCompositePodGroupName: the CompositePodGroup (of the same namespace) the group
    /// is a child of; read only with the `CompositePodGroup` gate.
    pub parent: Option<Arc<str>>,
}

/// A CompositePodGroup (`scheduling.k8s.io/v1alpha3`, kube 1.37's `CompositePodGroup` gate): a
/// group of PodGroups and CompositePodGroups (its children name it as their parent), placed
/// together in one domain of its topology key, each child in a domain of its own key inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompositePodGroup {
    /// metadata.namespace.
    pub namespace: Arc<str>,
    /// metadata.name.
    pub name: Arc<str>,
    /// metadata.uid.
    pub uid: Arc<str>,
    /// spec.parentCompositePodGroupName; `None` for the root of a hierarchy.
    pub parent: Option<Arc<str>>,
    /// spec.schedulingPolicy.gang.minGroupCount; `None` for the basic policy.
    pub min_group_count: Option<u32>,
    /// spec.schedulingConstraints.topology[0].key.
    pub topology_key: Option<Arc<str>>,
    /// spec.priority (0 when unset).
    pub priority: i32,
    /// spec.preemptionPolicy.
    pub preemption_policy: PreemptionPolicy,
}

impl CompositePodGroup {
    /// "namespace/name".
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// How many children must be placed together: minGroupCount, 1 for the basic policy (kube's
    /// `getMinCount`).
    pub fn min_group_count(&self) -> u32 {
        self.min_group_count.unwrap_or(1)
    }

    /// Approximate bytes held.
    pub fn approx_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.namespace.len()
            + self.name.len()
            + self.uid.len()
            + self.parent.as_deref().map_or(0, str::len)
            + self.topology_key.as_deref().map_or(0, str::len)
    }
}

impl PodGroup {
    /// "namespace/name".
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Its key, typed.
    pub fn group_key(&self) -> PodGroupKey {
        PodGroupKey::new(&self.namespace, &self.name)
    }

    /// How many pods must be placed together: minCount, 1 for the basic policy (kube's
    /// `getMinCount`).
    pub fn min_count(&self) -> u32 {
        self.min_count.unwrap_or(1)
    }

    /// Approximate bytes held.
    pub fn approx_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.namespace.len()
            + self.name.len()
            + self.uid.len()
            + self.topology_key.as_deref().map_or(0, str::len)
    }
}

/// A label gang's key, "namespace/name": the gang the label `placement.dev/gang` names, in the
/// pod's namespace. A type of its own, so that it is never taken for a PodGroup's key, which is
/// written the same way ([`PodSpec::pod_group`]); both read the same in the API.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LabelGangKey(Arc<str>);

impl LabelGangKey {
    /// The key of the gang `name` in `namespace`.
    pub fn new(namespace: &str, name: &str) -> Self {
        Self(Arc::from(format!("{namespace}/{name}")))
    }

    /// "namespace/name".
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// "namespace/name", shared.
    pub fn as_arc(&self) -> &Arc<str> {
        &self.0
    }
}

impl std::fmt::Debug for LabelGangKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::fmt::Display for LabelGangKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&*self.0, f)
    }
}

/// A PodGroup's key, "namespace/name": the group a pod's `spec.schedulingGroup.podGroupName`
/// names, in its namespace. A type of its own, so that it is never taken for a label gang's
/// ([`LabelGangKey`]) or a CompositePodGroup's, which are written the same way; all read the same
/// in the API.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodGroupKey(Arc<str>);

impl PodGroupKey {
    /// The key of the PodGroup `name` in `namespace`.
    pub fn new(namespace: &str, name: &str) -> Self {
        Self(Arc::from(format!("{namespace}/{name}")))
    }

    /// The key "namespace/name" as written.
    pub fn from_key(key: &str) -> Self {
        Self(Arc::from(key))
    }

    /// The key "namespace/name" as written, shared.
    pub fn from_arc(key: &Arc<str>) -> Self {
        Self(Arc::clone(key))
    }

    /// "namespace/name".
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// "namespace/name", shared.
    pub fn as_arc(&self) -> &Arc<str> {
        &self.0
    }
}

impl std::fmt::Debug for PodGroupKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::fmt::Display for PodGroupKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&*self.0, f)
    }
}

/// A pod's label gang.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Gang {
    /// "namespace/name": gangs are namespaced.
    pub key: LabelGangKey,
    /// Members that must be placed together (at least 1).
    pub min_members: u32,
}

/// Where a pod's volume comes from, for the kinds the volume filters read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum VolumeSource {
    /// A PersistentVolumeClaim of the pod's namespace (`persistentVolumeClaim`, or a generic
    /// ephemeral volume's claim).
    Claim {
        /// The claim's name.
        claim_name: Arc<str>,
        /// A generic ephemeral volume: the claim must be controlled by the pod.
        ephemeral: bool,
    },
    /// `gcePersistentDisk`.
    GcePersistentDisk {
        /// pdName.
        pd_name: Arc<str>,
        /// readOnly.
        read_only: bool,
    },
    /// `awsElasticBlockStore`.
    AwsElasticBlockStore {
        /// volumeID.
        volume_id: Arc<str>,
    },
    /// `iscsi`.
    Iscsi {
        /// iqn.
        iqn: Arc<str>,
        /// readOnly.
        read_only: bool,
    },
    /// `rbd`.
    Rbd {
        /// monitors.
        monitors: Vec<Arc<str>>,
        /// pool.
        pool: Arc<str>,
        /// image.
        image: Arc<str>,
        /// readOnly.
        read_only: bool,
    },
}

/// One volume of a pod that the volume filters read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodVolume {
    /// The volume's name in the pod.
    pub name: Arc<str>,
    /// Its source.
    pub source: VolumeSource,
}

impl PodVolume {
    /// The claim the volume uses, if any.
    pub fn claim_name(&self) -> Option<&str> {
        match &self.source {
            VolumeSource::Claim { claim_name, .. } => Some(claim_name),
            _ => None,
        }
    }

    /// Approximate bytes, inline and heap.
    pub fn approx_bytes(&self) -> usize {
        let heap = match &self.source {
            VolumeSource::Claim { claim_name: s, .. }
            | VolumeSource::GcePersistentDisk { pd_name: s, .. }
            | VolumeSource::AwsElasticBlockStore { volume_id: s }
            | VolumeSource::Iscsi { iqn: s, .. } => string_bytes(s),
            VolumeSource::Rbd {
                monitors, pool, image, ..
            } => monitors.iter().map(|m| string_bytes(m)).sum::<usize>() + string_bytes(pool) + string_bytes(image),
        };
        std::mem::size_of::<Self>() + string_bytes(&self.name) + heap
    }
}

/// A pod as the engine sees it: identity, effective requests and placement constraints.
#[derive(Debug, Clone, Default)]
pub struct PodSpec {
    /// metadata.uid.
    pub uid: Arc<str>,
    /// metadata.namespace.
    pub namespace: String,
    /// metadata.name.
    pub name: String,
    /// metadata.labels.
    pub labels: Labels,
    /// metadata.annotations (read by rules only).
    pub annotations: Labels,
    /// spec.containers as rules see them (the scheduler itself reads `requests`).
    pub containers: Vec<Container>,
    /// spec.priority.
    pub priority: i32,
    /// Effective request (Kubernetes' `PodRequests`, with overhead), for filtering.
    pub requests: Resources,
    /// Effective request with the scoring defaults for missing cpu and memory requests: what the
    /// pod adds to its node's non-zero requested sum (kube's `Non0CPU`, `Non0Mem`).
    pub non_zero_requests: Resources,
    /// The pod's own request in the scoring plugins, when it differs from `non_zero_requests`
    /// (only a pod with pod-level requests: see [`crate::engine::resources::PodRequests`]).
    pub score_requests: Option<Box<Resources>>,
    /// The node features the pod needs (NodeDeclaredFeatures), sorted.
    pub required_features: Box<[Arc<str>]>,
    /// spec.nodeName, when set.
    pub node_name: Option<String>,
    /// spec.nodeSelector.
    pub node_selector: Vec<(String, String)>,
    /// Required node affinity terms (ORed); `None` means no requirement.
    pub required_affinity: Option<Vec<SelectorTerm>>,
    /// Preferred node affinity terms.
    pub preferred_affinity: Vec<PreferredTerm>,
    /// spec.tolerations.
    pub tolerations: Vec<Toleration>,
    /// Host ports of every container (init containers included), port 0 left out.
    pub host_ports: Vec<HostPort>,
    /// Normalized image names of init containers and containers, in order.
    pub images: Vec<String>,
    /// spec.affinity.podAffinity.
    pub pod_affinity: PodAffinityTerms,
    /// spec.affinity.podAntiAffinity.
    pub pod_anti_affinity: PodAffinityTerms,
    /// spec.topologySpreadConstraints.
    pub spread_constraints: Vec<SpreadConstraint>,
    /// The selector of the default spreading (from the workloads selecting the pod), if any.
    pub default_spread_selector: Option<LabelSelector>,
    /// spec.preemptionPolicy.
    pub preemption_policy: PreemptionPolicy,
    /// status.startTime in Unix seconds; 0 when the pod has not started.
    pub start_time: i64,
    /// The gang the pod belongs to, if any.
    pub gang: Option<Gang>,
    /// spec.schedulingGroup.podGroupName, as the PodGroup's key; `None` for none.
    pub pod_group: Option<PodGroupKey>,
    /// metadata.deletionTimestamp is set: PodTopologySpread does not count the pod.
    pub terminating: bool,
    /// spec.volumes of the kinds the volume filters read.
    pub volumes: Vec<PodVolume>,
    /// The resources its containers and init containers name in their requests.
    pub requested_names: RequestedNames,
    /// spec.resourceClaims, with the claim names its status gives (DynamicResources).
    pub resource_claims: Vec<PodClaimRef>,
    /// The init containers and containers, in that order, that request a resource which may be
    /// backed by DRA (kube's `IsDRAExtendedResourceName`): what DynamicResources reads to name
    /// the requests of the pod's special claim for extended resources. Empty for most pods.
    pub extended_containers: Vec<ExtendedContainer>,
}

/// A container's requests as DynamicResources reads them for extended resources backed by DRA
/// (kube's `createResourceRequestAndMappings` in `dynamicresources/extendeddynamicresources.go`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtendedContainer {
    /// The container's index in init containers followed by containers.
    pub index: usize,
    /// The container's name.
    pub name: String,
    /// An init container that is not a sidecar (kube's short-lived containers).
    pub short_lived: bool,
    /// Every resource name of `resources.requests`, sorted (a request's name counts its place
    /// among them).
    pub request_names: Vec<Arc<str>>,
    /// The requests of names that may be backed by DRA, as whole numbers (`None` when the
    /// quantity is not one: kube's `AsInt64` fails and the container asks for none).
    pub extended: Vec<(Arc<str>, Option<i64>)>,
}

/// The names of the resources a pod's containers and init containers request, zero amounts
/// included: kube-scheduler's extender `IsInterested` reads the names in `resources.requests` and
/// `resources.limits` (the API server defaults every limit into the requests). cpu, memory and
/// ephemeral-storage are bits; other names (extended resources, hugepages) are kept as they are,
/// and most pods have none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestedNames {
    standard: u8,
    other: Vec<Arc<str>>,
}

impl RequestedNames {
    const STANDARD: [&'static str; 3] = ["cpu", "memory", "ephemeral-storage"];

    /// Adds a resource name.
    pub fn insert(&mut self, name: &str) {
        match Self::STANDARD.iter().position(|s| *s == name) {
            Some(bit) => self.standard |= 1 << bit,
            None if !self.other.iter().any(|o| **o == *name) => self.other.push(Arc::from(name)),
            None => {}
        }
    }

    /// Whether a container or init container requests `name`.
    pub fn contains(&self, name: &str) -> bool {
        match Self::STANDARD.iter().position(|s| *s == name) {
            Some(bit) => self.standard & (1 << bit) != 0,
            None => self.other.iter().any(|o| **o == *name),
        }
    }
}

impl PodSpec {
    /// Whether the pod has any pod affinity or anti-affinity term.
    pub fn has_pod_affinity(&self) -> bool {
        !self.pod_affinity.is_empty() || !self.pod_anti_affinity.is_empty()
    }

    /// `namespace/name`, as kube-scheduler names pods in messages.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The pod's own request in the scoring plugins (kube's
    /// `resourceAllocationScorer.calculatePodResourceRequest` with the defaults).
    pub fn score_requests(&self) -> &Resources {
        self.score_requests.as_deref().unwrap_or(&self.non_zero_requests)
    }
}

/// A node as the engine sees it: identity, labels, taints, allocatable and images.
#[derive(Debug, Clone, Default)]
pub struct NodeSpec {
    /// metadata.name.
    pub name: String,
    /// metadata.labels.
    pub labels: HashMap<String, String>,
    /// spec.taints.
    pub taints: Vec<Taint>,
    /// spec.unschedulable.
    pub unschedulable: bool,
    /// status.allocatable, without `pods`.
    pub allocatable: Resources,
    /// status.allocatable["pods"].
    pub allowed_pods: i64,
    /// Image name to size in bytes, one entry per name of each image.
    pub images: HashMap<String, i64>,
    /// status.declaredFeatures, sorted.
    pub declared_features: Vec<Arc<str>>,
}

impl NodeSpec {
    /// Approximate size, for the snapshot cache's memory budget.
    pub fn approx_bytes(&self) -> usize {
        // Hash map entries: the pair, its control byte, and the table's spare capacity.
        let entry = |k: &str, v: usize| 2 * (std::mem::size_of::<String>() + v) + string_bytes(k);
        let labels: usize = self
            .labels
            .iter()
            .map(|(k, v)| entry(k, std::mem::size_of::<String>()) + string_bytes(v))
            .sum();
        let images: usize = self.images.keys().map(|k| entry(k, 8)).sum();
        let taints: usize = self
            .taints
            .iter()
            .map(|t| std::mem::size_of::<Taint>() + string_bytes(&t.key) + string_bytes(&t.value))
            .sum();
        std::mem::size_of::<Self>()
            + string_bytes(&self.name)
            + labels
            + images
            + taints
            + self.allocatable.approx_bytes()
            + self
                .declared_features
                .iter()
                .map(|f| std::mem::size_of::<Arc<str>>() + 16 + f.len())
                .sum::<usize>()
    }
}

/// kube-scheduler's `normalizedImageName`: an image without a tag gets `:latest`.
pub fn normalized_image_name(name: &str) -> String {
    let last_colon = name.rfind(':');
    let last_slash = name.rfind('/');
    let has_tag = match (last_colon, last_slash) {
        (Some(c), Some(s)) => c > s,
        (Some(_), None) => true,
        (None, _) => false,
    };
    if has_tag {
        name.to_string()
    } else {
        format!("{name}:latest")
    }
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;

/// A pod's reference to a claim (`spec.resourceClaims[]`, with the claim name the pod's
/// `status.resourceClaimStatuses` gives for a template).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodClaimRef {
    /// The entry's `name` in the pod.
    pub name: String,
    /// The ResourceClaim's name: `resourceClaimName`, or the generated name from
    /// `status.resourceClaimStatuses` for a template. `None` while the resourceclaim controller
    /// has not created the template's claim yet (the pod waits, as kube's PreEnqueue makes it).
    pub claim_name: Option<String>,
    /// The entry names a template (`resourceClaimTemplateName`).
    pub from_template: bool,
}
