use super::super::blockers::Blocker;
use super::super::report::{
    ClusterSize, DeviceFailure, DeviceGroup, Hint, HintOut, PluginPart, PodSummary, RefusedGroup,
};
use super::*;

fn scored(rank: usize, node: &str, parts: &[(&str, i64, i64)]) -> ScoredNode {
    ScoredNode {
        rank,
        node: node.into(),
        total: parts.iter().map(|(_, s, w)| s * w).sum(),
        plugins: parts
            .iter()
            .map(|(p, s, w)| PluginPart {
                plugin: p.to_string(),
                score: *s,
                weight: *w,
                weighted: s * w,
            })
            .collect(),
    }
}

fn outcome(policy: &str, best: Vec<ScoredNode>) -> Outcome {
    Outcome {
        policy: policy.into(),
        decided_by: "in-process engine".into(),
        schedulable: !best.is_empty(),
        node: best.first().map(|b| b.node.clone()),
        score: best.first().map(|b| b.total),
        message: match best.first() {
            Some(b) => format!("Successfully assigned shop/web to {}", b.node),
            None => "0/3 nodes are available: 3 Insufficient cpu.".into(),
        },
        feasible_count: best.len() as u32,
        node_count: 3,
        nominated_node: None,
        victims: vec![],
        best,
        refused: vec![],
        devices: vec![],
        hints: vec![],
        hints_caveat: None,
        node_detail: None,
    }
}

fn explanation(current: Outcome) -> Explanation {
    Explanation {
        pod: PodSummary {
            namespace: "shop".into(),
            name: "web".into(),
            uid: "u".into(),
            scheduler_name: "placement-scheduler".into(),
            phase: "Pending".into(),
            bound_to: None,
            requests: [("cpu".to_string(), "2".to_string())].into(),
        },
        notes: vec![],
        cluster: ClusterSize {
            nodes: 3,
            bound_pods: 1,
        },
        pod_group: None,
        current,
        what_if: None,
    }
}

#[test]
fn a_schedulable_pod_reads_as_a_verdict_and_an_aligned_table() {
    let mut o = outcome(
        "default",
        vec![
            scored(1, "node-b", &[("NodeResourcesFit", 80, 1), ("TaintToleration", 100, 3)]),
            scored(2, "a", &[("NodeResourcesFit", 7, 1), ("TaintToleration", 100, 3)]),
        ],
    );
    o.refused = vec![RefusedGroup {
        filter: "TaintToleration".into(),
        reason: "node(s) had untolerated taint(s)".into(),
        count: 4,
        nodes: vec!["c".into(), "d".into()],
    }];
    o.node_count = 6;
    let text = text(&explanation(o), Style::default());
    let expected = "\
Pod shop/web: pending, scheduler placement-scheduler, requests cpu 2
Cluster: 3 nodes, 1 bound pod; asked the in-process engine, policy default

SCHEDULABLE: best node node-b (score 380); 2 of 6 nodes fit.
  kube-scheduler: Successfully assigned shop/web to node-b

Best nodes (weighted scores: plugin score 0-100 x weight):
  #  NODE    TOTAL  Fit  Taint
                     x1     x3
  1  node-b    380   80    300
  2  a         307    7    300

Refused nodes: 4 of 6 nodes (by the first filter that refused each):
  FILTER           REASON                            NODES  FIRST NODES
  TaintToleration  node(s) had untolerated taint(s)      4  c, d, …
";
    assert_eq!(text, expected);
    assert!(!text.contains('\x1b'), "plain when not a terminal");
}

#[test]
fn device_failures_get_a_section_and_a_refused_node_lists_its_own() {
    let mut o = outcome("default", vec![]);
    o.devices = vec![DeviceGroup {
        claim: "train-gpu".into(),
        request: "gpu".into(),
        kind: "devices_allocated".into(),
        why: "not enough free devices".into(),
        count: 3,
        nodes: vec!["a".into(), "b".into()],
        example_node: "a".into(),
        example: "2 requested; 2 devices match, 1 allocated to claims".into(),
    }];
    o.node_detail = Some(NodeVerdict {
        node: "a".into(),
        feasible: false,
        rank: None,
        scores: None,
        compared_with: None,
        filter: Some("DynamicResources".into()),
        reasons: vec!["cannot allocate all claims".into()],
        blockers: vec![],
        devices: vec![DeviceFailure {
            claim: "train-gpu".into(),
            request: "gpu".into(),
            kind: "devices_allocated".into(),
            message: "2 requested; 2 devices match, 1 allocated to claims".into(),
        }],
    });
    let text = text(&explanation(o), Style::default());
    assert!(
        text.contains(
            "\nNode a: REFUSED by DynamicResources: cannot allocate all claims\n  - DynamicResources: claim train-gpu request gpu: 2 requested; 2 devices match, 1 allocated to claims\n"
        ),
        "{text}"
    );
    assert!(!text.contains("nothing the cordon"), "{text}");
    assert!(
        text.contains(
            "\nWhy the pod's claims cannot be allocated (on the nodes DynamicResources refused, request by request):\n  \
             CLAIM      REQUEST  WHY                      NODES  FIRST NODES\n  \
             train-gpu  gpu      not enough free devices      3  a, b, …\n  \
             - claim train-gpu request gpu on a: 2 requested; 2 devices match, 1 allocated to claims\n"
        ),
        "{text}"
    );
}

#[test]
fn colour_wraps_cells_after_alignment() {
    let o = outcome("default", vec![scored(1, "n1", &[("NodeResourcesFit", 80, 1)])]);
    let text = text(&explanation(o), Style { color: true });
    assert!(text.contains("\x1b[1;32mSCHEDULABLE:\x1b[0m"), "{text}");
    // The padding is outside the escape codes: the node column still lines up.
    assert!(text.contains("  1  \x1b[36mn1\x1b[0m  "), "{text:?}");
}

#[test]
fn an_unschedulable_pod_shows_the_message_preemption_and_hints() {
    let mut o = outcome("default", vec![]);
    o.nominated_node = Some("a".into());
    o.victims = vec!["shop/low".into()];
    o.hints = vec![HintOut {
        hint: Hint::Cordoned {
            nodes: vec!["c".into()],
            count: 1,
        },
        text: "only being cordoned keeps the pod off 1 node (c)".into(),
    }];
    o.hints_caveat = Some("spread not re-checked".into());
    let text = text(&explanation(o), Style::default());
    assert!(text.contains("UNSCHEDULABLE: no node fits.\n  kube-scheduler: 0/3 nodes are available: 3 Insufficient cpu.\n  preemption: would nominate a, evicting shop/low\n"), "{text}");
    assert!(text.contains("\nWhat would make it fit:\n  - only being cordoned keeps the pod off 1 node (c)\n  (spread not re-checked)\n"), "{text}");
    assert!(!text.contains("Best nodes"));
}

#[test]
fn a_feasible_node_is_compared_plugin_by_plugin_with_the_winner() {
    let mut o = outcome(
        "default",
        vec![
            scored(1, "b", &[("NodeResourcesFit", 80, 1), ("ImageLocality", 0, 1)]),
            scored(2, "a", &[("NodeResourcesFit", 60, 1), ("ImageLocality", 10, 1)]),
        ],
    );
    o.node_detail = Some(NodeVerdict {
        node: "a".into(),
        feasible: true,
        rank: Some(2),
        scores: Some(o.best[1].clone()),
        compared_with: Some(o.best[0].clone()),
        filter: None,
        reasons: vec![],
        blockers: vec![],
        devices: vec![],
    });
    let text = text(&explanation(o), Style::default());
    let expected = "
Node a: feasible, rank 2 of 2 (score 70).
  Against b (rank 1, score 80), why b and not a, weighted scores:
  PLUGIN            WEIGHT   a   b  DIFF
  NodeResourcesFit       1  60  80   -20
  ImageLocality          1  10   0   +10
  TOTAL                     70  80   -10
";
    assert!(text.contains(expected), "{text}");
    assert!(!text.contains("Equal totals"));
}

#[test]
fn equal_totals_say_the_tie_break_decided() {
    let mut o = outcome(
        "default",
        vec![
            scored(1, "b", &[("NodeResourcesFit", 80, 1)]),
            scored(2, "a", &[("NodeResourcesFit", 80, 1)]),
        ],
    );
    o.node_detail = Some(NodeVerdict {
        node: "a".into(),
        feasible: true,
        rank: Some(2),
        scores: Some(o.best[1].clone()),
        compared_with: Some(o.best[0].clone()),
        filter: None,
        reasons: vec![],
        blockers: vec![],
        devices: vec![],
    });
    let text = text(&explanation(o), Style::default());
    assert!(
        text.contains("  TOTAL                     80  80     0\n  Equal totals: the tie-break"),
        "{text}"
    );
}

#[test]
fn a_refused_node_lists_everything_in_its_way() {
    let mut o = outcome("default", vec![]);
    o.node_detail = Some(NodeVerdict {
        node: "c".into(),
        feasible: false,
        rank: None,
        scores: None,
        compared_with: None,
        filter: Some("TaintToleration".into()),
        reasons: vec!["node(s) had untolerated taint(s)".into()],
        blockers: vec![
            Blocker::TaintToleration {
                taints: vec!["gpu=true:NoSchedule".into()],
            },
            Blocker::NodeUnschedulable,
        ],
        devices: vec![],
    });
    let text = text(&explanation(o), Style::default());
    assert!(
        text.contains(
            "\nNode c: REFUSED by TaintToleration: node(s) had untolerated taint(s)\n  - TaintToleration: untolerated taint gpu=true:NoSchedule\n  - NodeUnschedulable: cordoned"
        ),
        "{text}"
    );
}

#[test]
fn what_if_sits_beside_the_current_policy() {
    let current = outcome(
        "default",
        vec![
            scored(1, "a", &[("NodeResourcesFit", 80, 1)]),
            scored(2, "b", &[("NodeResourcesFit", 60, 1)]),
        ],
    );
    let mut e = explanation(current);
    e.what_if = Some(outcome(
        "bin-packing",
        vec![scored(1, "b", &[("NodeResourcesFit", 90, 1)])],
    ));
    let text = text(&e, Style::default());
    let expected = "
What if: policy bin-packing (in-process engine) beside default:
            default  bin-packing
  verdict   a (80)   b (90)
  feasible  2 of 3   1 of 3
  #1        a  80    b  90
  #2        b  60
";
    assert!(text.contains(expected), "{text}");
}

fn group_report() -> GroupReport {
    GroupReport {
        namespace: "ml".into(),
        name: "train".into(),
        found: true,
        min_count: Some(8),
        topology_key: Some("example.com/rack".into()),
        pending: 8,
        bound: 0,
        held: None,
        decided_by: "in-process engine".into(),
        schedulable: false,
        domain: None,
        reason: "Unschedulable".into(),
        message: "pod group is unschedulable, 0/7 placements are available, …".into(),
        pod_node: None,
        pod_message: "pod group is unschedulable, 0/7 placements are available, …".into(),
        domains: (0..7)
            .map(|i| DomainFit {
                domain: Some(format!("r{i}")),
                nodes: 4,
                fit: 7 - i,
                pending: 8,
                bound: usize::from(i == 0),
                feasible: false,
                chosen: false,
            })
            .collect(),
        domains_note: None,
        levels: vec![],
    }
}

#[test]
fn a_pod_group_of_a_hierarchy_reads_level_by_level() {
    let mut e = explanation(outcome(
        "default",
        vec![scored(1, "n1", &[("NodeResourcesFit", 50, 1)])],
    ));
    let mut g = group_report();
    g.domains.truncate(1);
    let fit = |d: &str, fit: usize, chosen: bool| DomainFit {
        domain: Some(d.into()),
        nodes: 4,
        fit,
        pending: 16,
        bound: 0,
        feasible: fit > 0,
        chosen,
    };
    g.levels = vec![super::super::report::LevelReport {
        composite: "job".into(),
        topology_key: Some("example.com/block".into()),
        chosen: None,
        domains: vec![fit("b1", 12, false), fit("b0", 9, false)],
    }];
    e.pod_group = Some(g);
    let text = text(&e, Style::default());
    assert!(
        text.contains(
            "\nCompositePodGroup job, topology key example.com/block: no block taken; per block, its 16 pending pods tried in order:\n\
             \x20 block b1: 12 of 16 fit\n\
             \x20 block b0: 9 of 16 fit\n\
             \n\
             Per rack, the group's 8 pending pods tried in order"
        ),
        "{text}"
    );
}

#[test]
fn a_pod_group_no_rack_holds_reads_rack_by_rack_and_the_rest_in_one_line() {
    let mut e = explanation(outcome(
        "default",
        vec![scored(1, "n1", &[("NodeResourcesFit", 50, 1)])],
    ));
    e.pod_group = Some(group_report());
    let text = text(&e, Style::default());
    assert!(
        text.contains(
            "PodGroup ml/train: minCount 8, topology key example.com/rack; 8 pods pending (this one included), 0 bound\n\
             UNSCHEDULABLE: no rack holds minCount 8 of the group.\n\
             \x20 PodGroupInitiallyScheduled: False (Unschedulable): pod group is unschedulable, 0/7 placements are available, …\n\
             \x20 kube-scheduler, this pod: pod group is unschedulable, 0/7 placements are available, …\n\
             \n\
             Per rack, the group's 8 pending pods tried in order, each taking its room:\n\
             \x20 rack r0: 7 of 8 fit, 1 bound there; minCount 8\n\
             \x20 rack r1: 6 of 8 fit; minCount 8\n\
             \x20 rack r2: 5 of 8 fit; minCount 8\n\
             \x20 rack r3: 4 of 8 fit; minCount 8\n\
             \x20 rack r4: 3 of 8 fit; minCount 8\n\
             \x20 … 2 more racks: 0 holding minCount, at most 2 of 8 fit\n\
             \n\
             This pod alone (Rank, as if it named no PodGroup):\n\
             SCHEDULABLE: best node n1"
        ),
        "{text}"
    );
}

#[test]
fn a_pod_group_that_fits_names_its_rack_and_a_held_one_why() {
    let mut g = group_report();
    g.schedulable = true;
    g.domain = Some("r3".into());
    g.reason = "Scheduled".into();
    g.message = String::new();
    g.pod_node = Some("n9".into());
    g.pod_message = "Successfully assigned ml/w-0 to n9".into();
    g.domains.truncate(2);
    g.domains[0].feasible = true;
    g.domains[0].chosen = true;
    g.domains[0].domain = Some("r3".into());
    let mut e = explanation(outcome("default", vec![]));
    e.pod_group = Some(g.clone());
    let out = text(&e, Style::default());
    assert!(
        out.contains(
            "SCHEDULABLE: the group takes rack r3 (1 of 2 racks hold it).\n\
             \x20 PodGroupInitiallyScheduled: True (Scheduled)\n\
             \x20 kube-scheduler, this pod: Successfully assigned ml/w-0 to n9\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("  rack r3: 7 of 8 fit, 1 bound there; minCount 8 (the group takes it)\n"),
        "{out}"
    );
    // Coloured: the verdict green, the rack cyan.
    let coloured = text(&e, Style { color: true });
    assert!(
        coloured.contains("\x1b[1;32mSCHEDULABLE:\x1b[0m the group takes rack \x1b[36mr3\x1b[0m"),
        "{coloured}"
    );
    // Missing: held, and no cycle.
    let missing = GroupReport {
        found: false,
        min_count: None,
        topology_key: None,
        pending: 1,
        held: Some("PodGroup ml/train does not exist: …".into()),
        decided_by: String::new(),
        reason: String::new(),
        domains: vec![],
        ..g
    };
    e.pod_group = Some(missing);
    let out = text(&e, Style::default());
    assert!(
        out.contains(
            "PodGroup ml/train (not found); 1 pod pending (this one included), 0 bound\n\
             HELD: PodGroup ml/train does not exist: …\n\
             \n\
             This pod alone"
        ),
        "{out}"
    );
}
