//! Traces in KEP-5927's shape on a real control plane (issue 47, item 5): `binder-agent run` and
//! `scheduler-service` as processes, each given the same component-base `TracingConfiguration`
//! file (every root sampled), export over OTLP/gRPC to a receiver in this test. One pod's trace is
//! then followed end to end: the binder's `schedulingCycle`, the decision replica's `Schedule`
//! (its child through W3C trace context in the gRPC metadata) and the pod's `SchedulePod` with a
//! span per phase, the binder's `bindingCycle` for the pod with `preBind` and `bind`, and under
//! `bind` kube-client's span of the Binding's POST.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use parking_lot::Mutex;
use placement_tests::e2e::{cluster, free_port, node_of, workspace_binary, BinderProcess, Scope, WAIT};
use placement_tests::fixtures::eventually;

/// A span as received, with the `service.name` of the process that sent it.
#[derive(Debug, Clone)]
pub(super) struct Received {
    pub(super) service: String,
    pub(super) span: Span,
}

impl Received {
    pub(super) fn attr(&self, key: &str) -> Option<String> {
        attr(&self.span.attributes, key)
    }
}

fn attr(attributes: &[KeyValue], key: &str) -> Option<String> {
    let value = attributes
        .iter()
        .find(|a| a.key == key)?
        .value
        .as_ref()?
        .value
        .as_ref()?;
    Some(match value {
        Value::StringValue(s) => s.clone(),
        Value::IntValue(i) => i.to_string(),
        Value::BoolValue(b) => b.to_string(),
        Value::DoubleValue(d) => d.to_string(),
        other => format!("{other:?}"),
    })
}

/// The collector's side of OTLP/gRPC: keeps every span it is sent.
#[derive(Clone, Default)]
pub(super) struct Receiver {
    pub(super) spans: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    /// A receiver serving OTLP/gRPC on 127.0.0.1 (a free port), and its address.
    pub(super) async fn start() -> (Receiver, SocketAddr) {
        let receiver = Receiver::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the receiver");
        let addr = listener.local_addr().expect("the receiver's address");
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(receiver.clone()))
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        (receiver, addr)
    }
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.spans.lock();
        for resource_spans in request.into_inner().resource_spans {
            let service = resource_spans
                .resource
                .as_ref()
                .and_then(|r| attr(&r.attributes, "service.name"))
                .unwrap_or_default();
            for scope in resource_spans.scope_spans {
                spans.extend(scope.spans.into_iter().map(|span| Received {
                    service: service.clone(),
                    span,
                }));
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// A `scheduler-service` child process, killed when dropped.
pub(super) struct ServiceProcess(pub(super) Child);

impl Drop for ServiceProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The spans of one trace, by span id.
fn trace_of(spans: &[Received], trace_id: &[u8]) -> HashMap<Vec<u8>, Received> {
    spans
        .iter()
        .filter(|s| s.span.trace_id == trace_id)
        .map(|s| (s.span.span_id.clone(), s.clone()))
        .collect()
}

/// The children of `parent` in `trace` named `name` (for kube-client's spans, the OTel name).
fn children<'a>(trace: &'a HashMap<Vec<u8>, Received>, parent: &Received, name: &str) -> Vec<&'a Received> {
    trace
        .values()
        .filter(|s| s.span.parent_span_id == parent.span.span_id && s.span.name == name)
        .collect()
}

/// The trace as an indented tree: per span its process, name, duration and the attributes that
/// say what it was about (printed by the test, and shown in docs/observability.md).
fn render(trace: &HashMap<Vec<u8>, Received>) -> String {
    fn walk(trace: &HashMap<Vec<u8>, Received>, parent: &[u8], depth: usize, out: &mut String) {
        let mut children: Vec<&Received> = trace.values().filter(|s| s.span.parent_span_id == parent).collect();
        children.sort_by_key(|s| (s.span.start_time_unix_nano, s.span.name.clone()));
        for s in children {
            let micros = s.span.end_time_unix_nano.saturating_sub(s.span.start_time_unix_nano) / 1000;
            let attrs: Vec<String> = s
                .span
                .attributes
                .iter()
                .filter(|a| {
                    a.key.starts_with("k8s.")
                        || matches!(a.key.as_str(), "pods" | "attempt" | "http.method" | "http.status_code")
                })
                .filter_map(|a| Some(format!("{}={}", a.key, s.attr(&a.key)?)))
                .collect();
            out.push_str(&format!(
                "{}{} [{}] {} µs {}\n",
                "  ".repeat(depth),
                s.span.name,
                s.service,
                micros,
                attrs.join(" ")
            ));
            walk(trace, &s.span.span_id, depth + 1, out);
        }
    }
    let mut out = String::new();
    walk(trace, &[], 0, &mut out);
    out
}

/// The binding cycle of the pod `name` and its trace, once the trace holds the replica's pod span
/// and the Binding's request span.
pub(super) fn pod_trace(spans: &[Received], name: &str) -> Option<(Received, HashMap<Vec<u8>, Received>)> {
    let cycle = spans
        .iter()
        .find(|s| s.span.name == "bindingCycle" && s.attr("k8s.pod.name").as_deref() == Some(name))?;
    let trace = trace_of(spans, &cycle.span.trace_id);
    let complete = trace.values().any(|s| s.span.name == "SchedulePod")
        && trace.values().any(|s| s.span.name == "create_subresource");
    complete.then(|| (cycle.clone(), trace))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_pods_trace_runs_from_the_binder_through_the_decision_replica() {
    let Some(cluster) = cluster("one_pods_trace_runs_from_the_binder_through_the_decision_replica").await else {
        return;
    };
    let receiver = Receiver::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the receiver");
    let collector: SocketAddr = listener.local_addr().expect("the receiver's address");
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(receiver.clone()))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let dir = tempfile::tempdir().expect("a temporary folder");
    let config = dir.path().join("tracing.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nendpoint: {collector}\nsamplingRatePerMillion: 1000000\n"
        ),
    )
    .expect("write the tracing configuration");
    let config = config.to_string_lossy().into_owned();

    let grpc = free_port();
    let log = std::fs::File::create(dir.path().join("scheduler-service.log")).expect("a log file");
    let _service = ServiceProcess(
        Command::new(workspace_binary("scheduler-service"))
            .args(["--listen", &grpc.to_string(), "--metrics-listen", "off"])
            .args(["--tracing-config-file", &config])
            // Spans leave within a fraction of a second instead of the SDK's 5 s.
            .env("OTEL_BSP_SCHEDULE_DELAY", "200")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start scheduler-service"),
    );
    eventually(Duration::from_secs(30), "scheduler-service listens", || async {
        tokio::net::TcpStream::connect(grpc).await.is_ok()
    })
    .await;

    let mut scope = Scope::new(&cluster, "tracing").await;
    let node = scope.add_node("traced", "4", &[]).await;
    let binder = BinderProcess::start_with_args(
        &cluster.kubeconfig,
        &scope.scheduler,
        &format!("http://{grpc}"),
        &format!("{}-traced", scope.run),
        None,
        &["--tracing-config-file", &config],
        &[("OTEL_BSP_SCHEDULE_DELAY", "200")],
    );
    let pod = scope.create(&scope.pod("traced", "100m")).await;
    let name = pod.metadata.name.clone().expect("the pod's name");
    eventually(WAIT, "the pod is bound", || async {
        scope
            .pods()
            .get(&name)
            .await
            .ok()
            .is_some_and(|p| node_of(&p) == Some(node.as_str()))
    })
    .await;

    // The pod's binding cycle names it; its trace holds the rest.
    eventually(Duration::from_secs(30), "the pod's trace is exported", || async {
        pod_trace(&receiver.spans.lock(), &name).is_some()
    })
    .await;
    let Some((binding, trace)) = pod_trace(&receiver.spans.lock(), &name) else {
        unreachable!("eventually returned")
    };
    eprintln!("e2e tracing: the pod's trace:\n{}", render(&trace));
    let log = binder.log_text();
    let context = || {
        let mut names: Vec<_> = trace
            .values()
            .map(|s| format!("{}:{}", s.service, s.span.name))
            .collect();
        names.sort();
        format!("trace spans {names:?}; binder log:\n{log}")
    };

    // The binder's binding cycle: the pod, its node, Success; preBind then bind, and the
    // Binding's POST (kube-client's span) under bind.
    assert_eq!(binding.service, "binder-agent", "{}", context());
    assert_eq!(binding.attr("k8s.pod.namespace").as_deref(), Some(scope.ns.as_str()));
    assert_eq!(
        binding.attr("k8s.pod.uid").as_deref(),
        pod.metadata.uid.as_deref(),
        "{}",
        context()
    );
    assert_eq!(
        binding.attr("k8s.scheduler.selected_node").as_deref(),
        Some(node.as_str())
    );
    assert_eq!(
        binding.attr("k8s.scheduler.result").as_deref(),
        Some("Success"),
        "{}",
        context()
    );
    assert_eq!(children(&trace, &binding, "preBind").len(), 1, "{}", context());
    let binds = children(&trace, &binding, "bind");
    assert_eq!(binds.len(), 1, "one bind attempt: {}", context());
    let posts = children(&trace, binds[0], "create_subresource");
    assert_eq!(posts.len(), 1, "the Binding's POST under bind: {}", context());
    let url = posts[0].attr("http.url").unwrap_or_default();
    assert!(
        url.contains(&format!("/namespaces/{}/pods/{name}/binding", scope.ns)),
        "{url}"
    );
    assert_eq!(posts[0].attr("http.method").as_deref(), Some("POST"));
    assert_eq!(
        posts[0].attr("http.status_code").as_deref(),
        Some("201"),
        "{}",
        context()
    );

    // Its parent: the batch's scheduling cycle, the trace's root.
    let cycle = trace
        .get(&binding.span.parent_span_id)
        .unwrap_or_else(|| panic!("the binding cycle's parent is in the trace: {}", context()));
    assert_eq!(cycle.span.name, "schedulingCycle");
    assert_eq!(cycle.service, "binder-agent");
    assert!(
        cycle.span.parent_span_id.is_empty(),
        "the scheduling cycle is the root: {}",
        context()
    );

    // The decision replica's Schedule, a child of the scheduling cycle over gRPC, and in it the
    // pod's SchedulePod with its phases.
    let decided: Vec<_> = trace
        .values()
        .filter(|s| s.span.name == "SchedulePod" && s.attr("k8s.pod.name").as_deref() == Some(name.as_str()))
        .collect();
    assert_eq!(decided.len(), 1, "the pod decided once in this trace: {}", context());
    let decided = decided[0];
    assert_eq!(decided.service, "scheduler-service");
    let schedule = trace
        .get(&decided.span.parent_span_id)
        .unwrap_or_else(|| panic!("SchedulePod's parent is in the trace: {}", context()));
    assert_eq!(schedule.span.name, "Schedule");
    assert_eq!(schedule.service, "scheduler-service");
    assert_eq!(
        schedule.span.parent_span_id,
        cycle.span.span_id,
        "the replica's Schedule is a child of the binder's scheduling cycle: {}",
        context()
    );
    assert_eq!(decided.attr("k8s.pod.uid").as_deref(), pod.metadata.uid.as_deref());
    assert_eq!(decided.attr("k8s.scheduler.result").as_deref(), Some("Success"));
    assert_eq!(
        decided.attr("k8s.scheduler.selected_node").as_deref(),
        Some(node.as_str())
    );
    for phase in ["preFilter", "filterAndScore", "reserve"] {
        assert_eq!(
            children(&trace, decided, phase).len(),
            1,
            "{phase} under SchedulePod: {}",
            context()
        );
    }
    // Phases nest in time inside the pod's span.
    for phase in trace.values().filter(|s| s.span.parent_span_id == decided.span.span_id) {
        assert!(
            phase.span.start_time_unix_nano >= decided.span.start_time_unix_nano
                && phase.span.end_time_unix_nano <= decided.span.end_time_unix_nano,
            "{} inside SchedulePod",
            phase.span.name
        );
    }
    drop(binder);
    scope.cleanup().await;
}
