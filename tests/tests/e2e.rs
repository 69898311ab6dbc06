//! End to end against a real cluster: set `E2E_KUBECONFIG` to a kubeconfig file (kind, minikube,
//! any conformant cluster where you may create Nodes, Pods, Namespaces, Events and Leases).
//!
//! The test creates three Node objects (no kubelet needed: only their status is set), a namespace
//! and pods naming `placement-scheduler`, runs a decision service and the binder in-process against
//! the cluster, and checks the Bindings, the `Scheduled` events, and for a pod that fits nowhere the
//! `PodScheduled=False`/`Unschedulable` condition and the `FailedScheduling` event with
//! kube-scheduler's message. Everything it created is deleted at the end.
//!
//! Without `E2E_KUBECONFIG` the test says it is skipped and returns.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Namespace, Node, Pod, PodSpec, ResourceRequirements, Toleration};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use placement_binder::kube_api::{KubeApi, KubeApiConfig};
use placement_binder::leader::Leadership;
use placement_binder::metrics::BinderMetrics;
use placement_binder::replicas::{EndpointSource, ReplicaConfig, ReplicaPool};
use placement_binder::{Binder, BinderConfig};
use placement_scheduler::grpc::{serve, Metrics, ServerConfig};
use placement_tests::fixtures::{eventually, quantities};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

const SCHEDULER: &str = "placement-scheduler";
const WAIT: Duration = Duration::from_secs(120);

/// Tolerations for the taints the node lifecycle controller puts on nodes without a kubelet.
fn kubelet_less_tolerations() -> Vec<Toleration> {
    ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"]
        .iter()
        .map(|k| Toleration {
            key: Some(k.to_string()),
            operator: Some("Exists".into()),
            ..Default::default()
        })
        .collect()
}

fn pod(name: &str, run: &str, cpu: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            scheduler_name: Some(SCHEDULER.into()),
            node_selector: Some([("placement-e2e".to_string(), run.to_string())].into()),
            tolerations: Some(kubelet_less_tolerations()),
            containers: vec![Container {
                name: "app".into(),
                image: Some("registry.k8s.io/pause:3.10".into()),
                resources: Some(ResourceRequirements {
                    requests: Some(quantities(&[("cpu", cpu), ("memory", "64Mi")])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binder_schedules_pods_on_a_real_cluster() {
    let Ok(path) = std::env::var("E2E_KUBECONFIG") else {
        eprintln!(
            "e2e skipped: set E2E_KUBECONFIG to a kubeconfig file to run the end-to-end suite against a real cluster"
        );
        return;
    };
    let kubeconfig = Kubeconfig::read_from(&path).expect("E2E_KUBECONFIG is a readable kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig is usable");
    let client = kube::Client::try_from(config).expect("client from kubeconfig");
    let run = format!("{:x}", std::process::id() as u64 ^ 0x5eed_0000);
    let ns = format!("placement-e2e-{run}");
    let nodes: Api<Node> = Api::all(client.clone());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);

    namespaces
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(ns.clone()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("create namespace");
    let node_names: Vec<String> = (1..=3).map(|i| format!("placement-e2e-{run}-n{i}")).collect();
    for name in &node_names {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"placement-e2e": run, "kubernetes.io/hostname": name}},
            "spec": {}
        }))
        .unwrap();
        nodes.create(&PostParams::default(), &node).await.expect("create node");
        let status = serde_json::json!({"status": {
            "allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"},
            "capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"}
        }});
        nodes
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("set node status");
    }

    // A decision replica and the binder, in-process, against the cluster.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let (stop_service, service_stopped) = oneshot::channel::<()>();
    tokio::spawn(serve(
        listener,
        ServerConfig::default(),
        Arc::new(Metrics::new()),
        async {
            let _ = service_stopped.await;
        },
    ));
    let metrics = Arc::new(BinderMetrics::new());
    let leadership = Leadership::always(&metrics);
    let binder = Binder::new(
        BinderConfig::default(),
        KubeApi::new(
            client.clone(),
            KubeApiConfig {
                reporting_controller: SCHEDULER.into(),
                reporting_instance: format!("{SCHEDULER}-e2e"),
                request_timeout: Duration::from_secs(10),
            },
        ),
        Arc::new(ReplicaPool::new(EndpointSource::Static(vec![endpoint]), ReplicaConfig::default()).unwrap()),
        metrics,
        leadership.receiver(),
    );
    let (stop_watch, watch_stopped) = oneshot::channel::<()>();
    let watch = tokio::spawn(placement_binder::watch::run(client.clone(), binder.clone(), async {
        let _ = watch_stopped.await;
    }));
    let (stop_binder, binder_stopped) = oneshot::channel::<()>();
    let looping = {
        let binder = binder.clone();
        tokio::spawn(async move {
            binder
                .run(async {
                    let _ = binder_stopped.await;
                })
                .await
        })
    };

    // 3 nodes × 2 CPUs: 20 pods of 250m fit (5 CPUs), one of 10 CPUs fits nowhere.
    for i in 0..20 {
        pods.create(&PostParams::default(), &pod(&format!("web-{i}"), &run, "250m"))
            .await
            .expect("create pod");
    }
    pods.create(&PostParams::default(), &pod("huge", &run, "10"))
        .await
        .expect("create pod");

    eventually(WAIT, "every web pod bound and huge marked unschedulable", || {
        let pods = pods.clone();
        async move {
            let list = pods.list(&Default::default()).await.unwrap().items;
            let bound = list
                .iter()
                .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
                .count();
            let huge_marked = list.iter().any(|p| {
                p.metadata.name.as_deref() == Some("huge")
                    && p.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "PodScheduled" && c.status == "False"))
            });
            bound == 20 && huge_marked
        }
    })
    .await;

    let list = pods.list(&Default::default()).await.unwrap().items;
    let mut per_node: HashMap<String, usize> = HashMap::new();
    for p in &list {
        if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.clone()) {
            assert!(node_names.contains(&n), "pod bound to a node outside the test: {n}");
            *per_node.entry(n).or_default() += 1;
        }
    }
    assert!(
        per_node.values().all(|n| *n <= 8),
        "no node holds more than 2 CPUs of 250m pods: {per_node:?}"
    );
    let huge = list
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("huge"))
        .unwrap();
    let cond = huge
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
        .unwrap();
    assert_eq!(cond.reason.as_deref(), Some("Unschedulable"));
    assert!(
        cond.message.as_deref().unwrap_or("").contains("3 Insufficient cpu"),
        "kube-scheduler's message names the three nodes: {:?}",
        cond.message
    );

    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    eventually(WAIT, "Scheduled and FailedScheduling events", || {
        let events = events.clone();
        async move {
            let list = events.list(&Default::default()).await.unwrap().items;
            let scheduled = list.iter().filter(|e| e.reason.as_deref() == Some("Scheduled")).count();
            let failed = list.iter().any(|e| {
                e.reason.as_deref() == Some("FailedScheduling")
                    && e.note.as_deref().is_some_and(|n| n.starts_with("0/"))
            });
            scheduled >= 20 && failed
        }
    })
    .await;
    let list = events.list(&Default::default()).await.unwrap().items;
    assert!(list
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Scheduled"))
        .all(|e| e
            .note
            .as_deref()
            .is_some_and(|n| n.starts_with(&format!("Successfully assigned {ns}/")))));

    // Stop, then clean up everything the test made.
    let _ = stop_binder.send(());
    looping.await.unwrap();
    let _ = stop_watch.send(());
    watch.await.unwrap();
    let _ = stop_service.send(());
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    for p in &list_names(&pods).await {
        let _ = pods.delete(p, &force).await;
    }
    let _ = namespaces.delete(&ns, &DeleteParams::default()).await;
    for n in &node_names {
        let _ = nodes.delete(n, &DeleteParams::default()).await;
    }
}

async fn list_names(pods: &Api<Pod>) -> Vec<String> {
    pods.list(&Default::default())
        .await
        .map(|l| l.items.into_iter().filter_map(|p| p.metadata.name).collect())
        .unwrap_or_default()
}
