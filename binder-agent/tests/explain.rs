//! `kubectl-placement explain`, the real binary, against the fake API server over the real
//! protocol: a pod that fits, pods that fit nowhere (for want of resources, for a taint, a label,
//! a cordon; and one preemption would place), `--node` for a refused and a feasible node, a
//! bound pod, what-if policies (built-in and from a file), JSON, colour, a decision replica over
//! gRPC, and clear errors. The last test runs the same binary against a real cluster when
//! `E2E_KUBECONFIG` is set (and says it is skipped otherwise).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Taint};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use placement_scheduler::grpc::{serve, Metrics, ServerConfig};
use placement_tests::fake_apiserver::FakeApiServer;
use placement_tests::fixtures;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-placement");
const SCHEDULER: &str = "placement-scheduler";

/// What a run of the binary printed.
struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        assert!(self.ok, "the command failed: {}", self.stderr);
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.stdout))
    }

    fn text(&self) -> &str {
        assert!(self.ok, "the command failed: {}", self.stderr);
        &self.stdout
    }
}

/// Runs `kubectl-placement explain ARGS` with `kubeconfig` (off the async runtime, so the fake
/// API server keeps serving).
async fn explain(kubeconfig: &Path, args: &[&str]) -> Run {
    let mut cmd = std::process::Command::new(BIN);
    cmd.arg("explain").arg("--kubeconfig").arg(kubeconfig).args(args);
    cmd.env_remove("NO_COLOR");
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .expect("run kubectl-placement");
    Run {
        ok: out.status.success(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

fn labels(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A node of `cpu` cores with labels, and maybe a taint or a cordon.
fn node(name: &str, cpu: &str, extra: &[(&str, &str)], taint: Option<(&str, &str)>, cordoned: bool) -> Node {
    let mut n = fixtures::node(name, cpu);
    n.metadata.labels.get_or_insert_default().extend(labels(extra));
    let spec = n.spec.get_or_insert_default();
    spec.unschedulable = cordoned.then_some(true);
    spec.taints = taint.map(|(k, v)| {
        vec![Taint {
            key: k.into(),
            value: Some(v.into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]
    });
    n
}

/// A pod in `shop` naming `scheduler`, requesting `cpu` (and 64Mi), with a node selector.
fn pod(name: &str, scheduler: &str, cpu: &str, selector: &[(&str, &str)], bound: Option<&str>) -> Pod {
    let mut p = fixtures::pod("shop", name, scheduler, cpu, bound);
    let spec = p.spec.as_mut().unwrap();
    if !selector.is_empty() {
        spec.node_selector = Some(labels(selector));
    }
    p
}

/// The pod bound to `small`: 2500m and 6Gi of its 4 cores and 8Gi, so that packing prefers the
/// node clearly (with less memory, spreading and packing would tie on it and `big`).
fn filler(scheduler: &str, node: &str, selector: &[(&str, &str)]) -> Pod {
    let mut p = pod("filler", scheduler, "2500m", selector, Some(node));
    p.spec.as_mut().unwrap().containers[0].resources = Some(k8s_openapi::api::core::v1::ResourceRequirements {
        requests: Some(fixtures::quantities(&[("cpu", "2500m"), ("memory", "6Gi")])),
        ..Default::default()
    });
    p
}

/// The cluster of these tests, `prefix`ed node names:
///
/// | node       | cpu | labels           | else                      |
/// |------------|-----|------------------|---------------------------|
/// | big        | 8   | disk=ssd         |                           |
/// | small      | 4   | disk=ssd         | `filler` (2500m, 6Gi) bound |
/// | gpu        | 8   | disk=ssd gpu=yes | taint gpu=true:NoSchedule |
/// | hdd        | 8   | disk=hdd         |                           |
/// | cordoned   | 8   | disk=ssd         | cordoned                  |
fn nodes(prefix: &str, extra: &[(&str, &str)]) -> Vec<Node> {
    let mut out = vec![
        node(&format!("{prefix}big"), "8", &[("disk", "ssd")], None, false),
        node(&format!("{prefix}small"), "4", &[("disk", "ssd")], None, false),
        node(
            &format!("{prefix}gpu"),
            "8",
            &[("disk", "ssd"), ("gpu", "yes")],
            Some(("gpu", "true")),
            false,
        ),
        node(&format!("{prefix}hdd"), "8", &[("disk", "hdd")], None, false),
        node(&format!("{prefix}cordoned"), "8", &[("disk", "ssd")], None, true),
    ];
    for n in &mut out {
        n.metadata.labels.get_or_insert_default().extend(labels(extra));
    }
    out
}

/// The fake API server with the cluster above, the pods of the tests, and a kubeconfig for it.
struct Fixture {
    server: FakeApiServer,
    kubeconfig: PathBuf,
}

impl Fixture {
    /// The fake API server with nothing in it but the namespace `shop`, and its kubeconfig.
    async fn empty() -> Self {
        let server = FakeApiServer::start().await;
        server.create_namespace(serde_json::from_value(serde_json::json!({"metadata": {"name": "shop"}})).unwrap());
        let kubeconfig = std::env::temp_dir().join(format!(
            "explain-{}-{}.kubeconfig",
            std::process::id(),
            server.addr().port()
        ));
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\nusers:\n- name: u\n  user: {{}}\n\
                 contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: u\n    namespace: shop\n\
                 current-context: fake\n",
                server.url()
            ),
        )
        .unwrap();
        Self { server, kubeconfig }
    }

    async fn start() -> Self {
        let f = Self::empty().await;
        let server = &f.server;
        for n in nodes("n-", &[]) {
            server.create_node(n);
        }
        server.create_pod(filler(SCHEDULER, "n-small", &[]));
        server.create_pod(pod("web", SCHEDULER, "1", &[("disk", "ssd")], None));
        server.create_pod(pod("huge", SCHEDULER, "10", &[("disk", "ssd")], None));
        server.create_pod(pod("gpu-job", SCHEDULER, "1", &[("gpu", "yes")], None));
        server.create_pod(pod(
            "pinned",
            SCHEDULER,
            "1",
            &[("kubernetes.io/hostname", "n-cordoned")],
            None,
        ));
        server.create_pod(pod("nvme", SCHEDULER, "1", &[("disk", "nvme")], None));
        let mut vip = pod("vip", SCHEDULER, "3", &[("kubernetes.io/hostname", "n-small")], None);
        vip.spec.as_mut().unwrap().priority = Some(100);
        server.create_pod(vip);
        server.create_pod(pod("other", "default-scheduler", "1", &[("disk", "ssd")], None));
        f
    }

    async fn explain(&self, args: &[&str]) -> Run {
        explain(&self.kubeconfig, args).await
    }

    /// [`Fixture::explain`] under the gates of a cluster with topology-aware PodGroup scheduling.
    async fn explain_tas(&self, args: &[&str]) -> Run {
        let mut all = args.to_vec();
        all.extend(["--feature-gates", "TopologyAwareWorkloadScheduling=true"]);
        explain(&self.kubeconfig, &all).await
    }

    async fn stop(self) {
        let _ = std::fs::remove_file(&self.kubeconfig);
        self.server.shutdown().await;
    }
}

/// The `(filter, reason, count)` of the refused groups of an outcome.
fn refused(outcome: &Value) -> Vec<(String, String, u64)> {
    outcome["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["filter"].as_str().unwrap().to_string(),
                g["reason"].as_str().unwrap().to_string(),
                g["count"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn hint_texts(outcome: &Value) -> Vec<String> {
    outcome["hints"]
        .as_array()
        .map(|hs| hs.iter().map(|h| h["text"].as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_fits_gets_the_verdict_the_best_nodes_and_the_refused_ones() {
    let f = Fixture::start().await;
    let run = f.explain(&["web"]).await;
    let text = run.text();
    assert!(!text.contains('\x1b'), "no colour when piped: {text}");
    assert!(
        text.starts_with(
            "Pod shop/web: pending, scheduler placement-scheduler, requests cpu 1, memory 64Mi\n\
                          Cluster: 5 nodes, 1 bound pod; asked the in-process engine, policy default\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("SCHEDULABLE: best node n-big (score ")
            && text.contains("); 2 of 5 nodes fit.\n  kube-scheduler: Successfully assigned shop/web to n-big\n"),
        "{text}"
    );
    // The table: header, weights, then the two feasible nodes best first.
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Best nodes"))
        .skip(1)
        .take(4)
        .collect();
    assert_eq!(
        table[0].split_whitespace().collect::<Vec<_>>(),
        [
            "#", "NODE", "TOTAL", "Taint", "NodeAff", "Fit", "Volume", "Spread", "PodAff", "Devices", "Balanced",
            "Image"
        ],
        "{text}"
    );
    assert_eq!(
        table[1].split_whitespace().collect::<Vec<_>>(),
        ["x3", "x2", "x1", "x1", "x2", "x2", "x2", "x1", "x1"]
    );
    assert!(
        table[2].starts_with("  1  n-big") && table[3].starts_with("  2  n-small"),
        "{text}"
    );
    // Columns line up: every value of a column ends at the same offset as its header.
    let end_of = |line: &str, word: &str| line.find(word).map(|i| i + word.len());
    assert_eq!(
        end_of(table[0], "TOTAL"),
        Some(
            table[2]
                .split("  ")
                .filter(|s| !s.is_empty())
                .nth(2)
                .map_or(0, |total| { table[2].find(total).unwrap() + total.len() })
        ),
        "{text}"
    );
    for line in [
        "NodeAffinity       node(s) didn't match Pod's node affinity/selector      1  n-hdd",
        "NodeUnschedulable  node(s) were unschedulable                             1  n-cordoned",
        "TaintToleration    node(s) had untolerated taint(s)                       1  n-gpu",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    assert!(
        !text.contains("What would make it fit"),
        "only for pods that fit nowhere"
    );
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_fits_nowhere_names_every_kind_of_reason_and_the_closest_node() {
    let f = Fixture::start().await;
    let text = f.explain(&["huge"]).await.text().to_string();
    assert!(
        text.contains(
            "UNSCHEDULABLE: no node fits.\n  kube-scheduler: 0/5 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, \
             1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, 2 Insufficient cpu."
        ),
        "{text}"
    );
    assert!(text.contains("NodeResourcesFit   Insufficient cpu"), "{text}");
    assert!(
        text.contains("What would make it fit:\n  - closest to fitting: n-big, short of 2 cpu (free 8 of 8, requested 10); resources alone keep the pod off 2 nodes\n"),
        "{text}"
    );
    assert!(!text.contains("Best nodes"));
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hints_name_the_taint_the_label_and_the_cordon_in_the_way() {
    let f = Fixture::start().await;
    let gpu = f.explain(&["gpu-job", "-o", "json"]).await.json();
    assert_eq!(gpu["current"]["schedulable"], false);
    assert!(refused(&gpu["current"]).contains(&(
        "TaintToleration".into(),
        "node(s) had untolerated taint(s)".into(),
        1
    )));
    assert_eq!(
        hint_texts(&gpu["current"]),
        [
            "only the untolerated taint gpu=true:NoSchedule keeps the pod off 1 node (n-gpu)",
            "only the unmet nodeSelector gpu=yes keeps the pod off 3 nodes (n-big, n-hdd, n-small)",
        ]
    );
    assert_eq!(gpu["current"]["hints"][0]["kind"], "taints");

    let pinned = f.explain(&["pinned", "-o", "json"]).await.json();
    assert!(refused(&pinned["current"]).contains(&(
        "NodeUnschedulable".into(),
        "node(s) were unschedulable".into(),
        1
    )));
    assert_eq!(
        hint_texts(&pinned["current"]),
        ["only being cordoned keeps the pod off 1 node (n-cordoned)"]
    );

    let nvme = f.explain(&["nvme", "--examples", "2", "-o", "json"]).await.json();
    assert!(refused(&nvme["current"]).contains(&(
        "NodeAffinity".into(),
        "node(s) didn't match Pod's node affinity/selector".into(),
        3
    )));
    assert_eq!(
        hint_texts(&nvme["current"]),
        ["only the unmet nodeSelector disk=nvme keeps the pod off 3 nodes (n-big, n-hdd, and 1 more)"]
    );
    assert_eq!(
        nvme["current"]["refused"][0]["nodes"],
        serde_json::json!(["n-big", "n-hdd"])
    );
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_flag_explains_a_refused_node_with_everything_in_its_way() {
    let f = Fixture::start().await;
    let text = f.explain(&["huge", "--node", "n-gpu"]).await.text().to_string();
    assert!(
        text.contains(
            "\nNode n-gpu: REFUSED by TaintToleration: node(s) had untolerated taint(s)\n\
             \x20 - TaintToleration: untolerated taint gpu=true:NoSchedule\n\
             \x20 - NodeResourcesFit: short of 2 cpu (free 8 of 8, requested 10)\n"
        ),
        "{text}"
    );
    let json = f.explain(&["huge", "--node", "n-cordoned", "-o", "json"]).await.json();
    let d = &json["current"]["node_detail"];
    assert_eq!(
        (d["feasible"].as_bool(), d["filter"].as_str()),
        (Some(false), Some("NodeUnschedulable"))
    );
    assert_eq!(d["blockers"][0]["filter"], "NodeUnschedulable");
    assert_eq!(d["blockers"][1]["shortfalls"][0]["short"], "2");
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_flag_compares_a_feasible_node_with_the_winner() {
    let f = Fixture::start().await;
    let text = f.explain(&["web", "--node", "n-small"]).await.text().to_string();
    assert!(text.contains("\nNode n-small: feasible, rank 2 of 2 (score "), "{text}");
    assert!(
        text.contains("  Against n-big (rank 1, score ")
            && text.contains("why n-big and not n-small, weighted scores:"),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("NodeResourcesFit "))
        .unwrap_or_else(|| panic!("{text}"));
    let cols: Vec<i64> = row.split_whitespace().skip(1).map(|v| v.parse().unwrap()).collect();
    assert_eq!(cols[0], 1, "weight");
    assert!(
        cols[1] < cols[2],
        "the fuller node scores lower on LeastAllocated: {row}"
    );
    assert_eq!(cols[3], cols[1] - cols[2], "the difference");
    let json = f.explain(&["web", "--node", "n-small", "-o", "json"]).await.json();
    let d = &json["current"]["node_detail"];
    assert_eq!(d["rank"], 2);
    assert_eq!(d["compared_with"]["node"], "n-big");
    assert!(d["scores"]["total"].as_i64() < d["compared_with"]["total"].as_i64());
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_policies_are_ranked_beside_the_current_one() {
    let f = Fixture::start().await;
    let text = f.explain(&["web", "--policy", "bin-packing"]).await.text().to_string();
    assert!(
        text.contains("\nWhat if: policy bin-packing (in-process engine) beside default:\n"),
        "{text}"
    );
    let verdict = text.lines().find(|l| l.trim_start().starts_with("verdict")).unwrap();
    let parts: Vec<&str> = verdict.split_whitespace().collect();
    assert_eq!(
        (parts[1], parts[3]),
        ("n-big", "n-small"),
        "spread under default, packed under bin-packing: {verdict}"
    );

    // A KubeSchedulerConfiguration in a file, with MostAllocated: the same answer, and JSON.
    let dir = tempfile_dir();
    let file = dir.join("packed.yaml");
    std::fs::write(
        &file,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n\
         - schedulerName: packed\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: MostAllocated\n",
    )
    .unwrap();
    let json = f
        .explain(&[
            "web",
            "--policy-file",
            file.to_str().unwrap(),
            "--node",
            "n-big",
            "-o",
            "json",
        ])
        .await
        .json();
    assert_eq!(json["current"]["policy"], "default");
    assert_eq!(json["current"]["node"], "n-big");
    let w = &json["what_if"];
    assert_eq!(w["policy"], "packed");
    assert_eq!(w["node"], "n-small");
    assert!(w["decided_by"].as_str().unwrap().contains("policy file"), "{w}");
    assert_eq!(json["current"]["node_detail"]["rank"], 1);
    assert_eq!(w["node_detail"]["rank"], 2, "n-big is second when packing");
    std::fs::remove_dir_all(dir).unwrap();

    let err = f.explain(&["web", "--policy", "no-such-policy"]).await;
    assert!(!err.ok);
    assert!(err.stderr.contains("no-such-policy"), "{}", err.stderr);
    f.stop().await;
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "explain-test-{}-{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_pod_is_explained_against_the_cluster_as_it_is_now() {
    let f = Fixture::start().await;
    let run = f.explain(&["filler"]).await;
    let text = run.text();
    assert!(text.starts_with("Pod shop/filler: bound to n-small,"), "{text}");
    assert!(
        text.contains(
            "Note: the pod is bound to n-small; it is explained against the cluster as it is now, without itself"
        ),
        "{text}"
    );
    assert!(
        text.contains("Cluster: 5 nodes, 0 bound pods"),
        "the pod itself is left out: {text}"
    );
    assert!(
        text.contains("\nNode n-small: feasible, rank "),
        "its node is explained: {text}"
    );
    let json = f.explain(&["pod/filler", "-o", "json"]).await.json();
    assert_eq!(json["pod"]["bound_to"], "n-small");
    assert_eq!(json["current"]["node_detail"]["node"], "n-small");
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption_names_the_nominated_node_and_the_victims() {
    let f = Fixture::start().await;
    let text = f.explain(&["vip"]).await.text().to_string();
    assert!(text.contains("UNSCHEDULABLE: no node fits."), "{text}");
    assert!(
        text.contains("  preemption: would nominate n-small, evicting shop/filler\n"),
        "{text}"
    );
    f.stop().await;
}

/// Claims, volumes and storage classes are read as the binder reads them: a pod whose claim's
/// only matching volume is on n-small is explained with VolumeBinding's reason on the nodes without
/// one, and a claim whose only volume is on the cordoned node leaves the pod nowhere to go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_and_volumes_are_read_and_explained() {
    use placement_tests::fake_apiserver::Kind;
    let f = Fixture::start().await;
    f.server.create_raw(
        Kind::StorageClass,
        serde_json::json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
                           "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}),
    );
    for (claim, node) in [("data", "n-small"), ("stuck", "n-cordoned")] {
        f.server.create_raw(
            Kind::PersistentVolume,
            serde_json::json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": format!("pv-{claim}")},
                "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                         "local": {"path": "/mnt"},
                         "claimRef": {"namespace": "shop", "name": claim},
                         "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                             {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}},
                "status": {"phase": "Available"}}),
        );
        f.server.create_raw(
            Kind::PersistentVolumeClaim,
            serde_json::json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": claim, "namespace": "shop"},
                "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "1Gi"}}}}),
        );
        let mut p = pod(&format!("db-{claim}"), SCHEDULER, "100m", &[], None);
        p.spec.as_mut().unwrap().volumes = Some(vec![k8s_openapi::api::core::v1::Volume {
            name: "data".into(),
            persistent_volume_claim: Some(k8s_openapi::api::core::v1::PersistentVolumeClaimVolumeSource {
                claim_name: claim.into(),
                read_only: None,
            }),
            ..Default::default()
        }]);
        f.server.create_pod(p);
    }
    let json = f.explain(&["db-data", "-o", "json"]).await.json();
    let c = &json["current"];
    assert_eq!(c["message"], "Successfully assigned shop/db-data to n-small", "{json}");
    assert!(
        refused(c).contains(&(
            "VolumeBinding".into(),
            "node(s) didn't find available persistent volumes to bind".into(),
            2
        )),
        "{json}"
    );
    let text = f.explain(&["db-stuck"]).await.text().to_string();
    assert!(
        text.contains(
            "kube-scheduler: 0/5 nodes are available: 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, \
             3 node(s) didn't find available persistent volumes to bind."
        ),
        "{text}"
    );
    f.stop().await;
}

/// DeviceClasses, ResourceClaims, ResourceSlices and DeviceTaintRules are read as the binder reads
/// them, and a pod whose claim of two GPUs fits nowhere is told, node by node, which request fails
/// and why:
///
/// | node       | GPUs                                   | the claim's request `gpu` (2 GPUs) |
/// |------------|----------------------------------------|------------------------------------|
/// | big        | 2, one allocated to the claim `taken`  | not enough free devices            |
/// | small      | 1                                      | no device matches (only 1)         |
/// | hdd        | 2, one tainted `maintenance:NoSchedule` by a DeviceTaintRule | devices tainted |
/// | gpu        | none (the node's taint refuses it first) | –                                |
/// | cordoned   | none (cordoned)                        | –                                  |
///
/// A user who may not list ResourceClaims gets the pod explained without them, with a note.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_objects_are_read_and_a_claim_that_fits_nowhere_is_explained_request_by_request() {
    use placement_tests::fake_apiserver::{matcher, Kind};
    let f = Fixture::start().await;
    const DRIVER: &str = "gpu.example.com";
    f.server.create_raw(
        Kind::DeviceClass,
        serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
                           "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]}}),
    );
    let slice = |node: &str, gpus: usize| {
        let devices: Vec<Value> = (0..gpus)
            .map(|i| serde_json::json!({"name": format!("gpu-{i}"), "attributes": {"model": {"string": "a100"}}}))
            .collect();
        serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": format!("{node}-{DRIVER}")},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}})
    };
    f.server.create_raw(Kind::ResourceSlice, slice("n-big", 2));
    f.server.create_raw(Kind::ResourceSlice, slice("n-small", 1));
    f.server.create_raw(Kind::ResourceSlice, slice("n-hdd", 2));
    // n-hdd's gpu-1 tainted by a rule, not by its slice; another rule, with the effect None,
    // taints nothing.
    for (name, device, effect) in [("hdd-gpu-1", "gpu-1", "NoSchedule"), ("hdd-gpu-0", "gpu-0", "None")] {
        f.server.create_raw(
            Kind::DeviceTaintRule,
            serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name},
                "spec": {"deviceSelector": {"pool": "n-hdd", "device": device},
                         "taint": {"key": "maintenance", "effect": effect}}}),
        );
    }
    let claim = |name: &str, count: u32| {
        serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"devices": {"requests": [{"name": "gpu",
                "exactly": {"deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": count}}]}}})
    };
    let mut taken = claim("taken", 1);
    taken["status"] = serde_json::json!({"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "n-big", "device": "gpu-0"}]}}});
    f.server.create_raw(Kind::ResourceClaim, taken);
    f.server.create_raw(Kind::ResourceClaim, claim("two-gpus", 2));
    let mut trainer = pod("trainer", SCHEDULER, "1", &[], None);
    trainer.spec.as_mut().unwrap().resource_claims = Some(vec![k8s_openapi::api::core::v1::PodResourceClaim {
        name: "gpu".into(),
        resource_claim_name: Some("two-gpus".into()),
        ..Default::default()
    }]);
    f.server.create_pod(trainer);

    let json = f.explain(&["trainer", "-o", "json"]).await.json();
    let c = &json["current"];
    assert_eq!(c["schedulable"], false, "{json}");
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .starts_with("0/5 nodes are available: 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, 3 cannot allocate all claims."),
        "{json}"
    );
    let groups: Vec<(String, String, String, u64, String)> = c["devices"]
        .as_array()
        .unwrap_or_else(|| panic!("no devices section: {json}"))
        .iter()
        .map(|g| {
            (
                format!("{}/{}", g["claim"].as_str().unwrap(), g["request"].as_str().unwrap()),
                g["kind"].as_str().unwrap().to_string(),
                g["example_node"].as_str().unwrap().to_string(),
                g["count"].as_u64().unwrap(),
                g["example"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let group = |node: &str, kind: &str, message: &str| {
        (
            "two-gpus/gpu".to_string(),
            kind.to_string(),
            node.to_string(),
            1,
            message.to_string(),
        )
    };
    assert_eq!(
        groups,
        vec![
            group(
                "n-small",
                "no_matching_device",
                "2 requested, only 1 of the node's 1 device matches class gpu.example.com and the request's selectors"
            ),
            group(
                "n-big",
                "devices_allocated",
                "2 requested; 2 devices match, 1 allocated to claims"
            ),
            group(
                "n-hdd",
                "device_tainted",
                "2 requested; 2 devices match, 1 with taints the request does not tolerate (maintenance:NoSchedule)"
            ),
        ],
        "{json}"
    );
    let text = f.explain(&["trainer", "--node", "n-big"]).await.text().to_string();
    assert!(
        text.contains(
            "\nNode n-big: REFUSED by DynamicResources: cannot allocate all claims\n\
             \x20 - DynamicResources: claim two-gpus request gpu: 2 requested; 2 devices match, 1 allocated to claims\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "Why the pod's claims cannot be allocated (on the nodes DynamicResources refused, request by request):"
        ),
        "{text}"
    );
    assert!(
        text.contains("  - claim two-gpus request gpu on n-small: 2 requested, only 1 of the node's 1 device matches"),
        "{text}"
    );
    // The hints do not ask about devices: they say so.
    assert!(
        text.contains("(these re-check cordons, taints, node labels, host ports and resources only; DynamicResources may still refuse the nodes named)"),
        "{text}"
    );

    // Without the right to list ResourceClaims: a note, and the claim is not found.
    f.server
        .fail_next(1, matcher("GET", "/apis/resource.k8s.io/v1/resourceclaims"), 403);
    let json = f.explain(&["trainer", "-o", "json"]).await.json();
    let notes: Vec<&str> = json["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("resourceclaims could not be listed (")
                && n.ends_with("): DynamicResources is explained without them")),
        "{json}"
    );
    assert!(
        json["current"]["message"]
            .as_str()
            .unwrap()
            .starts_with("0/5 nodes are available: could not find ResourceClaim \"shop/two-gpus\"."),
        "{json}"
    );
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_output_is_one_document_for_scripts() {
    let f = Fixture::start().await;
    let json = f.explain(&["web", "-o", "json", "--top", "1"]).await.json();
    assert_eq!(json["pod"]["namespace"], "shop");
    assert_eq!(json["pod"]["requests"]["cpu"], "1");
    assert_eq!(json["cluster"]["nodes"], 5);
    let c = &json["current"];
    assert_eq!(c["schedulable"], true);
    assert_eq!(c["message"], "Successfully assigned shop/web to n-big");
    assert_eq!(
        (c["feasible_count"].as_u64(), c["node_count"].as_u64()),
        (Some(2), Some(5))
    );
    let best = c["best"].as_array().unwrap();
    assert_eq!(best.len(), 1, "--top 1");
    let parts = best[0]["plugins"].as_array().unwrap();
    let sum: i64 = parts.iter().map(|p| p["weighted"].as_i64().unwrap()).sum();
    assert_eq!(sum, best[0]["total"].as_i64().unwrap(), "the parts add up to the total");
    for p in parts {
        assert_eq!(
            p["weighted"].as_i64(),
            Some(p["score"].as_i64().unwrap() * p["weight"].as_i64().unwrap())
        );
    }
    let refused_nodes: u64 = refused(c).iter().map(|(_, _, n)| n).sum();
    assert_eq!(refused_nodes, 3);
    assert!(json.get("what_if").is_none());
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colour_and_notes() {
    let f = Fixture::start().await;
    let text = f.explain(&["web", "--color", "always"]).await.text().to_string();
    assert!(text.contains("\x1b[1;32mSCHEDULABLE:\x1b[0m"), "{text:?}");
    let text = f.explain(&["other"]).await.text().to_string();
    assert!(
        text.contains("Note: spec.schedulerName is \"default-scheduler\": placement's binder places pods naming placement-scheduler"),
        "{text}"
    );
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_replica_can_answer_instead_of_the_engine_in_process() {
    let f = Fixture::start().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let service = tokio::spawn(serve(
        listener,
        ServerConfig::default(),
        Arc::new(Metrics::new()),
        async {
            let _ = stopped.await;
        },
    ));
    let json = f
        .explain(&["web", "--decision-address", &url, "-o", "json"])
        .await
        .json();
    assert_eq!(json["current"]["decided_by"], format!("decision replica {url}"));
    assert_eq!(json["current"]["node"], "n-big");
    let text = f.explain(&["web", "--decision-address", &url]).await.text().to_string();
    assert!(
        text.contains(&format!("asked the decision replica {url}, policy default")),
        "{text}"
    );
    let _ = stop.send(());
    let _ = service.await;
    // Nothing listens there any more: a clear error, not a hang.
    let run = f
        .explain(&["web", "--decision-address", &url, "--timeout-seconds", "20"])
        .await;
    assert!(!run.ok);
    assert!(run.stderr.contains("decision replica"), "{}", run.stderr);
    f.stop().await;
}

#[test]
fn the_plugin_introduces_itself_as_kubectl_placement() {
    let out = std::process::Command::new(BIN).arg("--help").output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    assert!(help.starts_with("Ask the placement scheduler about pods"), "{help}");
    assert!(help.contains("Usage: kubectl placement <COMMAND>"), "{help}");
    assert!(help.contains("explain  Why a pod is pending"), "{help}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_clear() {
    let f = Fixture::start().await;
    let run = f.explain(&["nope"]).await;
    assert!(!run.ok);
    assert_eq!(run.stderr.trim(), "error: pod shop/nope not found");
    let run = f.explain(&["web", "--node", "zz"]).await;
    assert!(!run.ok);
    assert!(
        run.stderr.contains("node \"zz\" is not in the cluster (5 nodes)"),
        "{}",
        run.stderr
    );
    let run = f.explain(&["deploy/web"]).await;
    assert!(
        !run.ok && run.stderr.contains("only pods can be explained"),
        "{}",
        run.stderr
    );
    f.stop().await;
}

/// The kubectl plugin against a real cluster (`E2E_KUBECONFIG`): three of the cases above on Node
/// and Pod objects of its own (uniquely named, deleted at the end), pods naming a scheduler of
/// their own so that no running binder places them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_on_a_real_cluster() {
    let Ok(path) = std::env::var("E2E_KUBECONFIG") else {
        eprintln!(
            "e2e skipped: set E2E_KUBECONFIG to a kubeconfig file to run kubectl-placement explain against a real cluster"
        );
        return;
    };
    let kubeconfig = PathBuf::from(&path);
    let kc = kube::config::Kubeconfig::read_from(&path).expect("E2E_KUBECONFIG is a readable kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("kubeconfig is usable");
    let client = kube::Client::try_from(config).expect("client");
    let run = format!("{:x}", std::process::id() as u64 ^ 0x28e2_0000);
    let ns = format!("placement-explain-{run}");
    let scheduler = format!("placement-explain-{run}");
    let prefix = format!("placement-explain-{run}-");
    let nodes_api: Api<Node> = Api::all(client.clone());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);

    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
        .expect("create namespace");
    let ours = [("placement-explain", run.as_str())];
    let made = nodes(&prefix, &ours);
    for n in &made {
        let name = n.metadata.name.clone().unwrap();
        let mut bare = n.clone();
        bare.status = None;
        nodes_api
            .create(&PostParams::default(), &bare)
            .await
            .expect("create node");
        let status = serde_json::json!({"status": {
            "allocatable": n.status.as_ref().unwrap().allocatable,
            "capacity": n.status.as_ref().unwrap().capacity,
            "conditions": [{"type": "Ready", "status": "True"}],
        }});
        nodes_api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("set node status");
    }
    let mine = |more: &[(&'static str, &'static str)]| -> Vec<(&str, &str)> {
        ours.iter().copied().chain(more.iter().copied()).collect()
    };
    let small = format!("{prefix}small");
    let mut filler = filler(&scheduler, &small, &mine(&[]));
    filler.metadata.namespace = None;
    let mut web = pod("web", &scheduler, "1", &mine(&[("disk", "ssd")]), None);
    web.metadata.namespace = None;
    let mut huge = pod("huge", &scheduler, "10", &mine(&[("disk", "ssd")]), None);
    huge.metadata.namespace = None;
    for p in [&filler, &web, &huge] {
        pods.create(&PostParams::default(), p).await.expect("create pod");
    }
    let checks = async {
        let big = format!("{prefix}big");
        let gpu = format!("{prefix}gpu");
        let common = ["-n", ns.as_str(), "--scheduler-name", scheduler.as_str()];
        let with =
            |more: &[&'static str]| -> Vec<&str> { common.iter().copied().chain(more.iter().copied()).collect() };
        let huge_args: Vec<&str> = common.iter().copied().chain(["huge", "--node", gpu.as_str()]).collect();

        let web_text = explain(&kubeconfig, &with(&["web"])).await;
        println!("$ kubectl placement explain web -n {ns}\n{}", web_text.text());
        let web_text = web_text.text();
        assert!(
            web_text.contains(&format!("kube-scheduler: Successfully assigned {ns}/web to {big}\n")),
            "{web_text}"
        );
        assert!(web_text.contains(&format!("  2  {prefix}small")), "{web_text}");

        let huge_run = explain(&kubeconfig, &huge_args).await;
        println!(
            "$ kubectl placement explain huge -n {ns} --node {gpu}\n{}",
            huge_run.text()
        );
        let huge_text = huge_run.text();
        assert!(huge_text.contains("UNSCHEDULABLE: no node fits."), "{huge_text}");
        assert!(
            huge_text.contains(&format!(
                "Node {gpu}: REFUSED by TaintToleration: node(s) had untolerated taint(s)\n  - TaintToleration: untolerated taint gpu=true:NoSchedule\n"
            )),
            "{huge_text}"
        );
        assert!(
            huge_text.contains(&format!(
                "closest to fitting: {big}, short of 2 cpu (free 8 of 8, requested 10)"
            )),
            "{huge_text}"
        );

        let json = explain(&kubeconfig, &with(&["web", "--policy", "bin-packing", "-o", "json"]))
            .await
            .json();
        assert_eq!(json["current"]["node"].as_str(), Some(big.as_str()));
        assert_eq!(json["what_if"]["node"].as_str(), Some(small.as_str()));
        let small_args: Vec<&str> = common
            .iter()
            .copied()
            .chain(["web", "--node", small.as_str()])
            .collect();
        let small_text = explain(&kubeconfig, &small_args).await;
        assert!(
            small_text
                .text()
                .contains(&format!("Node {small}: feasible, rank 2 of 2")),
            "{}",
            small_text.text()
        );
        let bound = explain(&kubeconfig, &with(&["filler", "-o", "json"])).await.json();
        assert_eq!(bound["pod"]["bound_to"].as_str(), Some(small.as_str()));
    };
    // Clean up whatever the checks found, then report them.
    let outcome = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(checks)).await;
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    for name in ["filler", "web", "huge"] {
        let _ = pods.delete(name, &force).await;
    }
    let _ = namespaces.delete(&ns, &DeleteParams::default()).await;
    for n in &made {
        let _ = nodes_api
            .delete(n.metadata.name.as_deref().unwrap(), &DeleteParams::default())
            .await;
    }
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// Two racks of two 4-cpu nodes, `g-a1` holding a bound 3-cpu pod, and three PodGroups of 3-cpu
/// pods: `fits` (2 pods, minCount 2: rack r2 holds both, r1 one), `huge` (3 pods, minCount 3: no
/// rack holds three) and `nogroup`, named by a pod but not there.
async fn pod_group_fixture() -> Fixture {
    use placement_tests::fake_apiserver::Kind;
    let f = Fixture::empty().await;
    for (name, rack) in [("g-a1", "r1"), ("g-a2", "r1"), ("g-b1", "r2"), ("g-b2", "r2")] {
        f.server.create_node(node(name, "4", &[("rack", rack)], None, false));
    }
    f.server
        .create_pod(pod("busy", "default-scheduler", "3", &[], Some("g-a1")));
    let group = |name: &str, min_count: u32| {
        serde_json::json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}},
                     "schedulingConstraints": {"topology": [{"key": "rack"}]}}})
    };
    f.server.create_raw(Kind::PodGroup, group("fits", 2));
    f.server.create_raw(Kind::PodGroup, group("huge", 3));
    let member = |name: &str, group: &str| {
        let mut p = pod(name, SCHEDULER, "3", &[], None);
        p.spec.as_mut().unwrap().scheduling_group =
            Some(serde_json::from_value(serde_json::json!({"podGroupName": group})).unwrap());
        p
    };
    for name in ["fits-0", "fits-1"] {
        f.server.create_pod(member(name, "fits"));
    }
    for name in ["huge-0", "huge-1", "huge-2"] {
        f.server.create_pod(member(name, "huge"));
    }
    f.server.create_pod(member("lost", "nogroup"));
    f
}

/// A group that fits: the rack it takes, each rack's count, the pod's node; JSON carries the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_group_that_fits_names_the_rack_it_takes() {
    let f = pod_group_fixture().await;
    let text = f.explain_tas(&["fits-0"]).await.text().to_string();
    assert!(
        text.contains(
            "PodGroup shop/fits: minCount 2, topology key rack; 2 pods pending (this one included), 0 bound\n\
             SCHEDULABLE: the group takes rack r2 (1 of 2 racks hold it).\n\
             \x20 PodGroupInitiallyScheduled: True (Scheduled)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "Per rack, the group's 2 pending pods tried in order, each taking its room:\n\
             \x20 rack r2: 2 of 2 fit; minCount 2 (the group takes it)\n\
             \x20 rack r1: 1 of 2 fit; minCount 2\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("\nThis pod alone (Rank, as if it named no PodGroup):\nSCHEDULABLE: best node"),
        "{text}"
    );
    let json = f.explain_tas(&["fits-0", "-o", "json"]).await.json();
    let g = &json["pod_group"];
    assert_eq!(
        (g["found"].as_bool(), g["min_count"].as_u64()),
        (Some(true), Some(2)),
        "{json}"
    );
    assert_eq!(
        (g["schedulable"].as_bool(), g["domain"].as_str()),
        (Some(true), Some("r2")),
        "{json}"
    );
    assert_eq!(g["reason"], "Scheduled");
    let node = g["pod_node"].as_str().unwrap_or_default();
    assert!(node == "g-b1" || node == "g-b2", "{json}");
    assert_eq!(g["pod_message"], format!("Successfully assigned shop/fits-0 to {node}"));
    let domains: Vec<(String, u64, bool, bool)> = g["domains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["domain"].as_str().unwrap().to_string(),
                d["fit"].as_u64().unwrap(),
                d["feasible"].as_bool().unwrap(),
                d["chosen"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        domains,
        [("r2".to_string(), 2, true, true), ("r1".to_string(), 1, false, false)]
    );
    f.stop().await;
}

/// A group one of whose pending pods still has scheduling gates: held whole, said so, as kube's
/// queue gates the group's entity (the cycle shown is for the pods without gates).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_group_with_a_gated_pod_is_held_whole() {
    let f = pod_group_fixture().await;
    let mut gated = pod("fits-2", SCHEDULER, "3", &[], None);
    let spec = gated.spec.as_mut().unwrap();
    spec.scheduling_group = Some(serde_json::from_value(serde_json::json!({"podGroupName": "fits"})).unwrap());
    spec.scheduling_gates = Some(vec![serde_json::from_value(
        serde_json::json!({"name": "example.com/quota"}),
    )
    .unwrap()]);
    f.server.create_pod(gated);
    let text = f.explain(&["fits-0"]).await.text().to_string();
    assert!(
        text.contains(
            "HELD: 1 pod of the group still has scheduling gates (fits-2): the binder holds the whole group, writing \
             nothing, until the last gate goes (kube-scheduler's queue gates the group as one); the cycle below is \
             for the pods without gates\n"
        ),
        "{text}"
    );
    f.stop().await;
}

/// A group no rack holds: each rack's count against minCount and the group's message as kube
/// writes it; a pod naming a PodGroup that does not exist is held, said so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_group_no_rack_holds_says_how_many_fit_each_rack_and_kubes_message() {
    let f = pod_group_fixture().await;
    let text = f.explain_tas(&["huge-1"]).await.text().to_string();
    // Rack r1, fuller, is tried first: huge-0 takes g-a2, huge-1 fits nowhere there, and minCount
    // can no longer be met.
    let message = "pod group is unschedulable, 0/2 placements are available, first placement status: minCount (3) \
                   cannot be satisfied: 1 scheduled, 1 remaining, pod group preemption: No preemption victims found \
                   for incoming preemptor";
    assert!(
        text.contains(&format!(
            "PodGroup shop/huge: minCount 3, topology key rack; 3 pods pending (this one included), 0 bound\n\
             UNSCHEDULABLE: no rack holds minCount 3 of the group.\n\
             \x20 PodGroupInitiallyScheduled: False (Unschedulable): {message}\n\
             \x20 kube-scheduler, this pod: 0/2 nodes are available: 2 Insufficient cpu.\n"
        )),
        "{text}"
    );
    assert!(
        text.contains("  rack r2: 2 of 3 fit; minCount 3\n  rack r1: 1 of 3 fit; minCount 3\n"),
        "{text}"
    );
    let json = f.explain_tas(&["huge-2", "-o", "json"]).await.json();
    let g = &json["pod_group"];
    assert_eq!(
        (g["schedulable"].as_bool(), g["reason"].as_str()),
        (Some(false), Some("Unschedulable"))
    );
    assert_eq!(g["message"], message);
    assert!(g.get("domain").is_none(), "{json}");
    assert_eq!(
        g["pod_message"],
        "pod group is unschedulable, 0/2 placements are available, first placement status: minCount (3) cannot \
         be satisfied: 1 scheduled, 1 remaining"
    );
    // The PodGroup is missing: held, no cycle.
    let text = f.explain_tas(&["lost"]).await.text().to_string();
    assert!(
        text.contains(
            "PodGroup shop/nogroup (not found); 1 pod pending (this one included), 0 bound\n\
             HELD: PodGroup shop/nogroup does not exist: the binder holds the pod, writing nothing, until it does \
             (GangScheduling's PreEnqueue)\n"
        ),
        "{text}"
    );
    assert!(!text.contains("PodGroupInitiallyScheduled"), "{text}");
    // PodGroups the user may not list: a note, and the group is explained as missing.
    f.server.fail_next(
        2,
        placement_tests::fake_apiserver::matcher("GET", "/apis/scheduling.k8s.io/v1beta1/podgroups"),
        403,
    );
    let json = f.explain_tas(&["huge-0", "-o", "json"]).await.json();
    assert!(
        json["notes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .any(|n| n.starts_with("podgroups could not be listed (")
                && n.ends_with("): the pod's PodGroup is explained as missing")),
        "{json}"
    );
    let g = &json["pod_group"];
    assert_eq!(g["found"], false, "{json}");
    assert!(
        g["held"]
            .as_str()
            .unwrap_or_default()
            .starts_with("PodGroup shop/huge does not exist (PodGroups were not read: see the notes)"),
        "{json}"
    );
    f.stop().await;
}

/// A decision replica answers the group's verdict (a Schedule of its pods); the per-rack counts
/// are the in-process engine's, and the output says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_replica_gives_the_groups_verdict_without_the_per_rack_counts() {
    let f = pod_group_fixture().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    // The replica decides under the process's gates, as scheduler-service --feature-gates sets them.
    placement_scheduler::engine::gates::set_process_default(
        placement_scheduler::engine::gates::FeatureGates::PLACEMENT_DEFAULT
            .with("TopologyAwareWorkloadScheduling=true")
            .unwrap(),
    );
    let service = tokio::spawn(serve(
        listener,
        ServerConfig::default(),
        Arc::new(Metrics::new()),
        async {
            let _ = stopped.await;
        },
    ));
    let json = f
        .explain(&["fits-1", "--decision-address", &url, "-o", "json"])
        .await
        .json();
    let g = &json["pod_group"];
    assert_eq!(g["decided_by"], format!("decision replica {url}"));
    assert_eq!(
        (g["schedulable"].as_bool(), g["domain"].as_str()),
        (Some(true), Some("r2")),
        "{json}"
    );
    assert_eq!(g["domains"].as_array().map(Vec::len), Some(0), "{json}");
    assert!(
        g["domains_note"]
            .as_str()
            .unwrap_or_default()
            .contains("in-process engine only"),
        "{json}"
    );
    let text = f
        .explain(&["huge-0", "--decision-address", &url])
        .await
        .text()
        .to_string();
    assert!(
        text.contains("UNSCHEDULABLE: no rack holds minCount 3 of the group.\n")
            && text.contains(
                "PodGroupInitiallyScheduled: False (Unschedulable): pod group is unschedulable, 0/2 placements"
            )
            && text
                .contains("Note: how many of the group's pods fit each domain is told by the in-process engine only"),
        "{text}"
    );
    let _ = stop.send(());
    let _ = service.await;
    f.stop().await;
}
