//! One batch of plain pods followed from the watch to the Binding, against the walk
//! docs/binder.md gives ("One batch, from the watch to the Binding"): each step opens a span where
//! it runs, named as that section names the step, and a recording subscriber lists the files of
//! the binder's spans in the order they open. The pods go through the real pod watch tracker, the
//! real loop and the real [`KubeApi`] (its requests answered by a scripted API server): the files
//! must be the section's, each once, in its order, at most eight of them.

use kube::runtime::watcher::Event;
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

use super::*;
use crate::kube_api::{KubeApi, KubeApiConfig};
use crate::watch::{PodTracker, WatchedPod};

/// The section of docs/binder.md the walk follows.
const SECTION: &str = "## One batch, from the watch to the Binding";

/// The files of this crate a batch crosses, relative to its `src/`, as the section lists them in
/// order, each with the text of its item (to check the names of its step).
fn documented_walk(doc: &str) -> Vec<(String, String)> {
    let Some(start) = doc.find(SECTION) else {
        panic!("docs/binder.md has no section {SECTION:?}");
    };
    let body = &doc[start + SECTION.len()..];
    let body = &body[..body.find("\n## ").unwrap_or(body.len())];
    let mut items: Vec<(String, String)> = Vec::new();
    for line in body.lines() {
        let numbered = line
            .split_once(". `")
            .filter(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        if let Some((_, rest)) = numbered {
            let file = rest.split('`').next().unwrap_or_default();
            items.push((file.to_string(), line.to_string()));
        } else if let Some((_, text)) = items.last_mut().filter(|_| line.starts_with("   ")) {
            text.push(' ');
            text.push_str(line.trim());
        }
    }
    items
}

/// Whether the item's text names `step`: as a code span of its own (`` `schedulingCycle` ``) or
/// as the last part of a path (`` `Binder::handle` ``).
fn names(text: &str, step: &str) -> bool {
    text.split('`')
        .skip(1)
        .step_by(2)
        .any(|code| code == step || code.ends_with(&format!("::{step}")))
}

/// A span opened by this crate's code: its file (relative to `src/`), its name, and the pod whose
/// binding cycle it belongs to, if any (a `bindingCycle` span's `k8s.pod.name`, inherited by the
/// spans opened inside it).
type Opened = (String, &'static str, Option<String>);

/// Records every span of this crate's code (not its tests) as it opens.
#[derive(Clone, Default)]
struct OpenedSpans(Arc<Mutex<Vec<Opened>>>);

/// The pod a span belongs to, kept in its extensions.
struct OfPod(String);

/// Reads a span's `k8s.pod.name`.
#[derive(Default)]
struct PodName(Option<String>);

impl tracing::field::Visit for PodName {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "k8s.pod.name" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

impl<S> Layer<S> for OpenedSpans
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut own = PodName::default();
        attrs.record(&mut own);
        let pod = own.0.or_else(|| {
            let parent = span.parent()?;
            let ext = parent.extensions();
            ext.get::<OfPod>().map(|p| p.0.clone())
        });
        if let Some(pod) = &pod {
            span.extensions_mut().insert(OfPod(pod.clone()));
        }
        let meta = attrs.metadata();
        let (Some(file), Some(module)) = (meta.file(), meta.module_path()) else {
            return;
        };
        let file = file.replace('\\', "/");
        let Some((_, within)) = file.split_once("binder-agent/src/") else {
            return;
        };
        if !module.starts_with("placement_binder") || module.contains("cycle_tests") {
            return;
        }
        self.0.lock().push((within.to_string(), meta.name(), pod));
    }
}

/// The opened spans grouped by file, consecutive spans of one file together: each file with the
/// name of the first span it opened.
fn crossed<'a>(opened: impl IntoIterator<Item = &'a Opened>) -> Vec<(String, &'static str)> {
    let mut files: Vec<(String, &'static str)> = Vec::new();
    for (file, name, _) in opened {
        if files.last().is_none_or(|(last, _)| last != file) {
            files.push((file.clone(), name));
        }
    }
    files
}

fn watched_pod(name: &str) -> WatchedPod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "resourceVersion": "7"},
        "spec": {"schedulerName": SCHEDULER, "containers": [{"name": "c"}]},
        "status": {"phase": "Pending"}
    }))
    .expect("a pod")
}

/// A scripted API server: every request answered with success (its body echoed back), each
/// request's method and path recorded.
fn api_server() -> (KubeApi, Arc<Mutex<Vec<String>>>) {
    use axum::http::{Request, Response};
    use kube::client::Body;
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&requests);
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            let (parts, body) = request.into_parts();
            let bytes = body.collect_bytes().await.unwrap_or_default();
            seen.lock().push(format!("{} {}", parts.method, parts.uri.path()));
            let mut response = Response::new(Body::from(bytes.to_vec()));
            *response.status_mut() = axum::http::StatusCode::CREATED;
            send.send_response(response);
        }
    });
    let config = KubeApiConfig {
        reporting_controller: SCHEDULER.into(),
        reporting_instance: format!("{SCHEDULER}-0"),
        request_timeout: Duration::from_secs(5),
    };
    (KubeApi::new(kube::Client::new(service, "default"), config), requests)
}

/// Set in the process [`a_batch_of_plain_pods_crosses_the_files_docs_binder_md_lists_each_once_in_order`]
/// starts for the walk.
const ALONE: &str = "PLACEMENT_WALK_ALONE";

/// The walk runs in a process of its own, alone: tracing caches each callsite's interest
/// process-wide, and this binary's other tests, running meanwhile on other threads with no
/// subscriber (or their own), left the cycle's spans disabled for this test's subscriber in about
/// half of the suite's runs.
#[test]
fn a_batch_of_plain_pods_crosses_the_files_docs_binder_md_lists_each_once_in_order() {
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "binder::cycle_tests::walk::the_walk_alone",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(ALONE, "1")
        .output()
        .expect("run the walk in a process of its own");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "the walk failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "the walk did not run:\n{stdout}\n{stderr}");
}

/// The walk itself; it runs only in the process the test above starts (elsewhere it returns).
#[tokio::test]
async fn the_walk_alone() {
    if std::env::var_os(ALONE).is_none() {
        return;
    }
    let walk = documented_walk(include_str!("../../../../docs/binder.md"));
    assert!(
        !walk.is_empty() && walk.len() <= 8,
        "the section lists at most eight files: {walk:?}"
    );

    let replica = ScriptedReplica::default();
    for name in ["web-1", "web-2", "web-3"] {
        replica.script(name, &[Answer::Node("n1")]);
    }
    let addr = serve(replica.clone()).await;
    let pool = Arc::new(
        ReplicaPool::new(
            EndpointSource::Static(vec![format!("http://{addr}")]),
            ReplicaConfig::default(),
        )
        .expect("a replica pool"),
    );
    let config = BinderConfig {
        scheduler_names: vec![SCHEDULER.into()],
        batch_window: Duration::from_millis(20),
        ..BinderConfig::default()
    };
    let (api, requests) = api_server();
    let (_leader, leader_rx) = watch::channel(true);
    let binder = Binder::new(config, api, pool, Arc::new(BinderMetrics::new()), leader_rx);
    binder.handle(ClusterEvent::NodeApplied(node("n1")));
    binder.set_synced();
    let (stop, run) = spawn_run(&binder);

    // The batch's other pods come first, unrecorded; from web-1's watch event on, every span this
    // thread's tasks open is recorded (the test's runtime runs every task on this thread, and the
    // loop runs only once the test awaits).
    let mut pods = PodTracker::default();
    let mut watched = |name: &str| {
        let (events, _) = pods.on_event(Event::Apply(watched_pod(name)));
        for event in events {
            binder.handle(event);
        }
    };
    watched("web-2");
    watched("web-3");
    let opened = OpenedSpans::default();
    let recording = tracing::subscriber::set_default(tracing_subscriber::registry().with(opened.clone()));
    watched("web-1");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while requests.lock().iter().filter(|r| r.ends_with("/binding")).count() < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out: {:?}",
            requests.lock()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(recording);
    let _ = stop.send(true);
    let _ = run.await;

    let mut calls = replica.calls.lock().clone();
    calls.iter_mut().for_each(|c| c.sort());
    assert_eq!(
        calls,
        [vec!["web-1".to_string(), "web-2".into(), "web-3".into()]],
        "the pods are decided as one batch"
    );
    // web-1 followed: the batch's spans, and those of its own binding cycle.
    let opened: Vec<Opened> = opened
        .0
        .lock()
        .iter()
        .filter(|(_, _, pod)| pod.as_deref().is_none_or(|p| p == "web-1"))
        .cloned()
        .collect();
    let crossed = crossed(&opened);
    let files: Vec<&str> = crossed.iter().map(|(f, _)| f.as_str()).collect();
    let documented: Vec<&str> = walk.iter().map(|(f, _)| f.as_str()).collect();
    for (i, file) in files.iter().enumerate() {
        assert!(
            !files[..i].contains(file),
            "{file} is crossed twice: {files:?} (spans: {opened:?})"
        );
    }
    assert_eq!(files, documented, "the files crossed, in order (spans: {opened:?})");
    // Each file's step is named as the docs name it.
    for ((file, step), (_, text)) in crossed.iter().zip(&walk) {
        assert!(
            names(text, step),
            "docs/binder.md's item for {file} does not name its step `{step}`: {text}"
        );
    }
}

#[test]
fn the_walk_is_read_from_the_docs_numbered_items() {
    let doc = format!(
        "# Binder\n\n{SECTION}\n\nIntro naming `not/a/step.rs`.\n\n1. `watch/mod.rs`: \
         `PodTracker::on_event`\n   hands over `ClusterEvent::PodApplied`.\n2. `kube_api.rs`: `KubeApi::bind`.\n\n\
         Other outcomes: `binder/failures.rs`.\n\n## Metrics\n\n1. `metrics.rs`: not the walk.\n"
    );
    let walk = documented_walk(&doc);
    let files: Vec<&str> = walk.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(files, ["watch/mod.rs", "kube_api.rs"]);
    assert!(names(&walk[0].1, "on_event") && names(&walk[0].1, "PodApplied"));
    assert!(names(&walk[1].1, "bind") && !names(&walk[1].1, "KubeApi::b"));
    assert!(!names(&walk[1].1, "kube_api.rs:"));
    assert_eq!(
        crossed(&[
            ("a.rs".into(), "x", None),
            ("a.rs".into(), "y", None),
            ("b.rs".into(), "z", None),
            ("a.rs".into(), "w", None)
        ]),
        [("a.rs".to_string(), "x"), ("b.rs".into(), "z"), ("a.rs".into(), "w")]
    );
}
