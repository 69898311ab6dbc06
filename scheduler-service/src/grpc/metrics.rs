//! Prometheus metrics of the decision service.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Labels of a finished RPC.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// RPC name, e.g. `Schedule`.
    pub rpc: &'static str,
    /// Policy applied (empty for RPCs without one).
    pub policy: String,
    /// gRPC status code name, e.g. `Ok`, `InvalidArgument`.
    pub code: String,
}

/// Labels of an RPC's latency.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LatencyLabels {
    /// RPC name.
    pub rpc: &'static str,
    /// Policy applied.
    pub policy: String,
}

/// Labels of a pod decision.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    /// Policy applied.
    pub policy: String,
    /// `scheduled` or `unschedulable`.
    pub result: &'static str,
}

/// Labels of a policy file load.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabels {
    /// `ok` (the file's policies are in use) or `error` (rejected; the previous ones stay).
    pub result: &'static str,
}

/// Labels of the policy configuration in use.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PolicyConfigLabels {
    /// Where the policies come from: `built-in` or the policy file's path.
    pub source: String,
    /// Hex digest of the configuration: the file's content, or `built-in`.
    pub digest: String,
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 20))
}

/// Every metric the service exports.
pub struct Metrics {
    /// The registry they are encoded from.
    pub registry: Registry,
    /// `placement_requests_total{rpc,policy,code}`.
    pub requests: Family<RequestLabels, Counter>,
    /// `placement_request_duration_seconds{rpc,policy}`.
    pub latency: Family<LatencyLabels, Histogram, fn() -> Histogram>,
    /// `placement_nodes_evaluated_total`: node evaluations (nodes × pods).
    pub nodes_evaluated: Counter,
    /// `placement_pod_decisions_total{policy,result}`.
    pub decisions: Family<DecisionLabels, Counter>,
    /// `placement_snapshot_cache_hits_total`.
    pub cache_hits: Counter,
    /// `placement_snapshot_cache_misses_total`.
    pub cache_misses: Counter,
    /// `placement_snapshot_cache_evictions_total`.
    pub cache_evictions: Counter,
    /// `placement_snapshot_cache_bytes`.
    pub cache_bytes: Gauge,
    /// `placement_snapshot_cache_entries`.
    pub cache_entries: Gauge,
    /// `placement_request_memory_bytes`: what the calls in flight hold of the request budget.
    pub request_memory: Gauge,
    /// `placement_request_budget_refusals_total`: calls refused RESOURCE_EXHAUSTED for want of
    /// request budget (before they were decoded).
    pub budget_refusals: Counter,
    /// `placement_policy_reloads_total{result}`: policy file loads (at start and on change).
    pub policy_reloads: Family<ReloadLabels, Counter>,
    /// `placement_policy_config_info{source,digest}`: 1 for the configuration in use.
    pub policy_config: Family<PolicyConfigLabels, Gauge>,
    /// `placement_policy_config_last_success_timestamp_seconds`: when the policies in use were loaded.
    pub policy_loaded_at: Gauge,
    /// `placement_policies`: policies in use.
    pub policies: Gauge,
    /// Calls to scheduler extenders, their errors and latency, per extender and verb.
    pub extenders: crate::extender::ExtenderMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Also keeps each pod's time in extender calls (see
    /// [`crate::extender::ExtenderMetrics::samples`]), for `binder-agent simulate`.
    pub fn keeping_extender_samples(mut self) -> Self {
        self.extenders = self.extenders.keeping_samples();
        self
    }

    /// Creates and registers every metric.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("placement");
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<LatencyLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        let nodes_evaluated = Counter::default();
        let decisions = Family::<DecisionLabels, Counter>::default();
        let cache_hits = Counter::default();
        let cache_misses = Counter::default();
        let cache_evictions = Counter::default();
        let cache_bytes = Gauge::default();
        let cache_entries = Gauge::default();
        let request_memory = Gauge::default();
        let budget_refusals = Counter::default();
        let policy_reloads = Family::<ReloadLabels, Counter>::default();
        let policy_config = Family::<PolicyConfigLabels, Gauge>::default();
        let policy_loaded_at = Gauge::default();
        let policies = Gauge::default();
        registry.register(
            "requests",
            "gRPC requests by RPC, policy and status code",
            requests.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "gRPC request latency by RPC and policy",
            latency.clone(),
        );
        registry.register(
            "nodes_evaluated",
            "Nodes evaluated (filtered and scored), summed over pods",
            nodes_evaluated.clone(),
        );
        registry.register("pod_decisions", "Pod decisions by policy and result", decisions.clone());
        registry.register(
            "snapshot_cache_hits",
            "Requests that found their snapshot id in the cache",
            cache_hits.clone(),
        );
        registry.register(
            "snapshot_cache_misses",
            "Requests whose snapshot id was not in the cache",
            cache_misses.clone(),
        );
        registry.register(
            "snapshot_cache_evictions",
            "Snapshots evicted to stay within the memory budget",
            cache_evictions.clone(),
        );
        registry.register(
            "snapshot_cache_bytes",
            "Approximate bytes of cached snapshots",
            cache_bytes.clone(),
        );
        registry.register("snapshot_cache_entries", "Cached snapshots", cache_entries.clone());
        registry.register(
            "request_memory_bytes",
            "Bytes of the request budget (--request-memory-bytes) the calls in flight hold",
            request_memory.clone(),
        );
        registry.register(
            "request_budget_refusals",
            "Calls refused with RESOURCE_EXHAUSTED before decoding, for want of request budget",
            budget_refusals.clone(),
        );
        registry.register(
            "policy_reloads",
            "Policy file loads by result (ok: in use; error: rejected, the previous policies stay)",
            policy_reloads.clone(),
        );
        registry.register(
            "policy_config_info",
            "The policy configuration in use (value 1), by source and digest",
            policy_config.clone(),
        );
        registry.register(
            "policy_config_last_success_timestamp_seconds",
            "Unix time the policies in use were loaded",
            policy_loaded_at.clone(),
        );
        registry.register("policies", "Policies in use", policies.clone());
        let extenders = crate::extender::ExtenderMetrics::default();
        extenders.register(&mut registry);
        Self {
            extenders,
            registry,
            requests,
            latency,
            nodes_evaluated,
            decisions,
            cache_hits,
            cache_misses,
            cache_evictions,
            cache_bytes,
            cache_entries,
            request_memory,
            budget_refusals,
            policy_reloads,
            policy_config,
            policy_loaded_at,
            policies,
        }
    }

    /// Records the policy configuration now in use.
    pub fn policy_config_in_use(&self, source: &str, digest: &str, policies: usize) {
        self.policy_config.clear();
        self.policy_config
            .get_or_create(&PolicyConfigLabels {
                source: source.to_string(),
                digest: digest.to_string(),
            })
            .set(1);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        self.policy_loaded_at.set(now);
        self.policies.set(policies as i64);
    }

    /// The metrics in the Prometheus text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
