//! Tests of placement's `DevicePacking` ([`super::super::device_packing`]): the device order,
//! the node score, and kube's order left alone without it.

use std::collections::HashSet;
use std::sync::Arc;

use super::super::allocator::Allocator;
use super::super::cel::SelectorCache;
use super::super::device_packing::{Packing, BREAK_PENALTY, PCIE_ROOT};
use super::*;

/// The devices each claim gets on `node`, and the node's packing score, with packing (`Some`) or
/// in kube's order (`None`).
fn pick(
    slices: &[ResourceSlice],
    in_use: &[DeviceId],
    node: &NodeSpec,
    claims: &[ResourceClaim],
    packing: Option<&Packing>,
) -> Option<(Vec<Vec<String>>, i64)> {
    let classes = [class(CLASS_A, DRIVER_A)];
    let slices: Vec<Arc<ResourceSlice>> = slices.iter().cloned().map(Arc::new).collect();
    let cel = SelectorCache::new();
    let lookup = |name: &str| classes.iter().find(|c| c.name == name);
    let index = crate::engine::devices::SliceIndex::new(slices);
    let allocated = crate::engine::devices::InUse::from(in_use.iter().cloned().collect::<HashSet<_>>());
    let allocator = Allocator::new(&lookup, &index, &allocated, &cel).with_packing(packing);
    let refs: Vec<&ResourceClaim> = claims.iter().collect();
    let (allocations, score) = allocator.allocate_scored(node, &refs, None).expect("no error")?;
    let names = allocations
        .iter()
        .map(|a| a.devices.iter().map(|d| d.device.device.to_string()).collect())
        .collect();
    Some((names, score))
}

/// Two partitionable GPUs on `node` (counter sets `gpu-0`, `gpu-1` of 80Gi each, in a slice of
/// their own as the API requires): per GPU a whole device and two 40Gi slices, `kind` telling
/// them apart.
fn partitionable(node: &str) -> Vec<ResourceSlice> {
    let mut counters = slice_count(slice(SLICE2, on(node), POOL1, DRIVER_A, Vec::new()), 2);
    let mut s = slice_count(slice(SLICE1, on(node), POOL1, DRIVER_A, Vec::new()), 2);
    for g in 0..2 {
        let set = format!("gpu-{g}");
        counters.shared_counters.push(CounterSet {
            name: set.clone(),
            counters: [("memory".to_string(), q("80Gi"))].into_iter().collect(),
        });
        let kind = |k: &str| [("kind", AttributeValue::String(k.into()))];
        s.devices.push(consuming(
            with_attrs(device(&format!("gpu-{g}")), &kind("whole")),
            &set,
            &[("memory", "80Gi")],
        ));
        for p in ["a", "b"] {
            s.devices.push(consuming(
                with_attrs(device(&format!("gpu-{g}-{p}")), &kind("slice")),
                &set,
                &[("memory", "40Gi")],
            ));
        }
    }
    vec![s, counters]
}

fn slice_claim(name: &str) -> ResourceClaim {
    claim(
        name,
        vec![request_with(
            REQ0,
            selecting(CLASS_A, 1, r#"device.attributes["driver-a"].kind == "slice""#),
        )],
        Vec::new(),
    )
}

/// Four GPUs under two PCIe roots (two each) on `node`.
fn two_roots(node: &str) -> ResourceSlice {
    let devices = (0..4)
        .map(|i| {
            with_attrs(
                device(&format!("gpu-{i}")),
                &[(PCIE_ROOT, AttributeValue::String(format!("pci-{}", i / 2)))],
            )
        })
        .collect();
    slice(SLICE1, on(node), POOL1, DRIVER_A, devices)
}

#[test]
fn a_slice_goes_to_the_gpu_already_partitioned_instead_of_breaking_a_whole_one() {
    let n = node(NODE1, REGION1);
    let in_use = [id(DRIVER_A, POOL1, "gpu-1-a")];
    let claims = [slice_claim(CLAIM0)];
    let (kube, _) = pick(&partitionable(NODE1), &in_use, &n, &claims, None).expect("fits");
    assert_eq!(kube, vec![vec!["gpu-0-a".to_string()]], "kube's first fit");
    let packing = Packing::default();
    let (packed, score) = pick(&partitionable(NODE1), &in_use, &n, &claims, Some(&packing)).expect("fits");
    assert_eq!(packed, vec![vec!["gpu-1-b".to_string()]]);
    // Every device of gpu-1 is spent (its two slices taken, the whole device blocked); gpu-0's
    // three are free: 3 of 6 unusable, nothing broken.
    assert_eq!(score, 50);
}

#[test]
fn a_whole_gpu_is_taken_whole_and_breaks_nothing() {
    let n = node(NODE1, REGION1);
    let whole = claim(
        CLAIM0,
        vec![request_with(
            REQ0,
            selecting(CLASS_A, 1, r#"device.attributes["driver-a"].kind == "whole""#),
        )],
        Vec::new(),
    );
    let packing = Packing::default();
    let (packed, score) = pick(&partitionable(NODE1), &[], &n, &[whole], Some(&packing)).expect("fits");
    assert_eq!(packed, vec![vec!["gpu-0".to_string()]]);
    assert_eq!(score, 50, "gpu-0's three devices spent, no set left partly used");
    // A slice of an intact GPU breaks it: penalized.
    let (_, broken) = pick(&partitionable(NODE1), &[], &n, &[slice_claim(CLAIM0)], Some(&packing)).expect("fits");
    assert_eq!(broken, (2 * 100 / 6 - BREAK_PENALTY).max(0));
}

#[test]
fn a_single_device_goes_to_the_broken_pcie_root_and_keeps_the_whole_one_for_a_pair() {
    let n = node(NODE1, REGION1);
    let in_use = [id(DRIVER_A, POOL1, "gpu-2")];
    let single = [simple_claim(CLAIM0, REQ0, CLASS_A)];
    let (kube, _) = pick(&[two_roots(NODE1)], &in_use, &n, &single, None).expect("fits");
    assert_eq!(kube, vec![vec!["gpu-0".to_string()]], "kube's first fit breaks pci-0");
    let packing = Packing::default();
    let (packed, score) = pick(&[two_roots(NODE1)], &in_use, &n, &single, Some(&packing)).expect("fits");
    assert_eq!(packed, vec![vec!["gpu-3".to_string()]]);
    assert_eq!(score, 50, "2 of 4 in use, pci-0 left whole");
    // The pair that needs one root whole still fits after the packed single, not after kube's.
    let pair = [claim(
        CLAIM1,
        vec![request(REQ0, CLASS_A, 2)],
        vec![match_attribute(&[], PCIE_ROOT)],
    )];
    let after_kube = [in_use[0].clone(), id(DRIVER_A, POOL1, "gpu-0")];
    let after_packed = [in_use[0].clone(), id(DRIVER_A, POOL1, "gpu-3")];
    assert!(pick(&[two_roots(NODE1)], &after_kube, &n, &pair, None).is_none());
    let (pair_devices, _) = pick(&[two_roots(NODE1)], &after_packed, &n, &pair, None).expect("pair fits");
    assert_eq!(pair_devices, vec![vec!["gpu-0".to_string(), "gpu-1".to_string()]]);
}

#[test]
fn packing_changes_which_devices_never_whether_claims_fit() {
    let n = node(NODE1, REGION1);
    let packing = Packing::default();
    // A pair on one root while each root has one device in use: fits nowhere, either way.
    let pair = [claim(
        CLAIM0,
        vec![request(REQ0, CLASS_A, 2)],
        vec![match_attribute(&[], PCIE_ROOT)],
    )];
    let in_use = [id(DRIVER_A, POOL1, "gpu-0"), id(DRIVER_A, POOL1, "gpu-3")];
    assert!(pick(&[two_roots(NODE1)], &in_use, &n, &pair, None).is_none());
    assert!(pick(&[two_roots(NODE1)], &in_use, &n, &pair, Some(&packing)).is_none());
    // With the domain walk ordered, the search still backtracks into the whole root.
    let in_use = [id(DRIVER_A, POOL1, "gpu-2")];
    let (packed, _) = pick(&[two_roots(NODE1)], &in_use, &n, &pair, Some(&packing)).expect("fits");
    assert_eq!(packed, vec![vec!["gpu-0".to_string(), "gpu-1".to_string()]]);
    // Three devices (more than any root holds) without a constraint: found across roots.
    let three = [claim(CLAIM0, vec![request(REQ0, CLASS_A, 3)], Vec::new())];
    let (packed, score) = pick(&[two_roots(NODE1)], &[], &n, &three, Some(&packing)).expect("fits");
    assert_eq!(packed[0].len(), 3);
    assert_eq!(score, (75 - BREAK_PENALTY).max(0), "one root broken");
}

#[test]
fn busier_nodes_score_higher() {
    let packing = Packing::default();
    let single = [simple_claim(CLAIM0, REQ0, CLASS_A)];
    let empty = node(NODE1, REGION1);
    let (_, on_empty) = pick(&[two_roots(NODE1)], &[], &empty, &single, Some(&packing)).expect("fits");
    let busy = [id(DRIVER_A, POOL1, "gpu-2")];
    let (_, on_busy) = pick(&[two_roots(NODE1)], &busy, &empty, &single, Some(&packing)).expect("fits");
    assert!(on_busy > on_empty, "{on_busy} > {on_empty}");
    assert_eq!(on_empty, 0, "25 filled, one root broken");
}

#[test]
fn arguments_are_checked() {
    assert!(Packing::default().validate().is_ok());
    let bad = Packing {
        match_attributes: vec![PCIE_ROOT.into(), "numa".into()],
    };
    let (index, message) = bad.validate().expect_err("unqualified");
    assert_eq!(index, 1);
    assert!(message.contains("not a qualified attribute name"), "{message}");
}

#[test]
fn a_batch_is_decided_by_priority_then_largest_claims_first() {
    use super::super::device_packing::batch_order;
    use crate::engine::devices::DeviceObjects;
    use crate::engine::model::{PodClaimRef, PodSpec};
    let mut objects = DeviceObjects::default();
    let mut add = |name: &str, requests: Vec<DeviceRequest>| {
        let mut c = claim(name, requests, Vec::new());
        c.namespace = "ns".into();
        objects.claims.insert(format!("ns/{name}"), Arc::new(c));
    };
    add("one", vec![request(REQ0, CLASS_A, 1)]);
    add("two", vec![request(REQ0, CLASS_A, 2)]);
    add("all", vec![all_request(REQ0, CLASS_A)]);
    add(
        "one-and-two",
        vec![request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 2)],
    );
    let pod = |name: &str, claim: Option<&str>, priority: i32| PodSpec {
        name: name.into(),
        namespace: "ns".into(),
        priority,
        resource_claims: claim
            .map(|c| PodClaimRef {
                name: "gpus".into(),
                claim_name: Some(c.into()),
                from_template: false,
            })
            .into_iter()
            .collect(),
        ..PodSpec::default()
    };
    let pods = [
        pod("a", Some("one"), 0),
        pod("b", None, 0),
        pod("c", Some("two"), 0),
        pod("d", Some("all"), 0),
        pod("e", Some("one-and-two"), 0),
        pod("f", Some("one"), 10),
    ];
    // Priority first (f), then demand: All (d), three devices (e), two (c), one (a), none (b).
    assert_eq!(batch_order(&objects, &pods), Some(vec![5, 3, 4, 2, 0, 1]));
    // Already in that order: nothing to change.
    let sorted = [pods[5].clone(), pods[3].clone(), pods[0].clone()];
    assert_eq!(batch_order(&objects, &sorted), None);
    // A gang member in the batch: its order is kept.
    let mut gang = pods.to_vec();
    gang[1].pod_group = Some(crate::engine::model::PodGroupKey::new("ns", "group"));
    assert_eq!(batch_order(&objects, &gang), None);
}
