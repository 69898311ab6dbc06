//! DeviceTaintRules through the cycle: the rules' taints keep devices from the requests that do
//! not tolerate them, as the slices' own taints do (kube's tracker applies them, the allocator
//! reads them: `tracker_test.go` and `dynamicresources_test.go`'s taint cases), and snapshots
//! derived by deltas that add or remove a rule decide on the rules they hold.

use std::sync::Arc;

use super::tests::{claim, class, cluster, diagnoses, failure, gpus, schedule, slice, spec, with_claims, DRIVER};
use crate::engine::devices::{
    DeviceDelta, DeviceParts, DeviceTaintEffect, DeviceTaintRule, DeviceTaintSelector, RequestKind, ResourceClaim,
    ResourceSlice,
};
use crate::engine::framework::{Deadline, Decision, Evaluator};
use crate::engine::model::{TaintEffect, Toleration, TolerationOperator};
use crate::engine::plugins::dynamicresources::FailureKind;
use crate::engine::plugins::testing::{node, taint};
use crate::engine::policy::Policy;
use crate::engine::profile::Profile;
use crate::engine::snapshot::{Delta, Snapshot};

const UNSCHEDULABLE: &str = "0/3 nodes are available: 3 cannot allocate all claims. \
     preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.";

fn rule(name: &str, driver: Option<&str>, pool: Option<&str>, device: Option<&str>, key: &str) -> DeviceTaintRule {
    DeviceTaintRule {
        name: name.into(),
        selector: Some(DeviceTaintSelector {
            driver: driver.map(Arc::from),
            pool: pool.map(Arc::from),
            device: device.map(Arc::from),
        }),
        key: key.into(),
        value: "true".into(),
        effect: Some(DeviceTaintEffect::NoSchedule),
        time_added: 0,
    }
}

fn with_effect(r: DeviceTaintRule, effect: Option<DeviceTaintEffect>) -> DeviceTaintRule {
    DeviceTaintRule { effect, ..r }
}

fn tolerating(name: &str, count: i64, keys: &[&str]) -> ResourceClaim {
    let mut s = spec(count, None);
    s.tolerations = keys
        .iter()
        .map(|k| Toleration {
            key: (*k).into(),
            operator: TolerationOperator::Exists,
            value: String::new(),
            effect: None,
        })
        .collect();
    claim(name, RequestKind::Exactly(s))
}

fn with_rules(slices: Vec<ResourceSlice>, claims: Vec<ResourceClaim>, rules: Vec<DeviceTaintRule>) -> Snapshot {
    Snapshot::build(
        ["n1", "n2", "n3"].iter().map(|n| node(n, 8000, 32 << 30)).collect(),
        vec![],
    )
    .and_then(|s| {
        s.with_devices(DeviceParts {
            classes: vec![class()],
            claims,
            slices,
            taint_rules: rules,
        })
    })
    .expect("a valid snapshot")
}

fn ok(node: &str, devices: &[&str]) -> Result<(String, Vec<String>), String> {
    Ok((node.into(), devices.iter().map(|d| d.to_string()).collect()))
}

/// A rule selecting a device by driver and name keeps it off the pods that do not tolerate its
/// taint on every node, and its toleration lets them take it.
#[test]
fn a_rule_taints_the_devices_it_selects_and_tolerations_let_them_through() {
    let snap = with_rules(
        vec![slice("n1", "a100", 2), slice("n2", "a100", 1)],
        vec![
            gpus("plain-1", 1),
            gpus("plain-2", 1),
            tolerating("tolerant", 1, &["example.com/maintenance"]),
        ],
        vec![rule(
            "gpu-0",
            Some(DRIVER),
            None,
            Some("gpu-0"),
            "example.com/maintenance",
        )],
    );
    let out = schedule(
        &snap,
        &[
            with_claims("p1", &["plain-1"]),
            with_claims("p2", &["plain-2"]),
            with_claims("p3", &["tolerant"]),
        ],
    );
    assert_eq!(out[0], ok("n1", &["plain-1=n1/gpu-1"]), "gpu-0 of n1 and n2 tainted");
    assert_eq!(out[1], Err(UNSCHEDULABLE.into()), "no untainted device left");
    assert_eq!(out[2], ok("n1", &["tolerant=n1/gpu-0"]), "the taint tolerated");
}

/// Selection by pool, by driver and pool, and the slice's own taints with the rule's: a request
/// must tolerate both.
#[test]
fn a_device_needs_its_slices_taints_and_the_rules_tolerated() {
    let mut n1 = slice("n1", "a100", 1);
    n1.devices[0].taints = vec![taint("example.com/own", "true", TaintEffect::NoSchedule)];
    let rules = vec![
        rule("pool-n1", None, Some("n1"), None, "example.com/drain"),
        rule(
            "n2-other-driver",
            Some("nic.example.com"),
            Some("n2"),
            None,
            "example.com/drain",
        ),
    ];
    let claims = vec![
        tolerating("own", 1, &["example.com/own"]),
        tolerating("drain", 1, &["example.com/drain"]),
        tolerating("both", 1, &["example.com/own", "example.com/drain"]),
    ];
    let snap = with_rules(vec![n1, slice("n2", "a100", 1)], claims, rules);
    let out = schedule(
        &snap,
        &[
            with_claims("p1", &["own"]),
            with_claims("p2", &["drain"]),
            with_claims("p3", &["both"]),
        ],
    );
    // n2's device: the rule for n2 names another driver.
    assert_eq!(
        out[0],
        ok("n2", &["own=n2/gpu-0"]),
        "n1's device also has the rule's taint"
    );
    assert_eq!(
        out[1],
        Err(UNSCHEDULABLE.into()),
        "n1's device also has its slice's taint"
    );
    assert_eq!(out[2], ok("n1", &["both=n1/gpu-0"]));
}

/// The effect None, a rule without a selector, and one selecting another pool taint nothing.
#[test]
fn rules_that_select_nothing_or_have_the_effect_none_keep_nothing_off() {
    let none_effect = with_effect(rule("info", None, None, None, "example.com/info"), None);
    let no_selector = DeviceTaintRule {
        selector: None,
        ..rule("nothing", None, None, None, "example.com/nothing")
    };
    let other_pool = rule("n9", None, Some("n9"), None, "example.com/drain");
    let snap = with_rules(
        vec![slice("n1", "a100", 1)],
        vec![gpus("plain", 1)],
        vec![none_effect, no_selector, other_pool],
    );
    assert_eq!(
        schedule(&snap, &[with_claims("p", &["plain"])])[0],
        ok("n1", &["plain=n1/gpu-0"])
    );
}

/// `NoExecute` keeps devices off as `NoSchedule` does; the allocation records the request's
/// tolerations.
#[test]
fn a_no_execute_rule_is_tolerated_by_its_effect_and_recorded() {
    let r = with_effect(
        rule("evict", None, Some("n1"), None, "example.com/evict"),
        Some(DeviceTaintEffect::NoExecute),
    );
    let mut tolerant = tolerating("tolerant", 1, &["example.com/evict"]);
    if let RequestKind::Exactly(s) = &mut tolerant.requests[0].kind {
        s.tolerations[0].effect = Some(TaintEffect::NoSchedule);
    }
    let snap = with_rules(
        vec![slice("n1", "a100", 1)],
        vec![tolerant, tolerating("right-effect", 1, &["example.com/evict"])],
        vec![r],
    );
    assert_eq!(
        schedule(&snap, &[with_claims("p", &["tolerant"])])[0],
        Err(UNSCHEDULABLE.into()),
        "a NoSchedule toleration does not tolerate NoExecute"
    );
    let profile = Profile::new(Policy::kube_default());
    let decided = Evaluator::new(&profile, &snap)
        .schedule(&[with_claims("p", &["right-effect"])], 0, Deadline::none())
        .expect("decided");
    let Some(Decision::Node { node, devices, .. }) = decided.into_iter().next() else {
        panic!("placed");
    };
    assert_eq!(node, "n1");
    assert_eq!(devices[0].allocation.devices[0].tolerations.len(), 1);
    assert_eq!(devices[0].allocation.devices[0].tolerations[0].key, "example.com/evict");
}

/// Snapshots derived by deltas decide on the rules they hold: a rule added keeps the device off,
/// the rule removed gives it back, though allocation verdicts are shared across such deltas.
#[test]
fn deltas_add_and_remove_rules() {
    let base = cluster(vec![slice("n1", "a100", 1)], vec![gpus("plain", 1)]);
    let pods = [with_claims("p", &["plain"])];
    assert_eq!(schedule(&base, &pods)[0], ok("n1", &["plain=n1/gpu-0"]));
    let tainted = base
        .apply(Delta {
            devices: DeviceDelta {
                upsert_taint_rules: vec![rule("n1", None, Some("n1"), None, "example.com/drain")],
                ..Default::default()
            },
            ..Default::default()
        })
        .expect("a delta");
    assert_eq!(tainted.devices().taint_rules.len(), 1);
    assert_eq!(schedule(&tainted, &pods)[0], Err(UNSCHEDULABLE.into()));
    let untainted = tainted
        .apply(Delta {
            devices: DeviceDelta {
                remove_taint_rules: vec!["n1".into()],
                ..Default::default()
            },
            ..Default::default()
        })
        .expect("a delta");
    assert_eq!(schedule(&untainted, &pods)[0], ok("n1", &["plain=n1/gpu-0"]));
    // A rule twice in one list is refused, as any DRA object twice.
    let twice = base.apply(Delta {
        devices: DeviceDelta {
            upsert_taint_rules: vec![rule("a", None, None, None, "k"), rule("a", None, None, None, "k")],
            ..Default::default()
        },
        ..Default::default()
    });
    assert!(twice.is_err());
}

/// Rank's diagnosis names the rule's taint as a taint the request does not tolerate.
#[test]
fn the_diagnosis_names_a_rules_taint() {
    let snap = with_rules(
        vec![slice("n1", "a100", 2)],
        vec![gpus("two", 2)],
        vec![rule("gpu-1", None, None, Some("gpu-1"), "maintenance")],
    );
    assert_eq!(
        diagnoses(&snap, &with_claims("p", &["two"]))[0],
        (
            "n1".into(),
            vec![failure(
                "two",
                "gpu",
                FailureKind::DeviceTainted,
                "2 requested; 2 devices match, 1 with taints the request does not tolerate (maintenance=true:NoSchedule)"
            )]
        )
    );
}
