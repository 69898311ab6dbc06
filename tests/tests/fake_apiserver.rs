//! The fake API server driven by the real kube-rs client, runtime watcher and event recorder.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    Binding, Container, Event as CoreEvent, Node, NodeSpec, ObjectReference, Pod, PodCondition, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::core::{PartialObjectMeta, Status};
use kube::runtime::events::{Event as RecorderEvent, EventType, Recorder, Reporter};
use kube::runtime::watcher::{self, Event};
use kube::ResourceExt;
use placement_tests::fake_apiserver::{matcher, Failure, FakeApiServer, FakeApiServerConfig, Kind, RequestMatcher};
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(10);

fn node(name: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("zone".to_string(), "a".to_string())].into()),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        ..Default::default()
    }
}

fn pod(name: &str, node_name: Option<&str>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            labels: Some([("app".to_string(), "web".to_string())].into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            scheduler_name: Some("placement".into()),
            node_name: node_name.map(str::to_string),
            containers: vec![Container {
                name: "c".into(),
                image: Some("registry.example/app:1".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn binding(pod: &str, node: &str, uid: Option<&str>) -> Binding {
    Binding {
        metadata: ObjectMeta {
            name: Some(pod.into()),
            uid: uid.map(str::to_string),
            ..Default::default()
        },
        target: ObjectReference {
            kind: Some("Node".into()),
            name: Some(node.into()),
            ..Default::default()
        },
    }
}

async fn bind(api: &Api<Pod>, pod: &str, node: &str, uid: Option<&str>) -> kube::Result<Status> {
    api.create_subresource("binding", pod, &PostParams::default(), &binding(pod, node, uid))
        .await
}

fn api_code(err: &kube::Error) -> (u16, String) {
    match err {
        kube::Error::Api(s) => (s.code, s.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Drives a watcher in the background (it only makes requests while polled) and forwards its
/// events, dropping the errors it recovers from by itself.
fn spawn_watcher<K>(api: Api<K>, config: watcher::Config) -> mpsc::UnboundedReceiver<Event<K>>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = watcher::watcher(api, config).boxed();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => {
                    if tx.send(ev).is_err() {
                        break;
                    }
                }
                // Back off a little, as real consumers do; this also yields to the runtime.
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    });
    rx
}

/// The next watcher event, within [`WAIT`].
async fn next_event<K>(rx: &mut mpsc::UnboundedReceiver<Event<K>>) -> Event<K> {
    match tokio::time::timeout(WAIT, rx.recv()).await {
        Ok(Some(ev)) => ev,
        Ok(None) => panic!("watcher stream ended"),
        Err(_) => panic!("no watcher event within {WAIT:?}"),
    }
}

/// Consumes events up to the end of one Init … InitDone round and returns the names listed.
async fn initial_names<K: kube::Resource>(rx: &mut mpsc::UnboundedReceiver<Event<K>>) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    loop {
        match next_event(rx).await {
            Event::Init => names.clear(),
            Event::InitApply(o) => {
                names.insert(o.meta().name.clone().unwrap_or_default());
            }
            Event::InitDone => return names,
            Event::Apply(_) | Event::Delete(_) => {}
        }
    }
}

#[tokio::test]
async fn watcher_lists_then_sees_added_nodes() {
    let server = FakeApiServer::start().await;
    server.create_node(node("n1"));
    let nodes: Api<Node> = Api::all(server.client());
    let mut stream = spawn_watcher(nodes.clone(), watcher::Config::default());
    assert_eq!(initial_names(&mut stream).await, BTreeSet::from(["n1".to_string()]));

    server.create_node(node("n2"));
    match next_event(&mut stream).await {
        Event::Apply(n) => assert_eq!(n.name_any(), "n2"),
        other => panic!("expected Apply(n2), got {other:?}"),
    }
    // A create through the API is seen too, with server-assigned metadata.
    let created = nodes.create(&PostParams::default(), &node("n3")).await.unwrap();
    assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());
    match next_event(&mut stream).await {
        Event::Apply(n) => {
            assert_eq!(n.name_any(), "n3");
            assert_eq!(n.resource_version(), created.resource_version());
        }
        other => panic!("expected Apply(n3), got {other:?}"),
    }
    let list = nodes.list(&ListParams::default().labels("zone=a")).await.unwrap();
    assert_eq!(list.items.len(), 3);
    assert_eq!(
        list.metadata.resource_version,
        Some(server.resource_version().to_string())
    );
    let lists = server.requests_matching(&matcher("GET", "/api/v1/nodes").watch(false));
    let watches = server.requests_matching(&matcher("GET", "/api/v1/nodes").watch(true));
    assert!(!lists.is_empty() && !watches.is_empty());
    assert!(watches[0].path_and_query.contains("allowWatchBookmarks=true"));
}

#[tokio::test]
async fn lists_come_in_pages_and_the_watcher_reads_them_all() {
    let server = FakeApiServer::start().await;
    for i in 0..7 {
        server.create_node(node(&format!("n{i}")));
    }
    let nodes: Api<Node> = Api::all(server.client());
    let rv = server.resource_version().to_string();
    let mut names = Vec::new();
    let mut params = ListParams::default().limit(3);
    let mut pages = 0;
    loop {
        let page = nodes.list(&params).await.unwrap();
        pages += 1;
        assert!(page.items.len() <= 3);
        assert_eq!(
            page.metadata.resource_version.as_deref(),
            Some(rv.as_str()),
            "every page has the first page's version"
        );
        names.extend(page.items.iter().map(|n| n.name_any()));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => params = ListParams::default().limit(3).continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(names, (0..7).map(|i| format!("n{i}")).collect::<Vec<_>>());

    // A bad continue token is a 400, as the API server answers.
    match nodes
        .list(&ListParams::default().limit(3).continue_token("nonsense"))
        .await
    {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 400),
        other => panic!("expected a 400, got {other:?}"),
    }

    // kube-rs' watcher pages its initial list (2 per page here) and still sees every node.
    let mut stream = spawn_watcher(nodes, watcher::Config::default().page_size(2));
    assert_eq!(initial_names(&mut stream).await.len(), 7);
    let lists = server.requests_matching(&matcher("GET", "/api/v1/nodes?").watch(false));
    assert!(
        lists.iter().any(|r| r.path_and_query.contains("continue=")),
        "the watcher followed continue tokens"
    );
}

#[tokio::test]
async fn binding_succeeds_once_then_conflicts() {
    let server = FakeApiServer::start().await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let created = pods.create(&PostParams::default(), &pod("p", None)).await.unwrap();
    assert_eq!(
        created.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );
    let uid = created.metadata.uid.clone().unwrap();

    // A Binding whose uid does not match the pod's is a precondition failure.
    let err = bind(&pods, "p", "n1", Some("not-the-uid")).await.unwrap_err();
    assert_eq!(api_code(&err), (409, "Conflict".into()));

    let ok = bind(&pods, "p", "n1", Some(&uid)).await.unwrap();
    assert_eq!(ok.code, 201);
    let bound = pods.get("p").await.unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("n1"));
    let scheduled = bound
        .status
        .unwrap()
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .expect("binding sets PodScheduled");
    assert_eq!(scheduled.status, "True");

    let err = bind(&pods, "p", "n2", None).await.unwrap_err();
    let kube::Error::Api(status) = &err else {
        panic!("expected kube::Error::Api, got {err:?}")
    };
    assert_eq!(status.code, 409);
    assert_eq!(status.reason, "Conflict");
    assert!(
        status.message.contains("already assigned to node \"n1\""),
        "{}",
        status.message
    );

    let err = bind(&pods, "missing", "n1", None).await.unwrap_err();
    assert_eq!(api_code(&err), (404, "NotFound".into()));

    assert_eq!(server.bindings_attempted(), 4);
    assert_eq!(server.bindings_succeeded(), 1);
    assert_eq!(server.bindings_conflicted(), 2);
    let posts = server.requests_matching(&matcher("POST", "/api/v1/namespaces/default/pods/p/binding"));
    assert_eq!(posts.iter().map(|r| r.status).collect::<Vec<_>>(), [409, 201, 409]);
    assert_eq!(posts[1].body.as_ref().unwrap()["target"]["name"], "n1");
}

fn pod_condition(p: &Pod, type_: &str) -> Option<PodCondition> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .cloned()
}

/// The API server's pod strategy and binding storage for scheduling gates: a gated pod is created
/// `PodScheduled=False` (reason `SchedulingGated`), cannot be bound, may lose gates but not gain
/// them, and binds once the last one is gone.
#[tokio::test]
async fn scheduling_gates_block_binding_until_removed() {
    let server = FakeApiServer::start().await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let mut gated = pod("g", None);
    gated.spec.as_mut().unwrap().scheduling_gates = Some(vec![
        k8s_openapi::api::core::v1::PodSchedulingGate { name: "a".into() },
        k8s_openapi::api::core::v1::PodSchedulingGate { name: "b".into() },
    ]);
    let created = pods.create(&PostParams::default(), &gated).await.unwrap();
    let c = pod_condition(&created, "PodScheduled").expect("a gated pod is created with PodScheduled");
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref(), c.message.as_deref()),
        (
            "False",
            Some("SchedulingGated"),
            Some("Scheduling is blocked due to non-empty scheduling gates")
        )
    );
    let plain = pods.create(&PostParams::default(), &pod("plain", None)).await.unwrap();
    assert!(pod_condition(&plain, "PodScheduled").is_none());

    let err = bind(&pods, "g", "n1", None).await.unwrap_err();
    let kube::Error::Api(status) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(status.code, 409);
    assert!(
        status.message.contains("pod g has non-empty .spec.schedulingGates"),
        "{}",
        status.message
    );

    // Adding a gate is refused; removing one is allowed.
    let add = json!({"spec": {"schedulingGates": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}});
    let err = pods
        .patch("g", &PatchParams::default(), &Patch::Merge(&add))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(status.code, 422);
    assert!(
        status.message.contains(
            "spec.schedulingGates[2].name: Forbidden: only deletion is allowed, but found new scheduling gate 'c'"
        ),
        "{}",
        status.message
    );
    let fewer = json!({"spec": {"schedulingGates": [{"name": "b"}]}});
    pods.patch("g", &PatchParams::default(), &Patch::Merge(&fewer))
        .await
        .unwrap();
    assert_eq!(api_code(&bind(&pods, "g", "n1", None).await.unwrap_err()).0, 409);
    let none = json!({"spec": {"schedulingGates": null}});
    pods.patch("g", &PatchParams::default(), &Patch::Merge(&none))
        .await
        .unwrap();
    assert_eq!(bind(&pods, "g", "n1", None).await.unwrap().code, 201);
    let bound = pods.get("g").await.unwrap();
    assert_eq!(pod_condition(&bound, "PodScheduled").unwrap().status, "True");
}

/// kube-apiserver's binding subresource (`setPodNodeAndMetadata` in
/// pkg/registry/core/pod/storage/storage.go) copies the Binding's annotations onto the pod,
/// overwriting a key the pod already has and keeping the others; the fake does the same.
#[tokio::test]
async fn binding_annotations_are_copied_onto_the_pod() {
    let server = FakeApiServer::start().await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let mut p = pod("p", None);
    p.metadata.annotations = Some(
        [
            ("keep.example/x".to_string(), "1".to_string()),
            ("placement.dev/arm".to_string(), "stale".to_string()),
        ]
        .into(),
    );
    let created = pods.create(&PostParams::default(), &p).await.unwrap();
    let mut b = binding("p", "n1", created.metadata.uid.as_deref());
    b.metadata.annotations = Some(
        [
            ("placement.dev/arm".to_string(), "candidate".to_string()),
            ("placement.dev/policy".to_string(), "bin-packing".to_string()),
        ]
        .into(),
    );
    let ok: Status = pods
        .create_subresource("binding", "p", &PostParams::default(), &b)
        .await
        .unwrap();
    assert_eq!(ok.code, 201);
    let bound = pods.get("p").await.unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("n1"));
    assert_eq!(
        bound.metadata.annotations.unwrap(),
        [
            ("keep.example/x".to_string(), "1".to_string()),
            ("placement.dev/arm".to_string(), "candidate".to_string()),
            ("placement.dev/policy".to_string(), "bin-packing".to_string()),
        ]
        .into()
    );
}

#[tokio::test]
async fn racing_bindings_have_exactly_one_winner() {
    let server = FakeApiServer::start().await;
    server.create_pod(pod("race", None));
    let mut tasks = Vec::new();
    for i in 0..8 {
        let api: Api<Pod> = Api::default_namespaced(server.client());
        tasks.push(tokio::spawn(
            async move { bind(&api, "race", &format!("n{i}"), None).await },
        ));
    }
    let mut wins = 0;
    let mut conflicts = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => wins += 1,
            Err(e) => {
                assert_eq!(api_code(&e).0, 409);
                conflicts += 1;
            }
        }
    }
    assert_eq!((wins, conflicts), (1, 7));
    assert_eq!(server.bindings_succeeded(), 1);
}

#[tokio::test]
async fn compaction_and_dropped_watches_force_a_relist() {
    let server = FakeApiServer::start().await;
    server.create_pod(pod("a", None));
    let pods: Api<Pod> = Api::all(server.client());
    let mut stream = spawn_watcher(pods, watcher::Config::default());
    assert_eq!(initial_names(&mut stream).await, BTreeSet::from(["a".to_string()]));
    assert!(server.wait_until(WAIT, |s| s.active_watches() == 1).await);

    // The world changes, the history is compacted away and the watch connection breaks.
    server.create_pod(pod("b", None));
    server.delete_pod("default", "a");
    server.compact();
    server.drop_watches();

    // The watcher reconnects from its old resourceVersion, gets 410 Expired and relists.
    assert_eq!(initial_names(&mut stream).await, BTreeSet::from(["b".to_string()]));
    let expired = server
        .requests_matching(&matcher("GET", "/api/v1/pods").watch(true))
        .len();
    assert!(expired >= 2, "the watcher re-watched after the drop");
    assert!(
        server.watches_expired() >= 1,
        "the re-watch was answered with 410 Expired"
    );
    let lists = server.count_requests(&matcher("GET", "/api/v1/pods").watch(false));
    assert_eq!(lists, 2, "one initial list and one relist");

    // And it keeps converging afterwards.
    server.create_pod(pod("c", None));
    match next_event(&mut stream).await {
        Event::Apply(p) => assert_eq!(p.name_any(), "c"),
        other => panic!("expected Apply(c), got {other:?}"),
    }
}

#[tokio::test]
async fn raw_watch_from_compacted_version_gets_410_error_event() {
    let server = FakeApiServer::start().await;
    let pods: Api<Pod> = Api::all(server.client());
    let rv = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    server.create_pod(pod("a", None));
    server.compact();
    let mut events = pods.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
    match events.try_next().await.unwrap() {
        Some(WatchEvent::Error(status)) => {
            assert_eq!(status.code, 410);
            assert_eq!(status.reason, "Expired");
            assert!(
                status.message.starts_with("too old resource version: "),
                "{}",
                status.message
            );
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    assert!(
        events.try_next().await.unwrap().is_none(),
        "the stream ends after the error"
    );
}

#[tokio::test]
async fn unbound_field_selector_turns_binding_into_delete() {
    let server = FakeApiServer::start().await;
    server.create_pod(pod("pending", None));
    server.create_pod(pod("running", Some("n1")));
    let pods: Api<Pod> = Api::all(server.client());
    let config = watcher::Config::default().fields("spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed");
    let mut stream = spawn_watcher(pods.clone(), config);
    assert_eq!(
        initial_names(&mut stream).await,
        BTreeSet::from(["pending".to_string()])
    );

    let ns_pods: Api<Pod> = Api::default_namespaced(server.client());
    bind(&ns_pods, "pending", "n2", None).await.unwrap();
    match next_event(&mut stream).await {
        Event::Delete(p) => {
            assert_eq!(p.name_any(), "pending");
            assert_eq!(p.resource_version(), Some(server.resource_version().to_string()));
        }
        other => panic!("expected Delete(pending), got {other:?}"),
    }

    let bound = pods
        .list(&ListParams::default().fields("spec.nodeName!="))
        .await
        .unwrap();
    let names: BTreeSet<String> = bound.items.iter().map(|p| p.name_any()).collect();
    assert_eq!(names, BTreeSet::from(["pending".to_string(), "running".to_string()]));
    let on_n1 = pods
        .list(&ListParams::default().fields("spec.nodeName=n1,spec.schedulerName=placement"))
        .await
        .unwrap();
    assert_eq!(on_n1.items.len(), 1);
    let err = pods
        .list(&ListParams::default().fields("spec.bogus=1"))
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), (400, "BadRequest".into()));
}

#[tokio::test]
async fn lease_create_and_replace_conflicts() {
    let server = FakeApiServer::start().await;
    let leases: Api<Lease> = Api::namespaced(server.client(), "kube-system");
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some("placement-binder".into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("a".into()),
            lease_duration_seconds: Some(15),
            ..Default::default()
        }),
    };
    let created = leases.create(&PostParams::default(), &lease).await.unwrap();
    let err = leases.create(&PostParams::default(), &lease).await.unwrap_err();
    assert_eq!(api_code(&err), (409, "AlreadyExists".into()));

    let mut mine = created.clone();
    mine.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let replaced = leases
        .replace("placement-binder", &PostParams::default(), &mine)
        .await
        .unwrap();
    assert_ne!(replaced.resource_version(), created.resource_version());

    // Replacing again from the stale copy loses the optimistic-concurrency race.
    let mut stale = created;
    stale.spec.as_mut().unwrap().holder_identity = Some("c".into());
    let err = leases
        .replace("placement-binder", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), (409, "Conflict".into()));
    assert_eq!(
        server
            .get_lease("kube-system", "placement-binder")
            .unwrap()
            .spec
            .unwrap()
            .holder_identity
            .as_deref(),
        Some("b")
    );

    // Server-side apply: another manager changing an owned field conflicts unless forced.
    let apply =
        |who: &str| json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": {"holderIdentity": who}});
    // The holder written by the replace above is owned by the update's manager.
    let err = leases
        .patch("placement-binder", &PatchParams::apply("a"), &Patch::Apply(apply("a")))
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), (409, "Conflict".into()));
    leases
        .patch(
            "placement-binder",
            &PatchParams::apply("a").force(),
            &Patch::Apply(apply("a")),
        )
        .await
        .unwrap();
    let err = leases
        .patch("placement-binder", &PatchParams::apply("z"), &Patch::Apply(apply("z")))
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), (409, "Conflict".into()));
    let forced = leases
        .patch(
            "placement-binder",
            &PatchParams::apply("z").force(),
            &Patch::Apply(apply("z")),
        )
        .await
        .unwrap();
    assert_eq!(forced.spec.unwrap().holder_identity.as_deref(), Some("z"));
}

#[tokio::test]
async fn injected_500_then_recovery_and_503_is_retried_by_kube() {
    let server = FakeApiServer::start().await;
    server.create_node(node("n1"));
    let nodes: Api<Node> = Api::all(server.client());

    server.fail_next(1, matcher("GET", "/api/v1/nodes"), 500);
    let err = nodes.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(api_code(&err), (500, "InternalError".into()));
    assert_eq!(nodes.list(&ListParams::default()).await.unwrap().items.len(), 1);
    let statuses: Vec<u16> = server
        .requests_matching(&matcher("GET", "/api/v1/nodes"))
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, [500, 200]);

    // kube::Client retries 503 by itself: the caller only sees success.
    server.clear_requests();
    server.fail_next_with(2, matcher("GET", "/api/v1/nodes/n1"), Failure::new(503));
    assert_eq!(nodes.get("n1").await.unwrap().name_any(), "n1");
    let statuses: Vec<u16> = server.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [503, 503, 200]);
}

#[tokio::test]
async fn delayed_request_times_out_client_but_still_applies() {
    let server = FakeApiServer::start().await;
    server.create_pod(pod("slow", None));
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    server.delay_next(1, matcher("POST", "/binding"), Duration::from_millis(600));
    let res = tokio::time::timeout(Duration::from_millis(100), bind(&pods, "slow", "n1", None)).await;
    assert!(res.is_err(), "the client gave up first");
    assert!(
        server
            .wait_until(WAIT, |s| s
                .get_pod("default", "slow")
                .and_then(|p| p.spec?.node_name)
                .is_some())
            .await
    );
    // The retry a cautious client would make now learns the pod is already bound.
    let err = bind(&pods, "slow", "n1", None).await.unwrap_err();
    assert_eq!(api_code(&err).0, 409);
}

#[tokio::test]
async fn status_patch_merges_pod_scheduled_condition() {
    let server = FakeApiServer::start().await;
    let mut p = pod("p", None);
    p.status = Some(PodStatus {
        phase: Some("Pending".into()),
        conditions: Some(vec![PodCondition {
            type_: "ContainersReady".into(),
            status: "False".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    server.create_pod(p);
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let patch = json!({"status": {
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                        "message": "0/3 nodes are available: 3 Insufficient cpu."}],
        "nominatedNodeName": "n2"
    }, "spec": {"nodeName": "sneaky"}});
    let patched = pods
        .patch_status("p", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
    let status = patched.status.unwrap();
    let types: Vec<&str> = status
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(types, ["ContainersReady", "PodScheduled"]);
    assert_eq!(status.nominated_node_name.as_deref(), Some("n2"));
    assert_eq!(
        patched.spec.unwrap().node_name,
        None,
        "the status subresource ignores spec"
    );

    // A strategic patch updates the condition with the same type in place.
    let again =
        json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulerError"}]}});
    let patched = pods
        .patch_status("p", &PatchParams::default(), &Patch::Strategic(&again))
        .await
        .unwrap();
    let conds = patched.status.unwrap().conditions.unwrap();
    assert_eq!(conds.len(), 2);
    assert_eq!(conds[1].reason.as_deref(), Some("SchedulerError"));

    // A JSON merge patch replaces lists wholesale, as the real server does.
    let merge = json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False"}]}});
    let patched = pods
        .patch_status("p", &PatchParams::default(), &Patch::Merge(&merge))
        .await
        .unwrap();
    assert_eq!(patched.status.unwrap().conditions.unwrap().len(), 1);

    // Through the main resource, spec.nodeName is immutable.
    let err = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"nodeName": "n1"}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), (422, "Invalid".into()));
}

#[tokio::test]
async fn events_of_both_apis_are_stored() {
    let server = FakeApiServer::start().await;
    let created = server.create_pod(pod("p", None));
    let recorder = Recorder::new(server.client(), Reporter::from("placement".to_string()));
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: created.metadata.name.clone(),
        namespace: created.metadata.namespace.clone(),
        uid: created.metadata.uid.clone(),
        ..Default::default()
    };
    let ev = RecorderEvent {
        type_: EventType::Warning,
        reason: "FailedScheduling".into(),
        note: Some("0/1 nodes are available".into()),
        action: "Scheduling".into(),
        secondary: None,
    };
    recorder.publish(&ev, &reference).await.unwrap();
    recorder.publish(&ev, &reference).await.unwrap(); // a series: merge-patched in place

    let core: Api<CoreEvent> = Api::default_namespaced(server.client());
    core.create(
        &PostParams::default(),
        &CoreEvent {
            metadata: ObjectMeta {
                generate_name: Some("p.".into()),
                ..Default::default()
            },
            involved_object: reference.clone(),
            reason: Some("Scheduled".into()),
            message: Some("Successfully assigned default/p to n1".into()),
            type_: Some("Normal".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();

    let events = server.events();
    assert_eq!(events.len(), 2);
    let core_ev = events.iter().find(|e| e.api_version == "v1").unwrap();
    assert_eq!(core_ev.reason.as_deref(), Some("Scheduled"));
    assert!(core_ev.name.starts_with("p."));
    let v1 = events.iter().find(|e| e.api_version == "events.k8s.io/v1").unwrap();
    assert_eq!(v1.reason.as_deref(), Some("FailedScheduling"));
    assert_eq!(v1.regarding_name.as_deref(), Some("p"));
    assert_eq!(server.events_v1()[0].series.as_ref().map(|s| s.count), Some(2));
    assert_eq!(core.list(&ListParams::default()).await.unwrap().items.len(), 1);
}

#[tokio::test]
async fn raw_watch_sends_bookmarks_and_ends_at_timeout() {
    let server = FakeApiServer::start_with(FakeApiServerConfig {
        bookmark_interval: Duration::from_millis(100),
        ..Default::default()
    })
    .await;
    let nodes: Api<Node> = Api::all(server.client());
    let rv = nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    server.create_node(node("n1"));
    let started = std::time::Instant::now();
    let events: Vec<_> = nodes
        .watch(&WatchParams::default().timeout(1), &rv)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(5),
        "{elapsed:?}"
    );
    assert!(matches!(&events[0], WatchEvent::Added(n) if n.name_any() == "n1"));
    let bookmarks: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            WatchEvent::Bookmark(b) => Some(b.metadata.resource_version.clone()),
            _ => None,
        })
        .collect();
    assert!(bookmarks.len() >= 3, "{bookmarks:?}");
    assert_eq!(bookmarks.last().unwrap(), &server.resource_version().to_string());
}

#[tokio::test]
async fn streaming_list_watcher_and_deletes() {
    let server = FakeApiServer::start().await;
    server.create_pod(pod("a", None));
    server.create_pod(pod("b", None));
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let mut stream = spawn_watcher(pods.clone(), watcher::Config::default().streaming_lists());
    assert_eq!(
        initial_names(&mut stream).await,
        BTreeSet::from(["a".to_string(), "b".to_string()])
    );
    pods.delete("a", &DeleteParams::default()).await.unwrap();
    match next_event(&mut stream).await {
        Event::Delete(p) => assert_eq!(p.name_any(), "a"),
        other => panic!("expected Delete(a), got {other:?}"),
    }
    assert_eq!(server.count_requests(&matcher("GET", "sendInitialEvents=true")), 1);
    assert!(server.get_raw(Kind::Pod, Some("default"), "a").is_none());
    let err = pods.delete("a", &DeleteParams::default()).await.unwrap_err();
    assert_eq!(api_code(&err), (404, "NotFound".into()));
    assert!(server.count_requests(&RequestMatcher::any()) >= 3);
}

#[tokio::test]
async fn kube_lease_manager_elects_and_hands_over() {
    use kube_lease_manager::{LeaseManagerBuilder, LeaseParams};
    let server = FakeApiServer::start().await;
    let manager = |id: &str| {
        LeaseManagerBuilder::new(server.client(), "placement-binder")
            .with_namespace("kube-system")
            .with_parameters(LeaseParams::new(id, 2, 1))
            .build()
    };
    let a = manager("a").await.unwrap();
    let b = manager("b").await.unwrap();
    assert!(tokio::time::timeout(WAIT, a.changed()).await.unwrap().unwrap());
    let holder = |s: &FakeApiServer| {
        s.get_lease("kube-system", "placement-binder")
            .and_then(|l| l.spec?.holder_identity)
    };
    assert_eq!(holder(&server).as_deref(), Some("a"));
    // b cannot take a held lease (its server-side apply conflicts or it waits for expiry).
    assert!(tokio::time::timeout(Duration::from_millis(300), b.changed())
        .await
        .is_err());
    a.release().await.unwrap();
    assert!(tokio::time::timeout(WAIT, b.changed()).await.unwrap().unwrap());
    assert_eq!(holder(&server).as_deref(), Some("b"));
    assert!(server.count_requests(&matcher("PATCH", "/leases/placement-binder")) >= 3);
}

#[tokio::test]
async fn drop_watches_breaks_open_streams() {
    let server = FakeApiServer::start().await;
    let nodes: Api<Node> = Api::all(server.client());
    let rv = nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut events = nodes.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
    server.create_node(node("n1"));
    assert!(matches!(events.next().await, Some(Ok(WatchEvent::Added(_)))));
    server.drop_watches();
    // The connection breaks mid-stream; kube reports it as the end of the stream (maybe after an error).
    let rest = tokio::time::timeout(WAIT, events.collect::<Vec<_>>())
        .await
        .expect("stream ends");
    assert!(rest.iter().all(|r| r.is_err()), "{rest:?}");
    assert!(server.wait_until(WAIT, |s| s.active_watches() == 0).await);
}

#[tokio::test]
async fn metadata_watcher_gets_partial_objects() {
    let server = FakeApiServer::start().await;
    server.create_pod(pod("a", None));
    let pods: Api<Pod> = Api::all(server.client());
    let list = pods.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].metadata.name.as_deref(), Some("a"));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let client = server.client();
    tokio::spawn(async move {
        let meta: Api<PartialObjectMeta<Pod>> = Api::all(client);
        let mut s = watcher::watcher(meta, watcher::Config::default()).boxed();
        while let Some(ev) = s.next().await {
            match ev {
                Ok(ev) => {
                    if tx.send(ev).is_err() {
                        break;
                    }
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    });
    assert_eq!(initial_names(&mut rx).await, BTreeSet::from(["a".to_string()]));
    server.create_pod(pod("b", None));
    match next_event(&mut rx).await {
        Event::Apply(m) => assert_eq!(m.metadata.name.as_deref(), Some("b")),
        other => panic!("expected Apply(b), got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_writers_and_watchers_converge() {
    let server = FakeApiServer::start_with(FakeApiServerConfig {
        bookmark_interval: Duration::from_millis(50),
        ..Default::default()
    })
    .await;
    let all: Api<Pod> = Api::all(server.client());
    // Watchers with different selectors; each keeps its own view of the matching pods.
    let selectors = [
        (None, None),
        (Some("app=web"), None),
        (Some("shard in (s0,s1)"), None),
        (None, Some("spec.nodeName=")),
        (None, Some("spec.nodeName!=")),
    ];
    let mut views = Vec::new();
    for (labels, fields) in selectors {
        let mut config = watcher::Config::default();
        if let Some(l) = labels {
            config = config.labels(l);
        }
        if let Some(f) = fields {
            config = config.fields(f);
        }
        let view = std::sync::Arc::new(parking_lot::Mutex::new(BTreeSet::new()));
        let v = view.clone();
        let mut rx = spawn_watcher(all.clone(), config);
        tokio::spawn(async move {
            let mut pending = BTreeSet::new();
            while let Some(ev) = rx.recv().await {
                match ev {
                    Event::Init => pending.clear(),
                    Event::InitApply(p) => {
                        pending.insert(p.name_any());
                    }
                    Event::InitDone => *v.lock() = std::mem::take(&mut pending),
                    Event::Apply(p) => {
                        v.lock().insert(p.name_any());
                    }
                    Event::Delete(p) => {
                        v.lock().remove(&p.name_any());
                    }
                }
            }
        });
        views.push((labels, fields, view));
    }
    // Four writers create 30 pods each through the API; half get bound, some deleted.
    let mut writers = Vec::new();
    for w in 0..4 {
        let api: Api<Pod> = Api::default_namespaced(server.client());
        writers.push(tokio::spawn(async move {
            for i in 0..30 {
                let name = format!("w{w}-{i}");
                let mut p = pod(&name, None);
                p.metadata
                    .labels
                    .as_mut()
                    .unwrap()
                    .insert("shard".into(), format!("s{}", i % 4));
                if i % 3 == 0 {
                    p.metadata.labels.as_mut().unwrap().insert("app".into(), "db".into());
                }
                api.create(&PostParams::default(), &p).await.unwrap();
                if i % 2 == 0 {
                    bind(&api, &name, "n1", None).await.unwrap();
                }
                if i % 5 == 0 {
                    api.delete(&name, &DeleteParams::default().grace_period(0))
                        .await
                        .unwrap();
                }
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    server.drop_watches(); // reconnects resume from their last resourceVersion mid-flight
    let expected = |labels: Option<&str>, fields: Option<&str>| -> BTreeSet<String> {
        server
            .pods()
            .into_iter()
            .filter(|p| {
                let l = p.metadata.labels.clone().unwrap_or_default();
                let bound = p.spec.as_ref().and_then(|s| s.node_name.clone()).is_some();
                let label_ok = match labels {
                    Some("app=web") => l.get("app").map(String::as_str) == Some("web"),
                    Some(_) => matches!(l.get("shard").map(String::as_str), Some("s0" | "s1")),
                    None => true,
                };
                let field_ok = match fields {
                    Some("spec.nodeName=") => !bound,
                    Some(_) => bound,
                    None => true,
                };
                label_ok && field_ok
            })
            .map(|p| p.name_any())
            .collect()
    };
    for (labels, fields, view) in &views {
        let want = expected(*labels, *fields);
        assert!(!want.is_empty());
        let converged = server.wait_until(WAIT, |_| *view.lock() == want).await;
        assert!(converged, "{labels:?} {fields:?}: {:?} != {want:?}", view.lock());
    }
    assert_eq!(server.pods().len(), 4 * 24);
    assert_eq!(server.bindings_succeeded(), 4 * 15);
}

#[tokio::test]
async fn shutdown_stops_serving() {
    let server = FakeApiServer::start().await;
    let nodes: Api<Node> = Api::all(server.client());
    assert!(nodes.list(&ListParams::default()).await.is_ok());
    let version = server.client().apiserver_version().await.unwrap();
    assert_eq!((version.major.as_str(), version.minor.as_str()), ("1", "34"));
    server.shutdown().await;
    let err = tokio::time::timeout(WAIT, nodes.list(&ListParams::default()))
        .await
        .expect("fails fast");
    assert!(err.is_err());
}

#[tokio::test]
async fn deleting_a_scheduled_pod_is_graceful_until_the_kubelet_deletes_it_again() {
    let server = FakeApiServer::start().await;
    let mut running = pod("running", Some("n1"));
    if let Some(spec) = running.spec.as_mut() {
        spec.termination_grace_period_seconds = Some(20);
    }
    server.create_pod(running);
    server.create_pod(pod("pending", None));
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let mut rx = spawn_watcher(pods.clone(), watcher::Config::default());
    assert_eq!(initial_names(&mut rx).await.len(), 2);

    // A pod on a node: marked with the pod's grace period, kept, and seen modified.
    let uid = pods.get("running").await.unwrap().metadata.uid.unwrap();
    let marked = pods
        .delete(
            "running",
            &DeleteParams::default().preconditions(kube::api::Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
        )
        .await
        .unwrap()
        .left()
        .expect("a graceful delete returns the pod");
    assert_eq!(marked.metadata.deletion_grace_period_seconds, Some(20));
    let ts = marked.metadata.deletion_timestamp.expect("deletionTimestamp set").0;
    let ahead = ts.duration_since(k8s_openapi::jiff::Timestamp::now()).as_secs();
    assert!(
        (15..=20).contains(&ahead),
        "deletionTimestamp is now + grace, {ahead}s ahead"
    );
    match next_event(&mut rx).await {
        Event::Apply(p) => assert!(p.metadata.deletion_timestamp.is_some()),
        other => panic!("expected the marked pod, got {other:?}"),
    }
    assert!(pods.get("running").await.is_ok(), "still there while terminating");
    // Deleting again with a longer grace changes nothing; the kubelet's grace 0 removes it.
    pods.delete("running", &DeleteParams::default().grace_period(25))
        .await
        .unwrap();
    pods.delete("running", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    match next_event(&mut rx).await {
        Event::Delete(p) => assert_eq!(p.metadata.name.as_deref(), Some("running")),
        other => panic!("expected the deletion, got {other:?}"),
    }
    // An unscheduled pod goes at once.
    pods.delete("pending", &DeleteParams::default()).await.unwrap();
    match next_event(&mut rx).await {
        Event::Delete(p) => assert_eq!(p.metadata.name.as_deref(), Some("pending")),
        other => panic!("expected the deletion, got {other:?}"),
    }
    let err = pods.get("running").await.unwrap_err();
    assert_eq!(api_code(&err).0, 404);
}

#[tokio::test]
async fn resource_claims_slices_and_classes_are_served_with_a_claim_status_subresource() {
    use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimConsumerReference, ResourceSlice};
    let server = FakeApiServer::start().await;
    let client = server.client();
    let classes: Api<DeviceClass> = Api::all(client.clone());
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), "ml");
    let class: DeviceClass =
        serde_json::from_value(json!({"metadata": {"name": "gpu"}, "spec": {"selectors": []}})).unwrap();
    classes.create(&PostParams::default(), &class).await.unwrap();
    let slice: ResourceSlice = serde_json::from_value(json!({"metadata": {"name": "n1-gpus"},
        "spec": {"driver": "gpu.example.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0"}]}}))
    .unwrap();
    slices.create(&PostParams::default(), &slice).await.unwrap();
    // Cluster-scoped kinds: listed (and selected by spec.nodeName) across the cluster.
    assert_eq!(classes.get("gpu").await.unwrap().name_any(), "gpu");
    let on_n1 = slices
        .list(&ListParams::default().fields("spec.nodeName=n1"))
        .await
        .unwrap();
    assert_eq!(on_n1.items.len(), 1);
    assert!(slices
        .list(&ListParams::default().fields("spec.nodeName=n2"))
        .await
        .unwrap()
        .items
        .is_empty());

    let mut rx = spawn_watcher(Api::<ResourceClaim>::all(client.clone()), watcher::Config::default());
    assert!(initial_names(&mut rx).await.is_empty());
    // A status set on create is dropped, as the API server's create strategy drops it.
    let claim: ResourceClaim = serde_json::from_value(json!({"metadata": {"name": "c"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {"reservedFor": [{"resource": "pods", "name": "p0", "uid": "u0"}]}}))
    .unwrap();
    let created = claims.create(&PostParams::default(), &claim).await.unwrap();
    assert!(created.status.is_none_or(|s| s.reserved_for.is_none()));
    // The main resource keeps status; the status subresource changes nothing but status.
    let mut current = claims.get("c").await.unwrap();
    current.metadata.finalizers = Some(vec!["resource.kubernetes.io/delete-protection".into()]);
    current.status.get_or_insert_with(Default::default).reserved_for = Some(vec![ResourceClaimConsumerReference {
        api_group: None,
        resource: "pods".into(),
        name: "ignored".into(),
        uid: "ignored".into(),
    }]);
    let mut current = claims.replace("c", &PostParams::default(), &current).await.unwrap();
    assert!(current.status.as_ref().is_none_or(|s| s.reserved_for.is_none()));
    assert_eq!(current.finalizers(), ["resource.kubernetes.io/delete-protection"]);
    let reserved = |name: &str, uid: &str| ResourceClaimConsumerReference {
        api_group: None,
        resource: "pods".into(),
        name: name.into(),
        uid: uid.into(),
    };
    current.metadata.finalizers = None;
    current.status.get_or_insert_with(Default::default).reserved_for =
        Some(vec![reserved("p1", "u1"), reserved("p2", "u2")]);
    let stale = current.clone();
    let current = claims
        .replace_status("c", &PostParams::default(), &current)
        .await
        .unwrap();
    assert_eq!(current.finalizers(), ["resource.kubernetes.io/delete-protection"]);
    // A status update carrying a stale resourceVersion conflicts.
    let err = claims
        .replace_status("c", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert_eq!(api_code(&err).0, 409);
    // A strategic merge patch deletes one reservation by its merge key (uid), with a uid precondition.
    let uid = current.uid().unwrap();
    let patch = json!({"metadata": {"uid": uid}, "status": {"reservedFor": [{"$patch": "delete", "uid": "u1"}]}});
    let patched = claims
        .patch_status("c", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    let uids: Vec<String> = patched
        .status
        .and_then(|s| s.reserved_for)
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.uid)
        .collect();
    assert_eq!(uids, ["u2"]);
    let wrong_uid =
        json!({"metadata": {"uid": "not-the-claim"}, "status": {"reservedFor": [{"$patch": "delete", "uid": "u2"}]}});
    let err = claims
        .patch_status("c", &PatchParams::default(), &Patch::Strategic(wrong_uid))
        .await
        .unwrap_err();
    assert_eq!(api_code(&err).0, 409);
    // The watch saw the create and each change, in order, with increasing resourceVersions.
    let mut seen = Vec::new();
    while seen.len() < 4 {
        if let Event::Apply(c) = next_event(&mut rx).await {
            seen.push(c);
        }
    }
    let rvs: Vec<u64> = seen
        .iter()
        .map(|c| c.resource_version().unwrap().parse().unwrap())
        .collect();
    assert!(rvs.windows(2).all(|w| w[0] < w[1]), "{rvs:?}");
    let reservations = |c: &ResourceClaim| {
        c.status
            .as_ref()
            .and_then(|s| s.reserved_for.as_ref())
            .map_or(0, Vec::len)
    };
    assert_eq!(seen.iter().map(reservations).collect::<Vec<_>>(), [0, 0, 2, 1]);
    server.shutdown().await;
}

#[tokio::test]
async fn pod_groups_are_served_with_a_status_subresource_that_merges_conditions_by_type() {
    use k8s_openapi::api::scheduling::v1beta1::PodGroup;
    let server = FakeApiServer::start().await;
    let client = server.client();
    let groups: Api<PodGroup> = Api::namespaced(client.clone(), "ml");
    let mut rx = spawn_watcher(Api::<PodGroup>::all(client.clone()), watcher::Config::default());
    assert!(initial_names(&mut rx).await.is_empty());
    // A status set on create is dropped, as the API server's create strategy drops it.
    let group: PodGroup = serde_json::from_value(json!({"metadata": {"name": "trainer"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}},
        "status": {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled",
                                   "message": "", "lastTransitionTime": "2026-11-29T00:00:00Z"}]}}))
    .unwrap();
    let created = groups.create(&PostParams::default(), &group).await.unwrap();
    assert!(created.status.is_none_or(|s| s.conditions.is_none()));
    let condition = |type_: &str, status: &str| {
        json!({"type": type_, "status": status, "reason": "Test", "message": "",
               "lastTransitionTime": "2026-11-29T00:00:00Z"})
    };
    // A strategic merge patch of status merges conditions by type, as kube-scheduler's
    // PatchPodGroupStatus relies on.
    let patch = |conditions: serde_json::Value| Patch::Strategic(json!({"status": {"conditions": conditions}}));
    groups
        .patch_status(
            "trainer",
            &PatchParams::default(),
            &patch(json!([condition("DisruptionTarget", "False")])),
        )
        .await
        .unwrap();
    let patched = groups
        .patch_status(
            "trainer",
            &PatchParams::default(),
            &patch(json!([condition("PodGroupInitiallyScheduled", "True")])),
        )
        .await
        .unwrap();
    let types: Vec<(String, String)> = patched
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    assert_eq!(
        types,
        [
            ("DisruptionTarget".to_string(), "False".to_string()),
            ("PodGroupInitiallyScheduled".to_string(), "True".to_string())
        ]
    );
    // The main resource keeps status: an update that drops it changes only the spec.
    let mut current = groups.get("trainer").await.unwrap();
    current.spec.scheduling_policy.gang =
        Some(k8s_openapi::api::scheduling::v1beta1::GangSchedulingPolicy { min_count: 6 });
    current.status = None;
    let updated = groups
        .replace("trainer", &PostParams::default(), &current)
        .await
        .unwrap();
    assert_eq!(updated.spec.scheduling_policy.gang.map(|g| g.min_count), Some(6));
    assert_eq!(updated.status.and_then(|s| s.conditions).map(|c| c.len()), Some(2));
    groups.delete("trainer", &DeleteParams::default()).await.unwrap();
    // The watch saw the create, each change and the deletion.
    let mut applied = 0;
    loop {
        match next_event(&mut rx).await {
            Event::Apply(_) => applied += 1,
            Event::Delete(g) => {
                assert_eq!(g.metadata.name.as_deref(), Some("trainer"));
                break;
            }
            _ => {}
        }
    }
    assert_eq!(applied, 4, "created, two status patches, one update");
    server.shutdown().await;
}

#[tokio::test]
async fn a_server_without_the_workload_api_answers_pod_groups_with_404_and_does_not_discover_them() {
    use k8s_openapi::api::scheduling::v1beta1::PodGroup;
    let server = FakeApiServer::start_with(FakeApiServerConfig {
        serve_pod_groups: false,
        ..FakeApiServerConfig::default()
    })
    .await;
    let client = server.client();
    let err = Api::<PodGroup>::all(client.clone())
        .list(&ListParams::default().limit(1))
        .await
        .unwrap_err();
    assert_eq!(api_code(&err).0, 404);
    let groups = client.list_api_groups().await.unwrap();
    assert!(!groups.groups.iter().any(|g| g.name == "scheduling.k8s.io"));
    assert!(groups.groups.iter().any(|g| g.name == "resource.k8s.io"));
    let err = client
        .list_api_group_resources("scheduling.k8s.io/v1beta1")
        .await
        .unwrap_err();
    assert_eq!(api_code(&err).0, 404);
    // Served by default, with its status subresource.
    let served = FakeApiServer::start().await;
    let resources = served
        .client()
        .list_api_group_resources("scheduling.k8s.io/v1beta1")
        .await
        .unwrap();
    let names: Vec<&str> = resources.resources.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["podgroups", "podgroups/status"]);
    server.shutdown().await;
    served.shutdown().await;
}
