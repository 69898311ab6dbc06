//! DynamicResources through the cycle, in kube-scheduler's style: a cluster of nodes with
//! devices, pods with claims, and where each goes or its message (kube's
//! `dynamicresources_test.go` cases the engine's batch adds to: devices taken by earlier pods of
//! the batch, a claim shared by two of its pods).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::engine::devices::{
    AllocationMode, AttributeValue, ConstraintKind, Device, DeviceClass, DeviceConstraint, DeviceParts, DeviceRequest,
    NodeSelection, PodClaimRef, RequestKind, RequestSpec, ResourceClaim, ResourceSlice,
};
use crate::engine::framework::{Deadline, Decision, Evaluator};
use crate::engine::model::{NodeSpec, PodSpec};
use crate::engine::plugins::dynamicresources::{FailureKind, PodDevices};
use crate::engine::plugins::testing::{node, pod};
use crate::engine::policy::Policy;
use crate::engine::profile::Profile;
use crate::engine::snapshot::Snapshot;

pub(super) const DRIVER: &str = "gpu.example.com";

fn gpu(name: &str, model: &str) -> Device {
    Device {
        name: Arc::from(name),
        attributes: BTreeMap::from([(format!("{DRIVER}/model"), AttributeValue::String(model.into()))]),
        ..Default::default()
    }
}

/// A slice of `node`'s GPUs of one model.
pub(super) fn slice(node: &str, model: &str, count: usize) -> ResourceSlice {
    ResourceSlice {
        name: format!("{node}-gpus"),
        driver: Arc::from(DRIVER),
        pool: Arc::from(node),
        pool_generation: 1,
        pool_slice_count: 1,
        node_selection: NodeSelection::NodeName(node.into()),
        devices: (0..count).map(|i| gpu(&format!("gpu-{i}"), model)).collect(),
        shared_counters: vec![],
    }
}

pub(super) fn class() -> DeviceClass {
    DeviceClass {
        name: "gpu".into(),
        selectors: vec![Arc::from(format!("device.driver == \"{DRIVER}\""))],
        extended_resource_name: None,
        created: 0,
    }
}

pub(super) fn spec(count: i64, selector: Option<&str>) -> RequestSpec {
    RequestSpec {
        class: "gpu".into(),
        selectors: selector.map(Arc::from).into_iter().collect(),
        mode: AllocationMode::ExactCount(count),
        admin_access: false,
        tolerations: vec![],
        capacity_requests: Default::default(),
    }
}

pub(super) fn claim(name: &str, kind: RequestKind) -> ResourceClaim {
    ResourceClaim {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        requests: vec![DeviceRequest {
            name: "gpu".into(),
            kind,
        }],
        ..Default::default()
    }
}

pub(super) fn gpus(name: &str, count: i64) -> ResourceClaim {
    claim(name, RequestKind::Exactly(spec(count, None)))
}

pub(super) fn with_claims(uid: &str, claims: &[&str]) -> PodSpec {
    let mut p = pod(uid, 100, 100);
    p.namespace = "default".into();
    p.name = uid.into();
    p.resource_claims = claims
        .iter()
        .map(|c| PodClaimRef {
            name: (*c).into(),
            claim_name: Some((*c).into()),
            from_template: false,
        })
        .collect();
    p
}

fn nodes() -> Vec<NodeSpec> {
    ["n1", "n2", "n3"].iter().map(|n| node(n, 8000, 32 << 30)).collect()
}

pub(super) fn cluster(slices: Vec<ResourceSlice>, claims: Vec<ResourceClaim>) -> Snapshot {
    Snapshot::build(nodes(), vec![])
        .and_then(|s| {
            s.with_devices(DeviceParts {
                classes: vec![class()],
                claims,
                slices,
                ..Default::default()
            })
        })
        .unwrap()
}

/// Each pod's node (with its claims' devices, `claim=node/device,…`) or message.
pub(super) fn schedule(snap: &Snapshot, pods: &[PodSpec]) -> Vec<Result<(String, Vec<String>), String>> {
    schedule_with(Policy::kube_default(), snap, pods)
}

/// [`schedule`] under `policy`.
fn schedule_with(policy: Policy, snap: &Snapshot, pods: &[PodSpec]) -> Vec<Result<(String, Vec<String>), String>> {
    let profile = Profile::new(policy);
    Evaluator::new(&profile, snap)
        .schedule(pods, 0, Deadline::none())
        .unwrap()
        .into_iter()
        .map(|d| match d {
            Decision::Node { node, devices, .. } => Ok((
                node,
                devices
                    .iter()
                    .map(|c| {
                        let ds: Vec<String> = c
                            .allocation
                            .devices
                            .iter()
                            .map(|d| format!("{}/{}", d.device.pool, d.device.device))
                            .collect();
                        format!("{}={}", c.name, ds.join(","))
                    })
                    .collect(),
            )),
            Decision::Unschedulable(diag) => Err(diag.error.clone().unwrap_or_else(|| diag.message())),
        })
        .collect()
}

#[test]
fn pods_go_only_where_their_devices_are_and_run_out_as_devices_do() {
    // Two GPUs on n2, none elsewhere: two pods of one GPU each fit (on n2), the third does not.
    let snap = cluster(
        vec![slice("n2", "a100", 2)],
        vec![gpus("c1", 1), gpus("c2", 1), gpus("c3", 1)],
    );
    let pods = [
        with_claims("p1", &["c1"]),
        with_claims("p2", &["c2"]),
        with_claims("p3", &["c3"]),
    ];
    let out = schedule(&snap, &pods);
    assert_eq!(out[0], Ok(("n2".into(), vec!["c1=n2/gpu-0".into()])));
    assert_eq!(out[1], Ok(("n2".into(), vec!["c2=n2/gpu-1".into()])));
    assert_eq!(
        out[2],
        Err("0/3 nodes are available: 3 cannot allocate all claims. \
             preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
            .into())
    );
}

#[test]
fn devices_allocated_to_claims_in_the_snapshot_are_not_given_again() {
    let mut taken = gpus("taken", 1);
    let free = slice("n1", "a100", 2);
    taken.allocation = Some(crate::engine::devices::Allocation {
        devices: vec![crate::engine::devices::AllocatedDevice {
            request: "gpu".into(),
            device: crate::engine::devices::DeviceId {
                driver: Arc::from(DRIVER),
                pool: Arc::from("n1"),
                device: Arc::from("gpu-0"),
            },
            admin_access: None,
            tolerations: vec![],
            consumed_capacity: Default::default(),
            share_id: None,
            ..Default::default()
        }],
        node_selector: None,
        ..Default::default()
    });
    let snap = cluster(vec![free], vec![taken, gpus("c1", 1), gpus("c2", 1)]);
    let out = schedule(&snap, &[with_claims("p1", &["c1"]), with_claims("p2", &["c2"])]);
    assert_eq!(out[0], Ok(("n1".into(), vec!["c1=n1/gpu-1".into()])));
    assert!(out[1]
        .as_ref()
        .is_err_and(|m| m.starts_with("0/3 nodes are available: 3 cannot allocate all claims.")));
}

#[test]
fn a_claim_shared_by_two_pods_puts_them_on_one_node_and_is_allocated_once() {
    let snap = cluster(
        vec![slice("n1", "a100", 1), slice("n3", "a100", 1)],
        vec![gpus("shared", 1)],
    );
    let out = schedule(&snap, &[with_claims("p1", &["shared"]), with_claims("p2", &["shared"])]);
    let Ok((first, allocated)) = &out[0] else {
        panic!("{out:?}")
    };
    assert_eq!(allocated.len(), 1);
    // The second pod finds the claim allocated: it goes where the devices are, allocating nothing.
    assert_eq!(out[1], Ok((first.clone(), vec![])));
}

#[test]
fn a_prioritized_list_falls_back_to_its_second_choice_and_prefers_the_first() {
    let first_available = |name: &str| {
        claim(
            name,
            RequestKind::FirstAvailable(vec![
                (
                    "h100".into(),
                    spec(1, Some("device.attributes[\"gpu.example.com\"].model == \"h100\"")),
                ),
                (
                    "a100".into(),
                    spec(1, Some("device.attributes[\"gpu.example.com\"].model == \"a100\"")),
                ),
            ]),
        )
    };
    // One H100 on n3, A100s on n1: the first pod takes the H100 (scored higher: 8 against 7),
    // the second falls back to an A100.
    let snap = cluster(
        vec![slice("n1", "a100", 2), slice("n3", "h100", 1)],
        vec![first_available("c1"), first_available("c2")],
    );
    let out = schedule(&snap, &[with_claims("p1", &["c1"]), with_claims("p2", &["c2"])]);
    assert_eq!(out[0], Ok(("n3".into(), vec!["c1=n3/gpu-0".into()])));
    assert_eq!(out[1], Ok(("n1".into(), vec!["c2=n1/gpu-0".into()])));
}

#[test]
fn a_missing_claim_class_or_template_claim_rejects_every_node_with_kubes_message() {
    let snap = cluster(
        vec![slice("n1", "a100", 1)],
        vec![claim(
            "classless",
            RequestKind::Exactly(RequestSpec {
                class: "tpu".into(),
                ..spec(1, None)
            }),
        )],
    );
    let mut template = with_claims("p3", &[]);
    template.resource_claims = vec![PodClaimRef {
        name: "gpu".into(),
        claim_name: None,
        from_template: true,
    }];
    let out = schedule(
        &snap,
        &[
            with_claims("p1", &["missing"]),
            with_claims("p2", &["classless"]),
            template,
        ],
    );
    let fit = |m: &str| {
        format!("0/3 nodes are available: {m}. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
    };
    assert_eq!(out[0], Err(fit("could not find ResourceClaim \"default/missing\"")));
    assert_eq!(out[1], Err(fit("request gpu: device class tpu does not exist")));
    assert_eq!(out[2], Err(fit("pod \"default/p3\": ResourceClaim not created yet")));
}

#[test]
fn a_selector_that_fails_ends_the_pods_cycle_with_the_filter_error() {
    let broken = claim(
        "broken",
        RequestKind::Exactly(spec(1, Some("device.attributes[\"gpu.example.com\"].model > 1"))),
    );
    let snap = cluster(vec![slice("n1", "a100", 1)], vec![broken]);
    let out = schedule(&snap, &[with_claims("p1", &["broken"])]);
    let Err(message) = &out[0] else { panic!("{out:?}") };
    assert!(
        message.starts_with("running \"DynamicResources\" filter plugin: claim default/broken: selector #0 on device gpu.example.com/n1/gpu-0: CEL runtime error:"),
        "{message}"
    );
}

/// A policy whose DynamicResources `filterTimeout` is `timeout`.
fn with_filter_timeout(timeout: std::time::Duration) -> Policy {
    let mut policy = Policy::kube_default();
    policy.dynamic_resources.filter_timeout = timeout;
    policy
}

/// kube's DRASchedulerFilterTimeout (`dynamicresources.go` Filter): a claim whose search on n1
/// explodes (twenty GPUs on distinct NUMA nodes of 19) ends the pod's cycle with kube's Filter
/// error once `filterTimeout` passes; a claim that fits is placed under kube's default; with
/// `0s` no timeout applies (a small search that fails says so, as without a timeout).
#[test]
fn a_filter_timeout_ends_the_pods_cycle_with_kubes_error() {
    let numa_slice = || {
        let mut s = slice("n1", "a100", 40);
        for (i, d) in s.devices.iter_mut().enumerate() {
            d.attributes
                .insert(format!("{DRIVER}/numa"), AttributeValue::Int(i as i64 % 19));
        }
        s
    };
    let distinct = |name: &str, count: i64| {
        let mut c = gpus(name, count);
        c.constraints.push(DeviceConstraint {
            requests: vec![],
            kind: ConstraintKind::DistinctAttribute(format!("{DRIVER}/numa")),
        });
        c
    };
    let snap = cluster(
        vec![numa_slice()],
        vec![
            distinct("exploding", 20),
            distinct("fitting", 19),
            claim(
                "h100",
                RequestKind::Exactly(spec(
                    1,
                    Some("device.attributes[\"gpu.example.com\"].model == \"h100\""),
                )),
            ),
        ],
    );
    let short = with_filter_timeout(std::time::Duration::from_millis(20));
    let out = schedule_with(short, &snap, &[with_claims("p1", &["exploding"])]);
    assert_eq!(
        out,
        vec![Err(
            "running \"DynamicResources\" filter plugin: node n1: timed out trying to allocate devices".to_string()
        )]
    );
    // kube's default 10s: a search that fits is unaffected.
    let out = schedule(&snap, &[with_claims("p2", &["fitting"])]);
    assert!(matches!(&out[0], Ok((node, _)) if node == "n1"), "{out:?}");
    // A search no device matches: past a 1ns timeout before its first step; with 0s, no
    // timeout applies and Filter says the claims cannot be allocated.
    let tiny = schedule_with(
        with_filter_timeout(std::time::Duration::from_nanos(1)),
        &snap,
        &[with_claims("p3", &["h100"])],
    );
    // (Every node times out here: the first to is named, as in kube.)
    let Err(message) = &tiny[0] else { panic!("{tiny:?}") };
    assert!(
        message.starts_with("running \"DynamicResources\" filter plugin: node n")
            && message.ends_with(": timed out trying to allocate devices"),
        "{message}"
    );
    let none = schedule_with(
        with_filter_timeout(std::time::Duration::ZERO),
        &snap,
        &[with_claims("p3", &["h100"])],
    );
    let Err(message) = &none[0] else { panic!("{none:?}") };
    assert!(!message.contains("timed out"), "{message}");
    assert!(message.contains("cannot allocate all claims"), "{message}");
    // kube's `dynamicresources_test.go` cases "timeout" (1ns: Filter's Error, even for a claim
    // that fits, the allocator looking at its deadline before the first device) and
    // "timeout_zero" (0: the claim is allocated).
    let tiny = schedule_with(
        with_filter_timeout(std::time::Duration::from_nanos(1)),
        &snap,
        &[with_claims("p4", &["fitting"])],
    );
    let Err(message) = &tiny[0] else { panic!("{tiny:?}") };
    assert!(message.ends_with(": timed out trying to allocate devices"), "{message}");
    let zero = schedule_with(
        with_filter_timeout(std::time::Duration::ZERO),
        &snap,
        &[with_claims("p5", &["fitting"])],
    );
    assert!(matches!(&zero[0], Ok((node, _)) if node == "n1"), "{zero:?}");
}

#[test]
fn pods_without_claims_are_placed_as_before() {
    let snap = cluster(vec![slice("n1", "a100", 1)], vec![]);
    let out = schedule(&snap, &[with_claims("plain", &[])]);
    assert!(out[0].is_ok(), "{out:?}");
}

/// The verdict shared by nodes with one device signature is the one each node gets alone: on
/// nodes of three shapes (two models, a taint), some devices in use in the snapshot, pods asking
/// for 1 to 4 GPUs of a model, every node's shared verdict equals its own allocation's.
#[test]
fn verdicts_by_device_signature_equal_allocations_node_by_node() {
    let models = ["a100", "h100"];
    let mut slices = Vec::new();
    let mut taken = Vec::new();
    let names: Vec<String> = (0..12).map(|i| format!("n{i}")).collect();
    for (i, n) in names.iter().enumerate() {
        let mut s = slice(n, models[i % 2], 4);
        if i % 3 == 0 {
            s.devices[3].taints = vec![crate::engine::plugins::testing::taint(
                "maintenance",
                "",
                crate::engine::model::TaintEffect::NoSchedule,
            )];
        }
        slices.push(s);
        if i % 4 == 1 {
            // One device of the node in use.
            let mut c = gpus(&format!("taken-{i}"), 1);
            c.allocation = Some(crate::engine::devices::Allocation {
                devices: vec![crate::engine::devices::AllocatedDevice {
                    request: "gpu".into(),
                    device: crate::engine::devices::DeviceId {
                        driver: Arc::from(DRIVER),
                        pool: Arc::from(n.as_str()),
                        device: Arc::from("gpu-1"),
                    },
                    admin_access: None,
                    tolerations: vec![],
                    consumed_capacity: Default::default(),
                    share_id: None,
                    ..Default::default()
                }],
                node_selector: None,
                ..Default::default()
            });
            taken.push(c);
        }
    }
    let mut claims = taken;
    for count in 1..=4 {
        for m in models {
            claims.push(claim(
                &format!("{m}-{count}"),
                RequestKind::Exactly(spec(
                    count,
                    Some(&format!("device.attributes[\"{DRIVER}\"].model == \"{m}\"")),
                )),
            ));
        }
    }
    let snap = Snapshot::build(names.iter().map(|n| node(n, 8000, 32 << 30)).collect(), vec![])
        .and_then(|s| {
            s.with_devices(DeviceParts {
                classes: vec![class()],
                claims,
                slices,
                ..Default::default()
            })
        })
        .unwrap();
    let index = snap.device_index();
    let mut batch = crate::engine::plugins::dynamicresources::BatchDevices::default();
    let mut compared = 0;
    // Then with two devices of n0 and one of n2 taken by earlier pods of the batch.
    for round in 0..2 {
        if round == 1 {
            for (node, count) in [(0, 2), (2, 1)] {
                let p = with_claims("earlier", &[&format!("a100-{count}")]);
                let earlier = PodDevices::pre_filter(
                    snap.devices(),
                    index,
                    crate::engine::plugins::dynamicresources::selectors(),
                    &p,
                    &crate::engine::plugins::dynamicresources::BatchDevices::default(),
                )
                .unwrap()
                .unwrap();
                let allocated = earlier.reserve(&snap.nodes()[node].spec);
                assert!(!allocated.is_empty());
                batch.record(&index.slices, node, &allocated);
            }
        }
        for count in 1..=4 {
            for m in models {
                let p = with_claims("p", &[&format!("{m}-{count}")]);
                let devices = PodDevices::pre_filter(
                    snap.devices(),
                    index,
                    crate::engine::plugins::dynamicresources::selectors(),
                    &p,
                    &batch,
                )
                .unwrap()
                .unwrap();
                for (i, n) in snap.nodes().iter().enumerate() {
                    let alone = devices.allocate(&n.spec).map(|_| ());
                    let shared = devices.verdict(i, &n.spec).map(|_| ());
                    assert_eq!(shared, alone, "round {round}: {m} x{count} on {}", n.spec.name);
                    compared += 1;
                }
            }
        }
    }
    assert_eq!(compared, 2 * 8 * 12);
}

/// A GPU of `node`'s pool on NUMA node `numa`.
fn numa_gpu(name: &str, numa: i64) -> Device {
    let mut d = gpu(name, "a100");
    d.attributes.insert(format!("{DRIVER}/numa"), AttributeValue::Int(numa));
    d
}

/// One failure as `(claim, request, kind, message)`.
pub(super) type Failure = (String, String, FailureKind, String);

/// What `pod` (its claims in `snap`) is told about each node.
pub(super) fn diagnoses(snap: &Snapshot, pod: &PodSpec) -> Vec<(String, Vec<Failure>)> {
    let devices = PodDevices::pre_filter(
        snap.devices(),
        snap.device_index(),
        crate::engine::plugins::dynamicresources::selectors(),
        pod,
        &crate::engine::plugins::dynamicresources::BatchDevices::default(),
    )
    .unwrap()
    .unwrap();
    snap.nodes()
        .iter()
        .map(|n| {
            let failures = devices
                .diagnose(&n.spec)
                .into_iter()
                .map(|f| (f.claim, f.request, f.kind, f.message))
                .collect();
            (n.spec.name.clone(), failures)
        })
        .collect()
}

pub(super) fn failure(claim: &str, request: &str, kind: FailureKind, message: &str) -> Failure {
    (claim.into(), request.into(), kind, message.into())
}

pub(super) fn allocated(name: &str, node: &str, devices: &[&str]) -> ResourceClaim {
    let mut c = gpus(name, devices.len() as i64);
    c.allocation = Some(crate::engine::devices::Allocation {
        devices: devices
            .iter()
            .map(|d| crate::engine::devices::AllocatedDevice {
                request: "gpu".into(),
                device: crate::engine::devices::DeviceId {
                    driver: Arc::from(DRIVER),
                    pool: Arc::from(node),
                    device: Arc::from(*d),
                },
                admin_access: None,
                tolerations: vec![],
                consumed_capacity: Default::default(),
                share_id: None,
                ..Default::default()
            })
            .collect(),
        node_selector: None,
        ..Default::default()
    });
    c
}

/// No device of the node matches: none at all, none of the class, none of the request's
/// selectors, or fewer than requested.
#[test]
fn diagnosis_no_device_matches_the_class_or_the_selectors() {
    let mut other = slice("n3", "a100", 1);
    other.name = "n3-nics".into();
    other.driver = Arc::from("nic.example.com");
    let h100 = claim(
        "h100",
        RequestKind::Exactly(spec(
            1,
            Some("device.attributes[\"gpu.example.com\"].model == \"h100\""),
        )),
    );
    let snap = cluster(vec![slice("n1", "a100", 2), other], vec![h100, gpus("three", 3)]);
    let kind = FailureKind::NoMatchingDevice;
    assert_eq!(
        diagnoses(&snap, &with_claims("p", &["h100"])),
        vec![
            (
                "n1".into(),
                vec![failure(
                    "h100",
                    "gpu",
                    kind,
                    "2 devices of class gpu, none matches the request's selectors"
                )]
            ),
            (
                "n2".into(),
                vec![failure("h100", "gpu", kind, "the node has no devices")]
            ),
            (
                "n3".into(),
                vec![failure(
                    "h100",
                    "gpu",
                    kind,
                    "none of the node's 1 device is of class gpu"
                )]
            ),
        ]
    );
    assert_eq!(
        diagnoses(&snap, &with_claims("p", &["three"]))[0],
        (
            "n1".into(),
            vec![failure(
                "three",
                "gpu",
                kind,
                "3 requested, only 2 of the node's 2 devices match class gpu and the request's selectors"
            )]
        )
    );
}

/// Enough devices match, but claims hold some of them.
#[test]
fn diagnosis_not_enough_free_devices() {
    let snap = cluster(
        vec![slice("n1", "a100", 2)],
        vec![allocated("taken", "n1", &["gpu-0"]), gpus("two", 2)],
    );
    assert_eq!(
        diagnoses(&snap, &with_claims("p", &["two"]))[0],
        (
            "n1".into(),
            vec![failure(
                "two",
                "gpu",
                FailureKind::DevicesAllocated,
                "2 requested; 2 devices match, 1 allocated to claims"
            )]
        )
    );
}

/// Enough devices match and are free, but one has a taint the request does not tolerate.
#[test]
fn diagnosis_devices_tainted() {
    let mut s = slice("n1", "a100", 2);
    s.devices[1].taints = vec![crate::engine::plugins::testing::taint(
        "maintenance",
        "",
        crate::engine::model::TaintEffect::NoSchedule,
    )];
    let snap = cluster(vec![s], vec![gpus("two", 2)]);
    assert_eq!(
        diagnoses(&snap, &with_claims("p", &["two"]))[0],
        (
            "n1".into(),
            vec![failure(
                "two",
                "gpu",
                FailureKind::DeviceTainted,
                "2 requested; 2 devices match, 1 with taints the request does not tolerate (maintenance:NoSchedule)"
            )]
        )
    );
}

/// Enough free devices match, but not 3 on one NUMA node, nor 3 on distinct ones.
#[test]
fn diagnosis_constraint_unmet() {
    let mut s = slice("n1", "a100", 0);
    s.devices = vec![
        numa_gpu("gpu-0", 0),
        numa_gpu("gpu-1", 0),
        numa_gpu("gpu-2", 1),
        numa_gpu("gpu-3", 1),
    ];
    let constrained = |name: &str, kind: ConstraintKind| {
        let mut c = gpus(name, 3);
        c.constraints = vec![DeviceConstraint { requests: vec![], kind }];
        c
    };
    let attribute = format!("{DRIVER}/numa");
    let snap = cluster(
        vec![s],
        vec![
            constrained("same", ConstraintKind::MatchAttribute(attribute.clone())),
            constrained("distinct", ConstraintKind::DistinctAttribute(attribute)),
        ],
    );
    let kind = FailureKind::ConstraintUnmet;
    assert_eq!(
        diagnoses(&snap, &with_claims("p", &["same"]))[0],
        (
            "n1".into(),
            vec![failure(
                "same",
                "gpu",
                kind,
                "matchAttribute gpu.example.com/numa: 3 devices must share one value; the free devices that match have 0 (2), 1 (2)"
            )]
        )
    );
    assert_eq!(
        diagnoses(&snap, &with_claims("p", &["distinct"]))[0].1,
        vec![failure(
            "distinct",
            "gpu",
            kind,
            "distinctAttribute gpu.example.com/numa: 3 devices must each have a value of their own; the free devices that match have 0 (2), 1 (2)"
        )]
    );
}

/// Where the claim fits there is nothing to say; each request of a prioritized list failing is
/// said under its own name; two claims that fit alone but not together name the later one.
#[test]
fn diagnosis_is_empty_where_the_claims_fit_and_names_subrequests_and_claims_together() {
    let first_available = claim(
        "either",
        RequestKind::FirstAvailable(vec![
            ("two".into(), spec(2, None)),
            (
                "h100".into(),
                spec(1, Some("device.attributes[\"gpu.example.com\"].model == \"h100\"")),
            ),
        ]),
    );
    let snap = cluster(
        vec![slice("n1", "a100", 2), slice("n2", "a100", 1)],
        vec![gpus("one", 1), gpus("other", 1), first_available],
    );
    let fits = diagnoses(&snap, &with_claims("p", &["one"]));
    assert_eq!(fits[0], ("n1".into(), vec![]), "the claim fits on n1");
    assert_eq!(fits[1], ("n2".into(), vec![]), "and on n2");
    assert_eq!(
        diagnoses(&snap, &with_claims("p", &["one", "other"]))[1],
        (
            "n2".into(),
            vec![failure(
                "other",
                "gpu",
                FailureKind::DevicesAllocated,
                "can be met alone, but too few devices are free once the pod's claim one has theirs"
            )]
        )
    );
    assert_eq!(
        diagnoses(&snap, &with_claims("p", &["either"]))[1].1,
        vec![
            failure(
                "either",
                "gpu/two",
                FailureKind::NoMatchingDevice,
                "2 requested, only 1 of the node's 1 device matches class gpu and the request's selectors"
            ),
            failure(
                "either",
                "gpu/h100",
                FailureKind::NoMatchingDevice,
                "1 device of class gpu, none matches the request's selectors"
            ),
        ]
    );
}

/// Rank lists the diagnosis on the nodes DynamicResources refused, and only there.
#[test]
fn rank_lists_why_the_claims_cannot_be_allocated_on_each_refused_node() {
    let snap = cluster(
        vec![slice("n1", "a100", 2), slice("n3", "a100", 1)],
        vec![gpus("two", 2)],
    );
    let profile = Profile::new(Policy::kube_default());
    let ranking = Evaluator::new(&profile, &snap)
        .rank(&with_claims("p", &["two"]), 0, 0, Deadline::none())
        .unwrap();
    assert_eq!(ranking.feasible_count, 1);
    let refused: Vec<(String, Vec<String>)> = ranking
        .rejected
        .iter()
        .map(|r| {
            (
                r.name(&snap).to_string(),
                r.devices
                    .iter()
                    .map(|f| format!("{}/{}: {}", f.claim, f.request, f.message))
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        refused,
        vec![
            ("n2".to_string(), vec!["two/gpu: the node has no devices".to_string()]),
            (
                "n3".to_string(),
                vec![
                    "two/gpu: 2 requested, only 1 of the node's 1 device matches class gpu and the request's selectors"
                        .to_string()
                ]
            ),
        ]
    );
}

// Extended resources backed by DRA (kube's `extendeddynamicresources.go` and
// `shouldDelegateResourceToDRA` in `noderesources/fit.go`).

/// A pod whose one container requests `count` of `resource` (with cpu and memory, so that the
/// resource is the container's request 1 of 3 by name when it sorts between them).
fn with_extended(uid: &str, resource: &str, count: i64) -> PodSpec {
    use crate::engine::model::ExtendedContainer;
    use crate::engine::resources::ResourceName;
    let mut p = with_claims(uid, &[]);
    let name = ResourceName::parse(resource).unwrap();
    p.requests.set(&name, count);
    let mut names: Vec<Arc<str>> = ["cpu", "memory", resource].iter().map(|n| Arc::from(*n)).collect();
    names.sort();
    p.extended_containers = vec![ExtendedContainer {
        index: 0,
        name: "main".into(),
        short_lived: false,
        request_names: names,
        extended: vec![(Arc::from(resource), Some(count))],
    }];
    p
}

/// The class `gpu` naming `example.com/gpu` as its extended resource.
fn extended_cluster(nodes: Vec<NodeSpec>, slices: Vec<ResourceSlice>, claims: Vec<ResourceClaim>) -> Snapshot {
    let mut class = class();
    class.extended_resource_name = Some("example.com/gpu".into());
    Snapshot::build(nodes, vec![])
        .and_then(|s| {
            s.with_devices(DeviceParts {
                classes: vec![class],
                claims,
                slices,
                ..Default::default()
            })
        })
        .unwrap()
}

/// Each pod's node, its claims (`name=pool/device,…`, the special claim as `<extended>` with
/// its requests `request:class×count`) or its message.
fn schedule_extended(snap: &Snapshot, pods: &[PodSpec]) -> Vec<Result<(String, Vec<String>), String>> {
    let profile = Profile::new(Policy::kube_default());
    Evaluator::new(&profile, snap)
        .schedule(pods, 0, Deadline::none())
        .unwrap()
        .into_iter()
        .map(|d| match d {
            Decision::Node { node, devices, .. } => Ok((
                node,
                devices
                    .iter()
                    .map(|c| {
                        let ds: Vec<String> = c
                            .allocation
                            .devices
                            .iter()
                            .map(|d| format!("{}:{}/{}", d.request, d.device.pool, d.device.device))
                            .collect();
                        match &c.extended {
                            None => format!("{}={}", c.name, ds.join(",")),
                            Some(e) => {
                                let rs: Vec<String> = e
                                    .requests
                                    .iter()
                                    .map(|r| format!("{}:{}x{}", r.name, r.class, r.count))
                                    .collect();
                                let ms: Vec<String> = e
                                    .mappings
                                    .iter()
                                    .map(|m| format!("{}/{}->{}", m.container_name, m.resource_name, m.request_name))
                                    .collect();
                                format!("<extended>[{}][{}]={}", rs.join(","), ms.join(","), ds.join(","))
                            }
                        }
                    })
                    .collect(),
            )),
            Decision::Unschedulable(diag) => Err(diag.error.clone().unwrap_or_else(|| diag.message())),
        })
        .collect()
}

#[test]
fn an_extended_resource_a_class_backs_is_allocated_from_the_class_devices() {
    // One GPU on n1, two on n2, none on n3, and no node has example.com/gpu in its
    // allocatable: NodeResourcesFit leaves it to DynamicResources, which allocates a special
    // claim (kube's request name container-0-request-1: the gpu is the container's second
    // request by name); the batch's first pod takes n2's two, the second n1's one, the third
    // finds none.
    let snap = extended_cluster(nodes(), vec![slice("n1", "a100", 1), slice("n2", "a100", 2)], vec![]);
    let pods = [
        with_extended("p1", "example.com/gpu", 2),
        with_extended("p2", "example.com/gpu", 1),
        with_extended("p3", "example.com/gpu", 1),
    ];
    let out = schedule_extended(&snap, &pods);
    assert_eq!(
        out[0],
        Ok((
            "n2".into(),
            vec![
                "<extended>[container-0-request-1:gpux2][main/example.com/gpu->container-0-request-1]=\
                  container-0-request-1:n2/gpu-0,container-0-request-1:n2/gpu-1"
                    .into()
            ]
        ))
    );
    assert_eq!(
        out[1],
        Ok((
            "n1".into(),
            vec![
                "<extended>[container-0-request-1:gpux1][main/example.com/gpu->container-0-request-1]=\
                  container-0-request-1:n1/gpu-0"
                    .into()
            ]
        ))
    );
    assert_eq!(
        out[2],
        Err("0/3 nodes are available: 3 cannot allocate all claims. \
             preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
            .into())
    );
}

#[test]
fn a_node_whose_allocatable_has_the_resource_serves_it_as_a_device_plugin_does() {
    // n1 has example.com/gpu: 1 in its allocatable (a device plugin) and no devices; n2 has
    // devices and no allocatable. NodeResourcesFit decides n1 (kube delegates only where the
    // allocatable has none): the first pod fits either node, the second, asking 2, only n2.
    use crate::engine::resources::ResourceName;
    let mut ns = nodes();
    ns[0]
        .allocatable
        .set(&ResourceName::parse("example.com/gpu").unwrap(), 1);
    ns.truncate(2);
    let snap = extended_cluster(ns, vec![slice("n2", "a100", 2)], vec![]);
    let idx = snap.device_index();
    let objects = snap.devices();
    let one = with_extended("p1", "example.com/gpu", 1);
    let two = with_extended("p2", "example.com/gpu", 2);
    let batch = crate::engine::plugins::dynamicresources::BatchDevices::default();
    let cel = crate::engine::plugins::dynamicresources::selectors();
    let d1 = PodDevices::pre_filter(objects, idx, cel, &one, &batch)
        .unwrap()
        .unwrap();
    let n1 = snap.node("n1").unwrap().spec.clone();
    let n2 = snap.node("n2").unwrap().spec.clone();
    // On n1 nothing is allocated (the device plugin's resource), on n2 the special claim.
    assert_eq!(d1.allocate(&n1), Ok(vec![]));
    assert_eq!(d1.reserve(&n1), vec![]);
    assert_eq!(d1.reserve(&n2).len(), 1);
    // Two do not fit n1's allocatable of 1: NodeResourcesFit's own message there.
    let out = schedule_extended(&snap, &[two]);
    assert_eq!(out[0].as_ref().map(|(n, _)| n.as_str()), Ok("n2"));
    let mut three = with_extended("p3", "example.com/gpu", 3);
    three.name = "p3".into();
    let out = schedule_extended(&snap, &[three]);
    assert_eq!(
        out[0],
        Err(
            "0/2 nodes are available: 1 Insufficient example.com/gpu, 1 cannot allocate all claims. \
             preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
                .into()
        )
    );
}

#[test]
fn the_implicit_name_of_a_class_is_backed_by_it() {
    let snap = extended_cluster(nodes(), vec![slice("n3", "a100", 1)], vec![]);
    let out = schedule_extended(
        &snap,
        &[with_extended("p1", "deviceclass.resource.kubernetes.io/gpu", 1)],
    );
    assert_eq!(
        out[0],
        Ok((
            "n3".into(),
            vec!["<extended>[container-0-request-1:gpux1][main/deviceclass.resource.kubernetes.io/gpu->container-0-request-1]=\
                  container-0-request-1:n3/gpu-0"
                .into()]
        ))
    );
}

#[test]
fn a_pod_with_a_claim_and_an_extended_resource_gets_distinct_devices_claim_first() {
    // Two GPUs on n1: the pod's own claim takes the first, the special claim the second.
    let snap = extended_cluster(nodes(), vec![slice("n1", "a100", 2)], vec![gpus("c1", 1)]);
    let mut p = with_extended("p1", "example.com/gpu", 1);
    p.resource_claims = with_claims("p1", &["c1"]).resource_claims;
    let out = schedule_extended(&snap, &[p]);
    assert_eq!(
        out[0],
        Ok((
            "n1".into(),
            vec![
                "c1=gpu:n1/gpu-0".into(),
                "<extended>[container-0-request-1:gpux1][main/example.com/gpu->container-0-request-1]=\
                 container-0-request-1:n1/gpu-1"
                    .into()
            ]
        ))
    );
}

#[test]
fn an_extended_resource_no_class_backs_stays_insufficient() {
    // example.com/fpga: no class names it, so NodeResourcesFit rejects every node as before.
    let snap = extended_cluster(nodes(), vec![slice("n1", "a100", 2)], vec![]);
    let out = schedule_extended(&snap, &[with_extended("p1", "example.com/fpga", 1)]);
    assert_eq!(
        out[0],
        Err("0/3 nodes are available: 3 Insufficient example.com/fpga. \
             preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
            .into())
    );
}

/// Rank's diagnosis names the special claim's request where the class's devices are too few.
#[test]
fn diagnosis_names_the_special_claims_request() {
    let snap = extended_cluster(nodes(), vec![slice("n1", "a100", 1)], vec![]);
    let got = diagnoses(&snap, &with_extended("p", "example.com/gpu", 2));
    assert_eq!(
        got[0],
        (
            "n1".into(),
            vec![failure(
                "<extended-resources>",
                "container-0-request-1",
                FailureKind::NoMatchingDevice,
                "2 requested, only 1 of the node's 1 device matches class gpu and the request's selectors"
            )]
        )
    );
}

/// Of several classes naming one extended resource the newest backs it, of equally old ones the
/// first by name (kube's extended resource cache, `updateResourceName2class`); the implicit name
/// is each class's own.
#[test]
fn the_newest_class_naming_a_resource_backs_it() {
    let named = |name: &str, created: i64| DeviceClass {
        name: name.into(),
        extended_resource_name: Some("example.com/gpu".into()),
        created,
        ..class()
    };
    let backing = |classes: Vec<DeviceClass>, resource: &str| {
        let snap = Snapshot::build(nodes(), vec![])
            .and_then(|s| {
                s.with_devices(DeviceParts {
                    classes,
                    ..Default::default()
                })
            })
            .unwrap();
        snap.devices()
            .class_for_extended_resource(resource)
            .map(|c| c.name.clone())
    };
    assert_eq!(
        backing(
            vec![named("a", 100), named("b", 200), named("c", 150)],
            "example.com/gpu"
        ),
        Some("b".into())
    );
    assert_eq!(
        backing(vec![named("b", 100), named("a", 100)], "example.com/gpu"),
        Some("a".into())
    );
    assert_eq!(
        backing(vec![named("a", 100)], "deviceclass.resource.kubernetes.io/a"),
        Some("a".into())
    );
    assert_eq!(backing(vec![named("a", 100)], "example.com/fpga"), None);
}

/// Rank's diagnosis of the special claim on each refused node: n1 provides the resource through
/// a device plugin, too little of it (NodeResourcesFit refuses it: no device diagnosis); n2 and
/// n3 have no devices. Then nodes whose devices look alike but whose allocatable does not get
/// diagnoses of their own: on m1 (the resource in its allocatable) only the pod's own claim is
/// diagnosed, on m2 the special claim too.
#[test]
fn rank_diagnoses_the_special_claim_on_each_refused_node() {
    use crate::engine::resources::ResourceName;
    let gpu = ResourceName::parse("example.com/gpu").unwrap();
    let mut ns = nodes();
    ns[0].allocatable.set(&gpu, 1);
    let snap = extended_cluster(ns, vec![], vec![]);
    let profile = Profile::new(Policy::kube_default());
    let refused = |snap: &Snapshot, pod: &PodSpec| -> Vec<(String, Vec<String>)> {
        let ranking = Evaluator::new(&profile, snap)
            .rank(pod, 0, 0, Deadline::none())
            .unwrap();
        assert_eq!(ranking.feasible_count, 0);
        ranking
            .rejected
            .iter()
            .map(|r| {
                (
                    r.name(snap).to_string(),
                    r.devices
                        .iter()
                        .map(|f| format!("{}/{}: {}", f.claim, f.request, f.message))
                        .collect(),
                )
            })
            .collect()
    };
    let none = "<extended-resources>/container-0-request-1: the node has no devices".to_string();
    assert_eq!(
        refused(&snap, &with_extended("p", "example.com/gpu", 2)),
        vec![
            ("n1".to_string(), vec![]),
            ("n2".to_string(), vec![none.clone()]),
            ("n3".to_string(), vec![none]),
        ]
    );
    let mut m1 = node("m1", 8000, 32 << 30);
    m1.allocatable.set(&gpu, 4);
    let m2 = node("m2", 8000, 32 << 30);
    let snap = extended_cluster(
        vec![m1, m2],
        vec![slice("m1", "a100", 1), slice("m2", "a100", 1)],
        vec![gpus("two", 2)],
    );
    let mut p = with_extended("p", "example.com/gpu", 2);
    p.resource_claims = with_claims("p", &["two"]).resource_claims;
    let short = |claim: &str, request: &str| {
        format!("{claim}/{request}: 2 requested, only 1 of the node's 1 device matches class gpu and the request's selectors")
    };
    assert_eq!(
        refused(&snap, &p),
        vec![
            ("m1".to_string(), vec![short("two", "gpu")]),
            (
                "m2".to_string(),
                vec![
                    short("two", "gpu"),
                    short("<extended-resources>", "container-0-request-1")
                ]
            ),
        ]
    );
}

/// A node's device shared by the claims allocated it: `memory` of 40Gi, requests rounded up
/// to whole Gi from 1Gi (as the converter keeps such a device).
fn shared_gpu_slice(node: &str) -> ResourceSlice {
    let mut s = slice(node, "a100", 1);
    let d = &mut s.devices[0];
    d.allow_multiple_allocations = true;
    let memory = format!("{DRIVER}/memory");
    d.capacity.insert(
        memory.clone(),
        crate::engine::quantity::Quantity::parse("40Gi").unwrap(),
    );
    let amount = |s: &str| crate::engine::devices::Amount::parse(s).unwrap();
    d.capacity_policies.insert(
        memory,
        crate::engine::devices::CapacityPolicy {
            name: "memory".into(),
            value: amount("40Gi"),
            default: Some(amount("1Gi")),
            valid_values: vec![],
            valid_range: Some(crate::engine::devices::CapacityRange {
                min: Some(amount("1Gi")),
                max: None,
                step: Some(amount("1Gi")),
            }),
            has_policy: true,
        },
    );
    s
}

fn memory_claim(name: &str, memory: &str) -> ResourceClaim {
    let mut s = spec(1, None);
    s.capacity_requests
        .insert("memory".into(), crate::engine::devices::Amount::parse(memory).unwrap());
    claim(name, RequestKind::Exactly(s))
}

/// `claim`, allocated a share of `node`'s device consuming `memory`.
fn sharing(name: &str, node: &str, memory: &str) -> ResourceClaim {
    let mut c = memory_claim(name, memory);
    c.allocation = Some(crate::engine::devices::Allocation {
        devices: vec![crate::engine::devices::AllocatedDevice {
            request: "gpu".into(),
            device: crate::engine::devices::DeviceId {
                driver: Arc::from(DRIVER),
                pool: Arc::from(node),
                device: Arc::from("gpu-0"),
            },
            admin_access: None,
            tolerations: vec![],
            consumed_capacity: BTreeMap::from([(
                "memory".to_string(),
                crate::engine::devices::Amount::parse(memory).unwrap(),
            )]),
            share_id: Some("0b7e1f7c-7a57-4c1e-9a57-2f7b8b6b1f00".into()),
            ..Default::default()
        }],
        node_selector: None,
        ..Default::default()
    });
    c
}

#[test]
fn a_shared_device_serves_pods_until_its_capacity_is_consumed_by_the_snapshot_and_the_batch() {
    // n2's device: 40Gi, 10Gi consumed by a claim in the snapshot. Pods asking 15Gi, 14.5Gi
    // (rounded up to 15Gi) and 1Gi: the first two share it, the third finds 0 left.
    let snap = cluster(
        vec![shared_gpu_slice("n2")],
        vec![
            sharing("in-use", "n2", "10Gi"),
            memory_claim("c1", "15Gi"),
            memory_claim("c2", "14848Mi"),
            memory_claim("c3", "1Gi"),
        ],
    );
    let pods = [
        with_claims("p1", &["c1"]),
        with_claims("p2", &["c2"]),
        with_claims("p3", &["c3"]),
    ];
    let profile = Profile::new(Policy::kube_default());
    let out = Evaluator::new(&profile, &snap)
        .schedule(&pods, 0, Deadline::none())
        .unwrap();
    for (d, consumed) in out.iter().take(2).zip(["15Gi", "15Gi"]) {
        let Decision::Node { node, devices, .. } = d else {
            panic!("{d:?}")
        };
        assert_eq!(node, "n2");
        let r = &devices[0].allocation.devices[0];
        assert_eq!(&*r.device.device, "gpu-0");
        assert_eq!(
            r.share_id.as_deref(),
            Some(""),
            "a new share, its ID drawn by the writer"
        );
        let memory: Vec<(&str, &str)> = r
            .consumed_capacity
            .iter()
            .map(|(k, a)| (k.as_str(), a.text.as_str()))
            .collect();
        assert_eq!(memory, vec![("memory", consumed)]);
    }
    assert!(
        matches!(&out[2], Decision::Unschedulable(_)),
        "40Gi consumed: {:?}",
        out[2]
    );
}

#[test]
fn verdicts_by_device_signature_count_the_capacity_consumed_on_shared_devices() {
    let names: Vec<String> = (0..6).map(|i| format!("n{i}")).collect();
    let slices = names.iter().map(|n| shared_gpu_slice(n)).collect();
    let mut claims = vec![
        sharing("s0", "n0", "30Gi"),
        sharing("s2", "n2", "10Gi"),
        memory_claim("earlier", "20Gi"),
    ];
    for m in ["5Gi", "15Gi", "25Gi", "35Gi"] {
        claims.push(memory_claim(&format!("m-{m}"), m));
    }
    let snap = Snapshot::build(names.iter().map(|n| node(n, 8000, 32 << 30)).collect(), vec![])
        .and_then(|s| {
            s.with_devices(DeviceParts {
                classes: vec![class()],
                claims,
                slices,
                ..Default::default()
            })
        })
        .unwrap();
    let index = snap.device_index();
    let selectors = crate::engine::plugins::dynamicresources::selectors();
    let mut batch = crate::engine::plugins::dynamicresources::BatchDevices::default();
    // An earlier pod of the batch took 20Gi of n4's device.
    let earlier = PodDevices::pre_filter(
        snap.devices(),
        index,
        selectors,
        &with_claims("e", &["earlier"]),
        &batch,
    )
    .unwrap()
    .unwrap();
    let allocated = earlier.reserve(&snap.nodes()[4].spec);
    assert!(!allocated.is_empty());
    batch.record(&index.slices, 4, &allocated);
    let mut fits = Vec::new();
    for m in ["5Gi", "15Gi", "25Gi", "35Gi"] {
        let p = with_claims("p", &[&format!("m-{m}")]);
        let devices = PodDevices::pre_filter(snap.devices(), index, selectors, &p, &batch)
            .unwrap()
            .unwrap();
        for (i, n) in snap.nodes().iter().enumerate() {
            let alone = devices.allocate(&n.spec).map(|_| ());
            let shared = devices.verdict(i, &n.spec).map(|_| ());
            assert_eq!(shared, alone, "{m} on {}", n.spec.name);
            fits.push(alone.is_ok());
        }
    }
    // 5Gi fits everywhere; 15Gi not on n0 (30Gi used); 25Gi not on n0 nor n4 (20Gi); 35Gi only
    // where nothing is used.
    let expect = |ok: [bool; 6]| ok.to_vec();
    let want: Vec<bool> = [
        expect([true; 6]),
        expect([false, true, true, true, true, true]),
        expect([false, true, true, true, false, true]),
        expect([false, true, false, true, false, true]),
    ]
    .concat();
    assert_eq!(fits, want);
}

#[test]
fn diagnosis_not_enough_capacity_left_on_a_shared_device() {
    // n1's shared device: 40Gi, 30Gi consumed; a claim asking 15Gi finds it too full.
    let snap = cluster(
        vec![shared_gpu_slice("n1")],
        vec![sharing("in-use", "n1", "30Gi"), memory_claim("big", "15Gi")],
    );
    assert_eq!(
        diagnoses(&snap, &with_claims("p", &["big"]))[0],
        (
            "n1".into(),
            vec![failure(
                "big",
                "gpu",
                FailureKind::DevicesAllocated,
                "1 requested; 1 device match, 1 without enough capacity left for the request"
            )]
        )
    );
}
