//! OpenTelemetry across both processes: the binder's batch span travels as W3C trace context in
//! gRPC metadata, and the decision service's SyncSnapshot and Schedule spans become its children.

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
    let batches: Vec<_> = spans.iter().filter(|s| s.name == "batch").collect();
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
}
