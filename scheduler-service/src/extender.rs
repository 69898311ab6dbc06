//! HTTP calls to kube-scheduler extenders, in the extender v1 protocol
//! (`k8s.io/kube-scheduler/extender/v1`) exactly as kube-scheduler's `HTTPExtender` makes them:
//! `POST <urlPrefix>/<verb>` with a JSON body whose fields carry Go's names (the Go types have no
//! JSON tags: `Pod`, `Nodes`, `NodeNames`, `PodName`, …), answers read with Go's case-insensitive
//! field matching, a per-extender timeout, HTTPS with the extender's `tlsConfig`, and
//! kube-scheduler's error texts.
//!
//! [`HttpExtenders`] is the engine's [`ExtenderHook`] for one request (it blocks its blocking
//! thread on the runtime for each call); [`Extender::bind`] is the binder's `bindVerb` call.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use serde_json::{json, Map, Value};

mod tls;

use tls::tls_config;

use crate::engine::extender::{ExtenderConfig, ExtenderFiltered, ExtenderHook, MAX_EXTENDER_PRIORITY};
use crate::engine::framework::MAX_NODE_SCORE;
use crate::engine::model::{PodSpec, TaintEffect};
use crate::engine::resources::Resources;
use crate::engine::snapshot::Snapshot;

/// Why an extender could not be set up (its TLS material).
#[derive(Debug, thiserror::Error)]
pub enum ExtenderSetupError {
    /// A file of `tlsConfig` cannot be read.
    #[error("extender {extender}: tlsConfig.{field} {path}: {source}")]
    Read {
        /// The extender's URL prefix.
        extender: String,
        /// The field naming the file.
        field: &'static str,
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The TLS material is not usable.
    #[error("extender {extender}: tlsConfig: {message}")]
    Tls {
        /// The extender's URL prefix.
        extender: String,
        /// What is wrong.
        message: String,
    },
}

/// Labels of an extender call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ExtenderLabels {
    /// The extender's URL prefix (kube-scheduler's name of an extender).
    pub extender: String,
    /// `filter`, `prioritize` or `bind`.
    pub verb: &'static str,
}

/// Per-extender metrics: calls, errors and latency by verb; and the time each pod's scheduling
/// spent in extender calls.
#[derive(Debug, Clone)]
pub struct ExtenderMetrics {
    /// Calls made.
    pub calls: Family<ExtenderLabels, Counter>,
    /// Calls that failed (no answer, not 200, an answer that does not decode, or its `Error`).
    pub errors: Family<ExtenderLabels, Counter>,
    /// Call latency, seconds.
    pub latency: Family<ExtenderLabels, Histogram>,
    /// Per pod sent to an extender: the time its filter and prioritize calls took, seconds.
    pub pod_seconds: Histogram,
    /// The same durations, each kept, when [`ExtenderMetrics::keeping_samples`] asked for them
    /// (`binder-agent simulate` reports their percentiles).
    samples: Option<Arc<parking_lot::Mutex<Vec<Duration>>>>,
}

impl Default for ExtenderMetrics {
    fn default() -> Self {
        Self {
            calls: Family::default(),
            errors: Family::default(),
            latency: Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.000_1, 2.0, 18))),
            pod_seconds: Histogram::new(exponential_buckets(0.000_1, 2.0, 18)),
            samples: None,
        }
    }
}

impl ExtenderMetrics {
    /// Also keeps every per-pod duration (see [`ExtenderMetrics::samples`]).
    pub fn keeping_samples(mut self) -> Self {
        self.samples = Some(Arc::default());
        self
    }

    /// The per-pod durations kept so far (empty unless [`ExtenderMetrics::keeping_samples`]).
    pub fn samples(&self) -> Vec<Duration> {
        self.samples.as_ref().map(|s| s.lock().clone()).unwrap_or_default()
    }

    fn observe_pod(&self, took: Duration) {
        self.pod_seconds.observe(took.as_secs_f64());
        if let Some(s) = &self.samples {
            s.lock().push(took);
        }
    }

    /// Registers the metrics (`extender_calls`, `extender_errors`, `extender_call_seconds`,
    /// `extender_pod_seconds`) in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register("extender_calls", "Calls to scheduler extenders", self.calls.clone());
        registry.register(
            "extender_errors",
            "Failed calls to scheduler extenders",
            self.errors.clone(),
        );
        registry.register(
            "extender_call_seconds",
            "Latency of calls to scheduler extenders",
            self.latency.clone(),
        );
        registry.register(
            "extender_pod_seconds",
            "Time a pod's scheduling spent in extender calls (filter and prioritize)",
            self.pod_seconds.clone(),
        );
    }
}

type HttpClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// One extender, ready to be called.
#[derive(Clone)]
pub struct Extender {
    config: ExtenderConfig,
    client: HttpClient,
    metrics: ExtenderMetrics,
}

impl std::fmt::Debug for Extender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extender").field("config", &self.config).finish()
    }
}

/// What went wrong with one call, as kube-scheduler words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CallError(pub String);

impl Extender {
    /// Prepares `config`'s client (its TLS material read now); `metrics` count its calls.
    pub fn new(config: ExtenderConfig, metrics: ExtenderMetrics) -> Result<Self, ExtenderSetupError> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        let tls = tls_config(&config)?;
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = Client::builder(hyper_util::rt::TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .build(connector);
        Ok(Self {
            config,
            client,
            metrics,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ExtenderConfig {
        &self.config
    }

    /// kube-scheduler's `send`: posts `body` to `<urlPrefix>/<verb>` and decodes a 200's JSON.
    async fn send(&self, kind: &'static str, verb: &str, body: Vec<u8>) -> Result<Value, CallError> {
        let labels = ExtenderLabels {
            extender: self.config.url_prefix.clone(),
            verb: kind,
        };
        self.metrics.calls.get_or_create(&labels).inc();
        let started = Instant::now();
        let span = tracing::debug_span!("extender", extender = %self.config.url_prefix, verb = kind);
        let result = tracing::Instrument::instrument(self.post(verb, body), span).await;
        self.metrics
            .latency
            .get_or_create(&labels)
            .observe(started.elapsed().as_secs_f64());
        if let Err(e) = &result {
            self.metrics.errors.get_or_create(&labels).inc();
            tracing::debug!(extender = %self.config.url_prefix, verb = kind, error = %e, "extender call failed");
        }
        result
    }

    async fn post(&self, verb: &str, body: Vec<u8>) -> Result<Value, CallError> {
        let url = format!("{}/{}", self.config.url_prefix.trim_end_matches('/'), verb);
        let go_error = |e: &dyn std::fmt::Display| CallError(format!("Post {url:?}: {e}"));
        let request = http::Request::post(&url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| go_error(&e))?;
        let deadline = tokio::time::Instant::now() + self.config.http_timeout;
        let response = match tokio::time::timeout_at(deadline, self.client.request(request)).await {
            Err(_) => {
                return Err(go_error(
                    &"context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
                ))
            }
            Ok(Err(e)) => return Err(go_error(&transport_error(&e, &url))),
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        if status != http::StatusCode::OK {
            return Err(CallError(format!(
                "failed {verb} with extender at URL {url}, code {}",
                status.as_u16()
            )));
        }
        let bytes = match tokio::time::timeout_at(deadline, response.into_body().collect()).await {
            Err(_) => {
                return Err(go_error(
                    &"context deadline exceeded (Client.Timeout or context cancellation while reading body)",
                ))
            }
            Ok(Err(e)) => return Err(go_error(&error_chain(&e))),
            Ok(Ok(b)) => b.to_bytes(),
        };
        serde_json::from_slice(&bytes).map_err(|e| CallError(go_json_error(&bytes, &e)))
    }

    /// `bindVerb`: asks the extender to bind the pod (kube-scheduler's `ExtenderBindingArgs`).
    pub async fn bind(&self, namespace: &str, name: &str, uid: &str, node: &str) -> Result<(), CallError> {
        let body = json!({"PodName": name, "PodNamespace": namespace, "PodUID": uid, "Node": node});
        let answer = self
            .send("bind", &self.config.bind_verb, body.to_string().into_bytes())
            .await?;
        match go_field(&answer, "Error").and_then(Value::as_str) {
            Some(e) if !e.is_empty() => {
                let labels = ExtenderLabels {
                    extender: self.config.url_prefix.clone(),
                    verb: "bind",
                };
                self.metrics.errors.get_or_create(&labels).inc();
                Err(CallError(e.to_string()))
            }
            _ => Ok(()),
        }
    }

    /// kube-scheduler's `Filter` over `nodes` (indices into `snapshot`'s nodes).
    async fn filter(
        &self,
        body: Vec<u8>,
        nodes: &[usize],
        names: &HashMap<&str, usize>,
    ) -> Result<ExtenderFiltered, CallError> {
        let answer = self.send("filter", &self.config.filter_verb, body).await?;
        if !answer.is_object() {
            return Err(CallError(format!(
                "json: cannot unmarshal {} into Go value of type v1.ExtenderFilterResult",
                go_type(&answer)
            )));
        }
        if let Some(e) = go_field(&answer, "Error")
            .and_then(Value::as_str)
            .filter(|e| !e.is_empty())
        {
            let labels = ExtenderLabels {
                extender: self.config.url_prefix.clone(),
                verb: "filter",
            };
            self.metrics.errors.get_or_create(&labels).inc();
            return Err(CallError(e.to_string()));
        }
        filter_result(
            &answer,
            self.config.node_cache_capable,
            &self.config.url_prefix,
            nodes,
            names,
        )
    }

    /// kube-scheduler's `Prioritize`: the raw `HostPriorityList`, by node index.
    async fn prioritize(&self, body: Vec<u8>, names: &HashMap<&str, usize>) -> Result<Vec<(usize, i64)>, CallError> {
        let answer = self.send("prioritize", &self.config.prioritize_verb, body).await?;
        let list = match &answer {
            Value::Null => return Ok(Vec::new()),
            Value::Array(list) => list,
            other => return Err(unmarshal(other, "v1.HostPriorityList")),
        };
        let mut out = Vec::with_capacity(list.len());
        for entry in list {
            let host = go_field(entry, "Host").and_then(Value::as_str).unwrap_or_default();
            let score = match go_field(entry, "Score") {
                None | Some(Value::Null) => 0,
                Some(v) => v.as_i64().ok_or_else(|| unmarshal(v, "int64"))?,
            };
            if let Some(&i) = names.get(host) {
                out.push((i, score));
            }
        }
        Ok(out)
    }
}

/// kube-scheduler's `HTTPExtender.Filter` after the call: the answer (not an `Error`) as the
/// feasible nodes and the failed ones, by index. With `nodeCacheCapable`, `NodeNames` must name
/// nodes that were sent (kube's error otherwise); `Nodes.items` are taken as given.
fn filter_result(
    answer: &Value,
    node_cache_capable: bool,
    url_prefix: &str,
    nodes: &[usize],
    names: &HashMap<&str, usize>,
) -> Result<ExtenderFiltered, CallError> {
    let sent: std::collections::HashSet<usize> = nodes.iter().copied().collect();
    let lookup = |name: &str| -> Result<usize, CallError> {
        names.get(name).copied().filter(|i| sent.contains(i)).ok_or_else(|| {
            CallError(format!(
                "extender {:?} claims a filtered node {name:?} which is not found in the input node list",
                url_prefix
            ))
        })
    };
    let mut out = ExtenderFiltered::default();
    let node_names = go_field(answer, "NodeNames").filter(|v| !v.is_null());
    let node_list = go_field(answer, "Nodes").filter(|v| !v.is_null());
    match (node_cache_capable, node_names, node_list) {
        (true, Some(list), _) => {
            let list = list.as_array().ok_or_else(|| unmarshal(list, "[]string"))?;
            for n in list {
                out.feasible
                    .push(lookup(n.as_str().ok_or_else(|| unmarshal(n, "string"))?)?);
            }
        }
        (_, _, Some(list)) => {
            let items = go_field(list, "Items")
                .filter(|v| !v.is_null())
                .map(|v| v.as_array().ok_or_else(|| unmarshal(v, "[]v1.Node")))
                .transpose()?;
            // kube-scheduler takes the returned Node objects as they are (`convertToNodeInfos`
            // checks no name against the input): a node of the snapshot that was not sent is
            // accepted too. One the snapshot does not hold has nothing to place a pod on and
            // is left out.
            for n in items.into_iter().flatten() {
                let name = go_field(n, "metadata")
                    .and_then(|m| go_field(m, "name"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if let Some(&i) = names.get(name) {
                    out.feasible.push(i);
                }
            }
        }
        _ => {}
    }
    let failed_map = |key: &str| -> Result<Vec<(usize, Arc<str>)>, CallError> {
        let Some(map) = go_field(answer, key).filter(|v| !v.is_null()) else {
            return Ok(Vec::new());
        };
        let map = map.as_object().ok_or_else(|| unmarshal(map, "v1.FailedNodesMap"))?;
        let mut out = Vec::with_capacity(map.len());
        for (name, message) in map {
            let message = message.as_str().ok_or_else(|| unmarshal(message, "string"))?;
            // A failed node that was not sent has no status to set; kube-scheduler would
            // count it, placement cannot name it among the snapshot's nodes otherwise.
            if let Some(&i) = names.get(name.as_str()) {
                out.push((i, Arc::from(message)));
            }
        }
        Ok(out)
    };
    out.failed_unresolvable = failed_map("FailedAndUnresolvableNodes")?;
    // FailedAndUnresolvableNodes takes precedence for a node in both.
    let unresolvable: std::collections::HashSet<usize> = out.failed_unresolvable.iter().map(|(i, _)| *i).collect();
    out.failed = failed_map("FailedNodes")?
        .into_iter()
        .filter(|(i, _)| !unresolvable.contains(i))
        .collect();
    Ok(out)
}

fn unmarshal(v: &Value, go: &str) -> CallError {
    CallError(format!(
        "json: cannot unmarshal {} into Go value of type {go}",
        go_type(v)
    ))
}

/// Go's name of a JSON value's kind in its unmarshal errors.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Go's `json.Decoder` message for the common garbage answers; serde's otherwise.
fn go_json_error(bytes: &[u8], e: &serde_json::Error) -> String {
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        None => "EOF".to_string(),
        Some(&b) if !matches!(b, b'{' | b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n') => {
            format!("invalid character {:?} looking for beginning of value", b as char)
        }
        Some(_) => format!("invalid JSON: {e}"),
    }
}

/// A field of a JSON object as Go's `encoding/json` finds it: the exact name, else a name equal
/// to it ignoring case.
pub fn go_field<'v>(v: &'v Value, name: &str) -> Option<&'v Value> {
    let map = v.as_object()?;
    map.get(name)
        .or_else(|| map.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v))
}

/// A failed connection in Go's words (`dial tcp 127.0.0.1:8888: connect: connection refused`)
/// when the cause is one Go names so; the error chain otherwise.
fn transport_error(e: &(dyn std::error::Error + 'static), url: &str) -> String {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            let addr = url
                .split_once("://")
                .map(|(_, rest)| rest.split('/').next().unwrap_or(rest))
                .unwrap_or(url);
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => {
                    return format!("dial tcp {addr}: connect: connection refused")
                }
                std::io::ErrorKind::ConnectionReset => return format!("read tcp {addr}: connection reset by peer"),
                _ => {}
            }
        }
        source = s.source();
    }
    error_chain(e)
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Kubernetes-shaped objects
// ---------------------------------------------------------------------------------------------

/// A quantity as Kubernetes writes it: cpu in cores or millicores, the rest plain.
fn cpu_quantity(milli: i64) -> String {
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

fn resource_list(r: &Resources, pods: Option<i64>) -> Value {
    let mut m = Map::new();
    if r.milli_cpu != 0 || pods.is_some() {
        m.insert("cpu".into(), Value::String(cpu_quantity(r.milli_cpu)));
    }
    if r.memory != 0 || pods.is_some() {
        m.insert("memory".into(), Value::String(r.memory.to_string()));
    }
    if r.ephemeral_storage != 0 {
        m.insert(
            "ephemeral-storage".into(),
            Value::String(r.ephemeral_storage.to_string()),
        );
    }
    for (name, v) in &r.scalars {
        m.insert(name.to_string(), Value::String(v.to_string()));
    }
    if let Some(p) = pods {
        m.insert("pods".into(), Value::String(p.to_string()));
    }
    Value::Object(m)
}

fn effect(e: TaintEffect) -> &'static str {
    match e {
        TaintEffect::NoSchedule => "NoSchedule",
        TaintEffect::PreferNoSchedule => "PreferNoSchedule",
        TaintEffect::NoExecute => "NoExecute",
    }
}

/// The pod as a `v1.Pod` (the fields placement receives).
pub fn pod_object(pod: &PodSpec) -> Value {
    let containers: Vec<Value> = pod
        .containers
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "image": c.image,
                "resources": {"requests": resource_list(&c.requests, None)},
            })
        })
        .collect();
    let mut spec = Map::new();
    spec.insert("containers".into(), Value::Array(containers));
    if !pod.node_selector.is_empty() {
        spec.insert(
            "nodeSelector".into(),
            Value::Object(
                pod.node_selector
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect(),
            ),
        );
    }
    if let Some(n) = pod.node_name.as_deref().filter(|n| !n.is_empty()) {
        spec.insert("nodeName".into(), Value::String(n.to_string()));
    }
    spec.insert("priority".into(), json!(pod.priority));
    spec.insert(
        "preemptionPolicy".into(),
        Value::String(
            match pod.preemption_policy {
                crate::engine::model::PreemptionPolicy::PreemptLowerPriority => "PreemptLowerPriority",
                crate::engine::model::PreemptionPolicy::Never => "Never",
            }
            .into(),
        ),
    );
    let claims: Vec<Value> = pod
        .volumes
        .iter()
        .filter_map(|v| match &v.source {
            crate::engine::model::VolumeSource::Claim {
                claim_name,
                ephemeral: false,
            } => Some(json!({"name": &*v.name, "persistentVolumeClaim": {"claimName": &**claim_name}})),
            crate::engine::model::VolumeSource::Claim { ephemeral: true, .. } => {
                Some(json!({"name": &*v.name, "ephemeral": {}}))
            }
            _ => None,
        })
        .collect();
    if !claims.is_empty() {
        spec.insert("volumes".into(), Value::Array(claims));
    }
    if !pod.tolerations.is_empty() {
        spec.insert(
            "tolerations".into(),
            Value::Array(
                pod.tolerations
                    .iter()
                    .map(|t| {
                        let mut m = Map::new();
                        if !t.key.is_empty() {
                            m.insert("key".into(), Value::String(t.key.clone()));
                        }
                        m.insert("operator".into(), Value::String(format!("{:?}", t.operator)));
                        if !t.value.is_empty() {
                            m.insert("value".into(), Value::String(t.value.clone()));
                        }
                        if let Some(e) = t.effect {
                            m.insert("effect".into(), Value::String(effect(e).into()));
                        }
                        Value::Object(m)
                    })
                    .collect(),
            ),
        );
    }
    let mut metadata = Map::new();
    metadata.insert("name".into(), Value::String(pod.name.clone()));
    metadata.insert("namespace".into(), Value::String(pod.namespace.clone()));
    metadata.insert("uid".into(), Value::String(pod.uid.to_string()));
    if !pod.labels.is_empty() {
        metadata.insert("labels".into(), json!(pod.labels));
    }
    if !pod.annotations.is_empty() {
        metadata.insert("annotations".into(), json!(pod.annotations));
    }
    json!({"metadata": metadata, "spec": spec, "status": {}})
}

/// The node as a `v1.Node` (the fields placement receives).
pub fn node_object(node: &crate::engine::model::NodeSpec) -> Value {
    let mut metadata = Map::new();
    metadata.insert("name".into(), Value::String(node.name.clone()));
    if !node.labels.is_empty() {
        metadata.insert("labels".into(), json!(node.labels));
    }
    let mut spec = Map::new();
    if node.unschedulable {
        spec.insert("unschedulable".into(), Value::Bool(true));
    }
    if !node.taints.is_empty() {
        spec.insert(
            "taints".into(),
            Value::Array(
                node.taints
                    .iter()
                    .map(|t| {
                        let mut m = Map::new();
                        m.insert("key".into(), Value::String(t.key.clone()));
                        if !t.value.is_empty() {
                            m.insert("value".into(), Value::String(t.value.clone()));
                        }
                        m.insert("effect".into(), Value::String(effect(t.effect).into()));
                        Value::Object(m)
                    })
                    .collect(),
            ),
        );
    }
    let allocatable = resource_list(&node.allocatable, Some(node.allowed_pods));
    let mut status = Map::new();
    status.insert("capacity".into(), allocatable.clone());
    status.insert("allocatable".into(), allocatable);
    if !node.declared_features.is_empty() {
        status.insert(
            "declaredFeatures".into(),
            Value::Array(
                node.declared_features
                    .iter()
                    .map(|f| Value::String(f.to_string()))
                    .collect(),
            ),
        );
    }
    json!({"metadata": metadata, "spec": spec, "status": status})
}

// ---------------------------------------------------------------------------------------------
// The engine's hook
// ---------------------------------------------------------------------------------------------

/// A policy's extenders, prepared once per policy set.
#[derive(Debug, Clone, Default)]
pub struct ExtenderSet {
    extenders: Vec<Extender>,
    metrics: ExtenderMetrics,
}

impl ExtenderSet {
    /// Prepares `configs` (in their order), counting their calls in `metrics`.
    pub fn new(configs: &[ExtenderConfig], metrics: &ExtenderMetrics) -> Result<Self, ExtenderSetupError> {
        Ok(Self {
            extenders: configs
                .iter()
                .map(|c| Extender::new(c.clone(), metrics.clone()))
                .collect::<Result<_, _>>()?,
            metrics: metrics.clone(),
        })
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.extenders.is_empty()
    }

    /// The extenders, in call order.
    pub fn extenders(&self) -> &[Extender] {
        &self.extenders
    }

    /// The binding extender interested in a pod (kube-scheduler's `extendersBinding`: the first
    /// binder that is interested), from the names of the resources the pod's containers and
    /// init containers request (kube-scheduler's `IsInterested` reads them so).
    pub fn binder_for_names<'n>(&self, names: impl Iterator<Item = &'n str> + Clone) -> Option<&Extender> {
        self.extenders
            .iter()
            .find(|e| e.config.is_binder() && e.config.interested_in_names(names.clone()))
    }

    /// Whether some extender binds.
    pub fn has_binder(&self) -> bool {
        self.extenders.iter().any(|e| e.config.is_binder())
    }

    /// The hook for one request over `snapshot`: calls block the current (blocking) thread on
    /// `runtime`.
    pub fn hook<'s>(&'s self, runtime: tokio::runtime::Handle, snapshot: &'s Snapshot) -> HttpExtenders<'s> {
        HttpExtenders {
            set: self,
            snapshot,
            runtime,
            names: OnceLock::new(),
            node_json: (0..snapshot.nodes().len()).map(|_| OnceLock::new()).collect(),
            pod_time: parking_lot::Mutex::new(None),
        }
    }
}

/// [`ExtenderHook`] over HTTP for one request: node objects are serialized once per request.
pub struct HttpExtenders<'s> {
    set: &'s ExtenderSet,
    snapshot: &'s Snapshot,
    runtime: tokio::runtime::Handle,
    names: OnceLock<HashMap<&'s str, usize>>,
    node_json: Vec<OnceLock<String>>,
    /// The pod whose extender calls are being timed, and their time so far (observed when the
    /// next pod's calls begin, or when the hook is dropped).
    pod_time: parking_lot::Mutex<Option<(Arc<str>, Duration)>>,
}

impl HttpExtenders<'_> {
    /// Adds `took` to `pod`'s time in extender calls.
    fn add_time(&self, pod: &PodSpec, took: Duration) {
        let mut current = self.pod_time.lock();
        match current.as_mut() {
            Some((uid, total)) if *uid == pod.uid => *total += took,
            _ => {
                if let Some((_, total)) = current.replace((pod.uid.clone(), took)) {
                    self.set.metrics.observe_pod(total);
                }
            }
        }
    }
}

impl Drop for HttpExtenders<'_> {
    fn drop(&mut self) {
        if let Some((_, total)) = self.pod_time.get_mut().take() {
            self.set.metrics.observe_pod(total);
        }
    }
}

impl<'s> HttpExtenders<'s> {
    fn names(&self) -> &HashMap<&'s str, usize> {
        self.names.get_or_init(|| {
            self.snapshot
                .nodes()
                .iter()
                .enumerate()
                .map(|(i, n)| (n.spec.name.as_str(), i))
                .collect()
        })
    }

    /// kube-scheduler's `ExtenderArgs`: the pod, and the nodes as a `NodeList` or only their names.
    fn args(&self, e: &ExtenderConfig, pod: &str, nodes: &[usize]) -> Vec<u8> {
        let all = self.snapshot.nodes();
        let mut out = String::with_capacity(pod.len() + nodes.len() * if e.node_cache_capable { 24 } else { 400 });
        out.push_str("{\"Pod\":");
        out.push_str(pod);
        if e.node_cache_capable {
            out.push_str(",\"Nodes\":null,\"NodeNames\":");
            let names: Vec<&str> = nodes.iter().map(|&i| all[i].spec.name.as_str()).collect();
            out.push_str(&serde_json::to_string(&names).unwrap_or_else(|_| "[]".into()));
        } else {
            out.push_str(",\"Nodes\":{\"metadata\":{},\"items\":[");
            for (k, &i) in nodes.iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                let Some(cell) = self.node_json.get(i) else {
                    continue;
                };
                out.push_str(cell.get_or_init(|| node_object(&all[i].spec).to_string()));
            }
            out.push_str("]},\"NodeNames\":null");
        }
        out.push('}');
        out.into_bytes()
    }
}

impl ExtenderHook for HttpExtenders<'_> {
    fn interested(&self, pod: &PodSpec) -> bool {
        self.set
            .extenders
            .iter()
            .any(|e| (e.config.is_filter() || e.config.is_prioritizer()) && e.config.is_interested(pod))
    }

    fn filter(&self, snapshot: &Snapshot, pod: &PodSpec, nodes: &[usize]) -> Result<ExtenderFiltered, String> {
        debug_assert!(std::ptr::eq(snapshot, self.snapshot), "the hook's own snapshot");
        let started = Instant::now();
        let out = self.filter_all(pod, nodes);
        self.add_time(pod, started.elapsed());
        out
    }

    fn prioritize(&self, snapshot: &Snapshot, pod: &PodSpec, nodes: &[usize]) -> Vec<(usize, i64)> {
        debug_assert!(std::ptr::eq(snapshot, self.snapshot), "the hook's own snapshot");
        let started = Instant::now();
        let out = self.prioritize_all(pod, nodes);
        self.add_time(pod, started.elapsed());
        out
    }
}

impl HttpExtenders<'_> {
    /// [`ExtenderHook::filter`]: every interested filter in order, each on what the one before kept.
    fn filter_all(&self, pod: &PodSpec, nodes: &[usize]) -> Result<ExtenderFiltered, String> {
        let names = self.names();
        let pod_json = pod_object(pod).to_string();
        let mut feasible = nodes.to_vec();
        let mut out = ExtenderFiltered::default();
        for e in &self.set.extenders {
            if feasible.is_empty() {
                break;
            }
            if !e.config.is_filter() || !e.config.is_interested(pod) {
                continue;
            }
            let body = self.args(&e.config, &pod_json, &feasible);
            match self.runtime.block_on(e.filter(body, &feasible, names)) {
                Ok(f) => {
                    feasible = f.feasible;
                    out.failed.extend(f.failed);
                    out.failed_unresolvable.extend(f.failed_unresolvable);
                }
                Err(err) if e.config.ignorable => {
                    tracing::info!(extender = %e.config.url_prefix, error = %err, pod = %pod.key(),
                        "Skipping extender as it returned error and has ignorable flag set");
                }
                Err(err) => return Err(err.0),
            }
        }
        out.feasible = feasible;
        Ok(out)
    }

    /// [`ExtenderHook::prioritize`]: every interested prioritizer, scores scaled and summed.
    fn prioritize_all(&self, pod: &PodSpec, nodes: &[usize]) -> Vec<(usize, i64)> {
        let names = self.names();
        let pod_json = pod_object(pod).to_string();
        // All at once, as kube-scheduler calls its prioritizers (a goroutine each).
        let calls: Vec<_> = self
            .set
            .extenders
            .iter()
            .filter(|e| e.config.is_prioritizer() && e.config.is_interested(pod))
            .map(|e| {
                let body = self.args(&e.config, &pod_json, nodes);
                async move { (e, e.prioritize(body, names).await) }
            })
            .collect();
        let mut out = Vec::new();
        for (e, answer) in self.runtime.block_on(futures::future::join_all(calls)) {
            match answer {
                Ok(scores) => out.extend(scores.into_iter().map(|(i, score)| {
                    (
                        i,
                        score
                            .saturating_mul(e.config.weight)
                            .saturating_mul(MAX_NODE_SCORE / MAX_EXTENDER_PRIORITY),
                    )
                })),
                Err(err) => {
                    // kube-scheduler: prioritization errors are ignored, the extender gives no score.
                    tracing::debug!(extender = %e.config.url_prefix, error = %err, pod = %pod.key(),
                        "Failed to run extender's priority function. No score given by this extender.");
                }
            }
        }
        out
    }
}

#[cfg(test)]
#[path = "extender_tests.rs"]
mod tests;
