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

/// kube-scheduler's `IsScalarResourceName`: extended, hugepages and attachable-volumes resources.
fn is_scalar_resource_name(name: &str) -> bool {
    if name.starts_with("hugepages-") || name.starts_with("attachable-volumes-") {
        return true;
    }
    // Extended resources are fully qualified (domain/name) outside the kubernetes.io domain;
    // `requests.` prefixed names are quota names, not container resources.
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
}

/// Kubernetes' `PodRequests`: the pod's effective request.
///
/// The sum of the regular containers and the restartable (sidecar) init containers, raised to the
/// largest init container's need at its point of the start-up sequence (its own request plus the
/// sidecars started before it), plus the pod overhead. With `non_missing`, containers that do not
/// request cpu or memory count kube-scheduler's defaults, as its scoring plugins do.
pub fn effective_requests(
    containers: &[ContainerRequests],
    init_containers: &[ContainerRequests],
    overhead: &Resources,
    non_missing: bool,
) -> Resources {
    let get = |c: &ContainerRequests| {
        if non_missing {
            c.non_missing()
        } else {
            c.requests.clone()
        }
    };
    let mut total = Resources::default();
    for c in containers {
        total.add(&get(c));
    }
    let mut sidecars = Resources::default();
    let mut init_max = Resources::default();
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
    total.add(overhead);
    total
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
        }
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
