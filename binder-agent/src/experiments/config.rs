//! A/B experiments and shadow policies: the configuration file, which pods an experiment selects,
//! and the arm each pod lands in. Pure logic, no I/O beyond reading the file and its TLS files.
//!
//! ```yaml
//! experiments:
//!   - name: packing                 # a DNS label; names the metrics and annotations
//!     selector:                     # every pod when empty
//!       namespaces: [team-a]        # any namespace when empty
//!       labelSelector:              # a standard metav1.LabelSelector
//!         matchLabels: {tier: batch}
//!         matchExpressions: [{key: app, operator: In, values: [etl]}]
//!     unit: workload                # pod | workload (default) | namespace
//!     salt: "2026-q4"               # default: the experiment's name
//!     allowPin: true                # honour the placement.dev/pin-arm annotation
//!     arms:
//!       - {name: control, weight: 80, policy: default}
//!       - name: candidate
//!         weight: 20
//!         policy: bin-packing
//!         backend:                  # optional: its own decision replicas
//!           endpoints: [http://placement-next.placement-system.svc:50051]
//!           tls: {ca: /etc/tls/ca.crt, cert: /etc/tls/tls.crt, key: /etc/tls/tls.key, serverName: x}
//! shadows:
//!   - {name: packing-shadow, policy: bin-packing}   # backend: optional, as for arms
//! ```
//!
//! - **Selection**: the first experiment (in file order) whose selector matches a pending pod
//!   decides it; pods no experiment selects are decided by the binder's own policy and replicas.
//! - **Units**: `pod` is `namespace/name` (a StatefulSet pod recreated under its name keeps its
//!   arm); `namespace` is the namespace; `workload` is the pod's controller owner reference, with
//!   a ReplicaSet whose name is `<deployment>-<pod-template-hash label>` taken as that Deployment
//!   (Kubernetes' naming convention), so a Deployment's pods stay in one arm across rollouts,
//!   with no extra API call. Pods without a controller are their own unit.
//! - **Assignment**: `xxh3_64(salt ␀ unit, seed = ASSIGNMENT_SEED)` scaled onto the summed weights
//!   picks the arm: the same unit lands in the same arm in every process and after every restart,
//!   while the file's experiment, salt and arm list are unchanged. Changing weights moves only the
//!   units whose hash falls in the moved range.
//! - **Pinning**: with `allowPin: true`, a pod annotated `placement.dev/pin-arm: <arm>` goes to
//!   that arm (an unknown arm name is ignored and the hash decides).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;

pub use crate::projection::Owner;
use crate::replicas::ClientTls;

/// Seed of the assignment hash. Fixed forever: changing it would move every unit.
pub const ASSIGNMENT_SEED: u64 = 0x706c_6163_656d_656e; // "placemen"

/// Why an experiments file was refused; every variant names the field.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not YAML of the expected shape (unknown field, wrong type).
    #[error("parsing the experiments file: {0}")]
    Parse(String),
    /// A field's value is not allowed.
    #[error("{field}: {reason}")]
    Invalid {
        /// The field path, e.g. `experiments[0].arms[1].weight`.
        field: String,
        /// Why.
        reason: String,
    },
    /// A TLS file of a backend could not be read.
    #[error("{field}: reading {path}: {source}")]
    TlsFile {
        /// The field path, e.g. `shadows[0].backend.tls.ca`.
        field: String,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

// ---------------------------------------------------------------------------------------------
// The file as written
// ---------------------------------------------------------------------------------------------

/// The experiments file as written (see the module documentation).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExperimentsFile {
    /// Experiments, first match wins.
    #[serde(default)]
    pub experiments: Vec<ExperimentSpec>,
    /// Policies evaluated on every batch without binding.
    #[serde(default)]
    pub shadows: Vec<ShadowSpec>,
}

/// One experiment as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExperimentSpec {
    /// DNS label naming the experiment.
    pub name: String,
    /// Which pods it takes.
    #[serde(default)]
    pub selector: SelectorSpec,
    /// What stays together in one arm.
    #[serde(default)]
    pub unit: Unit,
    /// Salt of the assignment hash (default: the name); change it to reshuffle units.
    #[serde(default)]
    pub salt: Option<String>,
    /// Whether `placement.dev/pin-arm` is honoured.
    #[serde(default)]
    pub allow_pin: bool,
    /// The arms, at least one.
    pub arms: Vec<ArmSpec>,
}

/// Pod selection as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SelectorSpec {
    /// Namespaces (any when empty).
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Label selector (every pod when absent).
    #[serde(default)]
    pub label_selector: Option<LabelSelector>,
}

/// One arm as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ArmSpec {
    /// DNS label naming the arm within its experiment.
    pub name: String,
    /// Relative share of units; 0 takes only pinned pods.
    pub weight: u32,
    /// Policy sent with its pods' batches (empty: the backend's default).
    #[serde(default)]
    pub policy: String,
    /// Its own decision replicas (default: the binder's).
    #[serde(default)]
    pub backend: Option<BackendSpec>,
}

/// A shadow policy as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ShadowSpec {
    /// DNS label naming the shadow.
    pub name: String,
    /// Policy evaluated.
    #[serde(default)]
    pub policy: String,
    /// Its own decision replicas (default: the binder's).
    #[serde(default)]
    pub backend: Option<BackendSpec>,
}

/// Decision replicas of an arm or shadow, as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BackendSpec {
    /// `http://host:port` URLs of `placement.v1.PlacementService` replicas.
    pub endpoints: Vec<String>,
    /// TLS to them, as the binder's `--decision-tls-*` flags.
    #[serde(default)]
    pub tls: Option<TlsSpec>,
}

/// TLS files of a backend.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TlsSpec {
    /// CA (PEM) the replicas' certificates chain to.
    pub ca: PathBuf,
    /// Client certificate (PEM) for mutual TLS.
    #[serde(default)]
    pub cert: Option<PathBuf>,
    /// Its private key (PEM).
    #[serde(default)]
    pub key: Option<PathBuf>,
    /// Name the certificates are verified against (default: each endpoint's host).
    #[serde(default)]
    pub server_name: Option<String>,
}

/// What is kept together in one arm.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// Each pod on its own (`namespace/name`).
    Pod,
    /// The pod's controller (a Deployment for ReplicaSet pods).
    #[default]
    Workload,
    /// The whole namespace.
    Namespace,
}

// ---------------------------------------------------------------------------------------------
// Validated
// ---------------------------------------------------------------------------------------------

/// A label requirement, as Kubernetes evaluates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// The label is one of the values.
    In(String, BTreeSet<String>),
    /// The label is absent or none of the values.
    NotIn(String, BTreeSet<String>),
    /// The label is present.
    Exists(String),
    /// The label is absent.
    DoesNotExist(String),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Self::In(k, v) => labels.get(k).is_some_and(|l| v.contains(l)),
            Self::NotIn(k, v) => labels.get(k).is_none_or(|l| !v.contains(l)),
            Self::Exists(k) => labels.contains_key(k),
            Self::DoesNotExist(k) => !labels.contains_key(k),
        }
    }
}

/// Which pods an experiment takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    /// Namespaces (any when empty).
    pub namespaces: HashSet<String>,
    /// Every requirement must hold (matchLabels are `In` requirements).
    pub requirements: Vec<Requirement>,
}

impl Selector {
    /// Whether a pod in `namespace` with `labels` is selected.
    pub fn matches(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        (self.namespaces.is_empty() || self.namespaces.contains(namespace))
            && self.requirements.iter().all(|r| r.matches(labels))
    }
}

/// An arm, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arm {
    /// Name.
    pub name: String,
    /// Relative share.
    pub weight: u32,
    /// Policy.
    pub policy: String,
    /// Own replicas, if any.
    pub backend: Option<BackendSpec>,
}

/// An experiment, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Experiment {
    /// Name.
    pub name: String,
    /// Pod selection.
    pub selector: Selector,
    /// What stays together.
    pub unit: Unit,
    /// Hash salt.
    pub salt: String,
    /// Whether pins are honoured.
    pub allow_pin: bool,
    /// Arms, at least one with a positive weight.
    pub arms: Vec<Arm>,
    total_weight: u64,
}

/// A shadow, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shadow {
    /// Name.
    pub name: String,
    /// Policy.
    pub policy: String,
    /// Own replicas, if any.
    pub backend: Option<BackendSpec>,
}

/// Every experiment and shadow, validated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExperimentSet {
    /// Experiments, first match wins.
    pub experiments: Vec<Experiment>,
    /// Shadows.
    pub shadows: Vec<Shadow>,
}

/// What assignment reads of a pod.
#[derive(Debug, Clone, Copy)]
pub struct PodFacts<'a> {
    /// metadata.namespace.
    pub namespace: &'a str,
    /// metadata.name.
    pub name: &'a str,
    /// metadata.labels.
    pub labels: &'a BTreeMap<String, String>,
    /// The controller owner reference.
    pub owner: Option<&'a Owner>,
    /// The `placement.dev/pin-arm` annotation.
    pub pin: Option<&'a str>,
    /// The PodGroup it names (`spec.schedulingGroup.podGroupName`), if any.
    pub pod_group: Option<&'a str>,
}

/// Where a pod goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Assignment {
    /// Index of the experiment.
    pub experiment: usize,
    /// Index of the arm in it.
    pub arm: usize,
    /// Chosen by the pin annotation rather than the hash.
    pub pinned: bool,
}

/// Whether `s` is a DNS-1123 label (what Kubernetes accepts as a label value we write).
fn dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn name(field: String, s: &str, seen: &mut HashSet<String>) -> Result<(), ConfigError> {
    if !dns_label(s) {
        return Err(invalid(
            field,
            format!("{s:?} is not a DNS label (lowercase letters, digits and '-', at most 63)"),
        ));
    }
    if !seen.insert(s.to_string()) {
        return Err(invalid(field, format!("duplicate name {s:?}")));
    }
    Ok(())
}

fn backend(field: &str, b: &Option<BackendSpec>) -> Result<(), ConfigError> {
    let Some(b) = b else { return Ok(()) };
    if b.endpoints.is_empty() {
        return Err(invalid(
            format!("{field}.endpoints"),
            "at least one endpoint is required",
        ));
    }
    for (i, e) in b.endpoints.iter().enumerate() {
        let ok = (e.starts_with("http://") || e.starts_with("https://"))
            && e.parse::<tonic::transport::Uri>().is_ok_and(|u| u.host().is_some());
        if !ok {
            return Err(invalid(
                format!("{field}.endpoints[{i}]"),
                format!("{e:?} is not an http:// or https:// URL"),
            ));
        }
    }
    if let Some(t) = &b.tls {
        if t.cert.is_some() != t.key.is_some() {
            return Err(invalid(format!("{field}.tls"), "cert and key go together"));
        }
    }
    Ok(())
}

fn selector(field: &str, s: &SelectorSpec) -> Result<Selector, ConfigError> {
    let mut out = Selector {
        namespaces: s.namespaces.iter().cloned().collect(),
        requirements: Vec::new(),
    };
    for (i, ns) in s.namespaces.iter().enumerate() {
        if !dns_label(ns) {
            return Err(invalid(
                format!("{field}.namespaces[{i}]"),
                format!("{ns:?} is not a namespace name"),
            ));
        }
    }
    let Some(ls) = &s.label_selector else {
        return Ok(out);
    };
    for (k, v) in ls.match_labels.iter().flatten() {
        if k.is_empty() {
            return Err(invalid(format!("{field}.labelSelector.matchLabels"), "empty key"));
        }
        out.requirements
            .push(Requirement::In(k.clone(), BTreeSet::from([v.clone()])));
    }
    for (i, e) in ls.match_expressions.iter().flatten().enumerate() {
        let f = format!("{field}.labelSelector.matchExpressions[{i}]");
        if e.key.is_empty() {
            return Err(invalid(format!("{f}.key"), "required"));
        }
        let values: BTreeSet<String> = e.values.iter().flatten().cloned().collect();
        let r = match e.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                return Err(invalid(
                    format!("{f}.values"),
                    format!("must be non-empty with operator {}", e.operator),
                ))
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                return Err(invalid(
                    format!("{f}.values"),
                    format!("must be empty with operator {}", e.operator),
                ))
            }
            "In" => Requirement::In(e.key.clone(), values),
            "NotIn" => Requirement::NotIn(e.key.clone(), values),
            "Exists" => Requirement::Exists(e.key.clone()),
            "DoesNotExist" => Requirement::DoesNotExist(e.key.clone()),
            other => {
                return Err(invalid(
                    format!("{f}.operator"),
                    format!("{other:?} is not one of In, NotIn, Exists, DoesNotExist"),
                ))
            }
        };
        out.requirements.push(r);
    }
    Ok(out)
}

impl ExperimentSet {
    /// Parses and validates an experiments file's text.
    pub fn parse(yaml: &str) -> Result<Self, ConfigError> {
        let file: ExperimentsFile = if yaml.trim().is_empty() {
            ExperimentsFile::default()
        } else {
            serde_saphyr::from_str(yaml).map_err(|e| ConfigError::Parse(e.to_string()))?
        };
        Self::validate(file)
    }

    /// Reads, parses and validates an experiments file, and checks its TLS files can be read.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let set = Self::parse(&text)?;
        for (field, b) in set.backends() {
            client_tls(&field, b)?;
        }
        Ok(set)
    }

    /// Validates a file as written.
    pub fn validate(file: ExperimentsFile) -> Result<Self, ConfigError> {
        let mut experiments = Vec::new();
        let mut names = HashSet::new();
        for (i, e) in file.experiments.into_iter().enumerate() {
            let f = format!("experiments[{i}]");
            name(format!("{f}.name"), &e.name, &mut names)?;
            let selector = selector(&format!("{f}.selector"), &e.selector)?;
            if e.arms.is_empty() {
                return Err(invalid(format!("{f}.arms"), "at least one arm is required"));
            }
            let mut arm_names = HashSet::new();
            let mut arms = Vec::new();
            for (j, a) in e.arms.into_iter().enumerate() {
                let af = format!("{f}.arms[{j}]");
                name(format!("{af}.name"), &a.name, &mut arm_names)?;
                backend(&format!("{af}.backend"), &a.backend)?;
                arms.push(Arm {
                    name: a.name,
                    weight: a.weight,
                    policy: a.policy,
                    backend: a.backend,
                });
            }
            let total_weight: u64 = arms.iter().map(|a| u64::from(a.weight)).sum();
            if total_weight == 0 {
                return Err(invalid(format!("{f}.arms"), "at least one arm needs a positive weight"));
            }
            if e.salt.as_deref() == Some("") {
                return Err(invalid(
                    format!("{f}.salt"),
                    "must not be empty (omit it to use the name)",
                ));
            }
            experiments.push(Experiment {
                salt: e.salt.unwrap_or_else(|| e.name.clone()),
                name: e.name,
                selector,
                unit: e.unit,
                allow_pin: e.allow_pin,
                arms,
                total_weight,
            });
        }
        let mut shadows = Vec::new();
        let mut shadow_names = HashSet::new();
        for (i, s) in file.shadows.into_iter().enumerate() {
            let f = format!("shadows[{i}]");
            name(format!("{f}.name"), &s.name, &mut shadow_names)?;
            backend(&format!("{f}.backend"), &s.backend)?;
            shadows.push(Shadow {
                name: s.name,
                policy: s.policy,
                backend: s.backend,
            });
        }
        Ok(Self { experiments, shadows })
    }

    /// The same file with only experiment `e`, reduced to its arm `arm` (all its units land
    /// there), and the shadows: one run of a per-arm comparison.
    pub fn only_arm(&self, e: usize, arm: usize) -> Option<Self> {
        let mut exp = self.experiments.get(e)?.clone();
        let mut a = exp.arms.get(arm)?.clone();
        a.weight = 1;
        exp.arms = vec![a];
        exp.total_weight = 1;
        Some(Self {
            experiments: vec![exp],
            shadows: self.shadows.clone(),
        })
    }

    /// Whether there is nothing to do (no experiment, no shadow).
    pub fn is_empty(&self) -> bool {
        self.experiments.is_empty() && self.shadows.is_empty()
    }

    /// Every backend with the path of its field.
    pub fn backends(&self) -> Vec<(String, &BackendSpec)> {
        let mut out = Vec::new();
        for (i, e) in self.experiments.iter().enumerate() {
            for (j, a) in e.arms.iter().enumerate() {
                if let Some(b) = &a.backend {
                    out.push((format!("experiments[{i}].arms[{j}].backend"), b));
                }
            }
        }
        for (i, s) in self.shadows.iter().enumerate() {
            if let Some(b) = &s.backend {
                out.push((format!("shadows[{i}].backend"), b));
            }
        }
        out
    }

    /// The experiment and arm of a pod, or `None` when no experiment selects it.
    pub fn assign(&self, pod: &PodFacts<'_>) -> Option<Assignment> {
        let (i, e) = self
            .experiments
            .iter()
            .enumerate()
            .find(|(_, e)| e.selector.matches(pod.namespace, pod.labels))?;
        if e.allow_pin {
            if let Some(arm) = pod.pin.and_then(|p| e.arms.iter().position(|a| a.name == p)) {
                return Some(Assignment {
                    experiment: i,
                    arm,
                    pinned: true,
                });
            }
        }
        Some(Assignment {
            experiment: i,
            arm: e.arm_of_unit(&e.unit_key(pod)),
            pinned: false,
        })
    }
}

impl Experiment {
    /// The unit a pod belongs to, as hashed. A gang's members (label [`placement_scheduler::labels::GANG_LABEL`])
    /// are one unit whatever the experiment's unit, and so are a PodGroup's (the pods naming it
    /// in `spec.schedulingGroup`), so the group is placed by one arm: split across arms, no arm
    /// would ever see minCount members to place it.
    pub fn unit_key(&self, pod: &PodFacts<'_>) -> String {
        if let Some(gang) = pod
            .labels
            .get(placement_scheduler::labels::GANG_LABEL)
            .filter(|g| !g.is_empty())
        {
            return format!("gang/{}/{gang}", pod.namespace);
        }
        if let Some(group) = pod.pod_group.filter(|g| !g.is_empty()) {
            return format!("podgroup/{}/{group}", pod.namespace);
        }
        match self.unit {
            Unit::Pod => format!("pod/{}/{}", pod.namespace, pod.name),
            Unit::Namespace => format!("namespace/{}", pod.namespace),
            Unit::Workload => match pod.owner {
                Some(o) => {
                    let (kind, name) = workload_of(o, pod.labels);
                    format!("workload/{}/{kind}/{name}", pod.namespace)
                }
                None => format!("pod/{}/{}", pod.namespace, pod.name),
            },
        }
    }

    /// The arm a unit lands in: its stable hash scaled onto the summed weights.
    pub fn arm_of_unit(&self, unit: &str) -> usize {
        let mut bytes = Vec::with_capacity(self.salt.len() + 1 + unit.len());
        bytes.extend_from_slice(self.salt.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(unit.as_bytes());
        let h = xxhash_rust::xxh3::xxh3_64_with_seed(&bytes, ASSIGNMENT_SEED);
        // Multiply-shift: uniform onto [0, total) without modulo bias worth mentioning.
        let point = ((u128::from(h) * u128::from(self.total_weight)) >> 64) as u64;
        let mut acc = 0u64;
        for (i, a) in self.arms.iter().enumerate() {
            acc += u64::from(a.weight);
            if point < acc {
                return i;
            }
        }
        self.arms.len() - 1
    }

    /// Sum of the arms' weights.
    pub fn total_weight(&self) -> u64 {
        self.total_weight
    }
}

/// The workload a controller owner stands for: a ReplicaSet named `<name>-<pod-template-hash>`
/// is the Deployment `<name>`; any other owner is itself.
pub fn workload_of<'a>(owner: &'a Owner, labels: &BTreeMap<String, String>) -> (&'a str, &'a str) {
    if owner.kind == "ReplicaSet" {
        if let Some(hash) = labels.get("pod-template-hash").filter(|h| !h.is_empty()) {
            if let Some(deployment) = owner
                .name
                .strip_suffix(hash.as_str())
                .and_then(|n| n.strip_suffix('-'))
                .filter(|n| !n.is_empty())
            {
                return ("Deployment", deployment);
            }
        }
    }
    (owner.kind.as_str(), owner.name.as_str())
}

fn read_tls_file(field: String, path: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|source| ConfigError::TlsFile {
        field,
        path: path.to_path_buf(),
        source,
    })
}

/// The TLS settings of a backend with its files read (`None` for plaintext).
pub fn client_tls(field: &str, b: &BackendSpec) -> Result<Option<ClientTls>, ConfigError> {
    let Some(t) = &b.tls else { return Ok(None) };
    Ok(Some(ClientTls {
        ca_pem: read_tls_file(format!("{field}.tls.ca"), &t.ca)?,
        cert_pem: t
            .cert
            .as_deref()
            .map(|p| read_tls_file(format!("{field}.tls.cert"), p))
            .transpose()?,
        key_pem: t
            .key
            .as_deref()
            .map(|p| read_tls_file(format!("{field}.tls.key"), p))
            .transpose()?,
        domain: t.server_name.clone(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
experiments:
  - name: packing
    selector:
      namespaces: [team-a, team-b]
      labelSelector:
        matchLabels: {tier: batch}
        matchExpressions:
          - {key: app, operator: In, values: [etl, ml]}
          - {key: legacy, operator: DoesNotExist}
    unit: workload
    allowPin: true
    arms:
      - {name: control, weight: 70, policy: default}
      - {name: candidate, weight: 20, policy: bin-packing}
      - name: next
        weight: 10
        policy: bin-packing
        backend: {endpoints: ["http://127.0.0.1:7001"]}
  - name: everyone
    unit: pod
    salt: s1
    arms:
      - {name: a, weight: 1, policy: default}
      - {name: b, weight: 1, policy: bin-packing}
shadows:
  - {name: packing-shadow, policy: bin-packing}
"#;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn facts<'a>(ns: &'a str, name: &'a str, l: &'a BTreeMap<String, String>) -> PodFacts<'a> {
        PodFacts {
            namespace: ns,
            name,
            labels: l,
            owner: None,
            pin: None,
            pod_group: None,
        }
    }

    #[test]
    fn a_gangs_members_are_one_unit_whatever_the_experiments_unit() {
        let set = ExperimentSet::parse(FILE).unwrap();
        let e = &set.experiments[0];
        let gang = labels(&[(placement_scheduler::labels::GANG_LABEL, "train")]);
        let keys: std::collections::BTreeSet<String> = (0..50)
            .map(|i| e.unit_key(&facts("ml", &format!("worker-{i}"), &gang)))
            .collect();
        assert_eq!(keys.into_iter().collect::<Vec<_>>(), ["gang/ml/train"]);
        // The same names outside the gang are units of their own (no owner: each pod).
        let plain = labels(&[]);
        assert_ne!(
            e.unit_key(&facts("ml", "worker-0", &plain)),
            e.unit_key(&facts("ml", "worker-1", &plain))
        );
        // Another namespace's gang of the same name is another unit.
        assert_ne!(
            e.unit_key(&facts("ml", "w", &gang)),
            e.unit_key(&facts("other", "w", &gang))
        );
    }

    #[test]
    fn a_pod_groups_members_are_one_unit_whatever_the_experiments_unit() {
        let set = ExperimentSet::parse(FILE).unwrap();
        let plain = labels(&[]);
        for e in &set.experiments {
            let keys: std::collections::BTreeSet<String> = (0..50)
                .map(|i| {
                    e.unit_key(&PodFacts {
                        pod_group: Some("train"),
                        ..facts("ml", &format!("worker-{i}"), &plain)
                    })
                })
                .collect();
            assert_eq!(keys.into_iter().collect::<Vec<_>>(), ["podgroup/ml/train"]);
        }
        // Another namespace's PodGroup of the same name is another unit.
        let e = &set.experiments[0];
        assert_ne!(
            e.unit_key(&PodFacts {
                pod_group: Some("train"),
                ..facts("ml", "w", &plain)
            }),
            e.unit_key(&PodFacts {
                pod_group: Some("train"),
                ..facts("other", "w", &plain)
            })
        );
    }

    #[test]
    fn parses_the_documented_shape() {
        let set = ExperimentSet::parse(FILE).unwrap();
        assert_eq!(set.experiments.len(), 2);
        let e = &set.experiments[0];
        assert_eq!(
            (e.unit, e.allow_pin, e.salt.as_str()),
            (Unit::Workload, true, "packing")
        );
        assert_eq!(e.total_weight(), 100);
        assert_eq!(e.selector.requirements.len(), 3);
        assert_eq!(e.arms[2].backend.as_ref().unwrap().endpoints, ["http://127.0.0.1:7001"]);
        assert_eq!(set.experiments[1].salt, "s1");
        assert_eq!(set.shadows[0].policy, "bin-packing");
        assert_eq!(set.backends().len(), 1);
        assert!(ExperimentSet::parse("").unwrap().is_empty());
    }

    #[test]
    fn selection_follows_kubernetes_label_selector_rules_first_match_wins() {
        let set = ExperimentSet::parse(FILE).unwrap();
        let batch = labels(&[("tier", "batch"), ("app", "etl")]);
        assert_eq!(set.assign(&facts("team-a", "p", &batch)).unwrap().experiment, 0);
        // Wrong namespace, a DoesNotExist label present, a value not In: the catch-all takes it.
        assert_eq!(set.assign(&facts("team-c", "p", &batch)).unwrap().experiment, 1);
        let legacy = labels(&[("tier", "batch"), ("app", "etl"), ("legacy", "")]);
        assert_eq!(set.assign(&facts("team-a", "p", &legacy)).unwrap().experiment, 1);
        let web = labels(&[("tier", "batch"), ("app", "web")]);
        assert_eq!(set.assign(&facts("team-a", "p", &web)).unwrap().experiment, 1);
        let not_in = Requirement::NotIn("app".into(), BTreeSet::from(["web".to_string()]));
        assert!(not_in.matches(&labels(&[])), "NotIn matches an absent label");
        assert!(!not_in.matches(&web));
        let only_first =
            ExperimentSet::parse("experiments: [{name: x, selector: {namespaces: [a]}, arms: [{name: a, weight: 1}]}]")
                .unwrap();
        assert!(only_first.assign(&facts("b", "p", &batch)).is_none());
    }

    #[test]
    fn a_deployments_pods_share_a_unit_across_replicasets() {
        let set = ExperimentSet::parse(FILE).unwrap();
        let e = &set.experiments[0];
        let l1 = labels(&[("pod-template-hash", "7d9f8c")]);
        let l2 = labels(&[("pod-template-hash", "55b6d4")]);
        let rs1 = Owner {
            kind: "ReplicaSet".into(),
            name: "web-7d9f8c".into(),
        };
        let rs2 = Owner {
            kind: "ReplicaSet".into(),
            name: "web-55b6d4".into(),
        };
        let p1 = PodFacts {
            owner: Some(&rs1),
            ..facts("team-a", "web-7d9f8c-abcde", &l1)
        };
        let p2 = PodFacts {
            owner: Some(&rs2),
            ..facts("team-a", "web-55b6d4-fghij", &l2)
        };
        assert_eq!(e.unit_key(&p1), "workload/team-a/Deployment/web");
        assert_eq!(e.unit_key(&p1), e.unit_key(&p2));
        // A bare ReplicaSet (no hash suffix) and a Job are themselves; no owner: the pod.
        let job = Owner {
            kind: "Job".into(),
            name: "etl-1".into(),
        };
        let empty = labels(&[]);
        let j = PodFacts {
            owner: Some(&job),
            ..facts("team-a", "etl-1-xyz", &empty)
        };
        assert_eq!(e.unit_key(&j), "workload/team-a/Job/etl-1");
        assert_eq!(e.unit_key(&facts("team-a", "solo", &empty)), "pod/team-a/solo");
        let bare = Owner {
            kind: "ReplicaSet".into(),
            name: "web".into(),
        };
        assert_eq!(workload_of(&bare, &l1), ("ReplicaSet", "web"));
    }

    #[test]
    fn pins_are_honoured_only_where_allowed_and_only_for_known_arms() {
        let set = ExperimentSet::parse(FILE).unwrap();
        let l = labels(&[("tier", "batch"), ("app", "ml")]);
        for arm in ["control", "candidate", "next"] {
            let a = set
                .assign(&PodFacts {
                    pin: Some(arm),
                    ..facts("team-b", "p", &l)
                })
                .unwrap();
            assert!(a.pinned);
            assert_eq!(set.experiments[0].arms[a.arm].name, arm);
        }
        let unknown = set
            .assign(&PodFacts {
                pin: Some("nope"),
                ..facts("team-b", "p", &l)
            })
            .unwrap();
        assert!(!unknown.pinned);
        // The second experiment does not allow pins.
        let other = set
            .assign(&PodFacts {
                pin: Some("b"),
                ..facts("x", "p", &l)
            })
            .unwrap();
        assert!(!other.pinned);
    }

    #[test]
    fn bad_files_name_the_field() {
        let cases = [
            ("experiments: [{name: x, arms: []}]", "experiments[0].arms"),
            ("experiments: [{name: X, arms: [{name: a, weight: 1}]}]", "experiments[0].name"),
            (
                "experiments: [{name: x, arms: [{name: a, weight: 0}]}]",
                "experiments[0].arms: at least one arm needs a positive weight",
            ),
            (
                "experiments: [{name: x, arms: [{name: a, weight: 1}, {name: a, weight: 1}]}]",
                "experiments[0].arms[1].name: duplicate",
            ),
            (
                "experiments: [{name: x, arms: [{name: a, weight: 1, backend: {endpoints: []}}]}]",
                "experiments[0].arms[0].backend.endpoints",
            ),
            (
                "experiments: [{name: x, arms: [{name: a, weight: 1, backend: {endpoints: [localhost]}}]}]",
                "experiments[0].arms[0].backend.endpoints[0]",
            ),
            (
                "experiments: [{name: x, selector: {labelSelector: {matchExpressions: [{key: k, operator: In}]}}, arms: [{name: a, weight: 1}]}]",
                "experiments[0].selector.labelSelector.matchExpressions[0].values",
            ),
            (
                "experiments: [{name: x, selector: {labelSelector: {matchExpressions: [{key: k, operator: Near}]}}, arms: [{name: a, weight: 1}]}]",
                "experiments[0].selector.labelSelector.matchExpressions[0].operator",
            ),
            ("experiments: [{name: x, salt: '', arms: [{name: a, weight: 1}]}]", "experiments[0].salt"),
            ("shadows: [{name: s, policy: p}, {name: s}]", "shadows[1].name"),
            (
                "shadows: [{name: s, backend: {endpoints: ['http://a:1'], tls: {ca: c, cert: x}}}]",
                "shadows[0].backend.tls: cert and key",
            ),
        ];
        for (yaml, field) in cases {
            let err = ExperimentSet::parse(yaml).unwrap_err().to_string();
            assert!(err.starts_with(field), "{yaml}\n  gave {err}\n  expected {field}");
        }
        // Unknown fields and wrong types are refused by the parser, naming the field.
        let err = ExperimentSet::parse("experiments: [{name: x, arms: [{name: a, weight: 1, polcy: p}]}]")
            .unwrap_err()
            .to_string();
        assert!(err.contains("polcy"), "{err}");
        let err = ExperimentSet::parse("experiments: [{name: x, unit: team, arms: [{name: a, weight: 1}]}]")
            .unwrap_err()
            .to_string();
        assert!(err.contains("team"), "{err}");
    }

    #[test]
    fn tls_files_are_read_at_load_naming_the_field() {
        let dir = std::env::temp_dir().join(format!("placement-exp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("experiments.yaml");
        std::fs::write(
            &path,
            "shadows: [{name: s, backend: {endpoints: ['https://a:1'], tls: {ca: /nonexistent/ca.pem}}}]",
        )
        .unwrap();
        let err = ExperimentSet::load(&path).unwrap_err().to_string();
        assert!(
            err.starts_with("shadows[0].backend.tls.ca: reading /nonexistent/ca.pem"),
            "{err}"
        );
        let missing = ExperimentSet::load(&dir.join("absent.yaml")).unwrap_err();
        assert!(matches!(missing, ConfigError::Read { .. }));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
