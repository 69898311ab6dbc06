//! OpenTelemetry across both processes, in KEP-5927's shape: the binder's `schedulingCycle` span
//! (one per batch) travels as W3C trace context in gRPC metadata, the decision service's
//! SyncSnapshot and Schedule spans become its children, each pod decided gets a `SchedulePod` span
//! with its phases under Schedule, and each placed pod a `bindingCycle` under the batch's cycle.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use placement_binder::simulate::{simulate, ClusterSource, SimConfig, SyntheticCluster};
use placement_scheduler::synth::ClusterShape;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decision_calls_are_children_of_the_binders_batch_span() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")))
        .init();
    placement_scheduler::telemetry::install_propagator();

    let summary = simulate(SimConfig {
        cluster: ClusterSource::Synthetic(SyntheticCluster {
            shape: ClusterShape {
                pods_per_node: 0,
                ..ClusterShape::with_nodes(50)
            },
            pending: 300,
            replicas_per_workload: 1,
            workload_share: 0.5,
            topology_share: 0.0,
            seed: 7,
            pod_groups: None,
        }),
        timeout: Duration::from_secs(60),
        progress: false,
        ..SimConfig::default()
    })
    .await
    .expect("simulation runs");
    assert!(summary.completed && summary.placed > 0, "{summary}");
    let _ = provider.force_flush();

    let spans = exporter.get_finished_spans().expect("spans were exported");
    let batches: Vec<_> = spans.iter().filter(|s| s.name == "schedulingCycle").collect();
    let calls: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "Schedule" || s.name == "SyncSnapshot")
        .collect();
    assert!(!batches.is_empty(), "the binder records a span per batch");
    assert!(
        calls.iter().filter(|s| s.name == "Schedule").count() >= batches.len(),
        "a Schedule span per batch"
    );
    for call in &calls {
        let parent = batches
            .iter()
            .find(|b| b.span_context.span_id() == call.parent_span_id)
            .unwrap_or_else(|| panic!("{} span has no batch span as its parent", call.name));
        assert_eq!(
            parent.span_context.trace_id(),
            call.span_context.trace_id(),
            "one trace"
        );
    }

    // The replica's per-pod spans: under a Schedule span, with the pod's phases under them.
    let by_id = |id| spans.iter().find(|s| s.span_context.span_id() == id);
    let pods: Vec<_> = spans.iter().filter(|s| s.name == "SchedulePod").collect();
    assert!(pods.len() >= summary.placed, "a SchedulePod span per pod decided");
    for pod in &pods {
        let parent = by_id(pod.parent_span_id).expect("SchedulePod's parent was exported");
        assert_eq!(parent.name, "Schedule");
        let attr = |k: &str| {
            pod.attributes
                .iter()
                .find(|a| a.key.as_str() == k)
                .map(|a| a.value.to_string())
        };
        assert!(attr("k8s.pod.name").is_some() && attr("k8s.pod.uid").is_some());
        let result = attr("k8s.scheduler.result").expect("a result");
        let phases: Vec<_> = spans
            .iter()
            .filter(|s| s.parent_span_id == pod.span_context.span_id())
            .map(|s| s.name.to_string())
            .collect();
        assert!(phases.iter().any(|p| p == "filterAndScore"), "{phases:?}");
        match result.as_str() {
            "Success" => {
                assert!(phases.iter().any(|p| p == "reserve") && attr("k8s.scheduler.selected_node").is_some())
            }
            "Unschedulable" => assert!(phases.iter().any(|p| p == "postFilter")),
            other => panic!("result {other}"),
        }
    }
    // The binder's binding cycles: one per pod bound, under a scheduling cycle, each with a bind.
    let binding: Vec<_> = spans.iter().filter(|s| s.name == "bindingCycle").collect();
    assert!(
        binding.len() >= summary.placed,
        "{} binding cycles, {} placed",
        binding.len(),
        summary.placed
    );
    for cycle in &binding {
        let parent = by_id(cycle.parent_span_id).expect("bindingCycle's parent was exported");
        assert_eq!(parent.name, "schedulingCycle");
        assert!(spans
            .iter()
            .any(|s| s.parent_span_id == cycle.span_context.span_id() && s.name == "bind"));
    }
}
