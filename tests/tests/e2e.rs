//! End to end against a real cluster: set `E2E_KUBECONFIG` to a kubeconfig file (kind, minikube,
//! any conformant cluster where you may create Nodes, Pods, Namespaces, Events, Leases,
//! PriorityClasses, PodDisruptionBudgets and RBAC objects). `scripts/e2e-cluster.sh` starts a
//! local control plane and sets it (CI does).
//!
//! Each test creates kubelet-less Nodes (only their status is set) carrying a label of its own, a
//! namespace and pods that select those nodes and name a scheduler of the test's own, runs the
//! decision service and the binder (in-process, or as real `binder-agent run` processes where a
//! test kills or restarts one), checks what lands in the cluster, and deletes what it created.
//! Where no kubelet exists to confirm a graceful deletion, the test confirms it (deletes the pod
//! with grace period 0), as the kubelet would.
//!
//! Tests that need more than a kubeconfig say they are skipped without it:
//! `E2E_KUBE_SCHEDULER=1` when the cluster's kube-scheduler serves `default-scheduler` (the
//! field-by-field comparison), `E2E_RESTART_APISERVER` a command that restarts the API server
//! (killing it at once when its environment has `E2E_RESTART_SIGNAL=KILL`).
//! Without `E2E_KUBECONFIG` every test says it is skipped and returns.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::discovery::Discovery;
use kube::ResourceExt;
use placement_binder::kube_api::{KubeApi, KubeApiConfig};
use placement_binder::leader::Leadership;
use placement_binder::metrics::BinderMetrics;
use placement_binder::replicas::{EndpointSource, ReplicaConfig, ReplicaPool};
use placement_binder::{Binder, BinderConfig};
use placement_tests::e2e::{
    cluster, marked_unschedulable, node_of, pod_for, scheduled_condition, serial, BinderProcess, Cluster, Scope,
    Service, WAIT,
};
use placement_tests::fixtures::eventually;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

// DeviceTaintRules against the cluster's kube-scheduler (a file of its own: this one is long).
#[path = "e2e/dra_taints.rs"]
mod dra_taints;

// Consumable capacity against the cluster's kube-scheduler (issue 45, item 3).
#[path = "e2e/dra_capacity.rs"]
mod dra_capacity;

// DynamicResources' PostFilter deallocating a pinned claim, against the cluster's kube-scheduler
// (issue 45, item 5).
#[path = "e2e/dra_postfilter.rs"]
mod dra_postfilter;

// Devices with binding conditions, bound once attached, against the cluster's kube-scheduler
// (issue 45, item 4).
#[path = "e2e/dra_binding.rs"]
mod dra_binding;

// kube's CEL environment for device selectors, against the cluster's kube-scheduler (issue 45,
// item 6).
#[path = "e2e/dra_cel.rs"]
mod dra_cel;

// kube-scheduler's metric names, labels, buckets and counts against the binder's (issue 47).
#[path = "e2e/metrics.rs"]
mod metrics;

// The Helm chart's objects applied and its workloads' args, environment and files run (issue 47).
#[path = "e2e/chart.rs"]
mod chart_run;

// A seeded PodGroup differential against a kube-scheduler of the cluster's version (issue 46).
#[path = "e2e/podgroup_diff.rs"]
mod podgroup_diff;

// A seeded DRA differential against a kube-scheduler of the cluster's version (issue 45).
#[path = "e2e/dra_diff.rs"]
mod dra_diff;

// Traces in KEP-5927's shape, from the binder through a decision replica (issue 47).
#[path = "e2e/tracing.rs"]
mod tracing;

// CompositePodGroups over two topology levels against the cluster's kube-scheduler (issue 46).
#[path = "e2e/composite.rs"]
mod composite;

/// The binder's loop and watch in this process, for `scope.scheduler`, stopped by [`stop`].
struct InProcessBinder {
    stops: Vec<oneshot::Sender<()>>,
    tasks: Vec<JoinHandle<()>>,
    binder: Binder<KubeApi>,
    _services: Vec<Service>,
}

impl InProcessBinder {
    async fn start(cluster: &Cluster, scope: &Scope) -> InProcessBinder {
        Self::start_with(cluster, scope, Service::start().await).await
    }

    /// A binder for `scope` deciding with `service`.
    async fn start_with(cluster: &Cluster, scope: &Scope, service: Service) -> InProcessBinder {
        Self::start_on(cluster, scope, vec![service], BinderConfig::default()).await
    }

    /// A binder for `scope` deciding with `services` and `config` (its scheduler name set).
    async fn start_on(
        cluster: &Cluster,
        scope: &Scope,
        services: Vec<Service>,
        config: BinderConfig,
    ) -> InProcessBinder {
        let metrics = Arc::new(BinderMetrics::new());
        let leadership = Leadership::always(&metrics);
        let config = BinderConfig {
            scheduler_names: vec![scope.scheduler.clone()],
            ..config
        };
        let binder = Binder::new(
            config,
            KubeApi::new(
                cluster.client.clone(),
                KubeApiConfig {
                    reporting_controller: scope.scheduler.clone(),
                    reporting_instance: format!("{}-e2e", scope.scheduler),
                    request_timeout: Duration::from_secs(10),
                },
            ),
            Arc::new(
                ReplicaPool::new(
                    EndpointSource::Static(services.iter().map(|s| s.endpoint.clone()).collect()),
                    ReplicaConfig::default(),
                )
                .expect("a replica pool"),
            ),
            metrics,
            leadership.receiver(),
        );
        let (stop_watch, watch_stopped) = oneshot::channel::<()>();
        let watch = tokio::spawn({
            let (client, binder) = (cluster.client.clone(), binder.clone());
            async move {
                let _ = placement_binder::watch::run(client, binder, async {
                    let _ = watch_stopped.await;
                })
                .await;
            }
        });
        let binder_handle = binder.clone();
        let (stop_loop, loop_stopped) = oneshot::channel::<()>();
        let looping = tokio::spawn(async move {
            let _ = binder
                .run(async {
                    let _ = loop_stopped.await;
                })
                .await;
            drop(leadership);
        });
        InProcessBinder {
            stops: vec![stop_loop, stop_watch],
            tasks: vec![looping, watch],
            binder: binder_handle,
            _services: services,
        }
    }

    async fn stop(self) {
        for s in self.stops {
            let _ = s.send(());
        }
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Every pod of the test's namespace.
async fn list_pods(scope: &Scope) -> Vec<Pod> {
    scope
        .pods()
        .list(&ListParams::default())
        .await
        .expect("list pods")
        .items
}

/// Events of the test's namespace about `pod`, with `reason`.
async fn events_for(scope: &Scope, pod: &str, reason: &str) -> Vec<Event> {
    let events: Api<Event> = Api::namespaced(scope.client.clone(), &scope.ns);
    events
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod) && e.reason.as_deref() == Some(reason)
        })
        .collect()
}

/// Millicores requested by a pod's containers.
fn cpu_millis(pod: &Pod) -> u64 {
    let spec = pod.spec.as_ref().expect("a pod spec");
    spec.containers
        .iter()
        .filter_map(|c| c.resources.as_ref()?.requests.as_ref()?.get("cpu"))
        .map(|q| {
            let s = &q.0;
            match s.strip_suffix('m') {
                Some(m) => m.parse::<u64>().expect("millicores"),
                None => s.parse::<u64>().expect("cores") * 1000,
            }
        })
        .sum()
}

/// Panics unless every node's bound pods request at most `capacity_millis` of cpu, and every
/// pod has at most one `Scheduled` event (one successful bind).
async fn assert_no_overcommit_no_double_bind(scope: &Scope, capacity_millis: u64) {
    let pods = list_pods(scope).await;
    let mut per_node: HashMap<String, u64> = HashMap::new();
    for p in &pods {
        if let Some(n) = node_of(p) {
            assert!(
                scope.nodes.iter().any(|m| m == n),
                "pod bound outside the test's nodes: {n}"
            );
            *per_node.entry(n.to_string()).or_default() += cpu_millis(p);
        }
    }
    for (node, used) in &per_node {
        assert!(
            *used <= capacity_millis,
            "node {node} overcommitted: {used}m of {capacity_millis}m"
        );
    }
    let events: Api<Event> = Api::namespaced(scope.client.clone(), &scope.ns);
    let mut scheduled: HashMap<String, usize> = HashMap::new();
    for e in events.list(&ListParams::default()).await.expect("list events").items {
        if e.reason.as_deref() == Some("Scheduled") {
            let name = e.regarding.and_then(|r| r.name).unwrap_or_default();
            *scheduled.entry(name).or_default() += 1;
        }
    }
    for (pod, n) in &scheduled {
        assert!(*n <= 1, "pod {pod} has {n} Scheduled events: bound twice?");
    }
}

/// Creates `count` pods `<prefix>-<i>` of `cpu`, `per_second` of them a second, retrying a
/// creation the API server refuses (while it restarts, say) until [`WAIT`] has passed.
fn stream_pods(scope: &Scope, prefix: &str, count: usize, cpu: &str, per_second: u64) -> JoinHandle<()> {
    let pods = scope.pods();
    let (ns, scheduler, run) = (scope.ns.clone(), scope.scheduler.clone(), scope.run.clone());
    let (prefix, cpu) = (prefix.to_string(), cpu.to_string());
    tokio::spawn(async move {
        let gap = Duration::from_millis(1000 / per_second.max(1));
        for i in 0..count {
            let pod = pod_for(&ns, &format!("{prefix}-{i}"), &scheduler, &run, &cpu);
            let deadline = tokio::time::Instant::now() + WAIT;
            loop {
                match pods.create(&PostParams::default(), &pod).await {
                    Ok(_) => break,
                    Err(kube::Error::Api(e)) if e.code == 409 => break, // created before a lost reply
                    Err(e) => {
                        assert!(tokio::time::Instant::now() < deadline, "create pod {prefix}-{i}: {e}");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
            tokio::time::sleep(gap).await;
        }
    })
}

/// Waits until every pod of the namespace whose name starts with `prefix` (`count` of them) is
/// bound.
async fn wait_bound(scope: &Scope, prefix: &str, count: usize) {
    eventually(WAIT, &format!("{count} pods {prefix}-* bound"), || async {
        match scope.pods().list(&ListParams::default()).await {
            Ok(list) => {
                list.items
                    .iter()
                    .filter(|p| p.name_any().starts_with(&format!("{prefix}-")) && node_of(p).is_some())
                    .count()
                    == count
            }
            Err(_) => false, // the API server may be restarting
        }
    })
    .await;
}

/// Two replicas and two batches in flight, each on its own partition of the nodes, on a real
/// API server: every pod is bound once with no node overcommitted, pods pinned to a node (some
/// of them in the other batch's partition) reach it, and a pod that fits nowhere gets
/// kube-scheduler's message for the whole cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_in_flight_on_two_replicas_bind_each_pod_once() {
    let Some(cluster) = cluster("batches_in_flight_on_two_replicas_bind_each_pod_once").await else {
        return;
    };
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "partitions").await;
    // Three nodes in each partition (each batch spreads its pods over its partition's nodes
    // only, so the partitions must be alike, as a hash makes them on large clusters).
    let mut suffixes: [Vec<String>; 2] = Default::default();
    for i in 1.. {
        let suffix = format!("n{i}");
        let side = placement_binder::partitions::partition_of(&format!("placement-e2e-{}-{suffix}", scope.run), 2);
        if suffixes[side as usize].len() < 3 {
            suffixes[side as usize].push(suffix);
        }
        if suffixes.iter().all(|s| s.len() == 3) {
            break;
        }
    }
    let mut nodes = Vec::new();
    for suffix in suffixes.concat() {
        nodes.push(scope.add_node(&suffix, "2", &[]).await);
    }
    // Every pod exists before the binder starts, so its first batches are decided at once.
    // The pod pinned to node `n`: `pinned-<suffix>`.
    let pinned = |n: &str| format!("pinned-{}", n.rsplit('-').next().unwrap_or_default());
    for n in &nodes {
        let mut p = scope.pod(&pinned(n), "250m");
        if let Some(spec) = p.spec.as_mut() {
            spec.node_selector = Some([("kubernetes.io/hostname".to_string(), n.clone())].into());
        }
        scope.create(&p).await;
    }
    for i in 0..24 {
        scope.create(&scope.pod(&format!("web-{i}"), "250m")).await;
    }
    scope.create(&scope.pod("huge", "10")).await;
    let binder = InProcessBinder::start_on(
        &cluster,
        &scope,
        vec![Service::start().await, Service::start().await],
        BinderConfig {
            batch_size: 4,
            batches_in_flight: 2,
            ..BinderConfig::default()
        },
    )
    .await;

    eventually(WAIT, "30 pods bound and huge marked unschedulable", || async {
        let list = list_pods(&scope).await;
        let bound = list.iter().filter(|p| node_of(p).is_some()).count();
        let huge_marked = list.iter().any(|p| p.name_any() == "huge" && marked_unschedulable(p));
        bound == 30 && huge_marked
    })
    .await;
    assert_no_overcommit_no_double_bind(&scope, 2000).await;
    let list = list_pods(&scope).await;
    for n in &nodes {
        let name = pinned(n);
        let pod = list.iter().find(|p| p.name_any() == name).expect("the pinned pod");
        assert_eq!(node_of(pod), Some(n.as_str()), "{name} must land on its node");
    }
    let huge = list.iter().find(|p| p.name_any() == "huge").expect("the huge pod");
    let cond = scheduled_condition(huge).expect("a PodScheduled condition");
    // The cluster may hold other nodes than the test's (which its pods do not select).
    let message = cond.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("0/") && message.contains(" 6 Insufficient cpu"),
        "kube-scheduler's message for the whole cluster, not for a partition: {message:?}"
    );
    assert_eq!(
        binder.binder.most_batches_in_flight(),
        2,
        "two batches were decided at once"
    );
    binder.stop().await;
    scope.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binder_schedules_pods_on_a_real_cluster() {
    let Some(cluster) = cluster("binder_schedules_pods_on_a_real_cluster").await else {
        return;
    };
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "binds").await;
    for i in 1..=3 {
        scope.add_node(&format!("n{i}"), "2", &[]).await;
    }
    let binder = InProcessBinder::start(&cluster, &scope).await;

    // 3 nodes × 2 CPUs: 20 pods of 250m fit (5 CPUs), one of 10 CPUs fits nowhere.
    for i in 0..20 {
        scope.create(&scope.pod(&format!("web-{i}"), "250m")).await;
    }
    scope.create(&scope.pod("huge", "10")).await;

    eventually(WAIT, "every web pod bound and huge marked unschedulable", || async {
        let list = list_pods(&scope).await;
        let bound = list.iter().filter(|p| node_of(p).is_some()).count();
        let huge_marked = list.iter().any(|p| p.name_any() == "huge" && marked_unschedulable(p));
        bound == 20 && huge_marked
    })
    .await;
    assert_no_overcommit_no_double_bind(&scope, 2000).await;
    let list = list_pods(&scope).await;
    let huge = list.iter().find(|p| p.name_any() == "huge").expect("the huge pod");
    let cond = scheduled_condition(huge).expect("a PodScheduled condition");
    assert_eq!(cond.reason.as_deref(), Some("Unschedulable"));
    assert!(
        cond.message.as_deref().unwrap_or("").contains("3 Insufficient cpu"),
        "kube-scheduler's message names the three nodes: {:?}",
        cond.message
    );

    let events: Api<Event> = Api::namespaced(cluster.client.clone(), &scope.ns);
    eventually(WAIT, "Scheduled and FailedScheduling events", || async {
        let list = events.list(&Default::default()).await.expect("list events").items;
        let scheduled = list.iter().filter(|e| e.reason.as_deref() == Some("Scheduled")).count();
        let failed = list.iter().any(|e| {
            e.reason.as_deref() == Some("FailedScheduling") && e.note.as_deref().is_some_and(|n| n.starts_with("0/"))
        });
        scheduled >= 20 && failed
    })
    .await;
    let list = events.list(&Default::default()).await.expect("list events").items;
    let prefix = format!("Successfully assigned {}/", scope.ns);
    assert!(list
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Scheduled"))
        .all(|e| e.note.as_deref().is_some_and(|n| n.starts_with(&prefix))));

    binder.stop().await;
    scope.cleanup().await;
}

/// The fields of an event a user reads, with the scheduler's own name replaced by `SCHEDULER`.
fn event_view(e: &Event, scheduler: &str) -> BTreeMap<&'static str, String> {
    let r = e.regarding.clone().unwrap_or_default();
    let mut v = BTreeMap::new();
    v.insert("type", e.type_.clone().unwrap_or_default());
    v.insert("reason", e.reason.clone().unwrap_or_default());
    v.insert("action", e.action.clone().unwrap_or_default());
    v.insert("note", e.note.clone().unwrap_or_default());
    v.insert(
        "reportingController",
        e.reporting_controller
            .clone()
            .unwrap_or_default()
            .replace(scheduler, "SCHEDULER"),
    );
    v.insert(
        "reportingInstance starts with the controller",
        e.reporting_instance
            .as_deref()
            .unwrap_or_default()
            .starts_with(&format!("{scheduler}-"))
            .to_string(),
    );
    v.insert("eventTime set", e.event_time.is_some().to_string());
    v.insert("regarding.kind", r.kind.unwrap_or_default());
    v.insert("regarding.apiVersion", r.api_version.unwrap_or_default());
    v.insert("regarding.namespace", r.namespace.unwrap_or_default());
    v.insert("regarding.uid set", r.uid.is_some().to_string());
    v.insert("related set", e.related.is_some().to_string());
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_and_conditions_match_kube_scheduler() {
    let Some(cluster) = cluster("events_and_conditions_match_kube_scheduler").await else {
        return;
    };
    if std::env::var("E2E_KUBE_SCHEDULER").as_deref() != Ok("1") {
        eprintln!("e2e events_and_conditions_match_kube_scheduler: skipped: set E2E_KUBE_SCHEDULER=1 when the cluster's kube-scheduler serves default-scheduler");
        return;
    }
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "versus-kube").await;
    for i in 1..=3 {
        scope.add_node(&format!("n{i}"), "2", &[]).await;
    }
    let binder = InProcessBinder::start(&cluster, &scope).await;

    // The same pods for both schedulers: one fits, one asks for more cpu than any node has, one
    // selects a label no node has.
    let shapes = [
        ("fits", "500m", None),
        ("huge", "10", None),
        ("nowhere", "100m", Some(("disk", "ssd"))),
    ];
    for (who, scheduler) in [
        ("ours", scope.scheduler.clone()),
        ("kube", "default-scheduler".to_string()),
    ] {
        for (name, cpu, label) in shapes {
            let mut pod = pod_for(&scope.ns, &format!("{name}-{who}"), &scheduler, &scope.run, cpu);
            if let Some((k, v)) = label {
                let spec = pod.spec.as_mut().expect("a pod spec");
                spec.node_selector.get_or_insert_default().insert(k.into(), v.into());
            }
            scope.create(&pod).await;
        }
    }
    eventually(WAIT, "both schedulers decided every pod", || async {
        let pods = list_pods(&scope).await;
        let decided = |p: &Pod| node_of(p).is_some() || marked_unschedulable(p);
        pods.iter().filter(|p| decided(p)).count() == 6
    })
    .await;
    eventually(WAIT, "both schedulers wrote their events", || async {
        let mut all = true;
        for who in ["ours", "kube"] {
            all &= !events_for(&scope, &format!("fits-{who}"), "Scheduled").await.is_empty();
            for name in ["huge", "nowhere"] {
                all &= !events_for(&scope, &format!("{name}-{who}"), "FailedScheduling")
                    .await
                    .is_empty();
            }
        }
        all
    })
    .await;

    let pods = list_pods(&scope).await;
    let pod = |name: &str| pods.iter().find(|p| p.name_any() == name).cloned().expect("a test pod");
    assert!(node_of(&pod("fits-ours")).is_some() && node_of(&pod("fits-kube")).is_some());
    for (ours, theirs) in [
        ("fits-ours", "fits-kube"),
        ("huge-ours", "huge-kube"),
        ("nowhere-ours", "nowhere-kube"),
    ] {
        let (a, b) = (pod(ours), pod(theirs));
        let (ca, cb) = (scheduled_condition(&a), scheduled_condition(&b));
        let view = |c: Option<&k8s_openapi::api::core::v1::PodCondition>| {
            c.map(|c| {
                (
                    c.status.clone(),
                    c.reason.clone(),
                    c.message.clone(),
                    c.last_transition_time.is_some(),
                )
            })
        };
        assert_eq!(
            view(ca),
            view(cb),
            "PodScheduled condition of {ours} against kube-scheduler's {theirs}"
        );
        let reason = if node_of(&a).is_some() {
            "Scheduled"
        } else {
            "FailedScheduling"
        };
        let ea = events_for(&scope, ours, reason).await;
        let eb = events_for(&scope, theirs, reason).await;
        let (va, vb) = (
            event_view(&ea[0], &scope.scheduler),
            event_view(&eb[0], "default-scheduler"),
        );
        let mut va_cmp = va.clone();
        // The note of a Scheduled event names the pod and node: compare it with the names swapped.
        if reason == "Scheduled" {
            let note = format!(
                "Successfully assigned {}/{} to {}",
                scope.ns,
                theirs,
                node_of(&b).unwrap_or_default()
            );
            assert_eq!(
                va["note"],
                format!(
                    "Successfully assigned {}/{} to {}",
                    scope.ns,
                    ours,
                    node_of(&a).unwrap_or_default()
                )
            );
            va_cmp.insert("note", note);
        }
        assert_eq!(va_cmp, vb, "{reason} event of {ours} against kube-scheduler's {theirs}");
    }

    binder.stop().await;
    scope.cleanup().await;
}

/// Creates a PriorityClass `<prefix>-<run>` of `value`, owned by the scope.
async fn priority_class(scope: &mut Scope, prefix: &str, value: i32) -> String {
    priority_class_with(scope, prefix, value, None).await
}

/// [`priority_class`] with a `preemptionPolicy` (`Never`, `PreemptLowerPriority`).
async fn priority_class_with(scope: &mut Scope, prefix: &str, value: i32, preemption_policy: Option<&str>) -> String {
    let name = format!("{prefix}-{}", scope.run);
    let classes: Api<PriorityClass> = Api::all(scope.client.clone());
    let pc = PriorityClass {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        value: Some(value),
        preemption_policy: preemption_policy.map(str::to_string),
        ..Default::default()
    };
    classes
        .create(&PostParams::default(), &pc)
        .await
        .expect("create a PriorityClass");
    scope.owns("priorityclasses", &name);
    name
}

/// A pod of `scope` with a priority class, labels and, for pods bound at creation, a node.
fn prioritized(scope: &Scope, name: &str, cpu: &str, class: &str, app: &str, node: Option<&str>) -> Pod {
    let mut pod = scope.pod(name, cpu);
    pod.metadata.labels = Some([("app".to_string(), app.to_string())].into());
    let spec = pod.spec.as_mut().expect("a pod spec");
    spec.priority_class_name = Some(class.into());
    spec.node_name = node.map(str::to_string);
    pod
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption_evicts_unprotected_victims_and_binds_on_the_nominated_node() {
    let Some(cluster) = cluster("preemption_evicts_unprotected_victims_and_binds_on_the_nominated_node").await else {
        return;
    };
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "preemption").await;
    let guarded = scope.add_node("guarded", "1", &[]).await;
    let free = scope.add_node("free", "1", &[]).await;
    let low = priority_class(&mut scope, "placement-e2e-low", 10).await;
    let high = priority_class(&mut scope, "placement-e2e-high", 1000).await;
    // Two low-priority pods fill each node; a PodDisruptionBudget protects those on `guarded`.
    for (node, app) in [(&guarded, "guarded"), (&free, "free")] {
        for i in 0..2 {
            scope
                .create(&prioritized(
                    &scope,
                    &format!("{app}-{i}"),
                    "500m",
                    &low,
                    app,
                    Some(node),
                ))
                .await;
        }
    }
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(cluster.client.clone(), &scope.ns);
    let pdb: PodDisruptionBudget = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "guarded"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "guarded"}}}
    }))
    .expect("a PodDisruptionBudget");
    pdbs.create(&PostParams::default(), &pdb)
        .await
        .expect("create the PodDisruptionBudget");
    // The disruption controller (kube-controller-manager) computes the budget: no disruption
    // allowed, since two pods must stay available.
    eventually(WAIT, "the budget's status from the disruption controller", || async {
        pdbs.get("guarded")
            .await
            .ok()
            .and_then(|p| p.status)
            .is_some_and(|s| s.observed_generation.is_some() && s.disruptions_allowed == Some(0))
    })
    .await;

    let binder = InProcessBinder::start(&cluster, &scope).await;
    scope
        .create(&prioritized(&scope, "important", "1", &high, "important", None))
        .await;

    // The preemptor is nominated on the node whose victims no budget protects; both victims are
    // marked and deleted gracefully (no kubelet here to finish the deletion).
    eventually(WAIT, "nominatedNodeName and both victims terminating", || async {
        let pods = list_pods(&scope).await;
        let nominated = pods.iter().any(|p| {
            p.name_any() == "important"
                && p.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()) == Some(free.as_str())
        });
        let terminating = pods
            .iter()
            .filter(|p| p.name_any().starts_with("free-") && p.metadata.deletion_timestamp.is_some())
            .count();
        nominated && terminating == 2
    })
    .await;
    let pods = list_pods(&scope).await;
    for p in pods.iter().filter(|p| p.name_any().starts_with("free-")) {
        let target = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "DisruptionTarget"));
        assert_eq!(
            target.map(|c| c.reason.clone()),
            Some(Some("PreemptionByScheduler".into())),
            "{}",
            p.name_any()
        );
        assert!(
            !events_for(&scope, &p.name_any(), "Preempted").await.is_empty(),
            "Preempted event on {}",
            p.name_any()
        );
    }
    for p in pods.iter().filter(|p| p.name_any().starts_with("guarded-")) {
        assert!(
            p.metadata.deletion_timestamp.is_none(),
            "the budget protects {}",
            p.name_any()
        );
    }
    let important = pods
        .iter()
        .find(|p| p.name_any() == "important")
        .expect("the preemptor");
    assert!(node_of(important).is_none(), "not bound while its victims terminate");
    // Events are written asynchronously (as kube's broadcaster writes them), possibly after the
    // nomination and the victims' deletion were seen.
    eventually(
        WAIT,
        "the preemptor gets FailedScheduling with the service's message",
        || async { !events_for(&scope, "important", "FailedScheduling").await.is_empty() },
    )
    .await;

    // The kubelet's part: the victims' containers stopped, their deletion completes.
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    for i in 0..2 {
        let _ = scope.pods().delete(&format!("free-{i}"), &force).await;
    }
    eventually(WAIT, "the preemptor bound on its nominated node", || async {
        scope
            .pods()
            .get("important")
            .await
            .ok()
            .is_some_and(|p| node_of(&p) == Some(free.as_str()))
    })
    .await;

    binder.stop().await;
    scope.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_is_bound_whole_once_its_last_member_exists() {
    let Some(cluster) = cluster("a_gang_is_bound_whole_once_its_last_member_exists").await else {
        return;
    };
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "gang").await;
    for i in 1..=2 {
        scope.add_node(&format!("n{i}"), "2", &[]).await;
    }
    let binder = InProcessBinder::start(&cluster, &scope).await;
    let member = |i: usize| {
        let mut pod = scope.pod(&format!("train-{i}"), "500m");
        pod.metadata.labels = Some([("placement.dev/gang".to_string(), "train".to_string())].into());
        pod.metadata.annotations = Some([("placement.dev/gang-min-members".to_string(), "3".to_string())].into());
        pod
    };
    scope.create(&member(0)).await;
    scope.create(&member(1)).await;
    // Two of three: held, none bound (a second binder pass would have bound them by now).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        list_pods(&scope).await.iter().all(|p| node_of(p).is_none()),
        "no member of a short gang is bound"
    );
    scope.create(&member(2)).await;
    wait_bound(&scope, "train", 3).await;
    binder.stop().await;
    scope.cleanup().await;
}

/// A pod created with `spec.schedulingGates` is not bound while a gate is left, with the
/// `PodScheduled` condition kube writes for a gated pod (the same as a twin pod of the cluster's
/// kube-scheduler, with `E2E_KUBE_SCHEDULER=1`), and is bound once the last gate is removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_pod_waits_for_its_gates() {
    let Some(cluster) = cluster("a_gated_pod_waits_for_its_gates").await else {
        return;
    };
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "gates").await;
    scope.add_node("n1", "2", &[]).await;
    let binder = InProcessBinder::start(&cluster, &scope).await;
    let compare = std::env::var("E2E_KUBE_SCHEDULER").as_deref() == Ok("1");
    let gate = || {
        Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
            name: "example.com/hold".into(),
        }])
    };
    let mut gated = scope.pod("gated-0", "100m");
    gated.spec.as_mut().expect("a pod spec").scheduling_gates = gate();
    let created = scope.create(&gated).await;
    assert_eq!(
        created.spec.as_ref().and_then(|s| s.scheduling_gates.clone()),
        gate(),
        "the API server stores spec.schedulingGates (1.26 and later)"
    );
    if compare {
        let mut twin = pod_for(&scope.ns, "gated-kube", "default-scheduler", &scope.run, "100m");
        twin.spec.as_mut().expect("a pod spec").scheduling_gates = gate();
        scope.create(&twin).await;
    }
    // An ungated pod created after it is bound: the binder has seen both by then.
    scope.create(&scope.pod("free-0", "100m")).await;
    wait_bound(&scope, "free", 1).await;
    let view = |p: &Pod| scheduled_condition(p).map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()));
    let p = scope.pods().get("gated-0").await.expect("the gated pod");
    assert_eq!(node_of(&p), None, "a gated pod is not bound");
    assert_eq!(
        view(&p),
        Some((
            "False".to_string(),
            Some("SchedulingGated".to_string()),
            Some("Scheduling is blocked due to non-empty scheduling gates".to_string())
        ))
    );
    if compare {
        let twin = scope.pods().get("gated-kube").await.expect("the twin pod");
        assert_eq!(node_of(&twin), None, "kube-scheduler leaves its gated pod too");
        assert_eq!(view(&p), view(&twin), "PodScheduled against kube-scheduler's twin");
    }
    let ungate = serde_json::json!({"spec": {"schedulingGates": null}});
    scope
        .pods()
        .patch(
            "gated-0",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&ungate),
        )
        .await
        .expect("remove the gate");
    wait_bound(&scope, "gated", 1).await;
    binder.stop().await;
    scope.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_killed_mid_run_loses_no_pod_and_binds_none_twice() {
    let Some(cluster) = cluster("the_leader_killed_mid_run_loses_no_pod_and_binds_none_twice").await else {
        return;
    };
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "leader").await;
    for i in 1..=3 {
        scope.add_node(&format!("n{i}"), "2", &[]).await;
    }
    let service = Service::start().await;
    let lease = (scope.ns.as_str(), "placement-binder");
    let mut binders: Vec<BinderProcess> = ["a", "b"]
        .iter()
        .map(|id| {
            BinderProcess::start(
                &cluster.kubeconfig,
                &scope.scheduler,
                &service.endpoint,
                &format!("{}-{id}", scope.run),
                Some(lease),
            )
        })
        .collect();
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), &scope.ns);
    let holder = || async {
        leases
            .get("placement-binder")
            .await
            .ok()
            .and_then(|l| l.spec?.holder_identity)
    };
    eventually(WAIT, "a leader", || async { holder().await.is_some() }).await;

    // 120 pods of 50m fill the three nodes' 6 CPUs exactly: any overcommit leaves one out.
    let creating = stream_pods(&scope, "p", 120, "50m", 40);
    eventually(WAIT, "some pods bound", || async {
        list_pods(&scope).await.iter().filter(|p| node_of(p).is_some()).count() >= 20
    })
    .await;
    let first = holder().await.expect("a leader");
    let killed = binders
        .iter()
        .position(|b| b.identity == first)
        .expect("the leader is one of ours");
    binders[killed].kill();
    eventually(WAIT, "the other binder takes the lease", || async {
        holder().await.is_some_and(|h| h != first)
    })
    .await;
    creating.await.expect("pods created");
    wait_bound(&scope, "p", 120).await;
    assert_no_overcommit_no_double_bind(&scope, 2000).await;

    drop(binders);
    drop(service);
    scope.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binder_restarted_mid_run_loses_no_pod_and_binds_none_twice() {
    let Some(cluster) = cluster("a_binder_restarted_mid_run_loses_no_pod_and_binds_none_twice").await else {
        return;
    };
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "restart").await;
    for i in 1..=3 {
        scope.add_node(&format!("n{i}"), "2", &[]).await;
    }
    let service = Service::start().await;
    let identity = format!("{}-single", scope.run);
    let mut binder = BinderProcess::start(
        &cluster.kubeconfig,
        &scope.scheduler,
        &service.endpoint,
        &identity,
        None,
    );
    let creating = stream_pods(&scope, "p", 120, "50m", 40);
    eventually(WAIT, "some pods bound", || async {
        list_pods(&scope).await.iter().filter(|p| node_of(p).is_some()).count() >= 20
    })
    .await;
    binder.kill();
    // The restarted binder speaks HTTP/2 to the API server (`--api-http2`: every watch and write
    // on one connection), the first one HTTP/1.1: either way every pod is bound once.
    let _restarted = BinderProcess::start_with_args(
        &cluster.kubeconfig,
        &scope.scheduler,
        &service.endpoint,
        &identity,
        None,
        &["--api-http2"],
        &[],
    );
    creating.await.expect("pods created");
    wait_bound(&scope, "p", 120).await;
    assert_no_overcommit_no_double_bind(&scope, 2000).await;
    drop(service);
    scope.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_restarted_mid_run_loses_no_pod() {
    let Some(cluster) = cluster("the_api_server_restarted_mid_run_loses_no_pod").await else {
        return;
    };
    let Ok(restart) = std::env::var("E2E_RESTART_APISERVER") else {
        eprintln!("e2e the_api_server_restarted_mid_run_loses_no_pod: skipped: set E2E_RESTART_APISERVER to a command that restarts the cluster's API server (scripts/e2e-cluster.sh does)");
        return;
    };
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "apiserver").await;
    for i in 1..=3 {
        scope.add_node(&format!("n{i}"), "2", &[]).await;
    }
    let binder = InProcessBinder::start(&cluster, &scope).await;
    let creating = stream_pods(&scope, "p", 120, "50m", 40);
    eventually(WAIT, "some pods bound", || async {
        list_pods(&scope).await.iter().filter(|p| node_of(p).is_some()).count() >= 20
    })
    .await;
    let status =
        tokio::task::spawn_blocking(move || std::process::Command::new("bash").args(["-c", &restart]).status())
            .await
            .expect("the restart command's thread")
            .expect("run E2E_RESTART_APISERVER");
    assert!(status.success(), "E2E_RESTART_APISERVER failed: {status}");
    creating.await.expect("pods created");
    wait_bound(&scope, "p", 120).await;
    assert_no_overcommit_no_double_bind(&scope, 2000).await;
    binder.stop().await;
    scope.cleanup().await;
}

/// The API server killed and restarted while a binder with leader election places a backlog at size
/// (500 nodes of 2 CPUs, 7,000 pending pods of 150m: 6,500 slots): every watch comes back
/// `Expired`, the binder relists, keeps or regains its lease and goes on binding within seconds
/// of the API server's return; in the end every slot is filled, the other 500 pods are marked
/// unschedulable, no node is overcommitted and no pod has two `Scheduled` events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_restarted_under_a_large_backlog_resumes_binding_within_seconds() {
    let test = "the_api_server_restarted_under_a_large_backlog_resumes_binding_within_seconds";
    let Some(cluster) = cluster(test).await else {
        return;
    };
    let Ok(restart) = std::env::var("E2E_RESTART_APISERVER") else {
        eprintln!("e2e {test}: skipped: set E2E_RESTART_APISERVER to a command that restarts the cluster's API server (scripts/e2e-cluster.sh does)");
        return;
    };
    let _serial = serial().await;
    const NODES: usize = 500;
    const PODS: usize = 7_000;
    const SLOTS: usize = NODES * 13; // 13 × 150m in 2 CPUs
    let mut scope = Scope::new(&cluster, "apiserver-large").await;
    let started = std::time::Instant::now();
    scope.add_nodes(NODES, "2").await;
    {
        use futures::StreamExt;
        let pods = scope.pods();
        futures::stream::iter(0..PODS)
            .map(|i| {
                let (pods, pod) = (pods.clone(), scope.pod(&format!("p-{i}"), "150m"));
                async move { pods.create(&PostParams::default(), &pod).await.map(|_| ()) }
            })
            .buffer_unordered(32)
            .for_each(|r| async move { r.expect("create a pod") })
            .await;
    }
    eprintln!(
        "e2e {test}: {NODES} nodes and {PODS} pending pods created in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let service = Service::start().await;
    let binder = BinderProcess::start(
        &cluster.kubeconfig,
        &scope.scheduler,
        &service.endpoint,
        &format!("{}-a", scope.run),
        Some((scope.ns.as_str(), "placement-binder")),
    );
    let bound = || async { binder.metric("binder_binds_total{result=\"ok\"}").await };
    eventually(WAIT, "the binder bound 100 pods", || async {
        bound().await.is_some_and(|n| n >= 100.0)
    })
    .await;
    // Killed, not stopped: during its graceful termination (up to 10 s) kube-apiserver still
    // serves the binder's open connections, which can drain the whole backlog before the restart
    // and leave nothing to resume.
    let status = tokio::task::spawn_blocking(move || {
        std::process::Command::new("bash")
            .args(["-c", &restart])
            .env("E2E_RESTART_SIGNAL", "KILL")
            .status()
    })
    .await
    .expect("the restart command's thread")
    .expect("run E2E_RESTART_APISERVER");
    assert!(status.success(), "E2E_RESTART_APISERVER failed: {status}");
    // The restart command returns once the API server answers again.
    let back = std::time::Instant::now();
    let at_return = bound().await.unwrap_or_default();
    assert!(
        (at_return as usize) < SLOTS,
        "all {SLOTS} slots were filled before the API server went down: nothing left to resume \
         (does E2E_RESTART_APISERVER honour E2E_RESTART_SIGNAL=KILL?)"
    );
    eventually(WAIT, "a Binding after the API server's return", || async {
        bound().await.is_some_and(|n| n > at_return)
    })
    .await;
    let resumed = back.elapsed();
    eprintln!(
        "e2e {test}: {at_return} pods bound when the API server was back; the next Binding {:.2} s after its return",
        resumed.as_secs_f64()
    );
    assert!(
        resumed < Duration::from_secs(20),
        "binding resumed {resumed:?} after the API server's return (binder log: {})",
        binder.log.display()
    );
    let counts = || async {
        match scope.pods().list(&ListParams::default()).await {
            Ok(list) => (
                list.items.iter().filter(|p| node_of(p).is_some()).count(),
                list.items.iter().filter(|p| marked_unschedulable(p)).count(),
            ),
            Err(_) => (0, 0),
        }
    };
    eventually(WAIT, "every slot filled", || async { counts().await.0 == SLOTS }).await;
    eprintln!(
        "e2e {test}: {SLOTS} pods bound {:.1} s after the start",
        started.elapsed().as_secs_f64()
    );
    eventually(WAIT, "the other pods marked unschedulable", || async {
        counts().await == (SLOTS, PODS - SLOTS)
    })
    .await;
    eprintln!(
        "e2e {test}: the other {} marked unschedulable {:.1} s after the start",
        PODS - SLOTS,
        started.elapsed().as_secs_f64()
    );
    assert_no_overcommit_no_double_bind(&scope, 2000).await;
    drop(binder);
    drop(service);
    scope.cleanup().await;
}

/// The custom-logic example on a real cluster: the framework plugin it stands for, as a CEL
/// filter rule in the decision service's policy file, admits pods whose name contains `nginx`
/// only on a node labelled `test=test` (`no match label` elsewhere); a node with the label key
/// `test/test` is not one; other pods go anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_plugin_keeps_nginx_pods_on_test_test_nodes() {
    let Some(cluster) = cluster("the_seed_plugin_keeps_nginx_pods_on_test_test_nodes").await else {
        return;
    };
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "seed-plugin").await;
    scope.add_node("big", "8", &[]).await;
    scope.add_node("decoy", "4", &[("test/test", "")]).await;
    let small = scope.add_node("small-test", "2", &[("test", "test")]).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let policies = dir.path().join("policies.yaml");
    std::fs::write(
        &policies,
        "apiVersion: placement/v1\nkind: PolicyConfiguration\npolicies:\n  - name: nginx-on-test-nodes\n    rules:\n      \
         filters:\n        - name: nginx-needs-test-label\n          expression: >-\n            \
         !pod.metadata.name.contains('nginx')\n            || ('test' in node.metadata.labels && \
         node.metadata.labels['test'] == 'test')\n          reason: no match label\n",
    )
    .expect("write the policy file");
    let service = Service::start_with(placement_scheduler::grpc::ServerConfig {
        policy_file: Some(placement_scheduler::grpc::PolicyFileConfig {
            path: policies,
            reload_interval: None,
        }),
        ..Default::default()
    })
    .await;
    let binder = InProcessBinder::start_with(&cluster, &scope, service).await;
    for (name, cpu) in [
        ("nginx-1", "250m"),
        ("web-nginx-2", "250m"),
        ("nginx-huge", "4"),
        ("other-1", "250m"),
    ] {
        scope.create(&scope.pod(name, cpu)).await;
    }
    eventually(WAIT, "three pods bound, nginx-huge unschedulable", || async {
        let pods = list_pods(&scope).await;
        pods.iter().filter(|p| node_of(p).is_some()).count() == 3
            && pods
                .iter()
                .any(|p| p.name_any() == "nginx-huge" && marked_unschedulable(p))
    })
    .await;
    let pods = list_pods(&scope).await;
    let pod = |name: &str| pods.iter().find(|p| p.name_any() == name).expect("a test pod");
    assert_eq!(node_of(pod("nginx-1")), Some(small.as_str()));
    assert_eq!(node_of(pod("web-nginx-2")), Some(small.as_str()));
    assert!(node_of(pod("other-1")).is_some());
    // Nodes other tests create or delete meanwhile are in the message as kube counts them when
    // the pod was decided: the count is read from it, and every node beyond this test's three
    // must be one the pod's node affinity (its scope) rules out.
    let message = scheduled_condition(pod("nginx-huge"))
        .and_then(|c| c.message.clone())
        .unwrap_or_default();
    let total: usize = message
        .strip_prefix("0/")
        .and_then(|m| m.split_once(' '))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or(0);
    assert!(total >= 3, "{message}");
    let mut reasons = vec!["1 Insufficient cpu".to_string(), "2 no match label".to_string()];
    if total > 3 {
        reasons.push(format!(
            "{} node(s) didn't match Pod's node affinity/selector",
            total - 3
        ));
    }
    reasons.sort();
    assert!(
        message.starts_with(&format!(
            "0/{total} nodes are available: {}. preemption: ",
            reasons.join(", ")
        )),
        "{message}"
    );
    binder.stop().await;
    scope.cleanup().await;
}

/// A seeded generator for the differential test (SplitMix64).
struct Generator(u64);

impl Generator {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// True with probability `percent` %.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next() % items.len() as u64) as usize]
    }
}

/// The differential's volume for a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Volume {
    /// None.
    No,
    /// A WaitForFirstConsumer claim whose only volume is a local one on node `i` of each side.
    Local(usize),
    /// A WaitForFirstConsumer claim whose class has no volume.
    NoneAvailable,
    /// A claim that does not exist.
    Missing,
}

/// placement's `Rank` of `pod` against the cluster as it stands (every node, bound pod, claim,
/// volume and storage class, as the binder converts them): the node that scores best alone, or `None` when the best score ties or
/// no node fits.
async fn unique_best(
    cluster: &Cluster,
    scope: &Scope,
    client: &mut placement_scheduler::proto::placement_service_client::PlacementServiceClient<
        tonic::transport::Channel,
    >,
    pod: &Pod,
) -> Option<String> {
    use placement_scheduler::proto;
    let nodes = Api::<k8s_openapi::api::core::v1::Node>::all(cluster.client.clone())
        .list(&ListParams::default())
        .await
        .expect("list nodes")
        .items;
    let claims =
        Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(cluster.client.clone(), &scope.ns)
            .list(&ListParams::default())
            .await
            .expect("list claims")
            .items;
    let volumes = Api::<k8s_openapi::api::core::v1::PersistentVolume>::all(cluster.client.clone())
        .list(&ListParams::default())
        .await
        .expect("list volumes")
        .items;
    let classes = Api::<k8s_openapi::api::storage::v1::StorageClass>::all(cluster.client.clone())
        .list(&ListParams::default())
        .await
        .expect("list storage classes")
        .items;
    let mut snapshot = proto::Snapshot {
        nodes: nodes.iter().map(placement_binder::projection::node_info).collect(),
        persistent_volume_claims: claims.iter().map(placement_binder::projection::claim_info).collect(),
        persistent_volumes: volumes.iter().map(placement_binder::projection::volume_info).collect(),
        storage_classes: classes
            .iter()
            .map(placement_binder::projection::storage_class_info)
            .collect(),
        ..Default::default()
    };
    for p in list_pods(scope).await {
        let info = placement_binder::projection::pod_info(&p);
        if !info.spec.node_name.is_empty() && !info.terminal {
            snapshot.pods.push(info.spec);
        }
    }
    let mut spec = placement_binder::projection::pod_info(pod).spec;
    spec.uid = format!("rank-{}", pod.name_any());
    let ranking = client
        .rank(proto::RankRequest {
            snapshot: Some(proto::SnapshotRef {
                source: Some(proto::snapshot_ref::Source::Inline(snapshot)),
            }),
            pod: Some(spec),
            top_k: 2,
            ..Default::default()
        })
        .await
        .expect("Rank")
        .into_inner();
    match ranking.feasible.as_slice() {
        [only] => Some(only.node.clone()),
        [first, second, ..] if first.total > second.total => Some(first.node.clone()),
        _ => None,
    }
}

/// A differential test against the cluster's kube-scheduler 1.37 (with `E2E_KUBE_SCHEDULER=1`).
/// A seeded generator (`E2E_DIFF_SEED`, `E2E_DIFF_PODS`, `E2E_DIFF_NODES` for larger runs) makes
/// twin node sets, `ours` and `kube`, of the same shapes (cpu, zone, disk label, a NoSchedule
/// taint, cordon), and pods with cpu requests, a disk nodeSelector, tolerations, a host port, a
/// DoNotSchedule zone spread, a required hostname anti-affinity, a priority (none, 10 or 1000)
/// and a volume (a WaitForFirstConsumer claim with a local volume on one node, one whose class
/// has no volume, or a claim that does not exist). Each pod goes to both schedulers at once, each
/// twin selecting its side; once both decided: the pod is feasible on both sides or on neither,
/// with the same PodScheduled reason and message (the other side's nodes count alike in both).
/// Before each pod, placement's `Rank` of it against the cluster as it stands (the binder's
/// conversion of every node and bound pod) says whether one node scores best alone: then both
/// schedulers must bind it there (the twin node of the same index). A pod left unschedulable
/// that preempts must nominate the twin node on both sides and evict the twin victims (every
/// bound pod gets a distinct `status.startTime`, so kube's victim and node order is not left to
/// the clock); the victims are then deleted at once and both preemptors must bind on their
/// nominated nodes. A pod bound on both sides to nodes of different index when several nodes tie
/// (kube breaks ties at random, placement by a stable hash) is deleted on both, and every
/// unschedulable twin that nominated nothing is deleted once compared, so the two sides stay
/// alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_pods_are_decided_as_kube_scheduler_decides_them() {
    let test = "generated_pods_are_decided_as_kube_scheduler_decides_them";
    let Some(cluster) = cluster(test).await else {
        return;
    };
    if std::env::var("E2E_KUBE_SCHEDULER").as_deref() != Ok("1") {
        eprintln!(
            "e2e {test}: skipped: set E2E_KUBE_SCHEDULER=1 when the cluster's kube-scheduler serves default-scheduler"
        );
        return;
    }
    let env = |name: &str, default: u64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let seed = env("E2E_DIFF_SEED", 37);
    let (node_count, pod_count) = (env("E2E_DIFF_NODES", 6) as usize, env("E2E_DIFF_PODS", 40) as usize);
    let mut g = Generator(seed);
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "differential").await;
    let low = priority_class(&mut scope, "placement-e2e-diff-low", 10).await;
    let high = priority_class(&mut scope, "placement-e2e-diff-high", 1000).await;
    let nodes_api: Api<k8s_openapi::api::core::v1::Node> = Api::all(cluster.client.clone());
    let mut node_names: Vec<[String; 2]> = Vec::new();
    for i in 0..node_count {
        let cpu = *g.pick(&["2", "4"]);
        let zone = format!("z{}", i % 3);
        let disk = *g.pick(&["ssd", "hdd"]);
        let tainted = g.chance(20);
        let cordoned = g.chance(12);
        let mut twin = [String::new(), String::new()];
        for (s, side) in ["ours", "kube"].into_iter().enumerate() {
            let name = scope
                .add_node(
                    &format!("{side}-{i}"),
                    cpu,
                    &[("side", side), ("topology.kubernetes.io/zone", &zone), ("disk", disk)],
                )
                .await;
            let mut spec = serde_json::json!({"unschedulable": cordoned});
            if tainted {
                spec["taints"] = serde_json::json!([{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]);
            }
            nodes_api
                .patch(
                    &name,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(serde_json::json!({ "spec": spec })),
                )
                .await
                .expect("shape the node");
            twin[s] = name;
        }
        node_names.push(twin);
    }
    let binder = InProcessBinder::start(&cluster, &scope).await;
    let ranker = Service::start().await;
    let mut rank_client =
        placement_scheduler::proto::placement_service_client::PlacementServiceClient::connect(ranker.endpoint.clone())
            .await
            .expect("connect to the ranking service");
    let index_of = |node: &str| node.rsplit('-').next().unwrap_or_default().to_string();
    let (mut compared, mut bound_alike, mut ties, mut unique, mut preempted) = (0, 0, 0, 0, 0);
    let force = DeleteParams::default().grace_period(0);
    for k in 0..pod_count {
        let cpu = *g.pick(&["100m", "500m", "1", "1500m", "3"]);
        let disk = match g.next() % 4 {
            0 => Some("ssd"),
            1 => Some("hdd"),
            _ => None,
        };
        let tolerates = g.chance(30);
        let port = g.chance(20);
        let spread = g.chance(30);
        let solo = g.chance(20);
        let priority = match g.next() % 10 {
            0..=1 => Some(high.as_str()),
            2..=4 => Some(low.as_str()),
            _ => None,
        };
        let volume = match g.next() % 20 {
            0..=2 => Volume::Local(g.next() as usize % node_count),
            3..=4 => Volume::NoneAvailable,
            5 => Volume::Missing,
            _ => Volume::No,
        };
        let class = format!("wffc-{}-p{k}", scope.run);
        if volume != Volume::No && volume != Volume::Missing {
            scope
                .create_storage(
                    "storageclasses",
                    serde_json::json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                        "metadata": {"name": class},
                        "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}),
                )
                .await;
        }
        if matches!(volume, Volume::NoneAvailable | Volume::Local(_)) {
            for (s, side) in ["ours", "kube"].into_iter().enumerate() {
                scope
                    .create_claim(claim_json(&format!("c{k}-{side}"), &class, None))
                    .await;
                if let Volume::Local(i) = volume {
                    local_volume(&mut scope, &format!("v{k}-{side}"), &class, &node_names[i][s]).await;
                }
            }
            // Both schedulers' informers see the claims and volumes before the pods arrive (a
            // pod decided first is unschedulable for want of its volume, then retried).
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let mut twins = Vec::new();
        let mut best = None;
        for (side, scheduler) in [
            ("ours", scope.scheduler.clone()),
            ("kube", "default-scheduler".to_string()),
        ] {
            let name = format!("p{k}-{side}");
            let mut pod = pod_for(&scope.ns, &name, &scheduler, &scope.run, cpu);
            match volume {
                Volume::No => {}
                Volume::Missing => pod = with_claim(pod, &format!("missing-p{k}")),
                Volume::NoneAvailable | Volume::Local(_) => pod = with_claim(pod, &format!("c{k}-{side}")),
            }
            let spec = pod.spec.as_mut().expect("a pod spec");
            spec.priority_class_name = priority.map(str::to_string);
            let selector = spec.node_selector.get_or_insert_default();
            selector.insert("side".into(), side.into());
            if let Some(d) = disk {
                selector.insert("disk".into(), d.into());
            }
            if tolerates {
                spec.tolerations
                    .get_or_insert_default()
                    .push(k8s_openapi::api::core::v1::Toleration {
                        key: Some("dedicated".into()),
                        operator: Some("Equal".into()),
                        value: Some("x".into()),
                        effect: Some("NoSchedule".into()),
                        ..Default::default()
                    });
            }
            if port {
                spec.containers[0].ports = Some(vec![k8s_openapi::api::core::v1::ContainerPort {
                    container_port: 8080,
                    host_port: Some(8080),
                    ..Default::default()
                }]);
            }
            let mut labels = BTreeMap::new();
            if spread {
                labels.insert("app".to_string(), "spread".to_string());
                spec.topology_spread_constraints = Some(vec![k8s_openapi::api::core::v1::TopologySpreadConstraint {
                    max_skew: 1,
                    topology_key: "topology.kubernetes.io/zone".into(),
                    when_unsatisfiable: "DoNotSchedule".into(),
                    label_selector: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                        match_labels: Some([("app".to_string(), "spread".to_string())].into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]);
            }
            if solo {
                labels.insert("app".to_string(), "solo".to_string());
                spec.affinity = Some(k8s_openapi::api::core::v1::Affinity {
                    pod_anti_affinity: Some(k8s_openapi::api::core::v1::PodAntiAffinity {
                        required_during_scheduling_ignored_during_execution: Some(vec![
                            k8s_openapi::api::core::v1::PodAffinityTerm {
                                topology_key: "kubernetes.io/hostname".into(),
                                label_selector: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                                    match_labels: Some([("app".to_string(), "solo".to_string())].into()),
                                    ..Default::default()
                                }),
                                ..Default::default()
                            },
                        ]),
                        ..Default::default()
                    }),
                    ..Default::default()
                });
            }
            if !labels.is_empty() {
                pod.metadata.labels = Some(labels);
            }
            if side == "ours" {
                best = unique_best(&cluster, &scope, &mut rank_client, &pod).await;
            }
            scope.create(&pod).await;
            twins.push(name);
        }
        let decided = |p: &Pod| node_of(p).is_some() || scheduled_condition(p).is_some_and(|c| c.status == "False");
        eventually(WAIT, &format!("both schedulers decided p{k}"), || async {
            let mut all = true;
            for name in &twins {
                all &= scope.pods().get(name).await.ok().is_some_and(|p| decided(&p));
            }
            all
        })
        .await;
        let ours = scope.pods().get(&twins[0]).await.expect("placement's twin");
        let theirs = scope.pods().get(&twins[1]).await.expect("kube-scheduler's twin");
        // A preemption message names the nominated node: the twin's name on each side.
        let view = |p: &Pod| {
            scheduled_condition(p).map(|c| {
                let twin = c
                    .message
                    .as_ref()
                    .map(|m| m.replace("-ours-", "-twin-").replace("-kube-", "-twin-"));
                (c.status.clone(), c.reason.clone(), twin)
            })
        };
        let shape = format!(
            "p{k} (seed {seed}): cpu {cpu}, disk {disk:?}, tolerates {tolerates}, port {port}, spread {spread}, solo {solo}, priority {priority:?}, volume {volume:?}"
        );
        match (node_of(&ours), node_of(&theirs)) {
            (Some(a), Some(b)) if best.is_some() => {
                // One node scores best alone: both schedulers take it.
                assert_eq!(Some(a), best.as_deref(), "{shape}: placement's unique best node");
                assert_eq!(
                    index_of(a),
                    index_of(b),
                    "{shape}: kube-scheduler's node against the unique best"
                );
                bound_alike += 1;
                unique += 1;
            }
            (Some(a), Some(b)) => {
                if index_of(a) == index_of(b) {
                    bound_alike += 1;
                } else {
                    ties += 1;
                    for name in &twins {
                        scope
                            .pods()
                            .delete(name, &DeleteParams::default().grace_period(0))
                            .await
                            .expect("delete");
                    }
                }
            }
            (None, None) => {
                assert_eq!(
                    view(&ours),
                    view(&theirs),
                    "{shape}: PodScheduled against kube-scheduler's"
                );
                let nominated = |p: &Pod| {
                    p.status
                        .as_ref()
                        .and_then(|s| s.nominated_node_name.clone())
                        .map(|n| index_of(&n))
                };
                assert_eq!(
                    nominated(&ours),
                    nominated(&theirs),
                    "{shape}: the node nominated by preemption against kube-scheduler's"
                );
                if let Some(node) = nominated(&ours) {
                    // Both preempted on the twin node: the same victims, then both bound there.
                    let victims = |side: &'static str| {
                        let scope = &scope;
                        async move {
                            list_pods(scope)
                                .await
                                .iter()
                                .filter(|p| p.metadata.deletion_timestamp.is_some())
                                .filter_map(|p| p.name_any().strip_suffix(&format!("-{side}")).map(str::to_string))
                                .collect::<std::collections::BTreeSet<_>>()
                        }
                    };
                    // The message says how many victims each side evicts ("preempting K victims").
                    let count = view(&ours)
                        .and_then(|(_, _, m)| m)
                        .and_then(|m| m.rsplit("preempting ").next()?.split(' ').next()?.parse::<usize>().ok())
                        .unwrap_or_else(|| panic!("{shape}: a nomination without 'preempting K victims'"));
                    eventually(
                        WAIT,
                        &format!("{shape}: {count} victims evicted on both sides"),
                        || async { victims("ours").await.len() >= count && victims("kube").await.len() >= count },
                    )
                    .await;
                    let evicted = victims("ours").await;
                    assert_eq!(
                        evicted,
                        victims("kube").await,
                        "{shape}: the victims against kube-scheduler's"
                    );
                    for victim in &evicted {
                        for side in ["ours", "kube"] {
                            let _ = scope.pods().delete(&format!("{victim}-{side}"), &force).await;
                        }
                    }
                    eventually(WAIT, &format!("{shape}: both preemptors bound"), || async {
                        let mut all = true;
                        for name in &twins {
                            all &= scope.pods().get(name).await.ok().is_some_and(|p| node_of(&p).is_some());
                        }
                        all
                    })
                    .await;
                    for name in &twins {
                        let p = scope.pods().get(name).await.expect("a preemptor");
                        assert_eq!(
                            node_of(&p).map(index_of),
                            Some(node.clone()),
                            "{shape}: {name} bound on its nominated node"
                        );
                    }
                    preempted += 1;
                } else {
                    for name in &twins {
                        scope.pods().delete(name, &force).await.expect("delete");
                    }
                }
            }
            (a, b) => panic!(
                "{shape}: placement {} ({:?}), kube-scheduler {} ({:?})",
                a.unwrap_or("unschedulable"),
                view(&ours),
                b.unwrap_or("unschedulable"),
                view(&theirs)
            ),
        }
        compared += 1;
        // Deleted twins must be gone before the next pod is decided.
        eventually(WAIT, "deleted twins gone", || async {
            let pods = list_pods(&scope).await;
            pods.iter().all(|p| p.metadata.deletion_timestamp.is_none())
        })
        .await;
        // Each bound pod its own start time (kube's victim order reads it; a pod without one
        // counts as starting now).
        let start = format!("2026-01-01T{:02}:{:02}:{:02}Z", k / 3600, k / 60 % 60, k % 60);
        for name in &twins {
            if scope.pods().get(name).await.ok().is_some_and(|p| node_of(&p).is_some()) {
                scope
                    .pods()
                    .patch_status(
                        name,
                        &kube::api::PatchParams::default(),
                        &kube::api::Patch::Merge(serde_json::json!({"status": {"startTime": start}})),
                    )
                    .await
                    .expect("set the pod's start time");
            }
        }
    }
    eprintln!(
        "e2e {test}: seed {seed}, {node_count} node shapes, {compared} pods compared: {bound_alike} bound to the same node ({unique} of them the unique best), {ties} to different nodes among tied ones (deleted), {} unschedulable on both with the same message ({preempted} of them preempted the same victims and bound on the same nominated node)",
        compared - bound_alike - ties
    );
    binder.stop().await;
    scope.cleanup().await;
}

/// kube-scheduler 1.37's resource and feature rules against the cluster's kube-scheduler (with
/// `E2E_KUBE_SCHEDULER=1`), on twin nodes `ours-*` and `kube-*`: a node declaring
/// `RestartAllContainersOnContainerExits` in `status.declaredFeatures` (4 cpu) and one declaring
/// nothing (8 cpu). On each side: a pod with a `RestartAllContainers` restart rule lands on the
/// declaring node; a pod whose pod-level request (`spec.resources`, 7 cpu) exceeds that node but
/// whose containers ask 100m lands on the other; a bound pod whose status says a resize to 3 cpu
/// was allocated and actuated (written as a kubelet writes it) fills the declaring node, so a
/// 1 cpu pod needing the feature is unschedulable; a pod-level request larger than any node is
/// unschedulable. Every twin gets the same node and the same PodScheduled condition and message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_level_resources_resize_and_declared_features_are_decided_as_kube_scheduler_decides_them() {
    let test = "pod_level_resources_resize_and_declared_features_are_decided_as_kube_scheduler_decides_them";
    let Some(cluster) = cluster(test).await else {
        return;
    };
    if std::env::var("E2E_KUBE_SCHEDULER").as_deref() != Ok("1") {
        eprintln!(
            "e2e {test}: skipped: set E2E_KUBE_SCHEDULER=1 when the cluster's kube-scheduler serves default-scheduler"
        );
        return;
    }
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "features").await;
    let nodes_api: Api<k8s_openapi::api::core::v1::Node> = Api::all(cluster.client.clone());
    let mut feat_node = HashMap::new();
    for side in ["ours", "kube"] {
        let feat = scope.add_node(&format!("{side}-feat"), "4", &[("side", side)]).await;
        scope.add_node(&format!("{side}-plain"), "8", &[("side", side)]).await;
        nodes_api
            .patch_status(
                &feat,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(serde_json::json!({
                    "status": {"declaredFeatures": ["RestartAllContainersOnContainerExits"]}
                })),
            )
            .await
            .expect("declare the node's features");
        feat_node.insert(side, feat);
    }
    let binder = InProcessBinder::start(&cluster, &scope).await;
    let side_of = |node: &str| node.rsplit('-').next().unwrap_or_default().to_string();
    // A pod on each side, the twin of the other, made by `shape`.
    let twins = |name: &str, cpu: &str, shape: &dyn Fn(&mut serde_json::Value)| {
        twin_pods(&scope, name, cpu, &|pod, _| shape(pod))
    };
    let restart_all = |pod: &mut serde_json::Value| {
        pod["spec"]["restartPolicy"] = "Never".into();
        pod["spec"]["containers"][0]["restartPolicy"] = "Never".into();
        pod["spec"]["containers"][0]["restartPolicyRules"] = serde_json::json!([
            {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}
        ]);
    };
    let pod_level = |cpu: &'static str| {
        move |pod: &mut serde_json::Value| pod["spec"]["resources"] = serde_json::json!({"requests": {"cpu": cpu}})
    };
    let decided = |p: &Pod| node_of(p).is_some() || marked_unschedulable(p);
    let mut outcomes = Vec::new();
    let decide = async |pods: [Pod; 2]| {
        for p in &pods {
            scope.create(p).await;
        }
        let names = pods.map(|p| p.name_any());
        eventually(WAIT, &format!("both schedulers decided {names:?}"), || async {
            let mut all = true;
            for name in &names {
                all &= scope.pods().get(name).await.ok().is_some_and(|p| decided(&p));
            }
            all
        })
        .await;
        let mut out = Vec::new();
        for name in &names {
            out.push(scope.pods().get(name).await.expect("a twin"));
        }
        out
    };
    let view = |p: &Pod| {
        (
            node_of(p).map(side_of),
            scheduled_condition(p).map(|c| (c.status.clone(), c.reason.clone(), c.message.clone())),
        )
    };
    // 1. The restart rule needs the feature: the declaring node, on both sides.
    let pods = decide(twins("restart-all", "100m", &restart_all)).await;
    assert_eq!(
        view(&pods[0]),
        view(&pods[1]),
        "restart-all against kube-scheduler's twin"
    );
    assert_eq!(
        node_of(&pods[0]),
        Some(feat_node["ours"].as_str()),
        "restart-all on the declaring node"
    );
    outcomes.push("restart-all");
    // 2. Pod-level 7 cpu over 100m containers: only the 8 cpu node holds it.
    let pods = decide(twins("pod-level-7", "100m", &pod_level("7"))).await;
    assert_eq!(
        view(&pods[0]),
        view(&pods[1]),
        "pod-level-7 against kube-scheduler's twin"
    );
    assert_eq!(
        view(&pods[0]).0.as_deref(),
        Some("plain"),
        "pod-level-7 on the 8 cpu node"
    );
    outcomes.push("pod-level-7");
    // 3. Pod-level 9 cpu: no node holds it (kube's whole message, preemption part included).
    let pods = decide(twins("pod-level-9", "100m", &pod_level("9"))).await;
    assert!(marked_unschedulable(&pods[0]), "pod-level-9 unschedulable");
    assert_eq!(
        view(&pods[0]).1,
        view(&pods[1]).1,
        "pod-level-9 against kube-scheduler's twin"
    );
    outcomes.push("pod-level-9");
    // 4. A bound pod resized to 3 cpu on the declaring node, as its kubelet reports it.
    for side in ["ours", "kube"] {
        let name = format!("resized-{side}");
        let mut pod = pod_for(&scope.ns, &name, "default-scheduler", &scope.run, "500m");
        pod.spec.as_mut().expect("a spec").node_name = Some(feat_node[side].clone());
        scope.create(&pod).await;
        scope
            .pods()
            .patch_status(
                &name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(serde_json::json!({"status": {
                    "phase": "Running",
                    "containerStatuses": [{
                        "name": pod.spec.as_ref().map(|s| s.containers[0].name.clone()).unwrap_or_default(),
                        "image": "registry.k8s.io/pause:3.10",
                        "imageID": "",
                        "ready": true,
                        "restartCount": 0,
                        "allocatedResources": {"cpu": "3"},
                        "resources": {"requests": {"cpu": "3"}}
                    }]
                }})),
            )
            .await
            .expect("write the resized pod's status");
    }
    // Both schedulers have seen the status once a pod that fits only without it is refused.
    let pods = decide(twins("after-resize", "1", &restart_all)).await;
    assert!(
        marked_unschedulable(&pods[0]),
        "after-resize: 0.1 + 3 of 4 cpu used, 1 more does not fit: {:?}",
        view(&pods[0])
    );
    assert_eq!(
        view(&pods[0]).1,
        view(&pods[1]).1,
        "after-resize against kube-scheduler's twin"
    );
    outcomes.push("after-resize");
    eprintln!("e2e {test}: {outcomes:?} decided alike by placement and kube-scheduler");
    binder.stop().await;
    scope.cleanup().await;
}

/// Twin pods `<name>-ours` (this test's scheduler) and `<name>-kube` (the cluster's
/// kube-scheduler), each kept to its side's nodes by the `side` label, requesting `cpu`, and
/// made by `shape` (given the pod as JSON and its side).
fn twin_pods(scope: &Scope, name: &str, cpu: &str, shape: &dyn Fn(&mut serde_json::Value, &str)) -> [Pod; 2] {
    ["ours", "kube"].map(|side| {
        let scheduler = if side == "ours" {
            scope.scheduler.clone()
        } else {
            "default-scheduler".to_string()
        };
        let mut pod = serde_json::to_value(pod_for(
            &scope.ns,
            &format!("{name}-{side}"),
            &scheduler,
            &scope.run,
            cpu,
        ))
        .expect("a pod as JSON");
        pod["spec"]["nodeSelector"] = serde_json::json!({ "side": side });
        shape(&mut pod, side);
        serde_json::from_value::<Pod>(pod).expect("a pod")
    })
}

/// `deploy/base/<file>`'s YAML documents as JSON.
fn manifest(file: &str) -> Vec<serde_json::Value> {
    let path = format!("{}/../deploy/base/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    serde_saphyr::from_multiple::<serde_json::Value>(&text)
        .unwrap_or_else(|e| panic!("parse {path}: {e}"))
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// A kubeconfig (written to a temporary file) that authenticates as the ServiceAccount `account`
/// of the test's namespace, with a token from the TokenRequest API, against the admin
/// kubeconfig's cluster.
async fn service_account_kubeconfig(cluster: &Cluster, scope: &Scope, account: &str) -> std::path::PathBuf {
    let accounts: Api<ServiceAccount> = Api::namespaced(cluster.client.clone(), &scope.ns);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let token = accounts
        .create_token_request(account, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("a token for {account}: {e}"))
        .status
        .expect("a token")
        .token;
    let admin = kube::config::Kubeconfig::read_from(&cluster.kubeconfig).expect("the admin kubeconfig");
    let context = admin.current_context.clone().unwrap_or_default();
    let cluster_name = admin
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .unwrap_or_default();
    let named_cluster = admin
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .expect("the admin context's cluster");
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [serde_json::to_value(named_cluster).expect("the cluster entry as JSON")],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": cluster_name, "user": account, "namespace": scope.ns}}],
        "current-context": account,
    });
    let kubeconfig = std::env::temp_dir().join(format!("placement-e2e-{account}-{}.kubeconfig", scope.run));
    std::fs::write(&kubeconfig, serde_json::to_string(&config).expect("kubeconfig as JSON")).expect("write it");
    kubeconfig
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binder_runs_with_a_service_account_token_under_deploy_rbac() {
    let Some(cluster) = cluster("the_binder_runs_with_a_service_account_token_under_deploy_rbac").await else {
        return;
    };
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "rbac").await;
    let client = cluster.client.clone();
    // deploy/base/rbac.yaml as kustomize would apply it, in this test's namespace and with
    // cluster-scoped names of this test's own.
    let suffix = format!("-{}", scope.run);
    for mut doc in manifest("rbac.yaml") {
        let kind = doc["kind"].as_str().unwrap_or_default().to_string();
        doc["metadata"]["namespace"] = scope.ns.clone().into();
        if let Some(subjects) = doc["subjects"].as_array_mut() {
            for s in subjects {
                s["namespace"] = scope.ns.clone().into();
            }
        }
        let pp = PostParams::default();
        match kind.as_str() {
            "ServiceAccount" => {
                let sa: ServiceAccount = serde_json::from_value(doc).expect("a ServiceAccount");
                Api::<ServiceAccount>::namespaced(client.clone(), &scope.ns)
                    .create(&pp, &sa)
                    .await
                    .expect("create");
            }
            "ClusterRole" => {
                let name = format!("{}{suffix}", doc["metadata"]["name"].as_str().unwrap_or_default());
                doc["metadata"]["name"] = name.clone().into();
                let role: ClusterRole = serde_json::from_value(doc).expect("a ClusterRole");
                Api::<ClusterRole>::all(client.clone())
                    .create(&pp, &role)
                    .await
                    .expect("create");
                scope.owns("clusterroles", &name);
            }
            "ClusterRoleBinding" => {
                let name = format!("{}{suffix}", doc["metadata"]["name"].as_str().unwrap_or_default());
                doc["metadata"]["name"] = name.clone().into();
                let role = format!("{}{suffix}", doc["roleRef"]["name"].as_str().unwrap_or_default());
                doc["roleRef"]["name"] = role.into();
                let binding: ClusterRoleBinding = serde_json::from_value(doc).expect("a ClusterRoleBinding");
                Api::<ClusterRoleBinding>::all(client.clone())
                    .create(&pp, &binding)
                    .await
                    .expect("create");
                scope.owns("clusterrolebindings", &name);
            }
            "Role" => {
                let role: Role = serde_json::from_value(doc).expect("a Role");
                Api::<Role>::namespaced(client.clone(), &scope.ns)
                    .create(&pp, &role)
                    .await
                    .expect("create");
            }
            "RoleBinding" => {
                let binding: RoleBinding = serde_json::from_value(doc).expect("a RoleBinding");
                Api::<RoleBinding>::namespaced(client.clone(), &scope.ns)
                    .create(&pp, &binding)
                    .await
                    .expect("create");
            }
            other => panic!("rbac.yaml holds an unexpected {other}"),
        }
    }
    // A token for the binder's ServiceAccount (TokenRequest API), in a kubeconfig of its own.
    let kubeconfig = service_account_kubeconfig(&cluster, &scope, "placement-binder").await;

    // Work that uses every grant: binds (pods/binding, events create), a pod that fits nowhere
    // (pods/status), decided again after a node change (events patch: a series), a preemption
    // (pods delete, pods/status), a volume claim's and a device claim's PreBind, the Lease
    // (create, get, patch), the watches.
    let node = scope.add_node("n1", "1", &[]).await;
    let low = priority_class(&mut scope, "placement-e2e-low", 10).await;
    let high = priority_class(&mut scope, "placement-e2e-high", 1000).await;
    scope
        .create(&prioritized(&scope, "victim", "1", &low, "victim", Some(&node)))
        .await;
    let service = Service::start().await;
    let binder = BinderProcess::start(
        &kubeconfig,
        &scope.scheduler,
        &service.endpoint,
        &format!("{}-sa", scope.run),
        Some((scope.ns.as_str(), "placement-binder")),
    );
    scope.create(&scope.pod("huge", "64")).await;
    scope
        .create(&prioritized(&scope, "preemptor", "1", &high, "preemptor", None))
        .await;
    eventually(WAIT, "the victim deleted and the huge pod reported", || async {
        let pods = list_pods(&scope).await;
        let victim_going = pods
            .iter()
            .any(|p| p.name_any() == "victim" && p.metadata.deletion_timestamp.is_some());
        let huge = pods.iter().any(|p| p.name_any() == "huge" && marked_unschedulable(p));
        victim_going && huge
    })
    .await;
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    let _ = scope.pods().delete("victim", &force).await;
    eventually(WAIT, "the preemptor bound", || async {
        scope
            .pods()
            .get("preemptor")
            .await
            .ok()
            .is_some_and(|p| node_of(&p) == Some(node.as_str()))
    })
    .await;
    // A pod with a WaitForFirstConsumer claim: the PreBind reads the claim and updates the
    // volume's claimRef under the same role; the PV controller binds the claim.
    let class = local_class(&mut scope).await;
    local_volume(&mut scope, "sa", &class, &node).await;
    scope.create_claim(claim_json("data", &class, None)).await;
    scope.create(&with_claim(scope.pod("db", "0"), "data")).await;
    eventually(WAIT, "the pod with a claim bound and its claim Bound", || async {
        let bound = scope
            .pods()
            .get("db")
            .await
            .ok()
            .is_some_and(|p| node_of(&p) == Some(node.as_str()));
        bound && claim_of(&scope, "data").await.status.and_then(|s| s.phase).as_deref() == Some("Bound")
    })
    .await;
    // A pod with a ResourceClaim: DynamicResources' PreBind, from the watched claim and
    // DeviceClass, adds the claim's finalizer, then writes status.allocation and reservedFor
    // (patches), which kube 1.36+ also authorizes as a patch of resourceclaims/binding
    // (DRAResourceClaimGranularStatusAuthorization).
    let device_class = format!("{}-sa-gpu", scope.run);
    scope
        .create_storage(
            "deviceclasses",
            serde_json::json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": device_class},
                "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{GPU_DRIVER}\"")}}]}
            }),
        )
        .await;
    scope
        .create_storage("resourceslices", gpu_slice(&node, &[("gpu-0", "a100", 0, false)]))
        .await;
    let resource_claims: Api<k8s_openapi::api::resource::v1::ResourceClaim> =
        Api::namespaced(client.clone(), &scope.ns);
    let gpu_claim = serde_json::json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "gpu"},
        "spec": claim_spec(serde_json::json!({"name": "gpu", "exactly": {"deviceClassName": device_class}}), serde_json::json!([])),
    });
    resource_claims
        .create(
            &PostParams::default(),
            &serde_json::from_value(gpu_claim).expect("a claim"),
        )
        .await
        .expect("create a ResourceClaim");
    let mut trainer = serde_json::to_value(scope.pod("trainer", "0")).expect("a pod as JSON");
    trainer["spec"]["resourceClaims"] = serde_json::json!([{"name": "gpu", "resourceClaimName": "gpu"}]);
    trainer["spec"]["containers"][0]["resources"]["claims"] = serde_json::json!([{"name": "gpu"}]);
    let trainer = scope
        .create(&serde_json::from_value(trainer).expect("a pod with a claim"))
        .await;
    eventually(WAIT, "the pod with a ResourceClaim bound", || async {
        let log = binder.log_text();
        if let Some(refused) = log.lines().find(|l| l.contains("resourceclaims/binding")) {
            panic!("the API server refused the claim's status update: {refused}");
        }
        scope
            .pods()
            .get("trainer")
            .await
            .ok()
            .is_some_and(|p| node_of(&p) == Some(node.as_str()))
    })
    .await;
    let gpu_claim = resource_claims.get("gpu").await.expect("the claim");
    let status = gpu_claim.status.clone().unwrap_or_default();
    let results: Vec<(String, String, String)> = status
        .allocation
        .as_ref()
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
        .map(|r| (r.driver.clone(), r.pool.clone(), r.device.clone()))
        .collect();
    assert_eq!(
        results,
        vec![(GPU_DRIVER.to_string(), node.clone(), "gpu-0".to_string())],
        "the claim is allocated the node's GPU: {status:?}"
    );
    let reserved: Vec<(String, String)> = status
        .reserved_for
        .unwrap_or_default()
        .into_iter()
        .map(|r| (r.name, r.uid))
        .collect();
    assert_eq!(
        reserved,
        vec![("trainer".to_string(), trainer.uid().expect("a uid"))],
        "the claim is reserved for the pod"
    );
    assert!(gpu_claim
        .finalizers()
        .iter()
        .any(|f| f == "resource.kubernetes.io/delete-protection"));
    // A node change sends the huge pod round again; the same message makes its FailedScheduling
    // a series.
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let relabel = serde_json::json!({"metadata": {"labels": {"placement-e2e-touched": "yes"}}});
    nodes
        .patch(
            &node,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&relabel),
        )
        .await
        .expect("relabel the node");
    eventually(WAIT, "a FailedScheduling series for the huge pod", || async {
        events_for(&scope, "huge", "FailedScheduling")
            .await
            .iter()
            .any(|e| e.series.as_ref().is_some_and(|s| s.count >= 2))
    })
    .await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), &scope.ns);
    let holder = leases
        .get("placement-binder")
        .await
        .expect("the Lease")
        .spec
        .and_then(|s| s.holder_identity);
    assert_eq!(holder, Some(format!("{}-sa", scope.run)));
    let log = binder.log_text();
    for refused in ["forbidden", "Forbidden"] {
        assert!(
            !log.contains(refused),
            "the binder was refused a call ({refused}):\n{log}"
        );
    }
    // A 403 status code, not the digits inside a timestamp or a port (`03:49:57.940325Z`).
    let digit = |c: Option<char>| c.is_some_and(|c| c.is_ascii_digit() || c == '.');
    let status_403 = log
        .match_indices("403")
        .any(|(i, _)| !digit(log[..i].chars().next_back()) && !digit(log[i + 3..].chars().next()));
    assert!(!status_403, "the binder was refused a call (403):\n{log}");
    drop(binder);
    drop(service);
    let _ = std::fs::remove_file(&kubeconfig);
    scope.cleanup().await;
}

/// The Kubernetes minor version each manifest of `deploy/base` needs (README "Running it on a
/// cluster").
const MANIFEST_MINIMUM: &[(&str, u32)] = &[
    ("namespace.yaml", 0),
    ("rbac.yaml", 19),
    ("binder.yaml", 21),
    ("networkpolicy.yaml", 21),
    ("decision.yaml", 27),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_base_passes_a_server_side_dry_run() {
    let Some(cluster) = cluster("deploy_base_passes_a_server_side_dry_run").await else {
        return;
    };
    let _serial = serial().await;
    let scope = Scope::new(&cluster, "deploy").await;
    let version = cluster.client.apiserver_version().await.expect("the server's version");
    let minor: u32 = version
        .minor
        .trim_end_matches('+')
        .parse()
        .expect("a numeric minor version");
    let discovery = Discovery::new(cluster.client.clone())
        .run()
        .await
        .expect("API discovery");
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let mut checked = 0;
    for (file, needs) in MANIFEST_MINIMUM {
        if minor < *needs {
            eprintln!("e2e deploy_base_passes_a_server_side_dry_run: {file} skipped: it needs Kubernetes 1.{needs}, the cluster is {}.{}", version.major, version.minor);
            continue;
        }
        for mut doc in manifest(file) {
            // In this test's namespace (placement-system may exist on the cluster).
            if doc["kind"] == "Namespace" {
                doc["metadata"]["name"] = format!("{}-dry", scope.ns).into();
            } else {
                doc["metadata"]["namespace"] = scope.ns.clone().into();
            }
            let obj: DynamicObject = serde_json::from_value(doc.clone()).expect("an object");
            let types = obj.types.clone().expect("apiVersion and kind");
            let (group, version) = types.api_version.split_once('/').unwrap_or(("", &types.api_version));
            let gvk = kube::api::GroupVersionKind::gvk(group, version, &types.kind);
            let (resource, caps) = discovery
                .resolve_gvk(&gvk)
                .unwrap_or_else(|| panic!("{file}: the cluster does not serve {}", types.api_version));
            let api: Api<DynamicObject> = if caps.scope == kube::discovery::Scope::Namespaced {
                Api::namespaced_with(cluster.client.clone(), &scope.ns, &resource)
            } else {
                Api::all_with(cluster.client.clone(), &resource)
            };
            api.create(&dry_run, &obj)
                .await
                .unwrap_or_else(|e| panic!("{file}: {} {} refused: {e}", types.kind, obj.name_any()));
            checked += 1;
        }
    }
    assert!(
        checked >= 8,
        "every object of the supported manifests was sent ({checked})"
    );
    scope.cleanup().await;
}

/// `helm template placement deploy/chart/placement --namespace {ns} {args}`'s documents as JSON;
/// helm from `$HELM`, `.tools/bin/helm` (scripts/install-tools.sh) or `PATH`.
fn chart(ns: &str, args: &[&str]) -> Vec<serde_json::Value> {
    let root = format!("{}/..", env!("CARGO_MANIFEST_DIR"));
    let local = format!("{root}/.tools/bin/helm");
    let helm = std::env::var("HELM")
        .ok()
        .or_else(|| std::path::Path::new(&local).exists().then_some(local))
        .unwrap_or_else(|| "helm".to_string());
    let out = std::process::Command::new(&helm)
        .args(["template", "placement", "deploy/chart/placement", "--namespace", ns])
        .args(args)
        .current_dir(&root)
        .output()
        .unwrap_or_else(|e| panic!("{helm}: {e} (scripts/install-tools.sh builds helm into .tools/bin; or set HELM)"));
    assert!(
        out.status.success(),
        "helm template {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_saphyr::from_multiple::<serde_json::Value>(&String::from_utf8_lossy(&out.stdout))
        .unwrap_or_else(|e| panic!("helm template {args:?}: {e}"))
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// The Helm chart's objects pass the API server's validation (a server-side dry run, nothing
/// created): with its defaults (deploy/base's objects) and with every option on
/// (ci/all-on-values.yaml). Kinds the cluster does not serve (cert-manager's, the Prometheus
/// Operator's) are skipped, saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_chart_passes_a_server_side_dry_run() {
    let Some(cluster) = cluster("helm_chart_passes_a_server_side_dry_run").await else {
        return;
    };
    let _serial = serial().await;
    let scope = Scope::new(&cluster, "chart").await;
    let discovery = Discovery::new(cluster.client.clone())
        .run()
        .await
        .expect("API discovery");
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    for values in [&[][..], &["-f", "deploy/chart/placement/ci/all-on-values.yaml"][..]] {
        let mut checked = 0;
        // Rendered into this test's namespace (placement-system may exist on the cluster).
        for mut doc in chart(&scope.ns, values) {
            if doc["kind"] == "Namespace" {
                doc["metadata"]["name"] = format!("{}-dry", scope.ns).into();
            }
            let obj: DynamicObject = serde_json::from_value(doc.clone()).expect("an object");
            let types = obj.types.clone().expect("apiVersion and kind");
            let (group, version) = types.api_version.split_once('/').unwrap_or(("", &types.api_version));
            let gvk = kube::api::GroupVersionKind::gvk(group, version, &types.kind);
            let Some((resource, caps)) = discovery.resolve_gvk(&gvk) else {
                eprintln!(
                    "e2e helm_chart_passes_a_server_side_dry_run {values:?}: {} {} skipped: the cluster does not serve {}",
                    types.kind,
                    obj.name_any(),
                    types.api_version
                );
                continue;
            };
            let api: Api<DynamicObject> = if caps.scope == kube::discovery::Scope::Namespaced {
                Api::namespaced_with(cluster.client.clone(), &scope.ns, &resource)
            } else {
                Api::all_with(cluster.client.clone(), &resource)
            };
            api.create(&dry_run, &obj)
                .await
                .unwrap_or_else(|e| panic!("chart {values:?}: {} {} refused: {e}", types.kind, obj.name_any()));
            checked += 1;
        }
        assert!(checked >= 15, "the chart's objects were sent ({values:?}: {checked})");
    }
    scope.cleanup().await;
}

/// A kube-scheduler of the cluster's version started by the test with `config` (its
/// `--config`), stopped when dropped.
struct KubeSchedulerProcess(std::process::Child);

impl Drop for KubeSchedulerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The same pods scheduled by placement and by a kube-scheduler the test starts, both with the
/// example extender (started with `extender_args`) in their KubeSchedulerConfiguration.
struct VersusKube {
    scope: Scope,
    binder: InProcessBinder,
    extender: placement_tests::extender_process::ExtenderProcess,
    _kube: KubeSchedulerProcess,
    _dir: tempfile::TempDir,
}

impl VersusKube {
    /// `None` (the test skipped, saying why) without a cluster or kube-scheduler's binary.
    async fn start(test: &str, extender_args: &[&str]) -> Option<(VersusKube, Cluster)> {
        let cluster = cluster(test).await?;
        let binary = std::env::var("K8S_STATE")
            .map(|state| std::path::PathBuf::from(state).join("bin/kube-scheduler"))
            .ok()
            .filter(|p| p.is_file());
        let (Ok("1"), Some(binary)) = (std::env::var("E2E_KUBE_SCHEDULER").as_deref(), binary) else {
            eprintln!(
                "e2e {test}: skipped: set E2E_KUBE_SCHEDULER=1 and K8S_STATE to a cluster.sh state folder holding \
                 bin/kube-scheduler"
            );
            return None;
        };
        let mut scope = Scope::new(&cluster, &test.replace('_', "-")).await;
        for i in 1..=3 {
            scope.add_node(&format!("n{i}"), "2", &[]).await;
        }
        let extender = placement_tests::extender_process::ExtenderProcess::start(extender_args);
        let extenders = format!(
            "extenders:\n  - urlPrefix: {}\n    filterVerb: filter\n    prioritizeVerb: prioritize\n    weight: 1\n",
            extender.url()
        );
        let dir = tempfile::tempdir().expect("a temporary directory");
        let ours = dir.path().join("placement.yaml");
        std::fs::write(
            &ours,
            format!(
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n  - \
                 schedulerName: {}\n{extenders}",
                scope.scheduler
            ),
        )
        .expect("write placement's configuration");
        let theirs = dir.path().join("kube-scheduler.yaml");
        // The extender fields are the same in v1 and in 1.24's v1beta3.
        let api = placement_tests::e2e::kube_scheduler_config_api(&binary).expect("kube-scheduler's version");
        std::fs::write(
            &theirs,
            format!(
                "apiVersion: {api}\nkind: KubeSchedulerConfiguration\nclientConnection:\n  \
                 kubeconfig: {}\nleaderElection:\n  leaderElect: false\nprofiles:\n  - schedulerName: {}-kube\n{extenders}",
                cluster.kubeconfig.display(),
                scope.scheduler
            ),
        )
        .expect("write kube-scheduler's configuration");
        let log = std::fs::File::create(dir.path().join("kube-scheduler.log")).expect("a log file");
        let kube = KubeSchedulerProcess(
            std::process::Command::new(&binary)
                .arg("--config")
                .arg(&theirs)
                .args(["--secure-port", "0"])
                .stdout(log.try_clone().expect("the log file"))
                .stderr(log)
                .spawn()
                .expect("kube-scheduler starts"),
        );
        let service = Service::start_with(placement_scheduler::grpc::ServerConfig {
            policy_file: Some(placement_scheduler::grpc::PolicyFileConfig {
                path: ours,
                reload_interval: None,
            }),
            ..Default::default()
        })
        .await;
        let binder = InProcessBinder::start_with(&cluster, &scope, service).await;
        Some((
            VersusKube {
                scope,
                binder,
                extender,
                _kube: kube,
                _dir: dir,
            },
            cluster,
        ))
    }

    /// Creates `names` for both schedulers (`<name>-ours`, `<name>-kube`) and waits until each is
    /// bound or has `PodScheduled=False`; the pods by name.
    async fn schedule(&self, names: &[&str]) -> HashMap<String, Pod> {
        let scope = &self.scope;
        for (who, scheduler) in [
            ("ours", scope.scheduler.clone()),
            ("kube", format!("{}-kube", scope.scheduler)),
        ] {
            for name in names {
                let pod = pod_for(&scope.ns, &format!("{name}-{who}"), &scheduler, &scope.run, "100m");
                scope.create(&pod).await;
            }
        }
        let decided = |p: &Pod| node_of(p).is_some() || scheduled_condition(p).is_some_and(|c| c.status == "False");
        eventually(WAIT, "both schedulers decided every pod", || async {
            let pods = list_pods(scope).await;
            pods.iter().filter(|p| decided(p)).count() == 2 * names.len()
        })
        .await;
        list_pods(scope).await.into_iter().map(|p| (p.name_any(), p)).collect()
    }

    async fn stop(self) {
        self.binder.stop().await;
        self.scope.cleanup().await;
    }
}

/// A pod's PodScheduled condition as a user reads it.
fn condition_view(p: &Pod) -> Option<(String, Option<String>, Option<String>)> {
    scheduled_condition(p).map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// The example extender under placement and under a kube-scheduler of the cluster's version,
/// both configured by a KubeSchedulerConfiguration with the same `extenders:`: the pod it accepts
/// is bound by both, the pod it rejects gets the same PodScheduled condition from both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_extender_behaves_as_under_kube_scheduler() {
    let test = "the_example_extender_behaves_as_under_kube_scheduler";
    let _serial = serial().await;
    let Some((run, _cluster)) = VersusKube::start(test, &[]).await else {
        return;
    };
    let pods = run.schedule(&["nginx", "reject"]).await;
    assert!(
        node_of(&pods["nginx-ours"]).is_some(),
        "placement bound the pod the extender accepts"
    );
    assert!(node_of(&pods["nginx-kube"]).is_some(), "kube-scheduler bound it too");
    let (a, b) = (
        condition_view(&pods["reject-ours"]),
        condition_view(&pods["reject-kube"]),
    );
    assert_eq!(
        a, b,
        "PodScheduled of the rejected pod: placement against kube-scheduler"
    );
    eprintln!("e2e {test}: both wrote {a:?}");
    assert!(
        a.as_ref()
            .and_then(|c| c.2.as_deref())
            .is_some_and(|m| m.contains("3 extender rejects pods named reject-*")),
        "{a:?}"
    );
    let filtered: Vec<String> = run
        .extender
        .requests()
        .into_iter()
        .filter(|(verb, _)| verb == "filter")
        .filter_map(|(_, args)| args["Pod"]["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    for name in ["nginx-ours", "reject-ours", "nginx-kube", "reject-kube"] {
        assert!(filtered.iter().any(|n| n == name), "{name} in {filtered:?}");
    }
    run.stop().await;
}

/// An extender answering 500 under placement and under kube-scheduler: the same status, reason
/// (`SchedulerError`) and message (kube-scheduler's error text).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_extender_fails_the_pod_as_under_kube_scheduler() {
    let test = "a_failing_extender_fails_the_pod_as_under_kube_scheduler";
    let _serial = serial().await;
    let Some((run, _cluster)) = VersusKube::start(test, &["--mode", "500"]).await else {
        return;
    };
    let pods = run.schedule(&["nginx"]).await;
    let (a, b) = (condition_view(&pods["nginx-ours"]), condition_view(&pods["nginx-kube"]));
    eprintln!("e2e {test}: placement wrote {a:?}, kube-scheduler {b:?}");
    let (a, b) = (
        a.expect("placement's condition"),
        b.expect("kube-scheduler's condition"),
    );
    assert_eq!(a, b, "status, reason and message: placement against kube-scheduler");
    assert_eq!(a.1.as_deref(), Some("SchedulerError"));
    assert_eq!(
        a.2,
        Some(format!(
            "failed filter with extender at URL {}/filter, code 500",
            run.extender.url()
        ))
    );
    run.stop().await;
}

/// A WaitForFirstConsumer StorageClass without a provisioner, owned by the scope.
async fn local_class(scope: &mut Scope) -> String {
    scope
        .create_storage(
            "storageclasses",
            serde_json::json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": format!("local-{}", scope.run)},
                "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}),
        )
        .await
}

/// A 1Gi local volume of `class` on `node` (node affinity on its hostname).
async fn local_volume(scope: &mut Scope, name: &str, class: &str, node: &str) -> String {
    scope
        .create_storage(
            "persistentvolumes",
            serde_json::json!({"apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": format!("{name}-{}", scope.run)},
                "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                         "storageClassName": class, "persistentVolumeReclaimPolicy": "Retain",
                         "local": {"path": format!("/mnt/{name}")},
                         "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                             {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}}),
        )
        .await
}

/// A 1Gi ReadWriteOnce claim of `class` (pre-bound to `volume` when given).
fn claim_json(name: &str, class: &str, volume: Option<&str>) -> serde_json::Value {
    let mut c = serde_json::json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}});
    if let Some(v) = volume {
        c["spec"]["volumeName"] = serde_json::json!(v);
    }
    c
}

/// `pod` with a volume `data` from `claim`.
fn with_claim(mut pod: Pod, claim: &str) -> Pod {
    pod.spec.as_mut().expect("a pod spec").volumes = Some(vec![k8s_openapi::api::core::v1::Volume {
        name: "data".into(),
        persistent_volume_claim: Some(k8s_openapi::api::core::v1::PersistentVolumeClaimVolumeSource {
            claim_name: claim.into(),
            read_only: None,
        }),
        ..Default::default()
    }]);
    pod
}

/// A pod's `PodScheduled` condition as the volume tests compare it: reason and message.
type Condition = Option<(Option<String>, Option<String>)>;

/// Creates a claim `data-ours` of `class` and a pod `<prefix>-ours` using it for this scope's
/// scheduler, and the same (`-kube`) for kube-scheduler with `E2E_KUBE_SCHEDULER=1`; waits until
/// each is marked unschedulable, and gives their conditions (placement's, then kube-scheduler's
/// when compared), asserting that none is bound.
async fn claimed_pods_left_unschedulable(scope: &Scope, class: &str, prefix: &str) -> (Condition, Option<Condition>) {
    let compare = std::env::var("E2E_KUBE_SCHEDULER").as_deref() == Ok("1");
    let mut who = vec![("ours", scope.scheduler.clone())];
    if compare {
        who.push(("kube", "default-scheduler".to_string()));
    }
    for (name, scheduler) in &who {
        scope
            .create_claim(claim_json(&format!("data-{name}"), class, None))
            .await;
        let pod = with_claim(
            pod_for(&scope.ns, &format!("{prefix}-{name}"), scheduler, &scope.run, "100m"),
            &format!("data-{name}"),
        );
        scope.create(&pod).await;
    }
    // Each claim exists before its pod, but a scheduler's claim cache may lag its pod cache: the pod
    // is first found to name a missing claim and decided again once the claim arrives (both
    // schedulers do). The settled verdict is compared.
    eventually(WAIT, "every pod marked unschedulable, its claim seen", || async {
        list_pods(scope)
            .await
            .iter()
            .filter(|p| {
                marked_unschedulable(p)
                    && !scheduled_condition(p)
                        .and_then(|c| c.message.as_deref())
                        .is_some_and(|m| m.contains("persistentvolumeclaim") && m.contains("not found"))
            })
            .count()
            == who.len()
    })
    .await;
    let pods = list_pods(scope).await;
    let condition = |name: &str| {
        let p = pods.iter().find(|p| p.name_any() == name).expect("a test pod");
        assert_eq!(node_of(p), None, "{name} is not bound");
        scheduled_condition(p).map(|c| (c.reason.clone(), c.message.clone()))
    };
    (
        condition(&format!("{prefix}-ours")),
        compare.then(|| condition(&format!("{prefix}-kube"))),
    )
}

async fn claim_of(scope: &Scope, name: &str) -> k8s_openapi::api::core::v1::PersistentVolumeClaim {
    Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(scope.client.clone(), &scope.ns)
        .get(name)
        .await
        .expect("get a claim")
}

/// Local volumes with node affinity and a WaitForFirstConsumer class without a provisioner
/// (kube-controller-manager's PV controller running): pods each with its own claim all end on
/// the nodes of their volumes, with the claims Bound by the PV controller after the binder set
/// the volumes' claimRef.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_with_waitforfirstconsumer_claims_land_on_their_volumes_nodes_and_the_claims_bind() {
    let Some(cluster) =
        cluster("pods_with_waitforfirstconsumer_claims_land_on_their_volumes_nodes_and_the_claims_bind").await
    else {
        return;
    };
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "wffc").await;
    let mut nodes = Vec::new();
    for i in 1..=3 {
        nodes.push(scope.add_node(&format!("n{i}"), "2", &[]).await);
    }
    let class = local_class(&mut scope).await;
    // Two volumes on n2, one on n3, none on n1.
    let mut volume_node = HashMap::new();
    for (name, node) in [("a", &nodes[1]), ("b", &nodes[1]), ("c", &nodes[2])] {
        let pv = local_volume(&mut scope, name, &class, node).await;
        volume_node.insert(pv, node.clone());
    }
    let binder = InProcessBinder::start(&cluster, &scope).await;
    for i in 0..3 {
        scope.create_claim(claim_json(&format!("data-{i}"), &class, None)).await;
        scope
            .create(&with_claim(scope.pod(&format!("db-{i}"), "100m"), &format!("data-{i}")))
            .await;
    }
    eventually(WAIT, "every pod bound and every claim Bound", || async {
        let pods = list_pods(&scope).await;
        let mut all = pods.iter().filter(|p| node_of(p).is_some()).count() == 3;
        for i in 0..3 {
            let c = claim_of(&scope, &format!("data-{i}")).await;
            all &= c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        }
        all
    })
    .await;
    let pods = list_pods(&scope).await;
    let mut used = Vec::new();
    for i in 0..3 {
        let c = claim_of(&scope, &format!("data-{i}")).await;
        let volume = c
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .expect("a bound claim");
        let pod = pods
            .iter()
            .find(|p| p.name_any() == format!("db-{i}"))
            .expect("the pod");
        assert_eq!(
            node_of(pod),
            volume_node.get(&volume).map(String::as_str),
            "db-{i} on {volume}'s node"
        );
        used.push(volume);
    }
    used.sort();
    used.dedup();
    assert_eq!(used.len(), 3, "three claims, three volumes");
    assert_no_overcommit_no_double_bind(&scope, 2000).await;
    binder.stop().await;
    scope.cleanup().await;
}

/// A pod whose only matching volume sits on a cordoned node: kube-scheduler's message (and, with
/// `E2E_KUBE_SCHEDULER=1`, the same condition as kube-scheduler gives the same pod).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_only_volume_is_on_a_cordoned_node_reports_kube_schedulers_message() {
    let Some(cluster) =
        cluster("a_claim_whose_only_volume_is_on_a_cordoned_node_reports_kube_schedulers_message").await
    else {
        return;
    };
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "cordoned-volume").await;
    let free = scope.add_node("free", "2", &[]).await;
    let cordoned = scope.add_node("cordoned", "2", &[]).await;
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(cluster.client.clone());
    nodes
        .patch(
            &cordoned,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"spec": {"unschedulable": true}})),
        )
        .await
        .expect("cordon");
    let class = local_class(&mut scope).await;
    local_volume(&mut scope, "only", &class, &cordoned).await;
    let binder = InProcessBinder::start(&cluster, &scope).await;
    let (ours, kube) = claimed_pods_left_unschedulable(&scope, &class, "db").await;
    let total = nodes
        .list(&ListParams::default())
        .await
        .expect("list nodes")
        .items
        .len();
    let others = total - 2;
    let mut reasons = vec![
        "1 node(s) didn't find available persistent volumes to bind".to_string(),
        "1 node(s) were unschedulable".to_string(),
    ];
    if others > 0 {
        reasons.push(format!("{others} node(s) didn't match Pod's node affinity/selector"));
    }
    reasons.sort();
    assert_eq!(
        ours,
        Some((
            Some("Unschedulable".to_string()),
            Some(format!(
                "0/{total} nodes are available: {}. preemption: 0/{total} nodes are available: {total} Preemption is \
                 not helpful for scheduling.",
                reasons.join(", ")
            ))
        )),
        "{free} has no volume, {cordoned} is cordoned"
    );
    if let Some(kube) = kube {
        assert_eq!(ours, kube, "the condition kube-scheduler writes");
    }
    binder.stop().await;
    scope.cleanup().await;
}

/// Storage capacity tracking: a CSIDriver with `storageCapacity: true` (no real driver is
/// needed) and a WaitForFirstConsumer class it provisions. With only a CSIStorageCapacity too
/// small for the claim, the pod reports "node(s) did not have enough free storage" (the same
/// condition as kube-scheduler with `E2E_KUBE_SCHEDULER=1`); once a capacity with room reaches
/// node b, the claim is provisioned there (its selected-node annotation).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_capacity_decides_where_a_tracked_driver_provisions() {
    let Some(cluster) = cluster("storage_capacity_decides_where_a_tracked_driver_provisions").await else {
        return;
    };
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "capacity").await;
    let node_a = scope.add_node("a", "2", &[("e2e.placement.io/zone", "a")]).await;
    let node_b = scope.add_node("b", "2", &[("e2e.placement.io/zone", "b")]).await;
    let driver = format!("csi-{}.e2e.example", scope.run);
    scope
        .create_storage(
            "csidrivers",
            serde_json::json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": driver},
                "spec": {"attachRequired": false, "storageCapacity": true}}),
        )
        .await;
    let class = scope
        .create_storage(
            "storageclasses",
            serde_json::json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": format!("tracked-{}", scope.run)},
                "provisioner": driver, "volumeBindingMode": "WaitForFirstConsumer"}),
        )
        .await;
    let capacity = |name: &str, zone_value: &str, size: &str| {
        serde_json::json!({"kind": "CSIStorageCapacity", "metadata": {"name": name},
            "storageClassName": class, "capacity": size,
            "nodeTopology": {"matchLabels": {"e2e.placement.io/zone": zone_value}}})
    };
    let Some(resource) = placement_binder::watch::capacity_resource(&cluster.client).await else {
        eprintln!("skipping: the API server serves no CSIStorageCapacity");
        scope.cleanup().await;
        return;
    };
    scope
        .create_capacity(&resource, capacity("small-a", "a", "512Mi"))
        .await;
    let binder = InProcessBinder::start(&cluster, &scope).await;
    let (ours, kube) = claimed_pods_left_unschedulable(&scope, &class, "job").await;
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(cluster.client.clone());
    let total = nodes
        .list(&ListParams::default())
        .await
        .expect("list nodes")
        .items
        .len();
    let others = total - 2;
    let mut reasons = vec!["2 node(s) did not have enough free storage".to_string()];
    if others > 0 {
        reasons.push(format!("{others} node(s) didn't match Pod's node affinity/selector"));
    }
    reasons.sort();
    assert_eq!(
        ours,
        Some((
            Some("Unschedulable".to_string()),
            Some(format!(
                "0/{total} nodes are available: {}. preemption: 0/{total} nodes are available: {total} Preemption is \
                 not helpful for scheduling.",
                reasons.join(", ")
            ))
        )),
        "{node_a}: 512Mi for a 1Gi claim; {node_b}: no capacity"
    );
    if let Some(kube) = kube {
        assert_eq!(ours, kube, "the condition kube-scheduler writes");
    }
    // Room on node b: the claim is provisioned there.
    scope.create_capacity(&resource, capacity("big-b", "b", "10Gi")).await;
    eventually(WAIT, "the claim's selected node is b", || async {
        claim_of(&scope, "data-ours")
            .await
            .metadata
            .annotations
            .and_then(|a| a.get("volume.kubernetes.io/selected-node").cloned())
            .as_deref()
            == Some(node_b.as_str())
    })
    .await;
    binder.stop().await;
    scope.cleanup().await;
}

/// A node whose CSINode gives a driver an attach limit of 2, with two bound volumes of that
/// driver in use by a pod on it, takes no more pod with such a volume ("node(s) exceed max
/// volume count", as kube-scheduler says with `E2E_KUBE_SCHEDULER=1`), and still takes pods
/// without volumes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_at_its_csi_attach_limit_takes_no_more_pods_with_such_volumes() {
    let Some(cluster) = cluster("a_node_at_its_csi_attach_limit_takes_no_more_pods_with_such_volumes").await else {
        return;
    };
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "attach-limit").await;
    let node = scope.add_node("n1", "4", &[]).await;
    let driver = format!("csi-{}.e2e.example", scope.run);
    scope
        .create_storage(
            "csinodes",
            serde_json::json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": node},
                "spec": {"drivers": [{"name": driver, "nodeID": node, "allocatable": {"count": 2}}]}}),
        )
        .await;
    // Claims pre-bound to CSI volumes (the PV controller completes each binding).
    let mut volumes = Vec::new();
    for i in 0..4 {
        let pv = format!("csi-{i}-{}", scope.run);
        let claim = format!("vol-{i}");
        scope
            .create_storage(
                "persistentvolumes",
                serde_json::json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
                    "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                             "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                             "csi": {"driver": driver, "volumeHandle": format!("handle-{i}")},
                             "claimRef": {"namespace": scope.ns, "name": claim}}}),
            )
            .await;
        let mut c = claim_json(&claim, "", Some(&pv));
        c["spec"]["storageClassName"] = serde_json::json!("");
        scope.create_claim(c).await;
        volumes.push(claim);
    }
    eventually(WAIT, "the PV controller binds the claims", || async {
        let mut all = true;
        for c in &volumes {
            all &= claim_of(&scope, c).await.status.and_then(|s| s.phase).as_deref() == Some("Bound");
        }
        all
    })
    .await;
    // A pod on the node already uses two of the driver's volumes: the node is at its limit.
    let mut full = with_claim(scope.pod("full", "100m"), "vol-0");
    {
        let spec = full.spec.as_mut().expect("a pod spec");
        spec.node_name = Some(node.clone());
        let mut second = spec.volumes.as_ref().expect("volumes")[0].clone();
        second.name = "more".into();
        if let Some(c) = second.persistent_volume_claim.as_mut() {
            c.claim_name = "vol-1".into();
        }
        spec.volumes.as_mut().expect("volumes").push(second);
    }
    scope.create(&full).await;
    let binder = InProcessBinder::start(&cluster, &scope).await;
    let compare = std::env::var("E2E_KUBE_SCHEDULER").as_deref() == Ok("1");
    scope.create(&with_claim(scope.pod("one-more", "100m"), "vol-2")).await;
    if compare {
        let pod = with_claim(
            pod_for(&scope.ns, "one-more-kube", "default-scheduler", &scope.run, "100m"),
            "vol-3",
        );
        scope.create(&pod).await;
    }
    scope.create(&scope.pod("plain", "100m")).await;
    eventually(
        WAIT,
        "the plain pod bound, the volume pods marked unschedulable",
        || async {
            let pods = list_pods(&scope).await;
            let plain = pods.iter().any(|p| p.name_any() == "plain" && node_of(p).is_some());
            let marked = pods
                .iter()
                .filter(|p| p.name_any().starts_with("one-more") && marked_unschedulable(p))
                .count();
            plain && marked == 1 + usize::from(compare)
        },
    )
    .await;
    let pods = list_pods(&scope).await;
    let condition = |name: &str| {
        let p = pods.iter().find(|p| p.name_any() == name).expect("a test pod");
        assert_eq!(node_of(p), None, "{name} is not bound");
        scheduled_condition(p).and_then(|c| c.message.clone())
    };
    let ours = condition("one-more").expect("a message");
    assert!(ours.starts_with("0/"), "{ours}");
    assert!(ours.contains("1 node(s) exceed max volume count"), "{ours}");
    if compare {
        assert_eq!(Some(ours), condition("one-more-kube"), "kube-scheduler's message");
    }
    binder.stop().await;
    scope.cleanup().await;
}

// ---- Dynamic Resource Allocation ----

/// The driver of the made-up GPUs (ResourceSlices are created by the test, as an admin would).
const GPU_DRIVER: &str = "gpu.placement-e2e.example.com";

/// A ResourceSlice of `node`'s GPUs, one pool per node: (name, model, numa, tainted).
fn gpu_slice(node: &str, gpus: &[(&str, &str, i64, bool)]) -> serde_json::Value {
    let devices: Vec<serde_json::Value> = gpus
        .iter()
        .map(|(name, model, numa, tainted)| {
            let mut d = serde_json::json!({
                "name": name,
                "attributes": {"model": {"string": model}, "numa": {"int": numa}},
                "capacity": {"memory": {"value": "80Gi"}},
            });
            if *tainted {
                d["taints"] =
                    serde_json::json!([{"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}]);
            }
            d
        })
        .collect();
    serde_json::json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": format!("{node}-gpus")},
        "spec": {
            "driver": GPU_DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        }
    })
}

/// A claim's spec asking for GPUs of `class`: `request` is the request's JSON (its name "gpu").
fn claim_spec(request: serde_json::Value, constraints: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"devices": {"requests": [request], "constraints": constraints}})
}

/// Whether `s` is a lower-case UUID (`8-4-4-4-12` hex digits), the form of kube's share IDs.
fn is_uuid(s: &str) -> bool {
    s.split('-').map(str::len).eq([8, 4, 4, 4, 12])
        && s.chars()
            .all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c))
}

/// What a decision wrote for one pod, the side's name taken out: the node's side-free suffix,
/// the pod's claim's allocation (request, driver, pool, device, tolerations, consumed capacity,
/// whether a share ID is a UUID) and node selector,
/// and its `PodScheduled` condition when it is not bound.
async fn dra_view(scope: &Scope, pod: &Pod, side: &str) -> serde_json::Value {
    let unside = |s: &str| s.replace(side, "SIDE");
    let status = pod.status.as_ref();
    let claim_name = pod
        .spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .and_then(|c| c.first())
        .and_then(|c| {
            c.resource_claim_name.clone().or_else(|| {
                status
                    .and_then(|s| s.resource_claim_statuses.as_ref())
                    .and_then(|s| s.iter().find(|s| s.name == c.name))
                    .and_then(|s| s.resource_claim_name.clone())
            })
        });
    let claims: Api<k8s_openapi::api::resource::v1::ResourceClaim> = Api::namespaced(scope.client.clone(), &scope.ns);
    let allocation = match &claim_name {
        Some(name) => claims
            .get(name)
            .await
            .ok()
            .and_then(|c| c.status)
            .and_then(|s| s.allocation),
        None => None,
    };
    let results: Vec<serde_json::Value> = allocation
        .as_ref()
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
        .map(|r| {
            serde_json::json!({
                "request": r.request,
                "driver": r.driver,
                "pool": unside(&r.pool),
                "device": r.device,
                "tolerations": serde_json::to_value(&r.tolerations).unwrap_or_default(),
                "consumed_capacity": serde_json::to_value(&r.consumed_capacity).unwrap_or_default(),
                // kube draws a random UUID: its form is compared, not its value.
                "share_id": r.share_id.as_deref().map(|id| if is_uuid(id) { "a UUID" } else { id }),
                "binding_conditions": r.binding_conditions,
                "binding_failure_conditions": r.binding_failure_conditions,
            })
        })
        .collect();
    let selector = allocation
        .as_ref()
        .and_then(|a| a.node_selector.as_ref())
        .map(|s| unside(&serde_json::to_string(s).unwrap_or_default()));
    // Who the claim is reserved for, and its finalizers (kube-scheduler's PreBind writes both).
    let claim = match &claim_name {
        Some(name) => claims.get(name).await.ok(),
        None => None,
    };
    let mut reserved: Vec<String> = claim
        .as_ref()
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.reserved_for.as_ref())
        .into_iter()
        .flatten()
        .map(|r| format!("{}/{}", r.resource, unside(&r.name)))
        .collect();
    reserved.sort();
    let finalizers = claim
        .as_ref()
        .and_then(|c| c.metadata.finalizers.clone())
        .unwrap_or_default();
    serde_json::json!({
        "node": node_of(pod).map(unside),
        "devices": results,
        "node_selector": selector,
        "reserved_for": reserved,
        "finalizers": finalizers,
        "condition": if node_of(pod).is_some() {
            serde_json::Value::Null
        } else {
            scheduled_condition(pod)
                .map(|c| serde_json::json!([c.status, c.reason, c.message.as_deref().map(unside)]))
                .unwrap_or_default()
        },
    })
}

/// Issue 38's acceptance on a real control plane: twin nodes with twin made-up GPUs on each side,
/// twin pods whose claims come from templates (the cluster's resourceclaim controller creates
/// them) or name a claim two pods share, decided one pair at a time by placement and by the
/// cluster's kube-scheduler. Each pair must land on twin nodes with the same devices allocated
/// (`status.allocation`: requests, pools, devices, tolerations, node selector), or be left
/// unschedulable with the same condition and message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_claims_are_allocated_as_kube_scheduler_allocates_them() {
    let test = "resource_claims_are_allocated_as_kube_scheduler_allocates_them";
    let Some(cluster) = cluster(test).await else {
        return;
    };
    if std::env::var("E2E_KUBE_SCHEDULER").as_deref() != Ok("1") {
        eprintln!(
            "e2e {test}: skipped: set E2E_KUBE_SCHEDULER=1 when the cluster's kube-scheduler serves default-scheduler"
        );
        return;
    }
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "dra").await;
    let class = format!("{}-gpu", scope.run);
    scope
        .create_storage(
            "deviceclasses",
            serde_json::json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": class},
                "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{GPU_DRIVER}\"")}}]}
            }),
        )
        .await;
    for side in ["ours", "kube"] {
        // n1: two A100s; n2: four H100s over two NUMA nodes; n3: one A100 under maintenance.
        let n1 = scope.add_node(&format!("{side}-n1"), "8", &[("side", side)]).await;
        let n2 = scope.add_node(&format!("{side}-n2"), "8", &[("side", side)]).await;
        let n3 = scope.add_node(&format!("{side}-n3"), "8", &[("side", side)]).await;
        for slice in [
            gpu_slice(&n1, &[("gpu-0", "a100", 0, false), ("gpu-1", "a100", 1, false)]),
            gpu_slice(
                &n2,
                &[
                    ("gpu-0", "h100", 0, false),
                    ("gpu-1", "h100", 1, false),
                    ("gpu-2", "h100", 0, false),
                    ("gpu-3", "h100", 1, false),
                ],
            ),
            gpu_slice(&n3, &[("gpu-0", "a100", 0, true)]),
        ] {
            scope.create_storage("resourceslices", slice).await;
        }
    }
    let model = |m: &str| serde_json::json!([{"cel": {"expression": format!("device.attributes[\"{GPU_DRIVER}\"].model == \"{m}\"")}}]);
    let tolerate =
        serde_json::json!([{"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}]);
    let templates = [
        (
            "one-a100",
            claim_spec(
                serde_json::json!({"name": "gpu", "exactly": {"deviceClassName": class, "selectors": model("a100")}}),
                serde_json::json!([]),
            ),
        ),
        (
            "one-h100",
            claim_spec(
                serde_json::json!({"name": "gpu", "exactly": {"deviceClassName": class, "selectors": model("h100")}}),
                serde_json::json!([]),
            ),
        ),
        (
            "a100-tolerant",
            claim_spec(
                serde_json::json!({"name": "gpu", "exactly": {"deviceClassName": class, "selectors": model("a100"), "tolerations": tolerate}}),
                serde_json::json!([]),
            ),
        ),
        (
            "h100-pair-one-numa",
            claim_spec(
                serde_json::json!({"name": "gpu", "exactly": {"deviceClassName": class, "selectors": model("h100"), "count": 2}}),
                serde_json::json!([{"requests": ["gpu"], "matchAttribute": format!("{GPU_DRIVER}/numa")}]),
            ),
        ),
        (
            "h100-else-a100",
            claim_spec(
                serde_json::json!({"name": "gpu", "firstAvailable": [
                    {"name": "h100", "deviceClassName": class, "selectors": model("h100")},
                    {"name": "a100", "deviceClassName": class, "selectors": model("a100")}
                ]}),
                serde_json::json!([]),
            ),
        ),
    ];
    let templates_api: Api<k8s_openapi::api::resource::v1::ResourceClaimTemplate> =
        Api::namespaced(cluster.client.clone(), &scope.ns);
    for (name, spec) in &templates {
        let t = serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name}, "spec": {"spec": spec}});
        templates_api
            .create(&PostParams::default(), &serde_json::from_value(t).expect("a template"))
            .await
            .expect("create a ResourceClaimTemplate");
    }
    // A claim each side's two "shared" pods use.
    let claims_api: Api<k8s_openapi::api::resource::v1::ResourceClaim> =
        Api::namespaced(cluster.client.clone(), &scope.ns);
    for side in ["ours", "kube"] {
        let c = serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": format!("shared-{side}")},
            "spec": claim_spec(serde_json::json!({"name": "gpu", "exactly": {"deviceClassName": class, "selectors": model("h100")}}), serde_json::json!([]))});
        claims_api
            .create(&PostParams::default(), &serde_json::from_value(c).expect("a claim"))
            .await
            .expect("create a ResourceClaim");
    }
    let binder = InProcessBinder::start(&cluster, &scope).await;
    // Twin pods using `template` (or, with `shared`, the side's shared claim).
    let twins = |name: &str, template: Option<&str>| {
        twin_pods(&scope, name, "100m", &|pod, side| {
            pod["spec"]["resourceClaims"] = match template {
                Some(t) => serde_json::json!([{"name": "gpu", "resourceClaimTemplateName": t}]),
                None => serde_json::json!([{"name": "gpu", "resourceClaimName": format!("shared-{side}")}]),
            };
            pod["spec"]["containers"][0]["resources"]["claims"] = serde_json::json!([{"name": "gpu"}]);
        })
    };
    let decided = |p: &Pod| node_of(p).is_some() || marked_unschedulable(p);
    let mut outcomes: Vec<(String, serde_json::Value)> = Vec::new();
    let steps: [(&str, Option<&str>); 9] = [
        ("a100-1", Some("one-a100")),
        ("h100-pair", Some("h100-pair-one-numa")),
        ("prefer-h100", Some("h100-else-a100")),
        ("a100-2", Some("one-a100")),
        ("a100-3", Some("one-a100")),
        ("a100-tolerant", Some("a100-tolerant")),
        ("shared-1", None),
        ("shared-2", None),
        ("h100-last", Some("one-h100")),
    ];
    for (step, template) in steps {
        let pods = twins(step, template);
        for p in &pods {
            scope.create(p).await;
        }
        let names = pods.map(|p| p.name_any());
        eventually(WAIT, &format!("both schedulers decided {names:?}"), || async {
            let mut all = true;
            for name in &names {
                all &= scope.pods().get(name).await.ok().is_some_and(|p| decided(&p));
            }
            all
        })
        .await;
        let ours = scope.pods().get(&names[0]).await.expect("our twin");
        let kube = scope.pods().get(&names[1]).await.expect("kube's twin");
        // A bound pod's claim is written before its Binding (PreBind), so it is there now.
        let (ours_view, kube_view) = (
            dra_view(&scope, &ours, "ours").await,
            dra_view(&scope, &kube, "kube").await,
        );
        assert_eq!(
            ours_view, kube_view,
            "{step}: placement (left) against kube-scheduler (right)"
        );
        outcomes.push((step.to_string(), ours_view));
    }
    // What the scenario is built to show, beyond agreeing with kube-scheduler.
    let node = |step: &str| outcomes.iter().find(|(s, _)| s == step).map(|(_, v)| v["node"].clone());
    // Our side's nodes were added first: n1, n2, n3.
    let suffix = |n: &str| {
        let i = ["n1", "n2", "n3"].iter().position(|x| *x == n).unwrap_or_default();
        serde_json::Value::String(scope.nodes[i].replace("ours", "SIDE"))
    };
    assert_eq!(
        node("a100-1"),
        Some(suffix("n1")),
        "an A100 only where one is free and untainted"
    );
    assert_eq!(node("h100-pair"), Some(suffix("n2")));
    assert_eq!(node("a100-3"), Some(serde_json::Value::Null), "out of untainted A100s");
    assert_eq!(node("a100-tolerant"), Some(suffix("n3")), "the tainted A100, tolerated");
    assert_eq!(
        node("shared-1"),
        node("shared-2"),
        "a shared claim puts its pods together"
    );
    assert_eq!(node("h100-last"), Some(serde_json::Value::Null), "out of H100s");
    eprintln!("e2e {test}: {} twin pairs decided and allocated alike", outcomes.len());
    for (step, view) in &outcomes {
        eprintln!("  {step}: {view}");
    }
    binder.stop().await;
    scope.cleanup().await;
}

/// What a decision wrote for a pod asking for an extended resource backed by DRA, the side's
/// name taken out: the node, the pod's `status.extendedResourceClaimStatus` (the claim's name
/// with its generated suffix cut, the request mappings), and the special claim kube-scheduler's
/// PreBind creates: its generateName, owner references, annotations, requests, allocation
/// (request, driver, pool, device), reservedFor and finalizers; the `PodScheduled` condition
/// when the pod is not bound.
async fn extended_view(scope: &Scope, pod: &Pod, side: &str) -> serde_json::Value {
    let unside = |s: &str| s.replace(side, "SIDE");
    let status = pod
        .status
        .as_ref()
        .and_then(|s| s.extended_resource_claim_status.as_ref());
    let claim_name = status.map(|s| s.resource_claim_name.clone());
    let claims: Api<k8s_openapi::api::resource::v1::ResourceClaim> = Api::namespaced(scope.client.clone(), &scope.ns);
    let claim = match &claim_name {
        Some(name) => claims.get(name).await.ok(),
        None => None,
    };
    let claim_view = claim.as_ref().map(|c| {
        let owners: Vec<serde_json::Value> = c
            .metadata
            .owner_references
            .iter()
            .flatten()
            .map(|o| {
                serde_json::json!([
                    o.api_version,
                    o.kind,
                    unside(&o.name),
                    o.controller,
                    o.uid == pod.metadata.uid.clone().unwrap_or_default()
                ])
            })
            .collect();
        let requests = c
            .spec
            .as_ref()
            .and_then(|s| s.devices.as_ref())
            .and_then(|d| d.requests.as_ref())
            .map(|r| serde_json::to_value(r).unwrap_or_default());
        let allocation = c.status.as_ref().and_then(|s| s.allocation.as_ref());
        let devices: Vec<serde_json::Value> = allocation
            .and_then(|a| a.devices.as_ref())
            .and_then(|d| d.results.as_ref())
            .into_iter()
            .flatten()
            .map(|r| serde_json::json!([r.request, r.driver, unside(&r.pool), r.device]))
            .collect();
        let selector = allocation
            .and_then(|a| a.node_selector.as_ref())
            .map(|s| unside(&serde_json::to_string(s).unwrap_or_default()));
        let reserved: Vec<String> = c
            .status
            .as_ref()
            .and_then(|s| s.reserved_for.as_ref())
            .into_iter()
            .flatten()
            .map(|r| format!("{}/{}", r.resource, unside(&r.name)))
            .collect();
        // The generated name: generateName and five characters.
        let generated = c.metadata.generate_name.as_deref().is_some_and(|g| {
            c.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with(g) && n.len() == g.len() + 5)
        });
        serde_json::json!({
            "generate_name": c.metadata.generate_name.as_deref().map(unside),
            "name_generated": generated,
            "owners": owners,
            "annotations": c.metadata.annotations,
            "requests": requests,
            "devices": devices,
            "node_selector": selector,
            "reserved_for": reserved,
            "finalizers": c.metadata.finalizers,
        })
    });
    serde_json::json!({
        "node": node_of(pod).map(unside),
        "request_mappings": status.map(|s| serde_json::to_value(&s.request_mappings).unwrap_or_default()),
        "claim": claim_view,
        "condition": if node_of(pod).is_some() {
            serde_json::Value::Null
        } else {
            scheduled_condition(pod)
                .map(|c| serde_json::json!([c.status, c.reason, c.message.as_deref().map(unside)]))
                .unwrap_or_default()
        },
    })
}

/// Issue 45 item 1 on a real control plane: a DeviceClass names an extended resource
/// (`spec.extendedResourceName`) and no node has it in its allocatable. Twin pods asking for it in
/// `resources.limits` (one through the class's implicit name `deviceclass.resource.kubernetes.io/
/// <class>`), decided one pair at a time by placement and by the cluster's kube-scheduler, must
/// land on twin nodes with the special claim written alike (generateName, owner, annotation,
/// requests, allocation, reservation, finalizer, the pod's request mappings), or be left
/// unschedulable with the same message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extended_resources_backed_by_dra_are_allocated_as_kube_scheduler_allocates_them() {
    let test = "extended_resources_backed_by_dra_are_allocated_as_kube_scheduler_allocates_them";
    let Some(cluster) = cluster(test).await else {
        return;
    };
    if std::env::var("E2E_KUBE_SCHEDULER").as_deref() != Ok("1") {
        eprintln!(
            "e2e {test}: skipped: set E2E_KUBE_SCHEDULER=1 when the cluster's kube-scheduler serves default-scheduler"
        );
        return;
    }
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "draext").await;
    let class = format!("{}-xgpu", scope.run);
    let resource = format!("e2e.example.com/{}-gpu", scope.run);
    scope
        .create_storage(
            "deviceclasses",
            serde_json::json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": class},
                "spec": {
                    "selectors": [{"cel": {"expression": format!("device.driver == \"{GPU_DRIVER}\"")}}],
                    "extendedResourceName": resource,
                }
            }),
        )
        .await;
    for side in ["ours", "kube"] {
        // n1: one GPU; n2: two. No node lists the resource in its allocatable.
        let n1 = scope.add_node(&format!("{side}-n1"), "8", &[("side", side)]).await;
        let n2 = scope.add_node(&format!("{side}-n2"), "8", &[("side", side)]).await;
        for slice in [
            gpu_slice(&n1, &[("gpu-0", "a100", 0, false)]),
            gpu_slice(&n2, &[("gpu-0", "a100", 0, false), ("gpu-1", "a100", 1, false)]),
        ] {
            scope.create_storage("resourceslices", slice).await;
        }
    }
    let binder = InProcessBinder::start(&cluster, &scope).await;
    let implicit = format!("deviceclass.resource.kubernetes.io/{class}");
    let decided = |p: &Pod| node_of(p).is_some() || marked_unschedulable(p);
    let mut outcomes: Vec<(String, serde_json::Value)> = Vec::new();
    // Two GPUs fit n2 only; then one, by the implicit name, fits n1 only; then none is left.
    let steps: [(&str, &str, &str); 3] = [
        ("two", &resource, "2"),
        ("one", &implicit, "1"),
        ("none-left", &resource, "1"),
    ];
    for (step, name, count) in steps {
        let pods = twin_pods(&scope, step, "100m", &|pod, _side| {
            pod["spec"]["containers"][0]["resources"]["limits"] = serde_json::json!({ name: count });
        });
        for p in &pods {
            scope.create(p).await;
        }
        let names = pods.map(|p| p.name_any());
        eventually(WAIT, &format!("both schedulers decided {names:?}"), || async {
            let mut all = true;
            for name in &names {
                all &= scope.pods().get(name).await.ok().is_some_and(|p| decided(&p));
            }
            all
        })
        .await;
        let ours = scope.pods().get(&names[0]).await.expect("our twin");
        let kube = scope.pods().get(&names[1]).await.expect("kube's twin");
        // The claim and the pod's status are written before the Binding (PreBind).
        let (ours_view, kube_view) = (
            extended_view(&scope, &ours, "ours").await,
            extended_view(&scope, &kube, "kube").await,
        );
        assert_eq!(
            ours_view, kube_view,
            "{step}: placement (left) against kube-scheduler (right)"
        );
        outcomes.push((step.to_string(), ours_view));
    }
    let view = |step: &str| {
        outcomes
            .iter()
            .find(|(s, _)| s == step)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let suffix = |i: usize| serde_json::Value::String(scope.nodes[i].replace("ours", "SIDE"));
    assert_eq!(view("two")["node"], suffix(1), "two GPUs: the node with two");
    assert_eq!(view("two")["claim"]["devices"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        view("one")["node"],
        suffix(0),
        "one GPU by the implicit name: the node left with one"
    );
    assert_eq!(view("none-left")["node"], serde_json::Value::Null, "out of GPUs");
    eprintln!("e2e {test}: {} twin pairs decided and written alike", outcomes.len());
    for (step, view) in &outcomes {
        eprintln!("  {step}: {view}");
    }
    binder.stop().await;
    scope.cleanup().await;
}

/// The rack of a node named `<run>-<side>-<rack>-<i>`, as the PodGroup tests name their nodes.
fn rack_of(node: &str) -> String {
    node.rsplit_once('-')
        .and_then(|(head, _)| head.rsplit_once('-'))
        .map(|(_, rack)| rack.to_string())
        .unwrap_or_default()
}

/// A PodGroup's `PodGroupInitiallyScheduled` condition as both schedulers write it: status,
/// reason, message and observed generation.
async fn group_condition(scope: &Scope, name: &str) -> Option<serde_json::Value> {
    let groups: Api<k8s_openapi::api::scheduling::v1beta1::PodGroup> =
        Api::namespaced(scope.pods().into_client(), &scope.ns);
    let g = groups.get(name).await.ok()?;
    let c = g
        .status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == "PodGroupInitiallyScheduled")?;
    Some(serde_json::json!({
        "status": c.status,
        "reason": c.reason,
        "message": c.message,
        "observedGeneration": c.observed_generation,
    }))
}

/// Creates the gang PodGroup `name` (minCount `min_count`), with a topology constraint on `key`
/// when given.
async fn create_gang(groups: &Api<PodGroup>, name: &str, min_count: usize, key: Option<&str>) {
    let mut g = serde_json::json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name}, "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}});
    if let Some(key) = key {
        g["spec"]["schedulingConstraints"] = serde_json::json!({"topology": [{"key": key}]});
    }
    groups
        .create(&PostParams::default(), &serde_json::from_value(g).expect("a PodGroup"))
        .await
        .expect("create a PodGroup");
}

type PodGroup = k8s_openapi::api::scheduling::v1beta1::PodGroup;

/// The cluster for a test comparing PodGroups with the cluster's kube-scheduler: `None` (saying
/// why) without a cluster, without `E2E_KUBE_SCHEDULER=1`, or when the API server serves no
/// `scheduling.k8s.io/v1beta1` PodGroups.
async fn workload_api_cluster(test: &str) -> Option<Cluster> {
    let cluster = cluster(test).await?;
    if std::env::var("E2E_KUBE_SCHEDULER").as_deref() != Ok("1") {
        eprintln!(
            "e2e {test}: skipped: set E2E_KUBE_SCHEDULER=1 when the cluster's kube-scheduler serves default-scheduler"
        );
        return None;
    }
    let served = Api::<PodGroup>::all(cluster.client.clone())
        .list(&ListParams::default().limit(1))
        .await
        .is_ok();
    if !served {
        eprintln!(
            "e2e {test}: skipped: the cluster does not serve scheduling.k8s.io/v1beta1 PodGroups (GenericWorkload; \
             ../shared/k8s/cluster.sh up --workload-api)"
        );
        return None;
    }
    Some(cluster)
}

/// [`workload_api_cluster`] for a test of topology-aware PodGroup scheduling: `None` (saying so)
/// when the cluster's gates (`E2E_FEATURE_GATES`) leave `TopologyAwareWorkloadScheduling` off,
/// or, with `want` false, when they turn it on.
async fn workload_api_cluster_with_tas(test: &str, want: bool) -> Option<Cluster> {
    let on = placement_tests::e2e::cluster_gates().topology_aware_workload_scheduling;
    if on != want {
        eprintln!(
            "e2e {test}: skipped: the cluster's TopologyAwareWorkloadScheduling gate is {} (E2E_FEATURE_GATES)",
            if on { "on" } else { "off" }
        );
        return None;
    }
    workload_api_cluster(test).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_groups_are_placed_whole_in_one_rack_as_kube_scheduler_places_them() {
    let test = "pod_groups_are_placed_whole_in_one_rack_as_kube_scheduler_places_them";
    let Some(cluster) = workload_api_cluster_with_tas(test, true).await else {
        return;
    };
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "podgroups").await;
    let groups: Api<PodGroup> = Api::namespaced(cluster.client.clone(), &scope.ns);
    // Each side: racks r1 and r2 of four 4-cpu nodes under a topology key of its own (so each
    // scheduler's placements are its side's racks only); r2's nodes each run a 500m pod.
    let run = scope.run.clone();
    let key = |side: &str| format!("e2e-{run}-{side}-rack");
    for side in ["ours", "kube"] {
        let k = key(side);
        for rack in ["r1", "r2"] {
            for i in 0..4 {
                let node = scope
                    .add_node(
                        &format!("{side}-{rack}-{i}"),
                        "4",
                        &[("side", side), (k.as_str(), rack)],
                    )
                    .await;
                if rack == "r2" {
                    let mut filler =
                        serde_json::to_value(scope.pod(&format!("filler-{side}-{i}"), "500m")).expect("json");
                    filler["spec"]["nodeName"] = serde_json::json!(node);
                    scope.create(&serde_json::from_value(filler).expect("a pod")).await;
                }
            }
        }
    }
    let binder = InProcessBinder::start(&cluster, &scope).await;
    // A gang PodGroup `<name>-<side>` of `size` pods of `cpu`, minCount `size`, one rack.
    let make_group = |name: &str, size: usize, cpu: &'static str| {
        let scope = &scope;
        let groups = &groups;
        let name = name.to_string();
        async move {
            let mut pods = Vec::new();
            for side in ["ours", "kube"] {
                create_gang(groups, &format!("{name}-{side}"), size, Some(&key(side))).await;
            }
            for i in 0..size {
                for pod in twin_pods(scope, &format!("{name}-{i}"), cpu, &|pod, side| {
                    pod["spec"]["schedulingGroup"] = serde_json::json!({"podGroupName": format!("{name}-{side}")});
                }) {
                    scope.create(&pod).await;
                    pods.push(pod.name_any());
                }
            }
            pods
        }
    };
    let side_of = |pod: &str| if pod.ends_with("-ours") { "ours" } else { "kube" };

    // 1. Ten 1.5-cpu pods, minCount 10: a rack holds eight. Neither places any, and both write the
    //    same condition on the group and the same message on each pod.
    let big = make_group("big", 10, "1500m").await;
    eventually(WAIT, "both schedulers gave up on the big groups", || async {
        let mut all =
            group_condition(&scope, "big-ours").await.is_some() && group_condition(&scope, "big-kube").await.is_some();
        for name in &big {
            all &= scope
                .pods()
                .get(name)
                .await
                .ok()
                .is_some_and(|p| marked_unschedulable(&p));
        }
        all
    })
    .await;
    let (ours, kube) = (
        group_condition(&scope, "big-ours").await,
        group_condition(&scope, "big-kube").await,
    );
    assert_eq!(
        ours, kube,
        "the unschedulable group's condition: placement (left), kube-scheduler (right)"
    );
    let mut messages: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for name in &big {
        let p = scope.pods().get(name).await.expect("a big pod");
        assert_eq!(
            node_of(&p),
            None,
            "{name}: no pod of a group that does not fit is bound"
        );
        let message = scheduled_condition(&p)
            .and_then(|c| c.message.clone())
            .unwrap_or_default();
        messages.entry(side_of(name)).or_default().push(message);
    }
    for m in messages.values_mut() {
        m.sort();
    }
    assert_eq!(
        messages.get("ours"),
        messages.get("kube"),
        "the big groups' pod messages: placement (left), kube-scheduler (right)"
    );
    eprintln!("e2e {test}: unschedulable group: {}", ours.unwrap_or_default());

    // 2. Eight 1.5-cpu pods, minCount 8: one rack holds them; the fuller rack (r2) is chosen
    //    (NodeResourcesFit's MostAllocated placement score), every pod in it.
    let fit = make_group("fit", 8, "1500m").await;
    eventually(WAIT, "both schedulers bound the fitting groups", || async {
        let mut all = true;
        for name in &fit {
            all &= scope.pods().get(name).await.ok().is_some_and(|p| node_of(&p).is_some());
        }
        all
    })
    .await;
    let mut racks: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for name in &fit {
        let p = scope.pods().get(name).await.expect("a fit pod");
        racks
            .entry(side_of(name))
            .or_default()
            .push(rack_of(node_of(&p).unwrap_or_default()));
    }
    for (side, rs) in &racks {
        assert!(
            rs.iter().all(|r| r == "r2"),
            "{side}: the group lands whole in the fuller rack: {rs:?}"
        );
    }
    assert_eq!(racks.get("ours").map(Vec::len), Some(8));
    assert_eq!(racks.get("kube").map(Vec::len), Some(8));
    eventually(WAIT, "both fitting groups' conditions written", || async {
        group_condition(&scope, "fit-ours").await.is_some() && group_condition(&scope, "fit-kube").await.is_some()
    })
    .await;
    assert_eq!(
        group_condition(&scope, "fit-ours").await,
        group_condition(&scope, "fit-kube").await,
        "the scheduled group's condition: placement (left), kube-scheduler (right)"
    );
    eprintln!("e2e {test}: two groups of 8 each whole in rack r2 on both sides, a group of 10 left whole by both");
    binder.stop().await;
    scope.cleanup().await;
}

/// A PodGroup one of whose pods still has a scheduling gate is held whole, as the cluster's
/// kube-scheduler holds a twin group (its queue gates the group's entity): no pod bound though
/// the two ungated pods alone meet minCount, the same conditions on the pods (the API server's
/// `SchedulingGated` on the gated one, nothing on the others) and none on the group; once the
/// gate is removed both bind the whole group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_group_with_a_gated_pod_is_held_whole_as_kube_scheduler_holds_it() {
    let test = "a_pod_group_with_a_gated_pod_is_held_whole_as_kube_scheduler_holds_it";
    let Some(cluster) = workload_api_cluster(test).await else {
        return;
    };
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "gatedgroups").await;
    let groups: Api<PodGroup> = Api::namespaced(cluster.client.clone(), &scope.ns);
    for side in ["ours", "kube"] {
        scope.add_node(&format!("{side}-0"), "4", &[("side", side)]).await;
        create_gang(&groups, &format!("gated-{side}"), 2, None).await;
    }
    let binder = InProcessBinder::start(&cluster, &scope).await;
    let mut members = Vec::new();
    for i in 0..3 {
        for pod in twin_pods(&scope, &format!("gated-{i}"), "500m", &|pod, side| {
            pod["spec"]["schedulingGroup"] = serde_json::json!({"podGroupName": format!("gated-{side}")});
            if i == 1 {
                pod["spec"]["schedulingGates"] = serde_json::json!([{"name": "example.com/hold"}]);
            }
        }) {
            scope.create(&pod).await;
            members.push(pod.name_any());
        }
    }
    // A plain pod on each side, created after the group: once both are bound, both schedulers
    // have been through the group's pods; then a few more seconds for anything late.
    let mut probes = Vec::new();
    for p in twin_pods(&scope, "probe", "100m", &|_, _| {}) {
        scope.create(&p).await;
        probes.push(p.name_any());
    }
    eventually(WAIT, "both probes bound", || async {
        let mut all = true;
        for name in &probes {
            all &= scope.pods().get(name).await.ok().is_some_and(|p| node_of(&p).is_some());
        }
        all
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    // Per twin: each side's PodScheduled (status, reason).
    type Sides = BTreeMap<&'static str, Option<(String, String)>>;
    let mut conditions: BTreeMap<String, Sides> = BTreeMap::new();
    for name in &members {
        let p = scope.pods().get(name).await.expect("a member");
        assert_eq!(node_of(&p), None, "{name}: bound while a member of its group is gated");
        let (base, side) = name.rsplit_once('-').expect("<name>-<side>");
        conditions.entry(base.to_string()).or_default().insert(
            if side == "ours" { "ours" } else { "kube" },
            scheduled_condition(&p).map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default())),
        );
    }
    for (base, sides) in &conditions {
        assert_eq!(
            sides.get("ours"),
            sides.get("kube"),
            "{base}: PodScheduled while held: placement (left), kube-scheduler (right)"
        );
    }
    assert_eq!(group_condition(&scope, "gated-ours").await, None);
    assert_eq!(group_condition(&scope, "gated-kube").await, None);
    eprintln!("e2e {test}: held by both: {conditions:?}");

    // The gate goes: both schedulers bind the whole group.
    for side in ["ours", "kube"] {
        scope
            .pods()
            .patch(
                &format!("gated-1-{side}"),
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(serde_json::json!({"spec": {"schedulingGates": null}})),
            )
            .await
            .expect("remove the gate");
    }
    eventually(WAIT, "both groups bound whole", || async {
        let mut all = true;
        for name in &members {
            all &= scope.pods().get(name).await.ok().is_some_and(|p| node_of(&p).is_some());
        }
        all
    })
    .await;
    eventually(WAIT, "both groups' conditions written", || async {
        group_condition(&scope, "gated-ours").await.is_some() && group_condition(&scope, "gated-kube").await.is_some()
    })
    .await;
    assert_eq!(
        group_condition(&scope, "gated-ours").await,
        group_condition(&scope, "gated-kube").await,
        "the group's condition once ungated: placement (left), kube-scheduler (right)"
    );
    binder.stop().await;
    scope.cleanup().await;
}

/// A PodGroup's pods are placed in the order kube-scheduler's queue keeps them (priority,
/// attempts, arrival, then name), and the order decides: on a 4-cpu and a 2-cpu node, a 1.5-cpu
/// pod placed first takes the big node and leaves no room for a 3-cpu one (the group fails), the
/// 3-cpu pod placed first leaves room for the other (the group fits). Each group is created in
/// one order with names in the other, on twin nodes for each scheduler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_groups_pods_are_placed_in_arrival_order_as_kube_scheduler_places_them() {
    let test = "a_pod_groups_pods_are_placed_in_arrival_order_as_kube_scheduler_places_them";
    let Some(cluster) = workload_api_cluster(test).await else {
        return;
    };
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "grouporder").await;
    let groups: Api<PodGroup> = Api::namespaced(cluster.client.clone(), &scope.ns);
    for set in ["small-first", "big-first"] {
        for side in ["ours", "kube"] {
            scope
                .add_node(&format!("{side}-{set}-big"), "4", &[("side", side), ("set", set)])
                .await;
            scope
                .add_node(&format!("{side}-{set}-small"), "2", &[("side", side), ("set", set)])
                .await;
            create_gang(&groups, &format!("{set}-{side}"), 2, None).await;
        }
    }
    let binder = InProcessBinder::start(&cluster, &scope).await;
    // Created in this order; the names sort the other way.
    let order = [
        ("small-first", "z-small", "1500m"),
        ("small-first", "a-big", "3"),
        ("big-first", "z-big", "3"),
        ("big-first", "a-small", "1500m"),
    ];
    let mut names: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (set, pod, cpu) in order {
        for p in twin_pods(&scope, &format!("{set}-{pod}"), cpu, &|p, side| {
            p["spec"]["schedulingGroup"] = serde_json::json!({"podGroupName": format!("{set}-{side}")});
            p["spec"]["nodeSelector"]["set"] = serde_json::json!(set);
        }) {
            scope.create(&p).await;
            names.entry(set).or_default().push(p.name_any());
        }
    }
    eventually(WAIT, "every group's condition written", || async {
        let mut all = true;
        for set in ["small-first", "big-first"] {
            for side in ["ours", "kube"] {
                all &= group_condition(&scope, &format!("{set}-{side}")).await.is_some();
            }
        }
        all
    })
    .await;
    for set in ["small-first", "big-first"] {
        assert_eq!(
            group_condition(&scope, &format!("{set}-ours")).await,
            group_condition(&scope, &format!("{set}-kube")).await,
            "{set}: the group's condition: placement (left), kube-scheduler (right)"
        );
    }
    let status = group_condition(&scope, "small-first-kube").await.unwrap_or_default();
    assert_eq!(
        status["status"], "False",
        "kube-scheduler placed the small pod first: {status}"
    );
    let status = group_condition(&scope, "big-first-kube").await.unwrap_or_default();
    assert_eq!(
        status["status"], "True",
        "kube-scheduler placed the big pod first: {status}"
    );
    eventually(WAIT, "the big-first groups bound, the others marked", || async {
        let mut all = true;
        for name in &names["big-first"] {
            all &= scope.pods().get(name).await.ok().is_some_and(|p| node_of(&p).is_some());
        }
        for name in &names["small-first"] {
            all &= scope
                .pods()
                .get(name)
                .await
                .ok()
                .is_some_and(|p| marked_unschedulable(&p));
        }
        all
    })
    .await;
    // Each pod's outcome: its node's size, or its message; the same on both sides.
    let mut outcomes: BTreeMap<String, BTreeMap<&str, String>> = BTreeMap::new();
    for set_names in names.values() {
        for name in set_names {
            let p = scope.pods().get(name).await.expect("a member");
            let outcome = match node_of(&p) {
                Some(node) => format!("bound to the {} node", node.rsplit('-').next().unwrap_or_default()),
                None => scheduled_condition(&p)
                    .and_then(|c| c.message.clone())
                    .unwrap_or_default(),
            };
            let (base, side) = name.rsplit_once('-').expect("<name>-<side>");
            outcomes
                .entry(base.to_string())
                .or_default()
                .insert(if side == "ours" { "ours" } else { "kube" }, outcome);
        }
    }
    for (base, sides) in &outcomes {
        assert_eq!(
            sides.get("ours"),
            sides.get("kube"),
            "{base}: placement (left), kube-scheduler (right)"
        );
    }
    eprintln!("e2e {test}: {outcomes:?}");
    binder.stop().await;
    scope.cleanup().await;
}

/// The `PodGroupInitiallyScheduled` condition's `lastTransitionTime` changes only with its status
/// (kube-scheduler's `SetStatusCondition` on the PodGroup it caches): a binder restarted between
/// two cycles of a group that stays unschedulable keeps the time the first one wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_binder_keeps_a_pod_groups_transition_time_on_the_api_server() {
    let test = "a_restarted_binder_keeps_a_pod_groups_transition_time_on_the_api_server";
    let Some(cluster) = workload_api_cluster(test).await else {
        return;
    };
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "grouprestart").await;
    let groups: Api<PodGroup> = Api::namespaced(cluster.client.clone(), &scope.ns);
    scope.add_node("ours-0", "4", &[("side", "ours")]).await;
    create_gang(&groups, "stuck", 2, None).await;
    let transition = || async {
        let g = groups.get("stuck").await.ok()?;
        g.status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "PodGroupInitiallyScheduled")
            .map(|c| (c.status, c.last_transition_time))
    };
    let first = InProcessBinder::start(&cluster, &scope).await;
    // Two 3-cpu pods on one 4-cpu node: the group never fits.
    for i in 0..2 {
        let [ours, _] = twin_pods(&scope, &format!("stuck-{i}"), "3", &|p, _| {
            p["spec"]["schedulingGroup"] = serde_json::json!({"podGroupName": "stuck"});
        });
        scope.create(&ours).await;
    }
    eventually(WAIT, "the group's condition written", || async {
        transition().await.is_some()
    })
    .await;
    let before = transition().await.expect("a condition");
    assert_eq!(before.0, "False");
    first.stop().await;
    // Past the second the time is written in, a new binder decides the group again.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let failed_scheduling = || async {
        let events: Api<Event> = Api::namespaced(cluster.client.clone(), &scope.ns);
        events.list(&ListParams::default()).await.map_or(0, |l| {
            l.items
                .iter()
                .filter(|e| e.reason.as_deref() == Some("FailedScheduling"))
                .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("stuck-0-ours"))
                .map(|e| e.series.as_ref().map_or(1, |s| s.count))
                .sum::<i32>()
        })
    };
    let seen = failed_scheduling().await;
    let second = InProcessBinder::start(&cluster, &scope).await;
    eventually(
        WAIT,
        "the restarted binder's cycle (a new FailedScheduling event)",
        || async { failed_scheduling().await > seen },
    )
    .await;
    // Its condition update (a write, or none when already so) follows the cycle.
    eventually(WAIT, "the restarted binder's condition update finished", || async {
        second
            .binder
            .metrics()
            .encode()
            .lines()
            .any(|l| l.starts_with(r#"binder_pod_group_condition_updates_total{result="ok"}"#))
    })
    .await;
    let after = transition().await.expect("a condition");
    assert_eq!(
        after, before,
        "the status stayed False: its transition time too (after the restart, before)"
    );
    eprintln!("e2e {test}: {before:?} kept across the restart");
    second.stop().await;
    scope.cleanup().await;
}

/// A PodGroup whose members' required anti-affinity refuses a pod bound in another rack: kube's
/// placement narrows the candidate nodes only, so InterPodAffinity still sees that pod and keeps
/// the members out of its zone. Per side: a0 (rack ra, zone z1), b0 (rack rb, zone z1), c0 (rack
/// rc, zone z2), a pod `app=x` bound on b0, a gang of 2 with the rack key whose members refuse
/// `app=x` over the zone: both schedulers bind both members on c0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_groups_anti_affinity_sees_pods_bound_in_other_racks_as_kube_scheduler_does() {
    let test = "a_pod_groups_anti_affinity_sees_pods_bound_in_other_racks_as_kube_scheduler_does";
    let Some(cluster) = workload_api_cluster_with_tas(test, true).await else {
        return;
    };
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "podgroup-anti").await;
    let groups: Api<PodGroup> = Api::namespaced(cluster.client.clone(), &scope.ns);
    let run = scope.run.clone();
    let rack_key = |side: &str| format!("e2e-{run}-{side}-rack");
    let zone_key = |side: &str| format!("e2e-{run}-{side}-zone");
    let mut c0 = BTreeMap::new();
    for side in ["ours", "kube"] {
        let (rk, zk) = (rack_key(side), zone_key(side));
        for (name, rack, zone) in [("a0", "ra", "z1"), ("b0", "rb", "z1"), ("c0", "rc", "z2")] {
            let node = scope
                .add_node(
                    &format!("{side}-{name}"),
                    "4",
                    &[("side", side), (rk.as_str(), rack), (zk.as_str(), zone)],
                )
                .await;
            if name == "b0" {
                let mut x = serde_json::to_value(scope.pod(&format!("x-{side}"), "100m")).expect("json");
                x["spec"]["nodeName"] = serde_json::json!(node);
                x["metadata"]["labels"]["app"] = serde_json::json!(format!("x-{side}"));
                scope.create(&serde_json::from_value(x).expect("a pod")).await;
            }
            if name == "c0" {
                c0.insert(side, node);
            }
        }
        create_gang(&groups, &format!("anti-{side}"), 2, Some(&rk)).await;
    }
    let binder = InProcessBinder::start(&cluster, &scope).await;
    let mut members = Vec::new();
    for i in 0..2 {
        for pod in twin_pods(&scope, &format!("anti-{i}"), "100m", &|pod, side| {
            pod["spec"]["schedulingGroup"] = serde_json::json!({"podGroupName": format!("anti-{side}")});
            pod["spec"]["affinity"] = serde_json::json!({"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchLabels": {"app": format!("x-{side}")}},
                    "topologyKey": zone_key(side)}]}});
        }) {
            scope.create(&pod).await;
            members.push(pod.name_any());
        }
    }
    eventually(WAIT, "both schedulers bound both groups", || async {
        let mut all = true;
        for name in &members {
            all &= scope.pods().get(name).await.ok().is_some_and(|p| node_of(&p).is_some());
        }
        all
    })
    .await;
    for name in &members {
        let side = if name.ends_with("-ours") { "ours" } else { "kube" };
        let p = scope.pods().get(name).await.expect("a member");
        assert_eq!(
            node_of(&p),
            c0.get(side).map(String::as_str),
            "{name}: the only node outside x's zone"
        );
    }
    eventually(WAIT, "both groups' conditions written", || async {
        group_condition(&scope, "anti-ours").await.is_some() && group_condition(&scope, "anti-kube").await.is_some()
    })
    .await;
    assert_eq!(
        group_condition(&scope, "anti-ours").await,
        group_condition(&scope, "anti-kube").await,
        "the group's condition: placement (left), kube-scheduler (right)"
    );
    eprintln!("e2e {test}: both groups bound on c0 (rack rc, zone z2) on both sides");
    binder.stop().await;
    scope.cleanup().await;
}

/// With kube 1.37's default gates (TopologyAwareWorkloadScheduling off) a PodGroup's topology key
/// is not read: kube runs its default PodGroup algorithm on every node. Twin racks r1 and r2 of two
/// 4-cpu nodes per side; a gang of four 2.5-cpu pods with the rack key (no rack holds it, the
/// cluster does) binds over both racks on both sides with the same condition; a gang of five fits
/// nowhere and both write the same condition and the same member messages. Runs only on a cluster
/// started with those gates (`WORKLOAD_GATES=GenericWorkload=true`; scripts/test.sh starts one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_groups_without_topology_aware_scheduling_are_decided_as_kube_scheduler_decides_them() {
    let test = "pod_groups_without_topology_aware_scheduling_are_decided_as_kube_scheduler_decides_them";
    let Some(cluster) = workload_api_cluster_with_tas(test, false).await else {
        return;
    };
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "podgroups-notas").await;
    let groups: Api<PodGroup> = Api::namespaced(cluster.client.clone(), &scope.ns);
    let run = scope.run.clone();
    let key = |side: &str| format!("e2e-{run}-{side}-rack");
    for side in ["ours", "kube"] {
        let k = key(side);
        for rack in ["r1", "r2"] {
            for i in 0..2 {
                scope
                    .add_node(
                        &format!("{side}-{rack}-{i}"),
                        "4",
                        &[("side", side), (k.as_str(), rack)],
                    )
                    .await;
            }
        }
    }
    let binder = InProcessBinder::start(&cluster, &scope).await;
    let side_of = |pod: &str| if pod.ends_with("-ours") { "ours" } else { "kube" };
    for (name, size) in [("four", 4usize), ("five", 5usize)] {
        for side in ["ours", "kube"] {
            create_gang(&groups, &format!("{name}-{side}"), size, Some(&key(side))).await;
        }
        let mut members = Vec::new();
        for i in 0..size {
            for pod in twin_pods(&scope, &format!("{name}-{i}"), "2500m", &|pod, side| {
                pod["spec"]["schedulingGroup"] = serde_json::json!({"podGroupName": format!("{name}-{side}")});
            }) {
                scope.create(&pod).await;
                members.push(pod.name_any());
            }
        }
        eventually(WAIT, "both schedulers decided the groups", || async {
            let mut all = group_condition(&scope, &format!("{name}-ours")).await.is_some()
                && group_condition(&scope, &format!("{name}-kube")).await.is_some();
            for m in &members {
                all &= scope
                    .pods()
                    .get(m)
                    .await
                    .ok()
                    .is_some_and(|p| node_of(&p).is_some() || marked_unschedulable(&p));
            }
            all
        })
        .await;
        assert_eq!(
            group_condition(&scope, &format!("{name}-ours")).await,
            group_condition(&scope, &format!("{name}-kube")).await,
            "{name}: the group's condition: placement (left), kube-scheduler (right)"
        );
        let mut bound: BTreeMap<&str, usize> = BTreeMap::new();
        let mut messages: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for m in &members {
            let p = scope.pods().get(m).await.expect("a member");
            if node_of(&p).is_some() {
                *bound.entry(side_of(m)).or_default() += 1;
            } else {
                let message = scheduled_condition(&p)
                    .and_then(|c| c.message.clone())
                    .unwrap_or_default();
                messages.entry(side_of(m)).or_default().push(message);
            }
        }
        for v in messages.values_mut() {
            v.sort();
        }
        assert_eq!(bound.get("ours"), bound.get("kube"), "{name}: members bound");
        assert_eq!(
            messages.get("ours"),
            messages.get("kube"),
            "{name}: the members' messages: placement (left), kube-scheduler (right)"
        );
        eprintln!(
            "e2e {test}: {name}: {} bound per side, condition {:?}",
            bound.get("ours").copied().unwrap_or(0),
            group_condition(&scope, &format!("{name}-ours")).await
        );
    }
    binder.stop().await;
    scope.cleanup().await;
}

/// A higher-priority PodGroup evicts a lower-priority PodGroup's pods in one rack and no other, as
/// the cluster's kube-scheduler does for a twin group on twin racks: the same victims, the members
/// nominated in the same rack, the same group condition; once the victims are gone, both groups
/// bind whole in that rack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_higher_priority_pod_group_preempts_in_one_rack_as_kube_scheduler_does() {
    let test = "a_higher_priority_pod_group_preempts_in_one_rack_as_kube_scheduler_does";
    let Some(cluster) = workload_api_cluster_with_tas(test, true).await else {
        return;
    };
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "podgroup-preemption").await;
    let groups: Api<PodGroup> = Api::namespaced(cluster.client.clone(), &scope.ns);
    let low = priority_class(&mut scope, "placement-e2e-pg-low", 10).await;
    let high = priority_class(&mut scope, "placement-e2e-pg-high", 1000).await;
    // Each side: racks r1 and r2 of two 4-cpu nodes under a topology key of its own. Every node
    // runs two 1.5-cpu pods of the low-priority PodGroup `lo-<side>` (disruption mode unset: each
    // pod a victim of its own); r2's first node runs a high-priority 500m pod too, so that r2 is
    // the fuller rack once the low pods are gone (MostAllocated placement score).
    let run = scope.run.clone();
    let key = |side: &str| format!("e2e-{run}-{side}-rack");
    for side in ["ours", "kube"] {
        let lo = serde_json::json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": format!("lo-{side}")},
            "spec": {"priorityClassName": low, "schedulingPolicy": {"gang": {"minCount": 1}}}});
        groups
            .create(&PostParams::default(), &serde_json::from_value(lo).expect("a PodGroup"))
            .await
            .expect("create the low-priority PodGroup");
    }
    for side in ["ours", "kube"] {
        let k = key(side);
        for rack in ["r1", "r2"] {
            for i in 0..2 {
                let node = scope
                    .add_node(
                        &format!("{side}-{rack}-{i}"),
                        "4",
                        &[("side", side), (k.as_str(), rack)],
                    )
                    .await;
                for j in 0..2 {
                    let name = format!("low-{rack}-{i}-{j}-{side}");
                    let mut pod = serde_json::to_value(prioritized(&scope, &name, "1500m", &low, "low", Some(&node)))
                        .expect("json");
                    pod["spec"]["schedulingGroup"] = serde_json::json!({"podGroupName": format!("lo-{side}")});
                    scope.create(&serde_json::from_value(pod).expect("a pod")).await;
                }
                if rack == "r2" && i == 0 {
                    let name = format!("keep-{side}");
                    scope
                        .create(&prioritized(&scope, &name, "500m", &high, "keep", Some(&node)))
                        .await;
                }
            }
        }
    }
    let binder = InProcessBinder::start(&cluster, &scope).await;
    // The high-priority gang of four 1.5-cpu pods, minCount 4, one rack: no rack has room until
    // low pods go.
    let mut members = Vec::new();
    for side in ["ours", "kube"] {
        let g = serde_json::json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": format!("hi-{side}")},
            "spec": {"priorityClassName": high,
                     "schedulingPolicy": {"gang": {"minCount": 4}},
                     "schedulingConstraints": {"topology": [{"key": key(side)}]}}});
        groups
            .create(&PostParams::default(), &serde_json::from_value(g).expect("a PodGroup"))
            .await
            .expect("create a PodGroup");
    }
    for i in 0..4 {
        for pod in twin_pods(&scope, &format!("hi-{i}"), "1500m", &|pod, side| {
            pod["spec"]["schedulingGroup"] = serde_json::json!({"podGroupName": format!("hi-{side}")});
            pod["spec"]["priorityClassName"] = serde_json::json!(high);
        }) {
            scope.create(&pod).await;
            members.push(pod.name_any());
        }
    }
    let side_of = |pod: &str| if pod.ends_with("-ours") { "ours" } else { "kube" };
    // Victims: the pods being deleted, by name without the side.
    let victims = |side: &'static str| {
        let scope = &scope;
        async move {
            list_pods(scope)
                .await
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_some())
                .filter_map(|p| p.name_any().strip_suffix(&format!("-{side}")).map(str::to_string))
                .collect::<std::collections::BTreeSet<_>>()
        }
    };
    eventually(WAIT, "both schedulers preempted for their group", || async {
        victims("ours").await.len() >= 4 && victims("kube").await.len() >= 4
    })
    .await;
    let (ours_condition, kube_condition) = (
        group_condition(&scope, "hi-ours").await,
        group_condition(&scope, "hi-kube").await,
    );
    eprintln!("e2e {test}: placement's condition: {ours_condition:?}");
    eprintln!("e2e {test}: kube-scheduler's condition: {kube_condition:?}");
    let evicted = victims("ours").await;
    assert_eq!(
        evicted,
        victims("kube").await,
        "the victims: placement (left), kube-scheduler (right)"
    );
    assert!(
        evicted.iter().all(|v| v.starts_with("low-r2-")),
        "only the low-priority group's pods in rack r2 are evicted: {evicted:?}"
    );
    assert_eq!(evicted.len(), 4, "{evicted:?}");
    // Every member nominated in r2 on both sides, two per node.
    let mut nominated: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut messages: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for name in &members {
        let p = scope.pods().get(name).await.expect("a member");
        assert_eq!(node_of(&p), None, "{name}: no member bound before the victims are gone");
        let n = p
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.clone())
            .unwrap_or_default();
        nominated.entry(side_of(name)).or_default().push(
            n.rsplit_once(&format!("{}-", side_of(name)))
                .map(|(_, t)| t.to_string())
                .unwrap_or(n.clone()),
        );
        messages.entry(side_of(name)).or_default().push(
            scheduled_condition(&p)
                .and_then(|c| c.message.clone())
                .unwrap_or_default(),
        );
    }
    for v in nominated.values_mut().chain(messages.values_mut()) {
        v.sort();
    }
    eprintln!("e2e {test}: nominated: {nominated:?}");
    eprintln!("e2e {test}: member messages: {messages:?}");
    assert_eq!(
        ours_condition, kube_condition,
        "the group's condition while the victims go: placement (left), kube-scheduler (right)"
    );
    assert_eq!(
        messages.get("ours"),
        messages.get("kube"),
        "the members' messages: placement (left), kube-scheduler (right)"
    );
    assert_eq!(
        nominated.get("ours").map(Vec::as_slice),
        Some(&["r2-0", "r2-0", "r2-1", "r2-1"].map(String::from)[..]),
        "placement nominates the group in r2, two per node"
    );
    assert_eq!(
        nominated.get("ours"),
        nominated.get("kube"),
        "nominated nodes: placement (left), kube-scheduler (right)"
    );
    assert_eq!(
        ours_condition
            .as_ref()
            .and_then(|c| c["message"].as_str())
            .map(str::to_string),
        Some(
            "pod group is unschedulable, 0/2 placements are available, first placement status: minCount (4) cannot \
             be satisfied: 0 scheduled, 3 remaining, pod group preemption: found a placement for podgroup, \
             preempting 4 victims"
                .to_string()
        ),
        "placement's condition while the victims go"
    );
    // Each victim's Preempted event names the group (its uid; the candidate is the cluster).
    for side in ["ours", "kube"] {
        let uid = groups
            .get(&format!("hi-{side}"))
            .await
            .expect("the group")
            .metadata
            .uid
            .unwrap_or_default();
        for v in &evicted {
            let victim = format!("{v}-{side}");
            eventually(WAIT, &format!("{victim}: its Preempted event"), || async {
                !events_for(&scope, &victim, "Preempted").await.is_empty()
            })
            .await;
            let events = events_for(&scope, &victim, "Preempted").await;
            let e = &events[0];
            assert_eq!(
                e.note.as_deref(),
                Some(format!("Preempted by podgroup {uid} on node cluster").as_str()),
                "{victim}: the event's note"
            );
            let related = e.related.as_ref().map(|r| (r.kind.clone(), r.name.clone()));
            assert_eq!(
                related,
                Some((Some("PodGroup".to_string()), Some(format!("hi-{side}")))),
                "{victim}: the event's related object"
            );
        }
    }
    // The victims go (no kubelet here to finish their graceful deletion).
    let force = DeleteParams::default().grace_period(0);
    for v in &evicted {
        for side in ["ours", "kube"] {
            let _ = scope.pods().delete(&format!("{v}-{side}"), &force).await;
        }
    }
    eventually(WAIT, "both groups bound", || async {
        let mut all = true;
        for name in &members {
            all &= scope.pods().get(name).await.ok().is_some_and(|p| node_of(&p).is_some());
        }
        all
    })
    .await;
    for name in &members {
        let p = scope.pods().get(name).await.expect("a member");
        assert_eq!(
            rack_of(node_of(&p).unwrap_or_default()),
            "r2",
            "{name}: the group lands whole in r2, where room was made"
        );
    }
    let low_left: Vec<String> = list_pods(&scope)
        .await
        .iter()
        .map(|p| p.name_any())
        .filter(|n| n.starts_with("low-r1-"))
        .collect();
    assert_eq!(
        low_left.len(),
        8,
        "rack r1's low pods all stay, on both sides: {low_left:?}"
    );
    eventually(WAIT, "both groups' conditions say scheduled", || async {
        let ok = |c: Option<serde_json::Value>| c.is_some_and(|c| c["status"] == "True");
        ok(group_condition(&scope, "hi-ours").await) && ok(group_condition(&scope, "hi-kube").await)
    })
    .await;
    assert_eq!(
        group_condition(&scope, "hi-ours").await,
        group_condition(&scope, "hi-kube").await,
        "the scheduled group's condition: placement (left), kube-scheduler (right)"
    );
    binder.stop().await;
    scope.cleanup().await;
}
