//! kube-scheduler extenders (`k8s.io/kube-scheduler/extender/v1`): their configuration, with
//! kube-scheduler's defaulting and validation, and the hook through which the engine calls them.
//! Plain Rust with no I/O: the HTTP calls are made by whoever implements [`ExtenderHook`] (the
//! decision service's `crate::extender`).
//!
//! The engine calls the hook where kube-scheduler calls its extenders: after the filter plugins
//! (and rules) kept some nodes, [`ExtenderHook::filter`] narrows them (its failed nodes' messages
//! are counted in the unschedulable message as plugin reasons are); when more than one node is
//! left, [`ExtenderHook::prioritize`] adds its scores (already scaled by `weight × MaxNodeScore /
//! MaxExtenderPriority`) to the nodes' totals. An extender error that is not ignorable makes the
//! pod's decision a scheduling error ([`super::Diagnosis::error`]).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::model::PodSpec;
use super::resources::is_qualified_name;
use super::snapshot::Snapshot;

/// kube-scheduler's `MaxExtenderPriority`: the highest score an extender gives.
pub const MAX_EXTENDER_PRIORITY: i64 = 10;
/// kube-scheduler's `DefaultExtenderTimeout`, used when `httpTimeout` is 0 or unset.
pub const DEFAULT_EXTENDER_TIMEOUT: Duration = Duration::from_secs(5);

/// One extender, as kube-scheduler's `Extender` configures it (after defaulting).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtenderConfig {
    /// `urlPrefix`: the verbs are posted to `<urlPrefix>/<verb>`.
    pub url_prefix: String,
    /// `filterVerb` (empty: the extender does not filter).
    pub filter_verb: String,
    /// `prioritizeVerb` (empty: the extender does not score).
    pub prioritize_verb: String,
    /// `bindVerb` (empty: the extender does not bind).
    pub bind_verb: String,
    /// `weight`: multiplies the extender's scores (positive when it prioritizes).
    pub weight: i64,
    /// `enableHTTPS`.
    pub enable_https: bool,
    /// `tlsConfig`.
    pub tls: Option<ExtenderTls>,
    /// `httpTimeout` (5s when 0 or unset).
    pub http_timeout: Duration,
    /// `nodeCacheCapable`: the extender is sent node names, not node objects.
    pub node_cache_capable: bool,
    /// `managedResources[].name`: when not empty, only pods requesting one of them are sent.
    pub managed_resources: Vec<String>,
    /// `ignorable`: an error of the extender skips it instead of failing the pod.
    pub ignorable: bool,
}

impl ExtenderConfig {
    /// kube-scheduler's `HTTPExtender.Name()`: the URL prefix.
    pub fn name(&self) -> &str {
        &self.url_prefix
    }

    /// kube-scheduler's `IsInterested`: every pod when no resource is managed, else a pod whose
    /// containers or init containers name one of the managed resources in their requests (a zero
    /// amount counts; pod overhead does not).
    pub fn is_interested(&self, pod: &PodSpec) -> bool {
        self.managed_resources.is_empty() || self.managed_resources.iter().any(|m| pod.requested_names.contains(m))
    }

    /// [`ExtenderConfig::is_interested`] from the names of the resources the pod's containers
    /// and init containers request.
    pub fn interested_in_names<'n>(&self, mut names: impl Iterator<Item = &'n str>) -> bool {
        self.managed_resources.is_empty() || names.any(|n| self.managed_resources.iter().any(|m| m == n))
    }

    /// Whether the extender filters.
    pub fn is_filter(&self) -> bool {
        !self.filter_verb.is_empty()
    }

    /// Whether the extender scores.
    pub fn is_prioritizer(&self) -> bool {
        !self.prioritize_verb.is_empty()
    }

    /// Whether the extender binds.
    pub fn is_binder(&self) -> bool {
        !self.bind_verb.is_empty()
    }
}

/// kube-scheduler's `ExtenderTLSConfig` (file contents already decoded from base64).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtenderTls {
    /// `insecure`: no verification of the server's certificate.
    pub insecure: bool,
    /// `serverName`: the name checked in the server's certificate (default: the URL's host).
    pub server_name: String,
    /// `certFile`: client certificate (PEM) file.
    pub cert_file: String,
    /// `keyFile`: client key (PEM) file.
    pub key_file: String,
    /// `caFile`: trusted root certificates (PEM) file.
    pub ca_file: String,
    /// `certData`: client certificate (PEM), takes precedence over `certFile`.
    pub cert_data: Vec<u8>,
    /// `keyData`: client key (PEM), takes precedence over `keyFile`.
    pub key_data: Vec<u8>,
    /// `caData`: trusted root certificates (PEM), take precedence over `caFile`.
    pub ca_data: Vec<u8>,
}

// ---------------------------------------------------------------------------------------------
// The file's shape (kube-scheduler's v1 field names)
// ---------------------------------------------------------------------------------------------

/// `extenders[i]` as written in a KubeSchedulerConfiguration (or placement's own file).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtenderSpec {
    #[serde(default)]
    url_prefix: String,
    #[serde(default)]
    filter_verb: String,
    #[serde(default)]
    preempt_verb: String,
    #[serde(default)]
    prioritize_verb: String,
    #[serde(default)]
    weight: i64,
    #[serde(default)]
    bind_verb: String,
    #[serde(default, rename = "enableHTTPS")]
    enable_https: bool,
    tls_config: Option<TlsSpec>,
    http_timeout: Option<String>,
    #[serde(default)]
    node_cache_capable: bool,
    #[serde(default)]
    managed_resources: Vec<ManagedResourceSpec>,
    #[serde(default)]
    ignorable: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TlsSpec {
    #[serde(default)]
    insecure: bool,
    #[serde(default)]
    server_name: String,
    #[serde(default)]
    cert_file: String,
    #[serde(default)]
    key_file: String,
    #[serde(default)]
    ca_file: String,
    #[serde(default)]
    cert_data: String,
    #[serde(default)]
    key_data: String,
    #[serde(default)]
    ca_data: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ManagedResourceSpec {
    #[serde(default)]
    name: String,
    #[serde(default)]
    ignored_by_scheduler: bool,
}

/// A field of an extender's configuration that is refused: its path and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ExtenderConfigError {
    /// Path of the field, e.g. `extenders[0].weight`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

fn refuse(field: String, message: impl Into<String>) -> ExtenderConfigError {
    ExtenderConfigError {
        field,
        message: message.into(),
    }
}

/// Maps `extenders` (at `path`, e.g. `extenders`) with kube-scheduler's defaulting (`httpTimeout`
/// 0 means 5s) and validation (`validateExtenders`: a positive weight for a prioritizer, managed
/// resources that are unique extended resource names, at most one binder), plus what placement
/// cannot follow (`preemptVerb`, `ignoredByScheduler`) and what cannot work (no `urlPrefix`).
/// Ignorable extenders go last, as kube-scheduler orders them.
pub fn extenders_from_specs(path: &str, specs: &[ExtenderSpec]) -> Result<Vec<ExtenderConfig>, ExtenderConfigError> {
    let mut out = Vec::with_capacity(specs.len());
    let mut binders = 0;
    let mut managed = HashSet::new();
    for (i, s) in specs.iter().enumerate() {
        let at = format!("{path}[{i}]");
        if s.url_prefix.is_empty() {
            return Err(refuse(format!("{at}.urlPrefix"), "required"));
        }
        if !s.url_prefix.starts_with("http://") && !s.url_prefix.starts_with("https://") {
            return Err(refuse(
                format!("{at}.urlPrefix"),
                format!("{:?}: must be an http:// or https:// URL", s.url_prefix),
            ));
        }
        if !s.preempt_verb.is_empty() {
            return Err(refuse(
                format!("{at}.preemptVerb"),
                "not supported: placement's preemption does not call extenders",
            ));
        }
        if !s.prioritize_verb.is_empty() && s.weight <= 0 {
            return Err(refuse(
                format!("{at}.weight"),
                format!("Invalid value: {}: must have a positive weight applied to it", s.weight),
            ));
        }
        if !s.bind_verb.is_empty() {
            binders += 1;
        }
        let mut resources = Vec::with_capacity(s.managed_resources.len());
        for (j, r) in s.managed_resources.iter().enumerate() {
            let field = format!("{at}.managedResources[{j}].name");
            if let Some(why) = extended_resource_name_problem(&r.name) {
                return Err(refuse(field, format!("Invalid value: {:?}: {why}", r.name)));
            }
            if !managed.insert(r.name.clone()) {
                return Err(refuse(
                    field,
                    format!("Invalid value: {:?}: duplicate extender managed resource name", r.name),
                ));
            }
            if r.ignored_by_scheduler {
                return Err(refuse(
                    format!("{at}.managedResources[{j}].ignoredByScheduler"),
                    "not supported: placement checks every requested resource",
                ));
            }
            resources.push(r.name.clone());
        }
        let http_timeout = match s.http_timeout.as_deref() {
            None => Duration::ZERO,
            Some(t) => parse_go_duration(t).map_err(|e| refuse(format!("{at}.httpTimeout"), e))?,
        };
        let tls = match &s.tls_config {
            None => None,
            Some(t) => Some(ExtenderTls {
                insecure: t.insecure,
                server_name: t.server_name.clone(),
                cert_file: t.cert_file.clone(),
                key_file: t.key_file.clone(),
                ca_file: t.ca_file.clone(),
                cert_data: base64_field(&format!("{at}.tlsConfig.certData"), &t.cert_data)?,
                key_data: base64_field(&format!("{at}.tlsConfig.keyData"), &t.key_data)?,
                ca_data: base64_field(&format!("{at}.tlsConfig.caData"), &t.ca_data)?,
            }),
        };
        out.push(ExtenderConfig {
            url_prefix: s.url_prefix.clone(),
            filter_verb: s.filter_verb.clone(),
            prioritize_verb: s.prioritize_verb.clone(),
            bind_verb: s.bind_verb.clone(),
            weight: s.weight,
            enable_https: s.enable_https,
            tls,
            http_timeout: if http_timeout.is_zero() {
                DEFAULT_EXTENDER_TIMEOUT
            } else {
                http_timeout
            },
            node_cache_capable: s.node_cache_capable,
            managed_resources: resources,
            ignorable: s.ignorable,
        });
    }
    if binders > 1 {
        return Err(refuse(
            path.to_string(),
            format!(
                "Invalid value: \"found {binders} extenders implementing bind\": only one extender can implement bind"
            ),
        ));
    }
    // kube-scheduler's buildExtenders: ignorable extenders at the tail, the order otherwise kept.
    out.sort_by_key(|e| e.ignorable);
    Ok(out)
}

/// Why `name` is not an extended resource name (kube's `validateExtendedResourceName`).
fn extended_resource_name_problem(name: &str) -> Option<&'static str> {
    if !is_qualified_name(name) {
        return Some("must be a qualified name");
    }
    let Some((prefix, _)) = name.split_once('/') else {
        return Some("is an invalid extended resource name: a domain prefix is required");
    };
    if prefix == "kubernetes.io" || prefix.ends_with(".kubernetes.io") {
        return Some("is an invalid extended resource name: the kubernetes.io domain is reserved");
    }
    if name.starts_with("requests.") {
        return Some("must not start with \"requests.\"");
    }
    None
}

/// A `[]byte` field of the configuration: base64 as Go's JSON decoding reads it.
fn base64_field(field: &str, text: &str) -> Result<Vec<u8>, ExtenderConfigError> {
    use base64::Engine as _;
    if text.is_empty() {
        return Ok(Vec::new());
    }
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| refuse(field.to_string(), format!("not base64: {e}")))
}

/// Parses a Go duration (`metav1.Duration`): a sequence of decimal numbers with units `ns`,
/// `us`/`µs`, `ms`, `s`, `m`, `h`, e.g. `30s`, `1m30s`, `1.5s`, `500ms`; `0` alone is zero.
pub fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("time: invalid duration {text:?}");
    let s = text.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.starts_with('-') {
        return Err(format!("{text:?}: must not be negative"));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    if s.is_empty() {
        return Err(bad());
    }
    let mut rest = s;
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("time: missing unit in duration {text:?}"))?;
        if num_end == 0 {
            return Err(bad());
        }
        let number: f64 = rest[..num_end].parse().map_err(|_| bad())?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            u => return Err(format!("time: unknown unit {u:?} in duration {text:?}")),
        };
        total += number * scale;
        rest = &rest[unit_end..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| bad())
}

// ---------------------------------------------------------------------------------------------
// The hook
// ---------------------------------------------------------------------------------------------

/// What an extender's filter left of the nodes, by index into the snapshot's nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtenderFiltered {
    /// The nodes that pass, a subset of those sent.
    pub feasible: Vec<usize>,
    /// `FailedNodes`: node index and message (evicting pods might help).
    pub failed: Vec<(usize, Arc<str>)>,
    /// `FailedAndUnresolvableNodes`: node index and message.
    pub failed_unresolvable: Vec<(usize, Arc<str>)>,
}

/// The extenders of a policy, called by the engine for each pod they are interested in. Calls
/// are synchronous: the engine runs on a blocking thread and places a batch's pods in order.
pub trait ExtenderHook: Sync {
    /// Whether some extender filters or scores `pod`.
    fn interested(&self, pod: &PodSpec) -> bool;

    /// Runs the filtering extenders interested in `pod` in order over `nodes` (indices into
    /// `snapshot.nodes()`), each on what the one before kept. `Err` is kube-scheduler's error
    /// text of an extender that failed and is not ignorable; ignorable ones are skipped.
    fn filter(&self, snapshot: &Snapshot, pod: &PodSpec, nodes: &[usize]) -> Result<ExtenderFiltered, String>;

    /// Runs the prioritizing extenders interested in `pod` over `nodes` and returns, per node
    /// index, the sum of their scaled scores (`score × weight × MaxNodeScore /
    /// MaxExtenderPriority`). Errors give no score, as in kube-scheduler.
    fn prioritize(&self, snapshot: &Snapshot, pod: &PodSpec, nodes: &[usize]) -> Vec<(usize, i64)>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        assert_eq!(parse_go_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_go_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_go_duration("0"), Ok(Duration::ZERO));
        assert!(parse_go_duration("30").unwrap_err().contains("missing unit"));
        assert!(parse_go_duration("3x").unwrap_err().contains("unknown unit"));
        assert!(parse_go_duration("-1s").is_err());
        assert!(parse_go_duration("").is_err());
    }

    #[test]
    fn managed_resources_select_the_pods_sent() {
        let spec = ExtenderSpec {
            url_prefix: "http://e".into(),
            managed_resources: vec![ManagedResourceSpec {
                name: "example.com/foo".into(),
                ignored_by_scheduler: false,
            }],
            ..ExtenderSpec::default()
        };
        let e = &extenders_from_specs("extenders", &[spec]).unwrap()[0];
        let mut pod = PodSpec::default();
        assert!(!e.is_interested(&pod));
        // Overhead counts in the effective requests, not in what the containers request.
        pod.requests.scalars.push((Arc::from("example.com/foo"), 1));
        assert!(!e.is_interested(&pod));
        pod.requested_names.insert("cpu");
        assert!(!e.is_interested(&pod));
        pod.requested_names.insert("example.com/foo");
        assert!(e.is_interested(&pod));
        let all = ExtenderConfig {
            managed_resources: vec![],
            ..e.clone()
        };
        assert!(all.is_interested(&PodSpec::default()));
    }
}
