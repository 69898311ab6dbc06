//! Why nodes were rejected and what a pod that fits nowhere is told (kube-scheduler's
//! `framework/types.go`: `Diagnosis`, `FitError`): each filter's reason in kube-scheduler's
//! words (the strings live with their plugins), whether preemption may resolve it, the
//! rejections of a reasons pass as the filters report them, and the message built from them.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use super::model::PodSpec;
use super::plugins::interpodaffinity::filtering as interpod_filtering;
use super::plugins::noderesources::fit;
use super::plugins::podtopologyspread::filtering as spread_filtering;
use super::plugins::volumebinding::binder as volume_binder;
use super::plugins::{
    node_affinity, node_declared_features, node_name, node_ports, node_unschedulable, nodevolumelimits,
    taint_toleration, volumerestrictions, volumezone,
};
use super::policy::FilterPlugin;
use super::pool::pooled_buffer;
use super::registry::Preemption;
use super::resources::ResourceName;
use super::snapshot::{NodeEntry, Snapshot};

/// Why a node was rejected, in kube-scheduler's words.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// NodeUnschedulable: the node is cordoned.
    NodeUnschedulable,
    /// NodeName: the pod names another node.
    NodeNameMismatch,
    /// NodeDeclaredFeatures: the node does not declare a feature the pod needs.
    NodeDeclaredFeatures,
    /// TaintToleration: a NoSchedule or NoExecute taint is not tolerated.
    UntoleratedTaint,
    /// NodeAffinity: nodeSelector or required affinity does not match.
    NodeAffinityMismatch,
    /// NodePorts: a requested host port is in use.
    NodePortsConflict,
    /// NodeResourcesFit: the node has no room for another pod.
    TooManyPods,
    /// NodeResourcesFit: not enough of a resource.
    Insufficient(ResourceName),
    /// PodTopologySpread: a DoNotSchedule constraint.
    TopologySpread(spread_filtering::Violation),
    /// InterPodAffinity: required affinity or anti-affinity.
    InterPodAffinity(interpod_filtering::Violation),
    /// A policy's CEL rule: the filter rule's reason, or what went wrong evaluating a rule.
    Rule(Arc<str>),
    /// VolumeRestrictions: a disk or ReadWriteOncePod claim of the pod is in use.
    VolumeRestrictions(volumerestrictions::Conflict),
    /// NodeVolumeLimits: the node's attach limit of a CSI driver would be exceeded.
    NodeVolumeLimits,
    /// NodeVolumeLimits: a CSI driver of the pod's volumes that must be on the node is not (its
    /// name).
    CsiDriverNotInstalled(Arc<str>),
    /// VolumeBinding: the pod's claims cannot be bound or provisioned on the node.
    VolumeBinding(volume_binder::Conflict),
    /// VolumeZone: a bound volume's zone or region is not the node's.
    VolumeZone,
    /// A volume plugin's PreFilter rejected the pod (every node gets it): its message, which
    /// kube-scheduler's `FitError` shows alone instead of counting nodes.
    VolumePreFilter(Arc<str>),
    /// DynamicResources' PreFilter rejected the pod (every node gets it): its message, shown
    /// alone like [`Reason::VolumePreFilter`].
    DevicePreFilter(Arc<str>),
    /// DynamicResources: the pod's claims cannot be allocated on the node, or an allocated one
    /// is not available there (kube's message).
    DynamicResources(Arc<str>),
    /// An extender's message for a node in `FailedNodes` or `FailedAndUnresolvableNodes`.
    Extender(Arc<str>),
    /// A node outside the names PreFilter restricted the pod to (NodeName's `spec.nodeName`,
    /// NodeAffinity's `metadata.name` terms): the framework's status for such a node, naming the
    /// plugins, sorted (`node(s) didn't satisfy plugin(s) [NodeAffinity NodeName]`).
    PreFilterResult(Arc<str>),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NodeUnschedulable => f.write_str(node_unschedulable::ERR_REASON_UNSCHEDULABLE),
            Self::NodeNameMismatch => f.write_str(node_name::ERR_REASON),
            Self::NodeDeclaredFeatures => f.write_str(node_declared_features::ERR_REASON),
            Self::UntoleratedTaint => f.write_str(taint_toleration::ERR_REASON),
            Self::NodeAffinityMismatch => f.write_str(node_affinity::ERR_REASON_POD),
            Self::NodePortsConflict => f.write_str(node_ports::ERR_REASON),
            Self::TooManyPods => f.write_str(fit::ERR_REASON_TOO_MANY_PODS),
            Self::Insufficient(r) => write!(f, "{} {r}", fit::ERR_REASON_INSUFFICIENT),
            Self::TopologySpread(spread_filtering::Violation::MissingLabel) => {
                f.write_str(spread_filtering::MISSING_LABEL_REASON)
            }
            Self::TopologySpread(spread_filtering::Violation::Skew) => {
                f.write_str(spread_filtering::CONSTRAINTS_REASON)
            }
            Self::InterPodAffinity(interpod_filtering::Violation::Affinity) => {
                f.write_str(interpod_filtering::AFFINITY_REASON)
            }
            Self::InterPodAffinity(interpod_filtering::Violation::AntiAffinity) => {
                f.write_str(interpod_filtering::ANTI_AFFINITY_REASON)
            }
            Self::InterPodAffinity(interpod_filtering::Violation::ExistingAntiAffinity) => {
                f.write_str(interpod_filtering::EXISTING_ANTI_AFFINITY_REASON)
            }
            Self::Rule(reason) | Self::Extender(reason) => f.write_str(reason),
            Self::VolumeRestrictions(c) => f.write_str(c.reason()),
            Self::NodeVolumeLimits => f.write_str(nodevolumelimits::ERR_REASON_MAX_VOLUME_COUNT),
            Self::CsiDriverNotInstalled(driver) => {
                write!(f, "{driver} {}", nodevolumelimits::ERR_DRIVER_NOT_INSTALLED)
            }
            Self::VolumeBinding(c) => f.write_str(c.reason()),
            Self::VolumeZone => f.write_str(volumezone::ERR_REASON_CONFLICT),
            Self::VolumePreFilter(m) | Self::DevicePreFilter(m) | Self::DynamicResources(m) => f.write_str(m),
            Self::PreFilterResult(plugins) => write!(f, "node(s) didn't satisfy plugin(s) [{plugins}]"),
        }
    }
}

/// Whether a filter rejection can be resolved by evicting pods (kube-scheduler's `Unschedulable`
/// as opposed to `UnschedulableAndUnresolvable`): the plugin's registry row says (evicting the
/// node's pods frees their ports, disks, attach slots and ReadWriteOncePod claims; a missing CSI
/// driver is kube's Unschedulable too, and preemption then finds evicting pods does not install
/// it), or, for the plugins whose row says it depends, the reason below.
#[inline]
pub(crate) fn resolvable(
    pod_requests: &crate::engine::resources::Resources,
    entry: &NodeEntry,
    plugin: FilterPlugin,
    r: &Reason,
) -> bool {
    match plugin.row().preemption {
        Preemption::Never => return false,
        Preemption::Always => return true,
        Preemption::ByReason => {}
    }
    match (plugin, r) {
        (FilterPlugin::NodeResourcesFit, Reason::TooManyPods) => true,
        // NodeResourcesFit marks a request larger than the node's whole allocatable unresolvable.
        (FilterPlugin::NodeResourcesFit, Reason::Insufficient(name)) => {
            let alloc = match name {
                ResourceName::Cpu => entry.spec.allocatable.milli_cpu,
                ResourceName::Memory => entry.spec.allocatable.memory,
                ResourceName::EphemeralStorage => entry.spec.allocatable.ephemeral_storage,
                ResourceName::Pods => entry.spec.allowed_pods,
                ResourceName::Scalar(s) => entry.spec.allocatable.scalar(s),
            };
            pod_requests.get(name) <= alloc
        }
        // PodTopologySpread's skew and InterPodAffinity's anti-affinity rules may clear when pods
        // go (kube-scheduler's Unschedulable); a missing topology label and the pod's own
        // affinity may not (UnschedulableAndUnresolvable).
        (FilterPlugin::PodTopologySpread, Reason::TopologySpread(v)) => *v == spread_filtering::Violation::Skew,
        (FilterPlugin::InterPodAffinity, Reason::InterPodAffinity(v)) => *v != interpod_filtering::Violation::Affinity,
        _ => false,
    }
}

/// Counts of reasons over the rejected nodes, from which kube-scheduler's message is built.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diagnosis {
    /// Nodes in the snapshot.
    pub node_count: usize,
    /// How many nodes gave each reason.
    pub reasons: HashMap<Reason, u32>,
    /// kube-scheduler's `PostFilterMsg`: what preemption said, e.g. `preemption: not eligible due to
    /// preemptionPolicy=Never.` or `preemption: found a potential placement for pod on node n1,
    /// preempting 2 victims`; empty when preemption did not run.
    pub post_filter: String,
    /// Where preemption would make room, and whom it would evict.
    pub nomination: Option<Nomination>,
    /// The claim DynamicResources' PostFilter deallocates (an unused claim whose allocation pins
    /// the pod to nodes it cannot use), which the caller writes.
    pub deallocate: Option<crate::engine::plugins::dynamicresources::ClaimDeallocation>,
    /// Set when the pod's gang could not be placed whole: why.
    pub gang: Option<GangFailure>,
    /// Set when scheduling failed with an error rather than for want of a node (an extender that
    /// is not ignorable failed): kube-scheduler's error text, shown instead of the fit message.
    pub error: Option<String>,
}

/// A preemption's outcome: the node the pod is nominated to and the pods to evict there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nomination {
    /// The nominated node.
    pub node: String,
    /// Uids of the victims, most important first.
    pub victims: Vec<Arc<str>>,
}

/// Why a gang member is not placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GangFailure {
    /// The gang, "namespace/name".
    pub gang: Arc<str>,
    /// The explanation shown to users.
    pub message: String,
    /// The pod's message is its own attempt's (a PodGroup member that failed by itself: kube
    /// shows its FitError), not the gang's.
    pub own: bool,
}

impl Diagnosis {
    /// kube-scheduler's `FitError.Error()`: `0/N nodes are available: <count> <reason>, ….` with
    /// the "count reason" strings sorted, or its message for a cluster with no nodes.
    pub fn message(&self) -> String {
        if let Some(e) = &self.error {
            return e.clone();
        }
        let own = self.fit_message();
        match &self.gang {
            Some(g) if g.own => own,
            Some(g) if self.reasons.is_empty() => g.message.clone(),
            Some(g) => format!("{} This pod: {own}", g.message),
            None => own,
        }
    }

    /// The message of the pod's own scheduling attempt, with preemption's part.
    fn fit_message(&self) -> String {
        if self.node_count == 0 {
            return "no nodes available to schedule pods".to_string();
        }
        let mut parts: Vec<String> = self.reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
        parts.sort();
        let mut msg = format!("0/{} nodes are available:", self.node_count);
        // A PreFilter rejection is shown alone, without node counts (`FitError.Error()`).
        let pre_filter = self.reasons.keys().find_map(|r| match r {
            Reason::VolumePreFilter(m) | Reason::DevicePreFilter(m) => Some(m),
            _ => None,
        });
        if let Some(m) = pre_filter {
            msg.push(' ');
            msg.push_str(m);
            msg.push('.');
        } else if !parts.is_empty() {
            msg.push(' ');
            msg.push_str(&parts.join(", "));
            msg.push('.');
        }
        if !self.post_filter.is_empty() {
            msg.push(' ');
            msg.push_str(&self.post_filter);
        }
        msg
    }
}

/// A node rejected by a filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedNode {
    /// The node's index in the ranked snapshot's [`Snapshot::nodes`] (its name:
    /// [`RejectedNode::name`]). An index, not a name, so that ranking copies no node name: the
    /// caller copies the names it answers with.
    pub node: usize,
    /// The filter that rejected it.
    pub plugin: FilterPlugin,
    /// Its reasons.
    pub reasons: Vec<Reason>,
    /// When DynamicResources refused it because the pod's claims cannot be allocated there
    /// (Rank only): which requests fail and why
    /// ([`super::plugins::dynamicresources::PodDevices::diagnose`]).
    pub devices: Vec<super::plugins::dynamicresources::RequestFailure>,
}

impl RejectedNode {
    /// The node's name in `snapshot`, the snapshot that was ranked (empty for an index that
    /// snapshot does not have, as from another snapshot's ranking).
    pub fn name<'s>(&self, snapshot: &'s Snapshot) -> &'s str {
        snapshot.nodes().get(self.node).map_or("", |n| n.spec.name.as_str())
    }
}

pooled_buffer!(
    pub(crate) FlagBuffer,
    bool,
    SPARE_FLAGS,
    "A flag per node: [`Rejections::unresolvable`]."
);

/// kube-scheduler's `PreFilterResult` for a pod: the nodes its PreFilter plugins restrict it to
/// (NodeName: `spec.nodeName`; NodeAffinity: when every required term names nodes by
/// `metadata.name In`, the union of the terms' names), intersected, and the status every other
/// node gets whichever filter would have rejected it (`schedule_one.go`'s `findNodesThatFitPod`:
/// `SetAbsentNodesStatus`, UnschedulableAndUnresolvable; counted in the message).
pub(crate) struct PreFilterNodes {
    names: std::collections::HashSet<String>,
    reason: Reason,
}

impl PreFilterNodes {
    /// The pod's restriction, `None` when every node is evaluated.
    pub(crate) fn of(pod: &PodSpec) -> Option<Self> {
        let mut plugins: Vec<&str> = Vec::new();
        let mut names: Option<std::collections::HashSet<String>> = None;
        if let Some(terms) = pod.required_affinity.as_ref().filter(|t| !t.is_empty()) {
            let mut union = std::collections::HashSet::new();
            let mut all = false;
            for t in terms {
                let mut term: Option<std::collections::HashSet<String>> = None;
                for r in &t.match_fields {
                    if let (true, super::model::SelectorOp::In(values)) = (r.key == "metadata.name", &r.op) {
                        let set: std::collections::HashSet<String> = values.iter().cloned().collect();
                        term = Some(match term {
                            None => set,
                            Some(t) => t.intersection(&set).cloned().collect(),
                        });
                    }
                }
                match term {
                    Some(t) => union.extend(t),
                    None => {
                        all = true;
                        break;
                    }
                }
            }
            // No name at all is NodeAffinity's own PreFilter failure, not a restriction.
            if !all && !union.is_empty() {
                plugins.push("NodeAffinity");
                names = Some(union);
            }
        }
        if let Some(n) = pod.node_name.as_deref().filter(|n| !n.is_empty()) {
            plugins.push("NodeName");
            names = Some(match names {
                None => std::iter::once(n.to_string()).collect(),
                Some(set) => set.into_iter().filter(|s| s == n).collect(),
            });
        }
        names.map(|names| Self {
            names,
            reason: Reason::PreFilterResult(Arc::from(plugins.join(" "))),
        })
    }
}

/// The rejections of a reasons pass (Rank's, and Schedule's for a pod that fits nowhere), taken as
/// the filters report them in node order: counted by reason, listed by node up to a limit, and
/// marked unresolvable for preemption.
pub(crate) struct Rejections<'r> {
    /// The snapshot's nodes (names for the list, allocatable for [`resolvable`]).
    pub(crate) nodes: &'r [Arc<NodeEntry>],
    /// The pod being placed (its requests, for [`resolvable`]).
    pub(crate) pod: &'r PodSpec,
    /// At most this many nodes listed (`None`: all).
    pub(crate) limit: Option<usize>,
    /// How many nodes gave each reason.
    pub(crate) counts: Vec<(Reason, u32)>,
    /// The rejected nodes listed, each with its reasons.
    pub(crate) listed: Vec<RejectedNode>,
    /// The node whose reasons are being listed (a node's reasons are consecutive).
    pub(crate) listing: usize,
    /// Per node, whether some reason is one evicting pods cannot resolve.
    pub(crate) unresolvable: FlagBuffer,
    /// The pod's PreFilterResult, if any, and the last node outside it that was counted.
    prefilter: Option<(PreFilterNodes, usize)>,
}

impl<'r> Rejections<'r> {
    /// None yet, for `pod` on `nodes`.
    pub(crate) fn new(nodes: &'r [Arc<NodeEntry>], pod: &'r PodSpec, limit: Option<usize>) -> Self {
        Self {
            nodes,
            pod,
            limit,
            counts: Vec::new(),
            listed: Vec::new(),
            listing: usize::MAX,
            unresolvable: {
                let mut flags = FlagBuffer::take_spare();
                flags.clear();
                flags.resize(nodes.len(), false);
                flags
            },
            prefilter: PreFilterNodes::of(pod).map(|p| (p, usize::MAX)),
        }
    }

    /// Takes one reason `plugin` gave for rejecting node `i`.
    #[inline]
    pub(crate) fn add(&mut self, i: usize, plugin: FilterPlugin, reason: Reason) {
        if let Some((pre, counted)) = &mut self.prefilter {
            if !pre.names.contains(&self.nodes[i].spec.name) {
                // Not filtered in kube-scheduler: one status, whichever filters reject it here.
                if *counted != i {
                    *counted = i;
                    let reason = pre.reason.clone();
                    if let Some(u) = self.unresolvable.get_mut(i) {
                        *u = true;
                    }
                    self.count(&reason, 1);
                    self.list(i, plugin, reason);
                }
                return;
            }
        }
        if let Some(u) = self.unresolvable.get_mut(i) {
            if !*u && !resolvable(&self.pod.requests, &self.nodes[i], plugin, &reason) {
                *u = true;
            }
        }
        self.count(&reason, 1);
        self.list(i, plugin, reason);
    }

    /// Counts `n` more nodes rejected for `reason` (few distinct reasons occur: a short list
    /// beats hashing one per rejected node).
    #[inline]
    pub(crate) fn count(&mut self, reason: &Reason, n: u32) {
        if n == 0 {
            return;
        }
        match self.counts.iter_mut().find(|(r, _)| r == reason) {
            Some((_, c)) => *c += n,
            None => self.counts.push((reason.clone(), n)),
        }
    }

    /// Whether a reason for node `i` would be listed.
    #[inline]
    pub(crate) fn lists_more(&self, i: usize) -> bool {
        i == self.listing || self.limit.is_none_or(|limit| self.listed.len() < limit)
    }

    /// Lists one reason `plugin` gave for rejecting node `i` (unless the list is full).
    #[inline]
    pub(crate) fn list(&mut self, i: usize, plugin: FilterPlugin, reason: Reason) {
        if !self.lists_more(i) {
            return;
        }
        if i == self.listing {
            if let Some(node) = self.listed.last_mut() {
                node.reasons.push(reason);
            }
        } else {
            self.listed.push(RejectedNode {
                node: i,
                plugin,
                reasons: vec![reason],
                devices: Vec::new(),
            });
            self.listing = i;
        }
    }
}
