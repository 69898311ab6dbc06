//! Resource amounts and Kubernetes' effective-request rules.
//!
//! Amounts are integers in the units kube-scheduler uses: millicores for `cpu`, bytes for
//! `memory` and `ephemeral-storage`, and plain counts for everything else (extended
//! resources such as `nvidia.com/gpu`, `hugepages-*`).

use std::sync::Arc;

/// Milli-CPU a container without a cpu request counts as when scoring (kube-scheduler's `DefaultMilliCPURequest`).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Bytes a container without a memory request counts as when scoring (kube-scheduler's `DefaultMemoryRequest`, 200Mi).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// Name of a resource the engine tracks.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum ResourceName {
    /// `cpu`, in millicores.
    Cpu,
    /// `memory`, in bytes.
    Memory,
    /// `ephemeral-storage`, in bytes.
    EphemeralStorage,
    /// `pods`: how many pods a node admits (node allocatable only).
    Pods,
    /// Any other countable resource: extended (`example.com/foo`), `hugepages-*`, `attachable-volumes-*`.
    Scalar(Arc<str>),
}

/// Why a resource name is not one the scheduler can account for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceNameError {
    /// Not a Kubernetes qualified name (Kubernetes' `IsQualifiedName`).
    #[error("must be a qualified name: an optional DNS subdomain prefix and '/', then 1 to 63 characters, alphanumeric, '-', '_' or '.', starting and ending with an alphanumeric character (e.g. 'example.com/MyName')")]
    NotQualified,
    /// Qualified, but not a resource the scheduler accounts for.
    #[error("must be a standard resource name (cpu, memory, ephemeral-storage, pods, hugepages-<size>) or a fully qualified extended resource name (example.com/foo)")]
    Unknown,
}

/// Kubernetes' `IsQualifiedName`: `[prefix/]name`, the prefix a DNS-1123 subdomain (at most 253
/// characters), the name 1 to 63 characters of `[A-Za-z0-9_.-]`, alphanumeric at both ends.
pub fn is_qualified_name(value: &str) -> bool {
    let (prefix, name) = match value.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, value),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric();
    name_ok && prefix.is_none_or(is_dns1123_subdomain)
}

/// Kubernetes' `IsDNS1123Subdomain`: at most 253 characters, dot-separated labels of lowercase
/// alphanumerics and '-', each starting and ending with an alphanumeric.
pub fn is_dns1123_subdomain(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 253
        && value.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        })
}

impl ResourceName {
    /// Parses a Kubernetes resource name.
    pub fn parse(name: &str) -> Result<Self, ResourceNameError> {
        Ok(match name {
            "cpu" => Self::Cpu,
            "memory" => Self::Memory,
            "ephemeral-storage" => Self::EphemeralStorage,
            "pods" => Self::Pods,
            _ if !is_qualified_name(name) => return Err(ResourceNameError::NotQualified),
            _ if is_scalar_resource_name(name) => Self::Scalar(Arc::from(name)),
            _ => return Err(ResourceNameError::Unknown),
        })
    }

    /// The name as Kubernetes spells it.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Cpu => "cpu",
            Self::Memory => "memory",
            Self::EphemeralStorage => "ephemeral-storage",
            Self::Pods => "pods",
            Self::Scalar(s) => s,
        }
    }

    /// True when quantities of this resource are counted in thousandths (only cpu).
    pub fn is_milli(&self) -> bool {
        matches!(self, Self::Cpu)
    }
}

impl From<ResourceName> for String {
    fn from(r: ResourceName) -> String {
        r.as_str().to_string()
    }
}

impl TryFrom<String> for ResourceName {
    type Error = ResourceNameError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse(&s)
    }
}

impl std::fmt::Display for ResourceName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// kube's `resourceapi.ResourceDeviceClassPrefix`: a DeviceClass's implicit extended resource
/// name is this prefix followed by the class's name (DRAExtendedResource).
pub const DEVICE_CLASS_RESOURCE_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// kube-scheduler's `IsScalarResourceName`: extended, hugepages and attachable-volumes resources,
/// and the one prefixed native name a pod may request, a DeviceClass's implicit extended
/// resource name (`deviceclass.resource.kubernetes.io/<class>`).
fn is_scalar_resource_name(name: &str) -> bool {
    if name.starts_with("hugepages-") || name.starts_with("attachable-volumes-") {
        return true;
    }
    if name
        .strip_prefix(DEVICE_CLASS_RESOURCE_PREFIX)
        .is_some_and(|class| !class.is_empty() && !class.contains('/'))
    {
        return true;
    }
    is_extended_resource_name(name)
}

/// Kubernetes' `IsExtendedResourceName`: fully qualified (domain/name) outside the kubernetes.io
/// domain; `requests.` prefixed names are quota names, not container resources.
pub fn is_extended_resource_name(name: &str) -> bool {
    match name.split_once('/') {
        Some((domain, rest)) => {
            !domain.is_empty()
                && !rest.is_empty()
                && !rest.contains('/')
                && domain != "kubernetes.io"
                && !domain.ends_with(".kubernetes.io")
                && !name.starts_with("requests.")
        }
        None => false,
    }
}

/// kube-scheduler's `IsDRAExtendedResourceName` (`pkg/scheduler/util/utils.go`): an extended
/// resource name, or a DeviceClass's implicit one; either may be backed by DRA.
pub fn is_dra_extended_resource_name(name: &str) -> bool {
    is_extended_resource_name(name) || name.starts_with(DEVICE_CLASS_RESOURCE_PREFIX)
}

/// A set of resource amounts: the dense fields for the common resources and a short list for the rest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    /// Millicores.
    pub milli_cpu: i64,
    /// Bytes of memory.
    pub memory: i64,
    /// Bytes of ephemeral storage.
    pub ephemeral_storage: i64,
    /// Other resources, sorted by name, no duplicates, no zero entries.
    pub scalars: Vec<(Arc<str>, i64)>,
}

impl Resources {
    /// Amount of one resource (0 when absent; `pods` is never part of a request set).
    pub fn get(&self, name: &ResourceName) -> i64 {
        match name {
            ResourceName::Cpu => self.milli_cpu,
            ResourceName::Memory => self.memory,
            ResourceName::EphemeralStorage => self.ephemeral_storage,
            ResourceName::Pods => 0,
            ResourceName::Scalar(s) => self.scalar(s),
        }
    }

    /// Amount of one scalar resource (0 when absent).
    pub fn scalar(&self, name: &str) -> i64 {
        self.scalars
            .binary_search_by(|(n, _)| (**n).cmp(name))
            .map(|i| self.scalars[i].1)
            .unwrap_or(0)
    }

    /// Sets one resource to an amount.
    pub fn set(&mut self, name: &ResourceName, amount: i64) {
        match name {
            ResourceName::Cpu => self.milli_cpu = amount,
            ResourceName::Memory => self.memory = amount,
            ResourceName::EphemeralStorage => self.ephemeral_storage = amount,
            ResourceName::Pods => {}
            ResourceName::Scalar(s) => self.set_scalar(s, amount),
        }
    }

    fn set_scalar(&mut self, name: &Arc<str>, amount: i64) {
        match self.scalars.binary_search_by(|(n, _)| (**n).cmp(name)) {
            Ok(i) if amount == 0 => {
                self.scalars.remove(i);
            }
            Ok(i) => self.scalars[i].1 = amount,
            Err(_) if amount == 0 => {}
            Err(i) => self.scalars.insert(i, (name.clone(), amount)),
        }
    }

    /// Adds every amount of `other` (saturating).
    pub fn add(&mut self, other: &Resources) {
        self.combine(other, i64::saturating_add);
    }

    /// Subtracts every amount of `other` (saturating).
    pub fn sub(&mut self, other: &Resources) {
        self.combine(other, i64::saturating_sub);
    }

    /// Raises every amount to at least the amount in `other`.
    pub fn max_with(&mut self, other: &Resources) {
        self.combine(other, i64::max);
    }

    fn combine(&mut self, other: &Resources, f: impl Fn(i64, i64) -> i64) {
        self.milli_cpu = f(self.milli_cpu, other.milli_cpu);
        self.memory = f(self.memory, other.memory);
        self.ephemeral_storage = f(self.ephemeral_storage, other.ephemeral_storage);
        for (name, amount) in &other.scalars {
            let current = self.scalar(name);
            self.set_scalar(name, f(current, *amount));
        }
    }

    /// True when every amount is zero.
    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0 && self.memory == 0 && self.ephemeral_storage == 0 && self.scalars.is_empty()
    }

    /// Approximate heap and inline size, for the snapshot cache's memory budget.
    pub fn approx_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self
                .scalars
                .iter()
                .map(|(name, _)| std::mem::size_of::<(Arc<str>, i64)>() + name.len() + 16)
                .sum::<usize>()
    }
}

/// A resource list as Kubernetes holds it: the amounts, and which names it has (zero amounts
/// included). kube's scoring defaults fill cpu and memory only where a list lacks the name, and a
/// pod-level request of `0` still replaces the containers' sum, so presence matters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceList {
    /// The amounts.
    pub amounts: Resources,
    /// The names the list has, sorted, without duplicates.
    pub names: Vec<ResourceName>,
}

impl ResourceList {
    /// Sets `name` to `amount`, the name counted as present.
    pub fn set(&mut self, name: &ResourceName, amount: i64) {
        self.amounts.set(name, amount);
        if let Err(i) = self.names.binary_search(name) {
            self.names.insert(i, name.clone());
        }
    }

    /// Whether the list names `name`.
    pub fn has(&self, name: &ResourceName) -> bool {
        self.names.binary_search(name).is_ok()
    }

    fn union_names(&mut self, other: &ResourceList) {
        for n in &other.names {
            if let Err(i) = self.names.binary_search(n) {
                self.names.insert(i, n.clone());
            }
        }
    }

    /// kube's `addResourceList`.
    fn add(&mut self, other: &ResourceList) {
        self.amounts.add(&other.amounts);
        self.union_names(other);
    }

    /// kube's `maxResourceList`.
    fn max_with(&mut self, other: &ResourceList) {
        self.amounts.max_with(&other.amounts);
        self.union_names(other);
    }
}

/// kube's `IsSupportedPodLevelResource`: cpu, memory and `hugepages-*` may be set at pod level.
pub fn is_pod_level_resource(name: &ResourceName) -> bool {
    match name {
        ResourceName::Cpu | ResourceName::Memory => true,
        ResourceName::Scalar(s) => s.starts_with("hugepages-"),
        _ => false,
    }
}

/// One container's resource requests, as the effective-request rules see it.
#[derive(Debug, Clone, Default)]
pub struct ContainerRequests {
    /// Parsed requests.
    pub requests: Resources,
    /// Whether a cpu request was present (even if zero): absent ones default when scoring.
    pub has_cpu: bool,
    /// Whether a memory request was present (even if zero).
    pub has_memory: bool,
    /// An init container with `restartPolicy: Always` (a sidecar).
    pub restartable: bool,
    /// Its status's `allocatedResources`, when the kubelet reported them (in-place resize).
    pub allocated: Option<ResourceList>,
    /// Its status's `resources.requests`, when reported: the requests in effect.
    pub actuated: Option<ResourceList>,
}

/// Which of cpu and memory kube-scheduler's `NonMissingContainerRequests` fill where missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fill {
    cpu: bool,
    memory: bool,
}

impl Fill {
    const NONE: Fill = Fill {
        cpu: false,
        memory: false,
    };
    const BOTH: Fill = Fill {
        cpu: true,
        memory: true,
    };
}

/// kube's `applyNonMissing` on a container's list: the defaults where it lacks cpu or memory.
fn non_missing(list: &ResourceList, fill: Fill) -> ResourceList {
    let mut r = list.clone();
    if fill.cpu && !list.has(&ResourceName::Cpu) {
        r.set(&ResourceName::Cpu, DEFAULT_MILLI_CPU_REQUEST);
    }
    if fill.memory && !list.has(&ResourceName::Memory) {
        r.set(&ResourceName::Memory, DEFAULT_MEMORY_REQUEST);
    }
    r
}

impl ContainerRequests {
    /// The requests with kube-scheduler's scoring defaults for missing cpu and memory.
    fn non_missing(&self) -> Resources {
        let mut r = self.requests.clone();
        if !self.has_cpu {
            r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
        }
        if !self.has_memory {
            r.memory = DEFAULT_MEMORY_REQUEST;
        }
        r
    }

    /// The spec's requests as a list (kube's `containerSpecRequests`).
    fn spec_list(&self) -> ResourceList {
        let mut names = Vec::new();
        if self.has_cpu {
            names.push(ResourceName::Cpu);
        }
        if self.has_memory {
            names.push(ResourceName::Memory);
        }
        if self.requests.ephemeral_storage != 0 {
            names.push(ResourceName::EphemeralStorage);
        }
        names.extend(
            self.requests
                .scalars
                .iter()
                .map(|(n, _)| ResourceName::Scalar(n.clone())),
        );
        names.sort();
        ResourceList {
            amounts: self.requests.clone(),
            names,
        }
    }

    /// kube's `containerAllocatedRequests`: allocated, else the spec (nothing when the resize is
    /// infeasible).
    fn allocated_list(&self, infeasible: bool) -> ResourceList {
        match &self.allocated {
            Some(a) => a.clone(),
            None if infeasible => ResourceList::default(),
            None => self.spec_list(),
        }
    }

    /// kube's `containerActuatedRequests`: actuated, else allocated, else the spec (nothing when
    /// the resize is infeasible).
    fn actuated_list(&self, infeasible: bool) -> ResourceList {
        match (&self.actuated, &self.allocated) {
            (Some(a), _) | (None, Some(a)) => a.clone(),
            (None, None) if infeasible => ResourceList::default(),
            (None, None) => self.spec_list(),
        }
    }
}

/// Kubernetes' `PodRequests`: the pod's effective request.
///
/// The sum of the regular containers and the restartable (sidecar) init containers, raised to the
/// largest init container's need at its point of the start-up sequence (its own request plus the
/// sidecars started before it), plus the pod overhead. With `non_missing`, containers that do not
/// request cpu or memory count kube-scheduler's defaults, as its scoring plugins do. This is the
/// whole rule for a pod without pod-level resources or resize status; [`pod_requests`] is the
/// rest of it.
pub fn effective_requests(
    containers: &[ContainerRequests],
    init_containers: &[ContainerRequests],
    overhead: &Resources,
    non_missing: bool,
) -> Resources {
    let mut total = sidecar_rule(containers, init_containers, |c| {
        if non_missing {
            c.non_missing()
        } else {
            c.requests.clone()
        }
    });
    total.add(overhead);
    total
}

/// A list kube's aggregation adds and raises ([`Resources`], [`ResourceList`]).
trait Aggregate: Default {
    fn add(&mut self, other: &Self);
    fn max_with(&mut self, other: &Self);
}

impl Aggregate for Resources {
    fn add(&mut self, other: &Self) {
        Resources::add(self, other);
    }
    fn max_with(&mut self, other: &Self) {
        Resources::max_with(self, other);
    }
}

impl Aggregate for ResourceList {
    fn add(&mut self, other: &Self) {
        ResourceList::add(self, other);
    }
    fn max_with(&mut self, other: &Self) {
        ResourceList::max_with(self, other);
    }
}

/// kube's `aggregateContainerResourcesByFn`: the regular containers' and the sidecars' sum,
/// raised to the largest init container's need at its point of the start-up sequence (its own
/// list plus the sidecars started before it), each container's list from `get`.
#[inline]
fn sidecar_rule<T: Aggregate>(
    containers: &[ContainerRequests],
    init_containers: &[ContainerRequests],
    get: impl Fn(&ContainerRequests) -> T,
) -> T {
    let mut total = T::default();
    for c in containers {
        total.add(&get(c));
    }
    let mut sidecars = T::default();
    let mut init_max = T::default();
    for c in init_containers {
        let own = get(c);
        if c.restartable {
            total.add(&own);
            sidecars.add(&own);
            init_max.max_with(&sidecars);
        } else {
            let mut need = own;
            need.add(&sidecars);
            init_max.max_with(&need);
        }
    }
    total.max_with(&init_max);
    total
}

/// [`sidecar_rule`] over lists: each container's list from `list` with `fill`'s defaults.
fn aggregate(
    containers: &[ContainerRequests],
    init_containers: &[ContainerRequests],
    fill: Fill,
    list: impl Fn(&ContainerRequests) -> ResourceList,
) -> ResourceList {
    sidecar_rule(containers, init_containers, |c| non_missing(&list(c), fill))
}

/// What kube's `PodRequests` reads of a pod beyond its containers' spec: pod-level resources,
/// the pod's resize status and its overhead.
#[derive(Debug, Clone, Default)]
pub struct PodResourceInputs {
    /// spec.resources.requests (every name given; only [`is_pod_level_resource`] ones apply).
    pub pod_requests: ResourceList,
    /// status.allocatedResources, when set.
    pub allocated: Option<ResourceList>,
    /// status.resources.requests, when set.
    pub actuated: Option<ResourceList>,
    /// The pod's `PodResizePending` condition says `Infeasible`.
    pub resize_infeasible: bool,
    /// spec.overhead.
    pub overhead: ResourceList,
}

impl PodResourceInputs {
    /// kube's `IsPodLevelRequestsSet`.
    fn pod_level_set(&self) -> bool {
        self.pod_requests.names.iter().any(is_pod_level_resource)
    }

    /// Nothing beyond the containers' spec and the overhead: [`effective_requests`] is the rule.
    fn is_plain(&self, containers: &[ContainerRequests], init_containers: &[ContainerRequests]) -> bool {
        !self.pod_level_set()
            && self.allocated.is_none()
            && self.actuated.is_none()
            && !self.resize_infeasible
            && containers
                .iter()
                .chain(init_containers)
                .all(|c| c.allocated.is_none() && c.actuated.is_none())
    }
}

/// kube-scheduler 1.37's `PodRequests` with the options its framework passes (in-place resize,
/// GA, and pod-level resources with their resize, beta and on, all read): the largest of the
/// containers' desired, allocated and actuated requests (the desired ones left out while a resize
/// is infeasible), pod-level status in place of the containers' when the kubelet reports it, the
/// pod-level requests replacing the containers' sum for the resources they name, plus overhead.
fn pod_requests_with(
    containers: &[ContainerRequests],
    init_containers: &[ContainerRequests],
    pod: &PodResourceInputs,
    fill: Fill,
) -> ResourceList {
    let infeasible = pod.resize_infeasible;
    let spec = aggregate(containers, init_containers, fill, ContainerRequests::spec_list);
    let (allocated, actuated) = match (&pod.allocated, &pod.actuated) {
        (Some(allocated), Some(actuated)) => (allocated.clone(), actuated.clone()),
        _ => (
            aggregate(containers, init_containers, fill, |c| c.allocated_list(infeasible)),
            aggregate(containers, init_containers, fill, |c| c.actuated_list(infeasible)),
        ),
    };
    let mut reqs = if infeasible { actuated.clone() } else { spec };
    if infeasible {
        reqs.max_with(&allocated);
    } else {
        reqs.max_with(&actuated);
        reqs.max_with(&allocated);
    }
    if pod.pod_level_set() {
        let mut effective = pod.pod_requests.clone();
        if let Some(actuated) = &pod.actuated {
            // kube's effectivePodLevelResources: max(spec, status.resources, status.allocated),
            // without the spec while its resize is infeasible.
            if infeasible {
                effective = ResourceList::default();
            }
            effective.max_with(actuated);
            if let Some(allocated) = &pod.allocated {
                effective.max_with(allocated);
            }
        }
        for name in effective.names.iter().filter(|n| is_pod_level_resource(n)) {
            reqs.set(name, effective.amounts.get(name));
        }
    }
    reqs.add(&pod.overhead);
    reqs
}

/// A pod's requests as kube-scheduler 1.37 counts them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRequests {
    /// `PodRequests`: what NodeResourcesFit checks and a node's requested sum adds.
    pub requests: Resources,
    /// The framework's `Non0CPU`/`Non0Mem` of the pod (`PodInfo.CalculateResource`): what a
    /// node's non-zero requested sum adds, which the scoring plugins read.
    pub non_zero: Resources,
    /// `resourceAllocationScorer.calculatePodResourceRequest`: the pod's own request in the
    /// scoring plugins, which fills every missing cpu or memory with the defaults. `None` when it
    /// equals `non_zero` (always, for a pod without pod-level requests).
    pub score: Option<Box<Resources>>,
}

/// A pod's [`PodRequests`].
pub fn pod_requests(
    containers: &[ContainerRequests],
    init_containers: &[ContainerRequests],
    pod: &PodResourceInputs,
) -> PodRequests {
    if pod.is_plain(containers, init_containers) {
        return PodRequests {
            requests: effective_requests(containers, init_containers, &pod.overhead.amounts, false),
            non_zero: effective_requests(containers, init_containers, &pod.overhead.amounts, true),
            score: None,
        };
    }
    let requests = pod_requests_with(containers, init_containers, pod, Fill::NONE);
    // kube's getNonMissingContainerRequests: without pod-level requests, the defaults for both;
    // with them, only for a resource the pod's requests do not name at all.
    let fill = if pod.pod_level_set() {
        Fill {
            cpu: !requests.has(&ResourceName::Cpu),
            memory: !requests.has(&ResourceName::Memory),
        }
    } else {
        Fill::BOTH
    };
    let non_zero = if fill == Fill::NONE {
        requests.amounts.clone()
    } else {
        pod_requests_with(containers, init_containers, pod, fill).amounts
    };
    let score = if fill == Fill::BOTH {
        None
    } else {
        Some(pod_requests_with(containers, init_containers, pod, Fill::BOTH).amounts)
            .filter(|s| *s != non_zero)
            .map(Box::new)
    };
    PodRequests {
        requests: requests.amounts,
        non_zero,
        score,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(cpu: Option<i64>, mem: Option<i64>) -> ContainerRequests {
        ContainerRequests {
            requests: Resources {
                milli_cpu: cpu.unwrap_or(0),
                memory: mem.unwrap_or(0),
                ..Default::default()
            },
            has_cpu: cpu.is_some(),
            has_memory: mem.is_some(),
            restartable: false,
            allocated: None,
            actuated: None,
        }
    }

    /// A list of cpu (millicores) and memory (bytes), each present when given.
    fn list(cpu: Option<i64>, mem: Option<i64>) -> ResourceList {
        let mut l = ResourceList::default();
        if let Some(v) = cpu {
            l.set(&ResourceName::Cpu, v);
        }
        if let Some(v) = mem {
            l.set(&ResourceName::Memory, v);
        }
        l
    }

    fn cpu_mem(r: &Resources) -> (i64, i64) {
        (r.milli_cpu, r.memory)
    }

    const MI: i64 = 1024 * 1024;

    /// kube's `PodRequests` on a pod without pod-level resources or resize status is the rule
    /// [`effective_requests`] computes; the general path agrees with it.
    #[test]
    fn a_plain_pod_takes_the_plain_rule_and_the_general_one_agrees() {
        let mut sidecar = c(Some(100), None);
        sidecar.restartable = true;
        let containers = [c(Some(200), Some(10 * MI)), c(None, None)];
        let init = [c(Some(350), None), sidecar, c(Some(300), Some(MI))];
        let pod = PodResourceInputs {
            overhead: list(Some(50), None),
            ..Default::default()
        };
        let plain = pod_requests(&containers, &init, &pod);
        for fill in [Fill::NONE, Fill::BOTH] {
            let general = pod_requests_with(&containers, &init, &pod, fill).amounts;
            let expected = if fill == Fill::NONE {
                &plain.requests
            } else {
                &plain.non_zero
            };
            assert_eq!(&general, expected, "{fill:?}");
        }
        assert_eq!(plain.score, None);
    }

    /// In-place resize (GA in 1.35): a bound pod counts the largest of its desired, allocated and
    /// actuated requests, each summed over the containers first (kube's AggregateContainerRequests).
    #[test]
    fn a_resized_pod_counts_the_largest_of_desired_allocated_and_actuated() {
        // Scaling up, not yet admitted: the desired 1500m counts.
        let mut a = c(Some(1500), Some(MI));
        a.allocated = Some(list(Some(1000), Some(MI)));
        a.actuated = Some(list(Some(1000), Some(MI)));
        // Scaling down, not yet actuated: the 800m still in effect counts.
        let mut b = c(Some(200), None);
        b.allocated = Some(list(Some(200), None));
        b.actuated = Some(list(Some(800), None));
        let r = pod_requests(&[a.clone(), b.clone()], &[], &PodResourceInputs::default());
        // max(spec 1700, actuated 1800, allocated 1200) over the sums, not per container.
        assert_eq!(cpu_mem(&r.requests), (1800, MI));
        // b names no memory anywhere: the scoring default fills each of its lists.
        assert_eq!(cpu_mem(&r.non_zero), (1800, MI + DEFAULT_MEMORY_REQUEST));
        // A container without status falls back to allocated, then to its spec.
        let mut only_allocated = c(Some(100), None);
        only_allocated.allocated = Some(list(Some(400), None));
        let r = pod_requests(&[only_allocated], &[], &PodResourceInputs::default());
        assert_eq!(r.requests.milli_cpu, 400);
    }

    /// A resize the node cannot admit (`PodResizePending` reason `Infeasible`): the desired
    /// requests count for nothing; a container without status counts nothing.
    #[test]
    fn an_infeasible_resize_counts_what_is_allocated_and_actuated_only() {
        let mut a = c(Some(4000), Some(MI));
        a.allocated = Some(list(Some(1000), Some(MI)));
        a.actuated = Some(list(Some(1000), Some(MI)));
        let without_status = c(Some(500), Some(MI));
        let pod = PodResourceInputs {
            resize_infeasible: true,
            ..Default::default()
        };
        let r = pod_requests(&[a, without_status], &[], &pod);
        assert_eq!(cpu_mem(&r.requests), (1000, MI));
        // The container without status has an empty list: the defaults fill it when scoring.
        assert_eq!(
            cpu_mem(&r.non_zero),
            (1000 + DEFAULT_MILLI_CPU_REQUEST, MI + DEFAULT_MEMORY_REQUEST)
        );
    }

    /// Pod-level requests (PodLevelResources, beta and on): cpu, memory and hugepages set at pod
    /// level replace the containers' sum for that resource, even at 0; other names do not; the
    /// overhead is added after.
    #[test]
    fn pod_level_requests_replace_the_containers_sum_for_what_they_name() {
        let gpu = ResourceName::Scalar(Arc::from("example.com/gpu"));
        let huge = ResourceName::Scalar(Arc::from("hugepages-2Mi"));
        let mut gpu_container = c(Some(500), None);
        gpu_container.requests.set(&gpu, 1);
        gpu_container.requests.set(&huge, 4 * MI);
        let mut pod_level = list(Some(2000), None);
        pod_level.set(&huge, 0);
        pod_level.set(&gpu, 3);
        let pod = PodResourceInputs {
            pod_requests: pod_level,
            overhead: list(Some(100), Some(MI)),
            ..Default::default()
        };
        let r = pod_requests(&[gpu_container, c(Some(500), Some(MI))], &[], &pod);
        assert_eq!(cpu_mem(&r.requests), (2100, 2 * MI));
        assert_eq!(r.requests.get(&huge), 0, "hugepages-2Mi: 0 at pod level replaces 4Mi");
        assert_eq!(r.requests.get(&gpu), 1, "example.com/gpu is not a pod-level resource");
        // Only names outside IsSupportedPodLevelResource: not pod-level resources at all.
        let mut only_gpu = ResourceList::default();
        only_gpu.set(&gpu, 3);
        let pod = PodResourceInputs {
            pod_requests: only_gpu,
            ..Default::default()
        };
        assert!(pod.is_plain(&[c(Some(500), None)], &[]));
    }

    /// The framework's non-zero requests of a pod with pod-level requests
    /// (getNonMissingContainerRequests): the defaults fill only a resource the pod's requests do
    /// not name; the scoring plugins' own request fills every container that lacks it.
    #[test]
    fn pod_level_requests_fill_the_defaults_only_where_the_pod_names_nothing() {
        // Pod-level memory only, no container names cpu: each container counts 100m.
        let pod = PodResourceInputs {
            pod_requests: list(None, Some(MI)),
            ..Default::default()
        };
        let r = pod_requests(&[c(None, None), c(None, None)], &[], &pod);
        assert_eq!(cpu_mem(&r.requests), (0, MI));
        assert_eq!(cpu_mem(&r.non_zero), (2 * DEFAULT_MILLI_CPU_REQUEST, MI));
        assert_eq!(r.score, None, "the scorer fills the same way here");
        // Pod-level cpu only; one container names memory, one does not: the pod's requests name
        // memory, so the framework adds no default, while the scorer fills the second container.
        let pod = PodResourceInputs {
            pod_requests: list(Some(1000), None),
            ..Default::default()
        };
        let r = pod_requests(&[c(None, Some(MI)), c(None, None)], &[], &pod);
        assert_eq!(cpu_mem(&r.requests), (1000, MI));
        assert_eq!(cpu_mem(&r.non_zero), (1000, MI));
        assert_eq!(
            r.score.as_deref().map(cpu_mem),
            Some((1000, MI + DEFAULT_MEMORY_REQUEST))
        );
    }

    /// Pod-level resize (InPlacePodLevelResourcesVerticalScaling, beta and on): with the pod's
    /// status.resources reported, the pod-level request is the largest of desired, actuated and
    /// allocated, and the pod-level status replaces the containers' allocated and actuated sums.
    #[test]
    fn pod_level_resize_status_counts_as_kube_counts_it() {
        let pod = PodResourceInputs {
            pod_requests: list(Some(1000), Some(MI)),
            allocated: Some(list(Some(2000), Some(MI))),
            actuated: Some(list(Some(3000), Some(2 * MI))),
            ..Default::default()
        };
        let r = pod_requests(&[c(Some(100), Some(MI))], &[], &pod);
        assert_eq!(cpu_mem(&r.requests), (3000, 2 * MI));
        // Infeasible: the desired pod-level 1000m is left out, the statuses remain.
        let infeasible = PodResourceInputs {
            resize_infeasible: true,
            pod_requests: list(Some(5000), Some(MI)),
            ..pod.clone()
        };
        let r = pod_requests(&[c(Some(100), Some(MI))], &[], &infeasible);
        assert_eq!(cpu_mem(&r.requests), (3000, 2 * MI));
        // Allocated alone at pod level (no status.resources): the containers' status is read and
        // the pod-level spec applies as it is.
        let half = PodResourceInputs { actuated: None, ..pod };
        let r = pod_requests(&[c(Some(100), Some(MI))], &[], &half);
        assert_eq!(cpu_mem(&r.requests), (1000, MI));
    }

    #[test]
    fn resource_names_follow_kubernetes() {
        assert_eq!(ResourceName::parse("cpu"), Ok(ResourceName::Cpu));
        assert_eq!(
            ResourceName::parse("nvidia.com/gpu").map(|r| r.to_string()),
            Ok("nvidia.com/gpu".to_string())
        );
        assert!(ResourceName::parse("hugepages-2Mi").is_ok());
        assert!(ResourceName::parse("gpu").is_err());
        assert!(ResourceName::parse("kubernetes.io/foo").is_err());
        assert!(ResourceName::parse("a/b/c").is_err());
        assert!(ResourceName::parse("/x").is_err());
    }

    #[test]
    fn sum_of_containers_plus_overhead() {
        let overhead = Resources {
            milli_cpu: 50,
            ..Default::default()
        };
        let r = effective_requests(&[c(Some(100), Some(10)), c(Some(200), None)], &[], &overhead, false);
        assert_eq!((r.milli_cpu, r.memory), (350, 10));
    }

    #[test]
    fn init_container_raises_to_its_maximum() {
        // Kubernetes docs: effective init request is the highest init request; the pod's
        // effective request is the higher of that and the sum of app containers.
        let r = effective_requests(
            &[c(Some(100), Some(100))],
            &[c(Some(500), Some(50))],
            &Resources::default(),
            false,
        );
        assert_eq!((r.milli_cpu, r.memory), (500, 100));
    }

    #[test]
    fn sidecars_add_to_everything_after_them() {
        // KEP-753: sidecar 100m runs beside the app (200m) and the later init container (300m).
        let mut sidecar = c(Some(100), None);
        sidecar.restartable = true;
        let init_after = c(Some(300), None);
        let init_before = c(Some(350), None);
        let r = effective_requests(
            &[c(Some(200), None)],
            &[init_before, sidecar, init_after],
            &Resources::default(),
            false,
        );
        // max(350, 100 + 300 = 400, app 200 + sidecar 100 = 300) = 400
        assert_eq!(r.milli_cpu, 400);
    }

    #[test]
    fn scoring_defaults_apply_to_missing_requests_only() {
        let r = effective_requests(&[c(None, None), c(Some(0), Some(0))], &[], &Resources::default(), true);
        assert_eq!(r.milli_cpu, DEFAULT_MILLI_CPU_REQUEST);
        assert_eq!(r.memory, DEFAULT_MEMORY_REQUEST);
        let plain = effective_requests(&[c(None, None)], &[], &Resources::default(), false);
        assert!(plain.is_zero());
    }

    #[test]
    fn scalars_add_and_subtract_back_to_empty() {
        let gpu: Arc<str> = Arc::from("nvidia.com/gpu");
        let mut a = Resources::default();
        let mut b = Resources::default();
        b.set(&ResourceName::Scalar(gpu.clone()), 2);
        a.add(&b);
        a.add(&b);
        assert_eq!(a.scalar(&gpu), 4);
        a.sub(&b);
        a.sub(&b);
        assert!(a.is_zero());
    }
}
