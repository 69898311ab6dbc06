//! A seeded PodGroup differential against kube-scheduler 1.37 (issue 46): twin racks and zones
//! per side, then, step by step, twin PodGroups (gangs of 2–5 pods, `minCount` at or below the
//! size, with the rack key or none, members requiring anti-affinity by zone to plain pods bound
//! earlier, high-priority groups one of whose members says `preemptionPolicy: Never`, a member
//! created gated and released later) and plain pods between them, decided by placement's binder
//! and by a kube-scheduler of the cluster's version started by this test at `-v=10` with the
//! cluster's feature gates. After each step both sides have settled (every pod bound or
//! `PodScheduled=False`, every group's `PodGroupInitiallyScheduled` condition written); per group
//! the test compares the pods bound, the condition, the unbound members' messages and, where
//! kube-scheduler's best placement score was unique (its `Calculated placement's final score`
//! lines: kube breaks ties at random), the rack the group landed in; per plain pod, bound or not
//! and its message. `E2E_PG_DIFF_SEED` and `E2E_PG_DIFF_GROUPS` pick other scenarios.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use placement_tests::e2e::{node_of, scheduled_condition, Scope, WAIT};
use placement_tests::fixtures::eventually;

use super::{
    create_gang, group_condition, list_pods, rack_of, twin_pods, workload_api_cluster, Generator, InProcessBinder,
    KubeSchedulerProcess, PodGroup,
};

/// A rack of each side: its name (the rack label's value), its zone and its nodes' cpu.
#[derive(Debug, Clone)]
struct Rack {
    name: String,
    zone: &'static str,
    nodes: Vec<&'static str>,
}

/// One twin PodGroup.
#[derive(Debug, Clone)]
struct Group {
    name: String,
    size: usize,
    min_count: usize,
    cpu: &'static str,
    /// The rack key as its topology constraint.
    keyed: bool,
    /// Members require anti-affinity, by zone, to the plain pods labelled `x`.
    anti_x: bool,
    /// High priority, the last member's class saying `Never`.
    high_never: bool,
    /// The member created with a scheduling gate, removed once both sides held the group.
    gated: Option<usize>,
}

#[derive(Debug, Clone)]
enum Step {
    Plain { name: String, cpu: &'static str, x: bool },
    Group(Group),
}

/// What plain pods and group members request.
const PLAIN_CPU: [&str; 2] = ["500m", "1"];
const MEMBER_CPU: [&str; 4] = ["500m", "1", "1500m", "2"];

/// The scenario of `seed`: three racks (two in zone z1, one in z2) and `groups` groups with plain
/// pods between them.
fn scenario(seed: u64, groups: usize) -> (Vec<Rack>, Vec<Step>) {
    let mut g = Generator(seed);
    // Every node of a side of another size, so that kube-scheduler's node scores rarely tie.
    let mut cpus = vec!["2", "3", "4", "5", "6", "7", "8", "9", "10"];
    let racks = ["r1", "r2", "r3"]
        .iter()
        .enumerate()
        .map(|(i, name)| Rack {
            name: (*name).to_string(),
            zone: if i < 2 { "z1" } else { "z2" },
            nodes: (0..2 + g.next() % 2)
                .map(|_| cpus.remove((g.next() % cpus.len() as u64) as usize))
                .collect(),
        })
        .collect();
    let mut steps = Vec::new();
    for i in 0..groups {
        if g.chance(50) {
            steps.push(Step::Plain {
                name: format!("plain{i}"),
                cpu: PLAIN_CPU[(g.next() % PLAIN_CPU.len() as u64) as usize],
                x: g.chance(60),
            });
        }
        let size = 2 + (g.next() % 4) as usize;
        let slack = (g.next() % 3) as usize;
        steps.push(Step::Group(Group {
            name: format!("g{i}"),
            size,
            min_count: size.saturating_sub(slack).max(1),
            cpu: MEMBER_CPU[(g.next() % MEMBER_CPU.len() as u64) as usize],
            keyed: g.chance(70),
            anti_x: g.chance(25),
            high_never: g.chance(20),
            gated: g.chance(15).then(|| (g.next() % size as u64) as usize),
        }));
    }
    (racks, steps)
}

/// The scores of kube-scheduler's last attempt at `subject`, from its `-v=10` log lines `message`
/// (`"Calculated placement's final score for podGroup" podGroup=… placement=… score=…`, or
/// `"Calculated node's final score for pod" pod=… node=… score=…`): (`item`'s value, score),
/// a repeated item starting the next attempt; `None` when it logged none.
pub(super) fn last_scores(
    log: &str,
    message: &str,
    subject_key: &str,
    subject: &str,
    item: &str,
) -> Option<Vec<(String, i64)>> {
    let needle = format!(" {subject_key}=\"{subject}\"");
    let mut attempts: Vec<Vec<(String, i64)>> = Vec::new();
    for line in log.lines() {
        if !line.contains(message) || !line.contains(&needle) {
            continue;
        }
        let field = |key: &str| -> Option<String> {
            let rest = line.split(&format!(" {key}=")).nth(1)?;
            let value = match rest.strip_prefix('"') {
                Some(quoted) => quoted.split('"').next()?,
                None => rest.split_whitespace().next()?,
            };
            Some(value.to_string())
        };
        let (Some(name), Some(score)) = (field(item), field("score").and_then(|s| s.parse().ok())) else {
            continue;
        };
        match attempts.last_mut() {
            Some(last) if !last.iter().any(|(p, _)| *p == name) => last.push((name, score)),
            _ => attempts.push(vec![(name, score)]),
        }
    }
    attempts.pop()
}

/// kube-scheduler's final placement scores for the PodGroup `group` (`ns/name`) in its last
/// attempt; `None` when it logged none (a single placement).
fn kube_scores(log: &str, group: &str) -> Option<Vec<(String, i64)>> {
    last_scores(
        log,
        "Calculated placement's final score for podGroup",
        "podGroup",
        group,
        "placement",
    )
}

/// Whether kube-scheduler's best node for the pod `pod` (`ns/name`), among `nodes` (those of the
/// placement it took), was unique in its last attempt; true when it logged no scores.
pub(super) fn best_node_is_unique(log: &str, pod: &str, nodes: &dyn Fn(&str) -> bool) -> bool {
    let Some(scores) = last_scores(log, "Calculated node's final score for pod", "pod", pod, "node") else {
        return true;
    };
    let scores: Vec<_> = scores.into_iter().filter(|(n, _)| nodes(n)).collect();
    let best = scores.iter().map(|(_, s)| *s).max().unwrap_or_default();
    scores.iter().filter(|(_, s)| *s == best).count() <= 1
}

/// Whether kube-scheduler's best placement for `group` was unique (true when it logged no
/// scores: it had one placement to take).
fn best_is_unique(log: &str, group: &str) -> bool {
    match kube_scores(log, group) {
        None => true,
        Some(scores) => {
            let best = scores.iter().map(|(_, s)| *s).max().unwrap_or_default();
            scores.iter().filter(|(_, s)| *s == best).count() == 1
        }
    }
}

/// A message with what depends on which placement kube-scheduler tried first left out: kube
/// generates a group's placements from a Go map (`topology_placement.go`), so the placement whose
/// status an unschedulable group reports ("first placement status: …") and the node count of its
/// members' messages are random in kube-scheduler when several racks exist.
fn without_first_placement(message: &str) -> String {
    if let Some((head, _)) = message.split_once(", first placement status:") {
        return head.to_string();
    }
    if message.starts_with("0/") && message.contains(" nodes are available") {
        return "0/N nodes are available: …".to_string();
    }
    message.to_string()
}

/// Moves placement's pod `name` to `node`: deleted at once and created again, bound there from
/// the start (what it was given otherwise kept), as kube-scheduler's random tie-break would have
/// put it.
async fn repin(scope: &Scope, name: &str, node: &str) {
    let pods = scope.pods();
    let pod = pods.get(name).await.expect("the pod to move");
    let mut obj = serde_json::to_value(&pod).expect("a pod as JSON");
    let meta = obj["metadata"].clone();
    obj["metadata"] = serde_json::json!({
        "name": meta["name"], "namespace": meta["namespace"],
        "labels": meta["labels"], "annotations": meta["annotations"]});
    obj["status"] = serde_json::Value::Null;
    obj["spec"]["nodeName"] = serde_json::json!(node);
    let force = kube::api::DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    let _ = pods.delete(name, &force).await;
    eventually(WAIT, &format!("{name} deleted"), || async {
        pods.get(name).await.is_err()
    })
    .await;
    let pod: Pod = serde_json::from_value(obj).expect("the pod again");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create the moved pod");
}

/// What a side did with a group or pod, compared across sides.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    bound: usize,
    condition: Option<serde_json::Value>,
    messages: Vec<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_groups_are_decided_as_kube_scheduler_decides_them_on_seeded_scenarios() {
    let test = "pod_groups_are_decided_as_kube_scheduler_decides_them_on_seeded_scenarios";
    let Some(cluster) = workload_api_cluster(test).await else {
        return;
    };
    // With TopologyAwareWorkloadScheduling off (kube 1.37's default) kube reads no topology key:
    // a group is decided on every node, and racks are compared only through the nodes taken.
    let tas = placement_tests::e2e::cluster_gates().topology_aware_workload_scheduling;
    let Some(binary) = std::env::var("K8S_STATE")
        .map(|state| std::path::PathBuf::from(state).join("bin/kube-scheduler"))
        .ok()
        .filter(|p| p.is_file())
    else {
        eprintln!("e2e {test}: skipped: K8S_STATE names no cluster.sh state folder holding bin/kube-scheduler");
        return;
    };
    let env = |name: &str, default: u64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let seed = env("E2E_PG_DIFF_SEED", 11);
    eprintln!(
        "e2e {test}: seed {seed}, TopologyAwareWorkloadScheduling {}",
        if tas { "on" } else { "off" }
    );
    let (racks, steps) = scenario(seed, env("E2E_PG_DIFF_GROUPS", 8) as usize);
    let _serial = super::serial().await;
    let mut scope = Scope::new(&cluster, "pg-diff").await;
    let run = scope.run.clone();
    let rack_key = |side: &str| format!("e2e-{run}-{side}-rack");
    let zone_key = |side: &str| format!("e2e-{run}-{side}-zone");
    for side in ["ours", "kube"] {
        for rack in &racks {
            for (i, cpu) in rack.nodes.iter().enumerate() {
                scope
                    .add_node(
                        &format!("{side}-{}-{i}", rack.name),
                        cpu,
                        &[
                            ("side", side),
                            (rack_key(side).as_str(), rack.name.as_str()),
                            (zone_key(side).as_str(), rack.zone),
                        ],
                    )
                    .await;
            }
        }
    }
    let high = super::priority_class(&mut scope, "pg-diff-high", 1000).await;
    let never = super::priority_class_with(&mut scope, "pg-diff-never", 1000, Some("Never")).await;

    // kube-scheduler of the cluster's version at -v=10 (its placement scores), this test's own.
    let own = own_kube_scheduler(&binary, &cluster, &scope);
    let (kube_name, log_path) = (own.name.clone(), own.log_path.clone());
    let binder = InProcessBinder::start(&cluster, &scope).await;
    let groups: Api<PodGroup> = Api::namespaced(cluster.client.clone(), &scope.ns);

    // Twin pods: placement's on the `ours` racks, the test's kube-scheduler's on the `kube` ones.
    let twins = |name: &str, cpu: &str, shape: &dyn Fn(&mut serde_json::Value, &str)| -> [Pod; 2] {
        twin_pods(&scope, name, cpu, &|pod, side| {
            if side == "kube" {
                pod["spec"]["schedulerName"] = serde_json::json!(kube_name);
            }
            shape(pod, side);
        })
    };
    let decided = |p: &Pod| node_of(p).is_some() || scheduled_condition(p).is_some_and(|c| c.status == "False");
    let message = |p: &Pod| {
        scheduled_condition(p)
            .and_then(|c| c.message.clone())
            .unwrap_or_default()
    };
    let mut compared = 0;
    let mut racks_compared = 0;
    let mut scored = 0;
    let mut differences: Vec<String> = Vec::new();
    // The twin of a kube-side node on placement's side.
    let twin = |node: &str| node.replacen("-kube-", "-ours-", 1);
    // Ties kube-scheduler broke at random where placement chose the other candidate: placement's
    // pod is moved to the twin of kube's node, so that later steps start from the same state.
    let mut ties: Vec<String> = Vec::new();
    let mut kube_races: Vec<String> = Vec::new();
    for step in &steps {
        match step {
            Step::Plain { name, cpu, x } => {
                for pod in twins(name, cpu, &|pod, side| {
                    if *x {
                        pod["metadata"]["labels"]["x"] = serde_json::json!(side);
                    }
                }) {
                    scope.create(&pod).await;
                }
                let names = [format!("{name}-ours"), format!("{name}-kube")];
                eventually(WAIT, &format!("both decided {name}"), || async {
                    let mut all = true;
                    for n in &names {
                        all &= scope.pods().get(n).await.ok().is_some_and(|p| decided(&p));
                    }
                    all
                })
                .await;
                let view = |p: &Pod| {
                    (
                        node_of(p).is_some(),
                        if node_of(p).is_some() {
                            String::new()
                        } else {
                            message(p)
                        },
                    )
                };
                let ours_pod = scope.pods().get(&names[0]).await.expect("the pod");
                let kube_pod = scope.pods().get(&names[1]).await.expect("the pod");
                let (ours, kube) = (view(&ours_pod), view(&kube_pod));
                if ours != kube {
                    differences.push(format!("{name}: placement {ours:?}, kube-scheduler {kube:?}"));
                }
                if let (Some(o), Some(k)) = (node_of(&ours_pod), node_of(&kube_pod)) {
                    if o != twin(k) {
                        let kube_log = std::fs::read_to_string(&log_path).unwrap_or_default();
                        let pod = format!("{}/{}", scope.ns, names[1]);
                        if best_node_is_unique(&kube_log, &pod, &|_| true) {
                            differences.push(format!(
                                "{name}: node placement {o}, kube-scheduler {k} (kube's best unique)"
                            ));
                        } else {
                            ties.push(format!("{name}: {k} (placement {o})"));
                            repin(&scope, &names[0], &twin(k)).await;
                        }
                    }
                }
                eprintln!(
                    "e2e {test} seed {seed}: {name} ({cpu}{}): placement {:?}, kube-scheduler {:?}",
                    if *x { ", labelled x" } else { "" },
                    node_of(&ours_pod),
                    node_of(&kube_pod)
                );
                compared += 1;
            }
            Step::Group(group) => {
                for side in ["ours", "kube"] {
                    let key = group.keyed.then(|| rack_key(side));
                    create_gang(
                        &groups,
                        &format!("{}-{side}", group.name),
                        group.min_count,
                        key.as_deref(),
                    )
                    .await;
                }
                let mut members: BTreeMap<&str, Vec<String>> = BTreeMap::new();
                for i in 0..group.size {
                    let gated = group.gated == Some(i);
                    let class = if group.high_never {
                        Some(if i + 1 == group.size {
                            never.clone()
                        } else {
                            high.clone()
                        })
                    } else {
                        None
                    };
                    for pod in twins(&format!("{}-{i}", group.name), group.cpu, &|pod, side| {
                        pod["spec"]["schedulingGroup"] =
                            serde_json::json!({"podGroupName": format!("{}-{side}", group.name)});
                        if gated {
                            pod["spec"]["schedulingGates"] = serde_json::json!([{"name": "example.com/hold"}]);
                        }
                        if let Some(class) = &class {
                            pod["spec"]["priorityClassName"] = serde_json::json!(class);
                        }
                        if group.anti_x {
                            pod["spec"]["affinity"] = serde_json::json!({"podAntiAffinity": {
                                "requiredDuringSchedulingIgnoredDuringExecution": [{
                                    "labelSelector": {"matchLabels": {"x": side}},
                                    "topologyKey": zone_key(side)}]}});
                        }
                    }) {
                        let side = if pod.name_any().ends_with("-ours") {
                            "ours"
                        } else {
                            "kube"
                        };
                        members.entry(side).or_default().push(pod.name_any());
                        scope.create(&pod).await;
                    }
                }
                if let Some(i) = group.gated {
                    // Both hold the group alike while a member is gated.
                    tokio::time::sleep(Duration::from_secs(4)).await;
                    let mut held = BTreeMap::new();
                    for (side, names) in &members {
                        let mut bound = 0;
                        for n in names {
                            let p = scope.pods().get(n).await.expect("a member");
                            bound += usize::from(node_of(&p).is_some());
                        }
                        held.insert(*side, bound);
                    }
                    if held.get("ours") != held.get("kube") {
                        differences.push(format!(
                            "{}: while member {i} was gated, placement bound {:?}, kube-scheduler {:?}",
                            group.name,
                            held.get("ours"),
                            held.get("kube")
                        ));
                    }
                    for side in ["ours", "kube"] {
                        scope
                            .pods()
                            .patch(
                                &format!("{}-{i}-{side}", group.name),
                                &PatchParams::default(),
                                &Patch::Merge(serde_json::json!({"spec": {"schedulingGates": null}})),
                            )
                            .await
                            .expect("remove the gate");
                    }
                }
                eventually(WAIT, &format!("both decided group {}", group.name), || async {
                    let mut all = true;
                    for side in ["ours", "kube"] {
                        all &= group_condition(&scope, &format!("{}-{side}", group.name))
                            .await
                            .is_some();
                    }
                    for names in members.values() {
                        for n in names {
                            all &= scope.pods().get(n).await.ok().is_some_and(|p| decided(&p));
                        }
                    }
                    all
                })
                .await;
                let mut outcomes = BTreeMap::new();
                let mut rack_sets = BTreeMap::new();
                for (side, names) in &members {
                    let mut bound = 0;
                    let mut messages = Vec::new();
                    let mut racks_used = BTreeSet::new();
                    for n in names {
                        let p = scope.pods().get(n).await.expect("a member");
                        match node_of(&p) {
                            Some(node) => {
                                bound += 1;
                                racks_used.insert(rack_of(node));
                            }
                            None => messages.push(message(&p)),
                        }
                    }
                    let mut condition = group_condition(&scope, &format!("{}-{side}", group.name)).await;
                    if group.keyed && tas && racks.len() > 1 && bound == 0 {
                        // Which members fit the reported placement is random too (those get the
                        // group's message twice over, those that did not their own): only the
                        // group's condition is compared.
                        messages.clear();
                        if let Some(message) = condition.as_mut().and_then(|c| c.get_mut("message")) {
                            let text = message.as_str().unwrap_or_default().to_string();
                            *message = serde_json::json!(without_first_placement(&text));
                        }
                    }
                    messages.sort();
                    outcomes.insert(
                        *side,
                        Outcome {
                            bound,
                            condition,
                            messages,
                        },
                    );
                    rack_sets.insert(*side, racks_used);
                }
                // kube-scheduler's own race: a cycle for the group's extra pods that reads the
                // group from its informer before its True condition arrived writes False over it
                // (`updatePodGroupCondition` means not to). placement does not regress; a False
                // after kube's logged success is taken as that race.
                {
                    let kube_log = std::fs::read_to_string(&log_path).unwrap_or_default();
                    let succeeded = format!(
                        "\"Successfully scheduled a pod group\" podGroupType=\"podgroup\" podGroup=\"{}/{}-kube\"",
                        scope.ns, group.name
                    );
                    let status = |side: &str| {
                        outcomes
                            .get(side)
                            .and_then(|o: &Outcome| o.condition.as_ref())
                            .map(|c| c["status"].clone())
                    };
                    if status("ours") == Some(serde_json::json!("True"))
                        && status("kube") == Some(serde_json::json!("False"))
                        && kube_log.contains(&succeeded)
                    {
                        kube_races.push(group.name.clone());
                        let ours = outcomes.get("ours").and_then(|o| o.condition.clone());
                        if let Some(k) = outcomes.get_mut("kube") {
                            k.condition = ours;
                        }
                    }
                }
                if outcomes.get("ours") != outcomes.get("kube") {
                    let kube_log = std::fs::read_to_string(&log_path).unwrap_or_default();
                    let needle = format!("\"{}/{}-kube\"", scope.ns, group.name);
                    let said: Vec<&str> = kube_log
                        .lines()
                        .filter(|l| l.contains(&needle) && (l.contains("pod group\"") || l.contains("pod group is")))
                        .collect();
                    differences.push(format!(
                        "group {:?}: placement {:?}, kube-scheduler {:?}; kube-scheduler's log of the group: {said:#?}",
                        group,
                        outcomes.get("ours"),
                        outcomes.get("kube")
                    ));
                }
                let kube_log = std::fs::read_to_string(&log_path).unwrap_or_default();
                let kube_group = format!("{}/{}-kube", scope.ns, group.name);
                scored += usize::from(kube_scores(&kube_log, &kube_group).is_some());
                let rack_unique = best_is_unique(&kube_log, &kube_group);
                if group.keyed && tas && rack_unique && outcomes.get("ours").is_some_and(|o| o.bound > 0) {
                    racks_compared += 1;
                    if rack_sets.get("ours") != rack_sets.get("kube") {
                        differences.push(format!(
                            "group {}: racks placement {:?}, kube-scheduler {:?} (kube's scores {:?})",
                            group.name,
                            rack_sets.get("ours"),
                            rack_sets.get("kube"),
                            kube_scores(&kube_log, &kube_group)
                        ));
                    }
                }
                // The nodes the group's members took, as a multiset: members alike in all but
                // their names may take each other's nodes (kube orders a group's members by
                // priority, attempts and the time its queue saw them). Compared where kube's best
                // node for each member was unique within the placement it took (and that
                // placement's choice unique too); otherwise placement's members are moved to
                // kube's nodes.
                let mut pairs = Vec::new();
                for i in 0..group.size {
                    let o = scope.pods().get(&format!("{}-{i}-ours", group.name)).await.ok();
                    let k = scope.pods().get(&format!("{}-{i}-kube", group.name)).await.ok();
                    if let (Some(o), Some(k)) = (o.as_ref().and_then(node_of), k.as_ref().and_then(node_of)) {
                        pairs.push((i, o.to_string(), k.to_string()));
                    }
                }
                let mut ours_nodes: Vec<String> = pairs.iter().map(|(_, o, _)| o.clone()).collect();
                let mut kube_nodes: Vec<String> = pairs.iter().map(|(_, _, k)| twin(k)).collect();
                ours_nodes.sort();
                kube_nodes.sort();
                if ours_nodes != kube_nodes {
                    let rack_tie = group.keyed && tas && !rack_unique;
                    let tied: Vec<usize> = pairs
                        .iter()
                        .filter(|(i, _, k)| {
                            let rack = rack_of(k);
                            let in_rack = |n: &str| !(group.keyed && tas) || rack_of(n) == rack;
                            rack_tie
                                || !best_node_is_unique(
                                    &kube_log,
                                    &format!("{}/{}-{i}-kube", scope.ns, group.name),
                                    &in_rack,
                                )
                        })
                        .map(|(i, _, _)| *i)
                        .collect();
                    if tied.is_empty() {
                        differences.push(format!(
                            "group {}: nodes placement {ours_nodes:?}, kube-scheduler {kube_nodes:?} (kube's best unique for each member)",
                            group.name
                        ));
                    } else {
                        ties.push(format!(
                            "group {} (members {tied:?}): {kube_nodes:?} (placement {ours_nodes:?})",
                            group.name
                        ));
                        for (i, o, k) in &pairs {
                            if *o != twin(k) {
                                repin(&scope, &format!("{}-{i}-ours", group.name), &twin(k)).await;
                            }
                        }
                    }
                }
                eprintln!(
                    "e2e {test} seed {seed}: {} ({} of {}, minCount {}, {}{}{}{}): {:?}, racks {:?}",
                    group.name,
                    group.cpu,
                    group.size,
                    group.min_count,
                    if group.keyed { "rack key" } else { "no key" },
                    if group.anti_x { ", anti-affinity" } else { "" },
                    if group.high_never {
                        ", high priority with a Never member"
                    } else {
                        ""
                    },
                    if group.gated.is_some() { ", a gated member" } else { "" },
                    outcomes
                        .get("ours")
                        .map(|o| (o.bound, o.condition.as_ref().map(|c| c["reason"].clone()))),
                    rack_sets.get("ours"),
                );
                compared += 1;
            }
        }
    }
    let pods = list_pods(&scope).await;
    if !ties.is_empty() {
        eprintln!(
            "e2e {test} seed {seed}: ties kube-scheduler broke otherwise, placement's pod moved to kube's node: {ties:?}"
        );
    }
    eprintln!(
        "e2e {test} seed {seed}: {compared} steps compared ({} pods), kube's placement scores read for {scored} groups, \
         racks compared for {racks_compared} groups, {} ties followed, {} differences; kube-scheduler turned a \
         scheduled group's condition False (its race): {kube_races:?}",
        pods.len(),
        ties.len(),
        differences.len()
    );
    // The log is read: a keyed group kube placed with a choice of racks logged its scores.
    assert!(
        racks_compared == 0 || scored > 0,
        "kube-scheduler's -v=10 log gave no placement scores (its format changed?)"
    );
    assert!(
        differences.is_empty(),
        "seed {seed} ({racks:?}): placement and kube-scheduler differ:\n{}",
        differences.join("\n")
    );
    binder.stop().await;
    scope.cleanup().await;
}

#[test]
fn kube_scores_are_read_from_the_last_attempt() {
    let log = r#"I1207 06:00:00.1 1 schedule_one_podgroup.go:1210] "Calculated placement's final score for podGroup" podGroup="ns/g1-kube" placement="rack-r1" score=40
I1207 06:00:00.1 1 schedule_one_podgroup.go:1210] "Calculated placement's final score for podGroup" podGroup="ns/g1-kube" placement="rack-r2" score=40
I1207 06:00:01.1 1 schedule_one_podgroup.go:1210] "Calculated placement's final score for podGroup" podGroup="ns/g1-kube" placement="rack-r1" score=40
I1207 06:00:01.1 1 schedule_one_podgroup.go:1210] "Calculated placement's final score for podGroup" podGroup="ns/g1-kube" placement="rack-r2" score=55
I1207 06:00:01.1 1 schedule_one_podgroup.go:1210] "Calculated placement's final score for podGroup" podGroup="ns/g2-kube" placement="rack-r2" score=10
"#;
    assert_eq!(
        kube_scores(log, "ns/g1-kube"),
        Some(vec![("rack-r1".into(), 40), ("rack-r2".into(), 55)])
    );
    assert!(best_is_unique(log, "ns/g1-kube"));
    assert!(best_is_unique(log, "ns/g3-kube"), "no scores: one placement");
    let tie = log.lines().take(2).collect::<Vec<_>>().join("\n");
    assert!(!best_is_unique(&tie, "ns/g1-kube"));
}

/// A kube-scheduler of the cluster's version at `-v=10` (its scores in its log), a differential
/// test's own: one profile named `<scope's scheduler>-kube`, no leader election, the gates of
/// `E2E_FEATURE_GATES`; stopped (and its folder removed) when dropped.
pub(super) struct OwnKubeScheduler {
    /// Its profile's `schedulerName`.
    pub(super) name: String,
    /// Its log (stdout and stderr).
    pub(super) log_path: std::path::PathBuf,
    _process: KubeSchedulerProcess,
    _dir: tempfile::TempDir,
}

/// Starts an [`OwnKubeScheduler`] from `binary` against `cluster` for `scope`'s pods.
pub(super) fn own_kube_scheduler(
    binary: &std::path::Path,
    cluster: &placement_tests::e2e::Cluster,
    scope: &Scope,
) -> OwnKubeScheduler {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let config = dir.path().join("kube-scheduler.yaml");
    let api = placement_tests::e2e::kube_scheduler_config_api(binary).expect("kube-scheduler's version");
    let name = format!("{}-kube", scope.scheduler);
    std::fs::write(
        &config,
        format!(
            "apiVersion: {api}\nkind: KubeSchedulerConfiguration\nclientConnection:\n  kubeconfig: {}\nleaderElection:\n  \
             leaderElect: false\nprofiles:\n  - schedulerName: {name}\n",
            cluster.kubeconfig.display()
        ),
    )
    .expect("write kube-scheduler's configuration");
    let log_path = dir.path().join("kube-scheduler.log");
    let log = std::fs::File::create(&log_path).expect("a log file");
    let mut kube = std::process::Command::new(binary);
    kube.arg("--config").arg(&config).args(["--secure-port", "0", "--v=10"]);
    if let Ok(gates) = std::env::var("E2E_FEATURE_GATES") {
        if !gates.is_empty() {
            kube.arg(format!("--feature-gates={gates}"));
        }
    }
    let process = KubeSchedulerProcess(
        kube.stdout(log.try_clone().expect("the log file"))
            .stderr(log)
            .spawn()
            .expect("kube-scheduler starts"),
    );
    OwnKubeScheduler {
        name,
        log_path,
        _process: process,
        _dir: dir,
    }
}
