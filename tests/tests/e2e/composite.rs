//! CompositePodGroups (`scheduling.k8s.io/v1alpha3`, kube 1.37's alpha `CompositePodGroup` gate)
//! on a real control plane: a job of two rack-keyed gangs under a block-keyed
//! CompositePodGroup, placed by placement and by the cluster's kube-scheduler (issue 46, item 2).
//!
//! Needs a control plane with the gate and the API version on; run it with
//!
//! ```text
//! WORKLOAD_GATES=GenericWorkload=true,TopologyAwareWorkloadScheduling=true,CompositePodGroup=true \
//! WORKLOAD_API_VERSIONS=scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true \
//! CLUSTER_SH=../shared/k8s/cluster.sh scripts/e2e-cluster.sh \
//!   bash -c 'cargo test -p placement-tests --test e2e -- --nocapture composite_pod_group'
//! ```
//!
//! (`E2E_FEATURE_GATES`, which scripts/e2e-cluster.sh sets from `WORKLOAD_GATES`, must name
//! `CompositePodGroup=true`; otherwise the test says it is skipped.)

use std::collections::BTreeMap;

use k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup;
use kube::api::{Api, ListParams, PostParams};
use kube::ResourceExt;
use placement_tests::e2e::{node_of, serial, Scope, WAIT};
use placement_tests::fixtures::eventually;

use super::{group_condition, twin_pods, workload_api_cluster, InProcessBinder, PodGroup};

/// The block and rack of a node named `<prefix>-<side>-<block>-<rack>-<i>`.
fn domains_of(node: &str) -> (String, String) {
    let parts: Vec<&str> = node.rsplitn(4, '-').collect();
    // [i, rack, block, rest]
    match parts.as_slice() {
        [_, rack, block, _] => (block.to_string(), rack.to_string()),
        _ => (String::new(), String::new()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_level_composite_pod_group_is_placed_as_kube_scheduler_places_it() {
    let test = "a_two_level_composite_pod_group_is_placed_as_kube_scheduler_places_it";
    if !placement_tests::e2e::cluster_gates().composite_pod_group {
        eprintln!(
            "e2e {test}: skipped: the cluster's CompositePodGroup gate is off (E2E_FEATURE_GATES; see this file's \
             documentation for the control plane it needs)"
        );
        return;
    }
    let Some(cluster) = workload_api_cluster(test).await else {
        return;
    };
    if Api::<CompositePodGroup>::all(cluster.client.clone())
        .list(&ListParams::default().limit(1))
        .await
        .is_err()
    {
        eprintln!("e2e {test}: skipped: the cluster does not serve scheduling.k8s.io/v1alpha3 CompositePodGroups");
        return;
    }
    let _serial = serial().await;
    let mut scope = Scope::new(&cluster, "cpg").await;
    let groups: Api<PodGroup> = Api::namespaced(cluster.client.clone(), &scope.ns);
    let composites: Api<CompositePodGroup> = Api::namespaced(cluster.client.clone(), &scope.ns);
    let run = scope.run.clone();
    let block_key = |side: &str| format!("e2e-{run}-{side}-block");
    let rack_key = |side: &str| format!("e2e-{run}-{side}-rack");
    // Each side (its own keys, so each scheduler's placements are its side's nodes): block x of
    // racks x1 and x2 (two 4-cpu nodes each), block y of rack y1 (two 4-cpu nodes) and y2 (two
    // 2-cpu nodes). The job's four pods (9 cpu) fill y more than x: y is the block
    // (NodeResourcesFit's placement score), and in y each gang has one rack whichever goes first
    // (kube takes a composite's children in map order): the 3-cpu pods fit only y1's nodes, and
    // the 1.5-cpu pods prefer the fuller y2 when first and fit only y2 when second.
    for side in ["ours", "kube"] {
        let (bk, rk) = (block_key(side), rack_key(side));
        for (block, rack, cpu) in [("x", "x1", "4"), ("x", "x2", "4"), ("y", "y1", "4"), ("y", "y2", "2")] {
            for i in 0..2 {
                scope
                    .add_node(
                        &format!("{side}-{block}-{rack}-{i}"),
                        cpu,
                        &[("side", side), (bk.as_str(), block), (rk.as_str(), rack)],
                    )
                    .await;
            }
        }
    }
    let binder = InProcessBinder::start(&cluster, &scope).await;
    let workload_ref = serde_json::json!({"workloadName": "trainer", "templateName": "job"});
    let mut pods: Vec<String> = Vec::new();
    for side in ["ours", "kube"] {
        let job = serde_json::json!({
            "apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": format!("job-{side}")},
            "spec": {
                "workloadRef": workload_ref,
                "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                "schedulingConstraints": {"topology": [{"key": block_key(side)}]},
            }
        });
        composites
            .create(
                &PostParams::default(),
                &serde_json::from_value(job).expect("a CompositePodGroup"),
            )
            .await
            .expect("create a CompositePodGroup");
        for leaf in ["a", "b"] {
            let g = serde_json::json!({
                "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                "metadata": {"name": format!("{leaf}-{side}")},
                "spec": {
                    "parentCompositePodGroupName": format!("job-{side}"),
                    "workloadRef": {"workloadName": "trainer", "templateName": leaf},
                    "schedulingPolicy": {"gang": {"minCount": 2}},
                    "schedulingConstraints": {"topology": [{"key": rack_key(side)}]},
                }
            });
            groups
                .create(&PostParams::default(), &serde_json::from_value(g).expect("a PodGroup"))
                .await
                .expect("create a PodGroup");
        }
    }
    for (leaf, cpu) in [("a", "3"), ("b", "1500m")] {
        for i in 0..2 {
            for pod in twin_pods(&scope, &format!("{leaf}-{i}"), cpu, &|pod, side| {
                pod["spec"]["schedulingGroup"] = serde_json::json!({"podGroupName": format!("{leaf}-{side}")});
            }) {
                scope.create(&pod).await;
                pods.push(pod.name_any());
            }
        }
    }
    eventually(WAIT, "both schedulers bound the jobs", || async {
        let mut all = true;
        for name in &pods {
            all &= scope.pods().get(name).await.ok().is_some_and(|p| node_of(&p).is_some());
        }
        all
    })
    .await;
    // Per side and gang: the (block, rack) of its pods.
    let mut placed: BTreeMap<(String, String), Vec<(String, String)>> = BTreeMap::new();
    for name in &pods {
        let p = scope.pods().get(name).await.expect("a job pod");
        // Pods are named `<leaf>-<i>-<side>`.
        let side = if name.ends_with("-ours") { "ours" } else { "kube" }.to_string();
        let leaf = name.split('-').next().unwrap_or_default().to_string();
        placed
            .entry((side, leaf))
            .or_default()
            .push(domains_of(node_of(&p).unwrap_or_default()));
    }
    for ((side, leaf), at) in &placed {
        eprintln!("e2e {test}: {side} {leaf}: {at:?}");
    }
    for leaf in ["a", "b"] {
        let ours = placed
            .get(&("ours".to_string(), leaf.to_string()))
            .cloned()
            .unwrap_or_default();
        let kube = placed
            .get(&("kube".to_string(), leaf.to_string()))
            .cloned()
            .unwrap_or_default();
        assert_eq!(ours.len(), 2, "gang {leaf}: placement bound both pods");
        assert_eq!(
            ours, kube,
            "gang {leaf}: the (block, rack) of each pod: placement (left), kube-scheduler (right)"
        );
    }
    assert!(
        placed.values().flatten().all(|(block, _)| block == "y"),
        "the job in the fuller block"
    );
    for leaf in ["a", "b"] {
        let (o, k) = (format!("{leaf}-ours"), format!("{leaf}-kube"));
        eventually(WAIT, "both gangs' conditions written", || async {
            group_condition(&scope, &o).await.is_some() && group_condition(&scope, &k).await.is_some()
        })
        .await;
        let (ours, kube) = (group_condition(&scope, &o).await, group_condition(&scope, &k).await);
        assert_eq!(
            ours, kube,
            "gang {leaf}'s condition: placement (left), kube-scheduler (right)"
        );
        eprintln!("e2e {test}: gang {leaf}: {}", ours.unwrap_or_default());
    }

    // 2. A second job no block holds: gang c (2 × 3 cpu) fits a rack of block x, gang d
    //    (3 × 3 cpu, minCount 3) fits no rack (two nodes each), and block y is full. Neither
    //    scheduler binds a pod of it; both write Unschedulable on each gang. (kube takes the
    //    placements in map order, so "first placement status" may name either block: the messages
    //    are printed, the condition's status and reason compared.)
    let mut second: Vec<String> = Vec::new();
    for side in ["ours", "kube"] {
        let job = serde_json::json!({
            "apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": format!("job2-{side}")},
            "spec": {
                "workloadRef": {"workloadName": "trainer2", "templateName": "job"},
                "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                "schedulingConstraints": {"topology": [{"key": block_key(side)}]},
            }
        });
        composites
            .create(
                &PostParams::default(),
                &serde_json::from_value(job).expect("a CompositePodGroup"),
            )
            .await
            .expect("create a CompositePodGroup");
        for (leaf, min) in [("c", 2), ("d", 3)] {
            let g = serde_json::json!({
                "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                "metadata": {"name": format!("{leaf}-{side}")},
                "spec": {
                    "parentCompositePodGroupName": format!("job2-{side}"),
                    "workloadRef": {"workloadName": "trainer2", "templateName": leaf},
                    "schedulingPolicy": {"gang": {"minCount": min}},
                    "schedulingConstraints": {"topology": [{"key": rack_key(side)}]},
                }
            });
            groups
                .create(&PostParams::default(), &serde_json::from_value(g).expect("a PodGroup"))
                .await
                .expect("create a PodGroup");
        }
    }
    for (leaf, n) in [("c", 2), ("d", 3)] {
        for i in 0..n {
            for pod in twin_pods(&scope, &format!("{leaf}-{i}"), "3", &|pod, side| {
                pod["spec"]["schedulingGroup"] = serde_json::json!({"podGroupName": format!("{leaf}-{side}")});
            }) {
                scope.create(&pod).await;
                second.push(pod.name_any());
            }
        }
    }
    eventually(WAIT, "both schedulers gave up on the second jobs", || async {
        let mut all = true;
        for g in ["c-ours", "c-kube", "d-ours", "d-kube"] {
            all &= group_condition(&scope, g).await.is_some();
        }
        all
    })
    .await;
    for name in &second {
        let p = scope.pods().get(name).await.expect("a second job's pod");
        assert_eq!(node_of(&p), None, "{name}: no pod of a job that fits no block is bound");
    }
    for leaf in ["c", "d"] {
        let (ours, kube) = (
            group_condition(&scope, &format!("{leaf}-ours"))
                .await
                .unwrap_or_default(),
            group_condition(&scope, &format!("{leaf}-kube"))
                .await
                .unwrap_or_default(),
        );
        eprintln!("e2e {test}: gang {leaf}: placement {ours}");
        eprintln!("e2e {test}: gang {leaf}: kube-scheduler {kube}");
        assert_eq!(
            (&ours["status"], &ours["reason"]),
            (&kube["status"], &kube["reason"]),
            "gang {leaf}'s condition: placement (left), kube-scheduler (right)"
        );
    }
    binder.stop().await;
    scope.cleanup().await;
}
