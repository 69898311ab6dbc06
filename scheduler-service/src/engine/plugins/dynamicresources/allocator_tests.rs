//! Tests of the allocator, ported from kube's shared table
//! (`structured/internal/allocatortesting/allocator_testing.go`, case names in comments), and of
//! the DRA CEL environment.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::allocator::{AllocateError, Allocator};
use super::cel::{CelError, SelectorCache};
use crate::engine::devices::{
    AllocatedDevice, Allocation, AllocationMode, Amount, AttributeValue, CapacityPolicy, CapacityRange, ConstraintKind,
    CounterConsumption, CounterSet, Device, DeviceClass, DeviceConstraint, DeviceId, DeviceRequest, DeviceTaint,
    DeviceTaintEffect, DeviceToleration, NodeSelection, RequestKind, RequestSpec, ResourceClaim, ResourceSlice,
};
use crate::engine::model::{NodeSpec, Requirement, SelectorOp, SelectorTerm, TolerationOperator};
use crate::engine::quantity::Quantity;

const REGION1: &str = "region-1";
const REGION2: &str = "region-2";
const NODE1: &str = "node-1";
const NODE2: &str = "node-2";
const CLASS_A: &str = "class-a";
const CLASS_B: &str = "class-b";
const DRIVER_A: &str = "driver-a";
const DRIVER_B: &str = "driver-b";
const POOL1: &str = "pool-1";
const POOL2: &str = "pool-2";
const POOL3: &str = "pool-3";
const POOL4: &str = "pool-4";
const REQ0: &str = "req-0";
const REQ1: &str = "req-1";
const SUB0: &str = "subReq-0";
const SUB1: &str = "subReq-1";
const CLAIM0: &str = "claim-0";
const CLAIM1: &str = "claim-1";
const SLICE1: &str = "slice-1";
const SLICE2: &str = "slice-2";
const DEVICE1: &str = "device-1";
const DEVICE2: &str = "device-2";
const DEVICE3: &str = "device-3";
const COUNTER_SET1: &str = "counter-set-1";

fn q(s: &str) -> Quantity {
    Quantity::parse(s).expect("test quantity")
}

fn node(name: &str, region: &str) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        labels: HashMap::from([("region".into(), region.into()), ("planet".into(), "earth".into())]),
        ..NodeSpec::default()
    }
}

fn class(name: &str, driver: &str) -> DeviceClass {
    DeviceClass {
        name: name.into(),
        selectors: vec![Arc::from(format!(r#"device.driver == "{driver}""#))],
        extended_resource_name: None,
        created: 0,
    }
}

fn spec(class: &str, mode: AllocationMode) -> RequestSpec {
    RequestSpec {
        class: class.into(),
        selectors: Vec::new(),
        mode,
        admin_access: false,
        tolerations: Vec::new(),
        capacity_requests: Default::default(),
    }
}

fn request(name: &str, class: &str, count: i64) -> DeviceRequest {
    DeviceRequest {
        name: name.into(),
        kind: RequestKind::Exactly(spec(class, AllocationMode::ExactCount(count))),
    }
}

fn request_with(name: &str, spec: RequestSpec) -> DeviceRequest {
    DeviceRequest {
        name: name.into(),
        kind: RequestKind::Exactly(spec),
    }
}

fn all_request(name: &str, class: &str) -> DeviceRequest {
    request_with(name, spec(class, AllocationMode::All))
}

fn selecting(class: &str, count: i64, selector: &str) -> RequestSpec {
    let mut s = spec(class, AllocationMode::ExactCount(count));
    s.selectors.push(Arc::from(selector));
    s
}

fn sub(name: &str, spec: RequestSpec) -> (String, RequestSpec) {
    (name.into(), spec)
}

fn prioritized(name: &str, subs: Vec<(String, RequestSpec)>) -> DeviceRequest {
    DeviceRequest {
        name: name.into(),
        kind: RequestKind::FirstAvailable(subs),
    }
}

fn claim(name: &str, requests: Vec<DeviceRequest>, constraints: Vec<DeviceConstraint>) -> ResourceClaim {
    ResourceClaim {
        name: name.into(),
        requests,
        constraints,
        ..ResourceClaim::default()
    }
}

/// kube's `claimWithRequest`: one request for one device.
fn simple_claim(name: &str, req: &str, class: &str) -> ResourceClaim {
    claim(name, vec![request(req, class, 1)], Vec::new())
}

fn match_attribute(requests: &[&str], attribute: &str) -> DeviceConstraint {
    DeviceConstraint {
        requests: requests.iter().map(|r| r.to_string()).collect(),
        kind: ConstraintKind::MatchAttribute(attribute.into()),
    }
}

fn distinct_attribute(requests: &[&str], attribute: &str) -> DeviceConstraint {
    DeviceConstraint {
        requests: requests.iter().map(|r| r.to_string()).collect(),
        kind: ConstraintKind::DistinctAttribute(attribute.into()),
    }
}

fn device(name: &str) -> Device {
    Device {
        name: Arc::from(name),
        ..Device::default()
    }
}

fn with_attrs(mut d: Device, attrs: &[(&str, AttributeValue)]) -> Device {
    for (k, v) in attrs {
        d.attributes.insert(k.to_string(), v.clone());
    }
    d
}

fn with_capacity(mut d: Device, caps: &[(&str, &str)]) -> Device {
    for (k, v) in caps {
        d.capacity.insert(k.to_string(), q(v));
    }
    d
}

fn consuming(mut d: Device, set: &str, counters: &[(&str, &str)]) -> Device {
    d.consumes_counters.push(CounterConsumption {
        counter_set: set.into(),
        counters: counters.iter().map(|(k, v)| (k.to_string(), q(v))).collect(),
    });
    d
}

fn on(node: &str) -> NodeSelection {
    NodeSelection::NodeName(node.into())
}

fn label_selector(key: &str, value: &str) -> NodeSelection {
    NodeSelection::NodeSelector(vec![SelectorTerm {
        match_expressions: vec![Requirement {
            key: key.into(),
            op: SelectorOp::In(vec![value.into()]),
        }],
        match_fields: Vec::new(),
    }])
}

fn field_selector(node: &str) -> NodeSelection {
    NodeSelection::NodeSelector(local(node).unwrap_or_default())
}

fn slice(name: &str, selection: NodeSelection, pool: &str, driver: &str, devices: Vec<Device>) -> ResourceSlice {
    ResourceSlice {
        name: name.into(),
        driver: Arc::from(driver),
        pool: Arc::from(pool),
        pool_generation: 1,
        pool_slice_count: 1,
        node_selection: selection,
        devices,
        shared_counters: Vec::new(),
    }
}

fn one_device(name: &str, selection: NodeSelection, pool: &str, driver: &str) -> ResourceSlice {
    slice(name, selection, pool, driver, vec![device(DEVICE1)])
}

fn counter_slice(
    name: &str,
    selection: NodeSelection,
    pool: &str,
    driver: &str,
    set: &str,
    counters: &[(&str, &str)],
) -> ResourceSlice {
    let mut s = slice(name, selection, pool, driver, Vec::new());
    s.shared_counters.push(CounterSet {
        name: set.into(),
        counters: counters
            .iter()
            .map(|(k, v)| (k.to_string(), q(v)))
            .collect::<BTreeMap<_, _>>(),
    });
    s
}

fn slice_count(mut s: ResourceSlice, count: i64) -> ResourceSlice {
    s.pool_slice_count = count;
    s
}

fn id(driver: &str, pool: &str, device: &str) -> DeviceId {
    DeviceId {
        driver: Arc::from(driver),
        pool: Arc::from(pool),
        device: Arc::from(device),
    }
}

fn result(request: &str, driver: &str, pool: &str, device: &str, admin: bool) -> AllocatedDevice {
    AllocatedDevice {
        request: request.into(),
        device: id(driver, pool, device),
        admin_access: admin.then_some(true),
        tolerations: Vec::new(),
        consumed_capacity: BTreeMap::new(),
        share_id: None,
        ..Default::default()
    }
}

fn tolerating(mut r: AllocatedDevice, tolerations: &[DeviceToleration]) -> AllocatedDevice {
    r.tolerations = tolerations.to_vec();
    r
}

/// kube's `localNodeSelector`.
fn local(node: &str) -> Option<Vec<SelectorTerm>> {
    Some(vec![SelectorTerm {
        match_expressions: Vec::new(),
        match_fields: vec![Requirement {
            key: "metadata.name".into(),
            op: SelectorOp::In(vec![node.into()]),
        }],
    }])
}

fn allocation(node_selector: Option<Vec<SelectorTerm>>, devices: Vec<AllocatedDevice>) -> Allocation {
    Allocation {
        devices,
        node_selector,
        ..Default::default()
    }
}

type Outcome = Result<Option<Vec<Allocation>>, AllocateError>;

fn run(
    classes: &[DeviceClass],
    slices: Vec<ResourceSlice>,
    allocated: &[DeviceId],
    node: &NodeSpec,
    claims: &[ResourceClaim],
) -> Outcome {
    run_until(classes, slices, allocated, node, claims, None)
}

/// [`run`] with the search stopped at `deadline` ([`Allocator::allocate_until`]).
fn run_until(
    classes: &[DeviceClass],
    slices: Vec<ResourceSlice>,
    allocated: &[DeviceId],
    node: &NodeSpec,
    claims: &[ResourceClaim],
    deadline: Option<std::time::Instant>,
) -> Outcome {
    let slices: Vec<Arc<ResourceSlice>> = slices.into_iter().map(Arc::new).collect();
    let allocated: HashSet<DeviceId> = allocated.iter().cloned().collect();
    let cel = SelectorCache::new();
    let lookup = |name: &str| classes.iter().find(|c| c.name == name);
    let slices = crate::engine::devices::SliceIndex::new(slices.to_vec());
    let allocated = crate::engine::devices::InUse::from(allocated.clone());
    let allocator = Allocator::new(&lookup, &slices, &allocated, &cel);
    let refs: Vec<&ResourceClaim> = claims.iter().collect();
    allocator.allocate_until(node, &refs, deadline)
}

fn error_text(outcome: Outcome) -> String {
    match outcome {
        Err(e) => e.to_string(),
        Ok(r) => panic!("expected an error, got {r:?}"),
    }
}

fn taint(key: &str, value: &str, effect: DeviceTaintEffect) -> DeviceTaint {
    DeviceTaint {
        key: key.into(),
        value: value.into(),
        effect,
    }
}

fn taint_no_schedule() -> DeviceTaint {
    taint("taint-key", "taint-value", DeviceTaintEffect::NoSchedule)
}

fn taint_no_execute() -> DeviceTaint {
    taint("taint-key", "taint-value-2", DeviceTaintEffect::NoExecute)
}

fn toleration_no_schedule() -> DeviceToleration {
    DeviceToleration {
        key: "taint-key".into(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: Some(DeviceTaintEffect::NoSchedule),
    }
}

fn toleration_no_execute() -> DeviceToleration {
    DeviceToleration {
        key: "taint-key".into(),
        operator: TolerationOperator::Equal,
        value: "taint-value-2".into(),
        effect: Some(DeviceTaintEffect::NoExecute),
    }
}

fn tainted(mut d: Device, taints: &[DeviceTaint]) -> Device {
    d.taints.extend_from_slice(taints);
    d
}

fn memory_at_least(amount: &str) -> String {
    format!(r#"device.capacity["{DRIVER_A}"].memory.compareTo(quantity("{amount}")) >= 0"#)
}

// ---- allocator cases ----

#[test]
fn simple() {
    // "simple"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![one_device(SLICE1, on(NODE1), POOL1, DRIVER_A)],
        &[],
        &node(NODE1, REGION1),
        &[simple_claim(CLAIM0, REQ0, CLASS_A)],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)]
        )]))
    );
}

#[test]
fn other_node() {
    // "other-node"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![
            one_device(SLICE1, on(NODE1), POOL1, DRIVER_B),
            one_device(SLICE2, on(NODE2), POOL2, DRIVER_A),
        ],
        &[],
        &node(NODE2, REGION2),
        &[simple_claim(CLAIM0, REQ0, CLASS_A)],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE2),
            vec![result(REQ0, DRIVER_A, POOL2, DEVICE1, false)]
        )]))
    );
}

fn small_and_large_devices(large_first: bool) -> Vec<ResourceSlice> {
    let small = with_capacity(device(DEVICE1), &[("driver-a/memory", "1Gi")]);
    let large = with_capacity(device(DEVICE2), &[("driver-a/memory", "2Gi")]);
    let devices = if large_first {
        vec![large, small]
    } else {
        vec![small, large]
    };
    vec![slice(SLICE1, on(NODE1), POOL1, DRIVER_A, devices)]
}

fn small_and_large_requests() -> Vec<DeviceRequest> {
    vec![
        request_with(REQ0, selecting(CLASS_A, 1, &memory_at_least("1Gi"))),
        request_with(REQ1, selecting(CLASS_A, 1, &memory_at_least("2Gi"))),
    ]
}

#[test]
fn small_and_large() {
    // "small-and-large"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        small_and_large_devices(false),
        &[],
        &node(NODE1, REGION1),
        &[claim(CLAIM0, small_and_large_requests(), Vec::new())],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ1, DRIVER_A, POOL1, DEVICE2, false)
            ]
        )]))
    );
}

#[test]
fn small_and_large_backtrack_requests() {
    // "small-and-large-backtrack-requests": the large device is tried first for the small
    // request, which leaves the large request without a device, and is undone.
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        small_and_large_devices(true),
        &[],
        &node(NODE1, REGION1),
        &[claim(CLAIM0, small_and_large_requests(), Vec::new())],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ1, DRIVER_A, POOL1, DEVICE2, false)
            ]
        )]))
    );
}

#[test]
fn small_and_large_backtrack_claims() {
    // "small-and-large-backtrack-claims"
    let mut requests = small_and_large_requests();
    let large = requests.pop().expect("two requests");
    let small = requests.pop().expect("two requests");
    let claims = [
        claim(CLAIM0, vec![small], Vec::new()),
        claim(CLAIM1, vec![large], Vec::new()),
    ];
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        small_and_large_devices(true),
        &[],
        &node(NODE1, REGION1),
        &claims,
    );
    assert_eq!(
        out,
        Ok(Some(vec![
            allocation(local(NODE1), vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)]),
            allocation(local(NODE1), vec![result(REQ1, DRIVER_A, POOL1, DEVICE2, false)]),
        ]))
    );
}

#[test]
fn devices_split_across_different_slices() {
    // "devices-split-across-different-slices"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![
            one_device(SLICE1, on(NODE1), POOL1, DRIVER_A),
            one_device(SLICE2, on(NODE1), POOL2, DRIVER_A),
        ],
        &[],
        &node(NODE1, REGION1),
        &[claim(CLAIM0, vec![request(REQ0, CLASS_A, 2)], Vec::new())],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ0, DRIVER_A, POOL2, DEVICE1, false)
            ]
        )]))
    );
}

#[test]
fn pools_and_slices_are_walked_in_kubes_order() {
    // The order of "devices-split-across-different-slices" and buildPool's sort: pools by
    // driver then name, slices by name, whatever order the slices come in.
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![
            slice("slice-b", on(NODE1), POOL2, DRIVER_A, vec![device(DEVICE3)]),
            slice_count(slice("slice-z", on(NODE1), POOL1, DRIVER_A, vec![device(DEVICE1)]), 2),
            slice_count(slice("slice-a", on(NODE1), POOL1, DRIVER_A, vec![device(DEVICE2)]), 2),
        ],
        &[],
        &node(NODE1, REGION1),
        &[claim(CLAIM0, vec![request(REQ0, CLASS_A, 2)], Vec::new())],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false)
            ]
        )]))
    );
}

#[test]
fn obsolete_slice() {
    // "obsolete-slice": the newer generation replaces the older, and is itself incomplete.
    let mut newer = slice_count(
        slice("slice-1-obsolete", on(NODE1), POOL1, DRIVER_A, vec![device(DEVICE2)]),
        2,
    );
    newer.pool_generation += 1;
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![
            slice_count(
                slice("slice-1-obsolete", on(NODE1), POOL1, DRIVER_A, vec![device(DEVICE1)]),
                2,
            ),
            newer,
        ],
        &[],
        &node(NODE1, REGION1),
        &[simple_claim(CLAIM0, REQ0, CLASS_A)],
    );
    assert_eq!(out, Ok(None));
}

#[test]
fn duplicate_slice() {
    // "duplicate-slice": two slices with the same device make the pool invalid.
    let a = slice_count(one_device(SLICE1, on(NODE1), POOL1, DRIVER_A), 2);
    let mut b = a.clone();
    b.name.push_str("-2");
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![a, b],
        &[],
        &node(NODE1, REGION1),
        &[simple_claim(CLAIM0, REQ0, CLASS_A)],
    );
    assert_eq!(error_text(out), "invalid resource pools were encountered");
}

#[test]
fn no_slices_and_not_enough_devices() {
    // "no-slices"
    let n = node(NODE1, REGION1);
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        Vec::new(),
        &[],
        &n,
        &[simple_claim(CLAIM0, REQ0, CLASS_A)],
    );
    assert_eq!(out, Ok(None));
    // "not-enough-suitable-devices"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![one_device(SLICE1, on(NODE1), POOL1, DRIVER_A)],
        &[],
        &n,
        &[simple_claim(CLAIM0, REQ0, CLASS_A), simple_claim(CLAIM0, REQ1, CLASS_A)],
    );
    assert_eq!(out, Ok(None));
    // "no-claims-to-allocate"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![one_device(SLICE1, on(NODE1), POOL1, DRIVER_A)],
        &[],
        &n,
        &[],
    );
    assert_eq!(out, Ok(Some(Vec::new())));
}

#[test]
fn unknown_and_empty_class() {
    let n = node(NODE1, REGION1);
    let slices = || vec![one_device(SLICE1, on(NODE1), POOL1, DRIVER_A)];
    // "no-classes"
    let out = run(&[], slices(), &[], &n, &[simple_claim(CLAIM0, REQ0, CLASS_A)]);
    assert_eq!(
        error_text(out),
        r#"claim claim-0, request req-0: could not retrieve device class class-a: deviceclass.resource.k8s.io "class-a" not found"#
    );
    // "unknown-class"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        slices(),
        &[],
        &n,
        &[simple_claim(CLAIM0, REQ0, "unknown-class")],
    );
    assert!(error_text(out).contains("could not retrieve device class unknown-class"));
    // "empty-class"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        slices(),
        &[],
        &n,
        &[simple_claim(CLAIM0, REQ0, "")],
    );
    assert_eq!(
        error_text(out),
        "claim claim-0, request req-0: missing device class name (unsupported request type?)"
    );
}

#[test]
fn all_devices_single_and_many() {
    let n = node(NODE1, REGION1);
    // "all-devices-single"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![one_device(SLICE1, on(NODE1), POOL1, DRIVER_A)],
        &[],
        &n,
        &[claim(CLAIM0, vec![all_request(REQ0, CLASS_A)], Vec::new())],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)]
        )]))
    );
    // "all-devices-many"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![
            one_device(SLICE1, on(NODE1), POOL1, DRIVER_A),
            one_device(SLICE1, on(NODE1), POOL2, DRIVER_A),
        ],
        &[],
        &n,
        &[claim(CLAIM0, vec![all_request(REQ0, CLASS_A)], Vec::new())],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ0, DRIVER_A, POOL2, DEVICE1, false)
            ]
        )]))
    );
    // "all-devices-no-slices": at least one device is needed.
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        Vec::new(),
        &[],
        &n,
        &[claim(CLAIM0, vec![all_request(REQ0, CLASS_A)], Vec::new())],
    );
    assert_eq!(out, Ok(None));
}

#[test]
fn all_devices_of_the_incomplete_pool() {
    // "all-devices-of-the-incomplete-pool"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![slice_count(one_device(SLICE1, on(NODE1), POOL1, DRIVER_A), 2)],
        &[],
        &node(NODE1, REGION1),
        &[claim(CLAIM0, vec![all_request(REQ0, CLASS_A)], Vec::new())],
    );
    assert_eq!(
        error_text(out),
        "claim claim-0, request req-0: asks for all devices, but resource pool driver-a/pool-1 is currently being updated"
    );
}

#[test]
fn incomplete_pool_is_skipped_for_exact_count() {
    // An incomplete pool gives no device to an ExactCount request (allocateOne skips it), but
    // another pool may.
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![
            slice_count(one_device(SLICE1, on(NODE1), POOL1, DRIVER_A), 2),
            one_device(SLICE2, on(NODE1), POOL2, DRIVER_A),
        ],
        &[],
        &node(NODE1, REGION1),
        &[simple_claim(CLAIM0, REQ0, CLASS_A)],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![result(REQ0, DRIVER_A, POOL2, DEVICE1, false)]
        )]))
    );
}

fn two_device_slice() -> Vec<ResourceSlice> {
    vec![slice(
        SLICE1,
        on(NODE1),
        POOL1,
        DRIVER_A,
        vec![device(DEVICE1), device(DEVICE2)],
    )]
}

#[test]
fn all_devices_some_allocated() {
    // "all-devices-some-allocated"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        two_device_slice(),
        &[id(DRIVER_A, POOL1, DEVICE1)],
        &node(NODE1, REGION1),
        &[claim(CLAIM0, vec![all_request(REQ0, CLASS_A)], Vec::new())],
    );
    assert_eq!(out, Ok(None));
}

fn admin(mut s: RequestSpec) -> RequestSpec {
    s.admin_access = true;
    s
}

#[test]
fn all_devices_some_allocated_admin_access() {
    // "all-devices-some-allocated-admin-access"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        two_device_slice(),
        &[id(DRIVER_A, POOL1, DEVICE1)],
        &node(NODE1, REGION1),
        &[claim(
            CLAIM0,
            vec![request_with(REQ0, admin(spec(CLASS_A, AllocationMode::All)))],
            Vec::new(),
        )],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, true),
                result(REQ0, DRIVER_A, POOL1, DEVICE2, true)
            ]
        )]))
    );
}

#[test]
fn all_devices_some_allocating_admin_access() {
    // "all-devices-some-allocating-admin-access": the first admin request takes device-1 for
    // the claim, so the second cannot take all devices.
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        two_device_slice(),
        &[],
        &node(NODE1, REGION1),
        &[claim(
            CLAIM0,
            vec![
                request_with(REQ0, admin(spec(CLASS_A, AllocationMode::ExactCount(1)))),
                request_with(REQ1, admin(spec(CLASS_A, AllocationMode::All))),
            ],
            Vec::new(),
        )],
    );
    assert_eq!(out, Ok(None));
}

#[test]
fn count_devices_some_allocated_admin_access() {
    // "count-devices-some-allocated-admin-access"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        two_device_slice(),
        &[id(DRIVER_A, POOL1, DEVICE1)],
        &node(NODE1, REGION1),
        &[claim(
            CLAIM0,
            vec![request_with(REQ0, admin(spec(CLASS_A, AllocationMode::ExactCount(2))))],
            Vec::new(),
        )],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, true),
                result(REQ0, DRIVER_A, POOL1, DEVICE2, true)
            ]
        )]))
    );
}

#[test]
fn already_allocated_devices_and_admin_access_enabled() {
    let n = node(NODE1, REGION1);
    let allocated = [id(DRIVER_A, POOL1, DEVICE1), id(DRIVER_A, POOL1, DEVICE2)];
    // "already-allocated-devices"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![one_device(SLICE1, on(NODE1), POOL1, DRIVER_A)],
        &allocated,
        &n,
        &[simple_claim(CLAIM0, REQ0, CLASS_A)],
    );
    assert_eq!(out, Ok(None));
    // "admin-access-enabled"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![one_device(SLICE1, on(NODE1), POOL1, DRIVER_A)],
        &allocated,
        &n,
        &[claim(
            CLAIM0,
            vec![request_with(REQ0, admin(spec(CLASS_A, AllocationMode::ExactCount(1))))],
            Vec::new(),
        )],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, true)]
        )]))
    );
}

#[test]
fn network_attached_device() {
    // "network-attached-device"
    let slices = || vec![one_device(SLICE1, label_selector("region", REGION1), POOL1, DRIVER_A)];
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        slices(),
        &[],
        &node(NODE1, REGION1),
        &[simple_claim(CLAIM0, REQ0, CLASS_A)],
    );
    let NodeSelection::NodeSelector(terms) = label_selector("region", REGION1) else {
        unreachable!("a selector")
    };
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            Some(terms),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)]
        )]))
    );
    // "unsuccessful-allocation-network-attached-device"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        slices(),
        &[],
        &node(NODE2, REGION2),
        &[simple_claim(CLAIM0, REQ0, CLASS_A)],
    );
    assert_eq!(out, Ok(None));
}

#[test]
fn many_network_attached_devices() {
    // "many-network-attached-devices": the node selector is the union of the slices'.
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![
            one_device(SLICE1, label_selector("region", REGION1), POOL1, DRIVER_A),
            one_device(SLICE1, NodeSelection::AllNodes, POOL2, DRIVER_A),
            one_device(SLICE1, label_selector("planet", "earth"), POOL3, DRIVER_A),
            one_device(SLICE1, field_selector(NODE1), POOL4, DRIVER_A),
        ],
        &[],
        &node(NODE1, REGION1),
        &[claim(CLAIM0, vec![request(REQ0, CLASS_A, 4)], Vec::new())],
    );
    let requirement = |key: &str, value: &str| Requirement {
        key: key.into(),
        op: SelectorOp::In(vec![value.into()]),
    };
    let expected = SelectorTerm {
        match_expressions: vec![requirement("region", REGION1), requirement("planet", "earth")],
        match_fields: vec![requirement("metadata.name", NODE1)],
    };
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            Some(vec![expected]),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ0, DRIVER_A, POOL2, DEVICE1, false),
                result(REQ0, DRIVER_A, POOL3, DEVICE1, false),
                result(REQ0, DRIVER_A, POOL4, DEVICE1, false),
            ]
        )]))
    );
}

#[test]
fn local_and_network_attached_devices() {
    // "local-and-network-attached-devices": one node-local device makes the selector the node.
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![
            one_device(SLICE1, label_selector("region", REGION1), POOL1, DRIVER_A),
            one_device(SLICE1, on(NODE1), POOL2, DRIVER_A),
        ],
        &[],
        &node(NODE1, REGION1),
        &[claim(CLAIM0, vec![request(REQ0, CLASS_A, 2)], Vec::new())],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ0, DRIVER_A, POOL2, DEVICE1, false)
            ]
        )]))
    );
}

#[test]
fn all_nodes_device_has_no_node_selector() {
    // createNodeSelector: devices on every node need no selector.
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![one_device(SLICE1, NodeSelection::AllNodes, POOL1, DRIVER_A)],
        &[],
        &node(NODE1, REGION1),
        &[simple_claim(CLAIM0, REQ0, CLASS_A)],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            None,
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)]
        )]))
    );
}

#[test]
fn several_different_drivers() {
    // "several-different-drivers"
    let out = run(
        &[class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        vec![
            slice(
                SLICE1,
                on(NODE1),
                POOL1,
                DRIVER_A,
                vec![device(DEVICE1), device(DEVICE2)],
            ),
            one_device(SLICE1, on(NODE1), POOL1, DRIVER_B),
        ],
        &[],
        &node(NODE1, REGION1),
        &[simple_claim(CLAIM0, REQ0, CLASS_A), simple_claim(CLAIM0, REQ0, CLASS_B)],
    );
    assert_eq!(
        out,
        Ok(Some(vec![
            allocation(local(NODE1), vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)]),
            allocation(local(NODE1), vec![result(REQ0, DRIVER_B, POOL1, DEVICE1, false)]),
        ]))
    );
}

fn attrs_device(name: &str, version: &str, numa: i64, string: &str, boolean: bool) -> Device {
    with_attrs(
        device(name),
        &[
            ("driver-a/driverVersion", AttributeValue::Version(version.into())),
            ("driver-a/numa", AttributeValue::Int(numa)),
            ("driver-a/stringAttribute", AttributeValue::String(string.into())),
            ("driver-a/boolAttribute", AttributeValue::Bool(boolean)),
        ],
    )
}

#[test]
fn with_constraint() {
    // "with-constraint"
    let constraints = vec![
        match_attribute(&[], "driver-a/numa"),
        match_attribute(&[], "driver-a/driverVersion"),
        match_attribute(&[], "driver-a/stringAttribute"),
        match_attribute(&[], "driver-a/boolAttribute"),
    ];
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![slice(
            SLICE1,
            on(NODE1),
            POOL1,
            DRIVER_A,
            vec![
                attrs_device(DEVICE1, "1.0.0", 1, "s", true),
                attrs_device(DEVICE2, "1.0.0", 1, "s", true),
            ],
        )],
        &[],
        &node(NODE1, REGION1),
        &[claim(
            CLAIM0,
            vec![request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1)],
            constraints,
        )],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ1, DRIVER_A, POOL1, DEVICE2, false)
            ]
        )]))
    );
}

#[test]
fn with_constraint_non_existent_and_not_matching() {
    let n = node(NODE1, REGION1);
    // "with-constraint-non-existent-attribute"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![one_device(SLICE1, on(NODE1), POOL1, DRIVER_A)],
        &[],
        &n,
        &[claim(
            CLAIM0,
            vec![request(REQ0, CLASS_A, 1)],
            vec![match_attribute(&[], "driver-a/NonExistentAttribute")],
        )],
    );
    assert_eq!(out, Ok(None));
    // "with-constraint-not-matching-int-attribute" (the attribute unqualified in the slice: it
    // belongs to the driver's domain, lookupAttribute).
    let slices = || {
        vec![slice(
            SLICE1,
            on(NODE1),
            POOL1,
            DRIVER_A,
            vec![
                with_attrs(device(DEVICE1), &[("numa", AttributeValue::Int(1))]),
                with_attrs(device(DEVICE2), &[("numa", AttributeValue::Int(2))]),
            ],
        )]
    };
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        slices(),
        &[],
        &n,
        &[claim(
            CLAIM0,
            vec![request(REQ0, CLASS_A, 2)],
            vec![match_attribute(&[], "driver-a/numa")],
        )],
    );
    assert_eq!(out, Ok(None));
    // "with-constraint-not-matching-int-attribute-all-devices": for All, a device breaking a
    // constraint is an error.
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        slices(),
        &[],
        &n,
        &[claim(
            CLAIM0,
            vec![all_request(REQ0, CLASS_A)],
            vec![match_attribute(&[], "driver-a/numa")],
        )],
    );
    assert_eq!(
        error_text(out),
        "claim claim-0, request req-0: cannot add device driver-a/pool-1/device-2 because a claim constraint would not be satisfied"
    );
    // distinctAttribute: the same two devices have distinct values.
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        slices(),
        &[],
        &n,
        &[claim(
            CLAIM0,
            vec![request(REQ0, CLASS_A, 2)],
            vec![distinct_attribute(&[], "driver-a/numa")],
        )],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ0, DRIVER_A, POOL1, DEVICE2, false)
            ]
        )]))
    );
}

#[test]
fn with_constraint_for_request_retry() {
    // "with-constraint-for-request-retry": device-1 breaks the second constraint for req-1, so
    // the allocator backtracks.
    let d = |name: &str, version: &str, s: &str| {
        with_attrs(
            device(name),
            &[
                ("driver-a/driverVersion", AttributeValue::Version(version.into())),
                ("driver-a/stringAttribute", AttributeValue::String(s.into())),
            ],
        )
    };
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![slice(
            SLICE1,
            on(NODE1),
            POOL1,
            DRIVER_A,
            vec![
                d(DEVICE1, "1.0.0", "a"),
                d(DEVICE2, "2.0.0", "b"),
                d(DEVICE3, "3.0.0", "b"),
            ],
        )],
        &[],
        &node(NODE1, REGION1),
        &[claim(
            CLAIM0,
            vec![request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1)],
            vec![
                match_attribute(&[REQ0], "driver-a/driverVersion"),
                match_attribute(&[], "driver-a/stringAttribute"),
            ],
        )],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                result(REQ1, DRIVER_A, POOL1, DEVICE3, false)
            ]
        )]))
    );
}

#[test]
fn invalid_cel() {
    let n = node(NODE1, REGION1);
    let slices = || vec![one_device(SLICE1, on(NODE1), POOL1, DRIVER_A)];
    // "invalid-CEL-one-device"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        slices(),
        &[],
        &n,
        &[claim(
            CLAIM0,
            vec![request_with(REQ0, selecting(CLASS_A, 1, "noSuchVar"))],
            Vec::new(),
        )],
    );
    let text = error_text(out);
    assert!(
        text.starts_with("claim claim-0: selector #0: CEL compile error: compilation failed:"),
        "{text}"
    );
    assert!(text.contains("undeclared reference to 'noSuchVar'"), "{text}");
    // "invalid-CEL-one-device-class"
    let mut bad = class(CLASS_A, DRIVER_A);
    bad.selectors = vec![Arc::from("noSuchVar")];
    let out = run(&[bad], slices(), &[], &n, &[simple_claim(CLAIM0, REQ0, CLASS_A)]);
    let text = error_text(out);
    assert!(
        text.starts_with("class class-a: selector #0: CEL compile error:"),
        "{text}"
    );
    assert!(text.contains("undeclared reference"), "{text}");
    // "invalid-CEL-all-devices"
    let mut all = spec(CLASS_A, AllocationMode::All);
    all.selectors.push(Arc::from("noSuchVar"));
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        slices(),
        &[],
        &n,
        &[claim(CLAIM0, vec![request_with(REQ0, all)], Vec::new())],
    );
    assert!(error_text(out).contains("undeclared reference"));
}

#[test]
fn cel_runtime_error_names_the_device() {
    // selectorsMatch: a runtime error names class or claim, selector and device.
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![one_device(SLICE1, on(NODE1), POOL1, DRIVER_A)],
        &[],
        &node(NODE1, REGION1),
        &[claim(
            CLAIM0,
            vec![request_with(
                REQ0,
                selecting(CLASS_A, 1, r#"device.attributes["driver-a"].model == "x""#),
            )],
            Vec::new(),
        )],
    );
    assert_eq!(
        error_text(out),
        "claim claim-0: selector #0 on device driver-a/pool-1/device-1: CEL runtime error: no such key: model. consider \
         using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields"
    );
}

#[test]
fn too_many_devices() {
    let n = node(NODE1, REGION1);
    let many: Vec<Device> = (0..40).map(|i| device(&format!("device-{i}"))).collect();
    let slices = || vec![slice(SLICE1, on(NODE1), POOL1, DRIVER_A, many.clone())];
    // "too-many-devices-single-request"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        slices(),
        &[],
        &n,
        &[claim(CLAIM0, vec![request(REQ0, CLASS_A, 33)], Vec::new())],
    );
    assert_eq!(
        error_text(out),
        "claim claim-0, request req-0: adding 33 devices exceeds the claim limit of 32, with 0 already accounted for"
    );
    // "many-devices-okay"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        slices(),
        &[],
        &n,
        &[claim(CLAIM0, vec![request(REQ0, CLASS_A, 32)], Vec::new())],
    );
    assert_eq!(out.map(|r| r.map(|a| a[0].devices.len())), Ok(Some(32)));
    // "too-many-devices-total"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        slices(),
        &[],
        &n,
        &[claim(
            CLAIM0,
            vec![request(REQ0, CLASS_A, 16), request(REQ1, CLASS_A, 17)],
            Vec::new(),
        )],
    );
    assert_eq!(
        error_text(out),
        "claim claim-0, request req-1: adding 17 devices exceeds the claim limit of 32, with 16 already accounted for"
    );
}

#[test]
fn prioritized_list_first_unavailable_and_non_available() {
    let n = node(NODE1, REGION1);
    let classes = [class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)];
    // "prioritized-list-first-unavailable"
    let out = run(
        &classes,
        vec![one_device(SLICE1, on(NODE1), POOL1, DRIVER_A)],
        &[],
        &n,
        &[claim(
            CLAIM0,
            vec![prioritized(
                REQ0,
                vec![
                    sub(SUB0, spec(CLASS_B, AllocationMode::ExactCount(1))),
                    sub(SUB1, spec(CLASS_A, AllocationMode::ExactCount(1))),
                ],
            )],
            Vec::new(),
        )],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![result("req-0/subReq-1", DRIVER_A, POOL1, DEVICE1, false)]
        )]))
    );
    // "prioritized-list-non-available"
    let out = run(
        &classes,
        vec![
            one_device(SLICE1, on(NODE1), POOL1, DRIVER_A),
            one_device(SLICE2, on(NODE1), POOL2, DRIVER_B),
        ],
        &[],
        &n,
        &[claim(
            CLAIM0,
            vec![prioritized(
                REQ0,
                vec![
                    sub(SUB0, spec(CLASS_B, AllocationMode::ExactCount(2))),
                    sub(SUB1, spec(CLASS_A, AllocationMode::ExactCount(2))),
                ],
            )],
            Vec::new(),
        )],
    );
    assert_eq!(out, Ok(None));
}

fn mem_version_device(name: &str, memory: &str, version: &str) -> Device {
    with_attrs(
        with_capacity(device(name), &[("driver-a/memory", memory)]),
        &[("driver-a/driverVersion", AttributeValue::Version(version.into()))],
    )
}

fn subrequest_claim(constraint_on: &[&str]) -> ResourceClaim {
    claim(
        CLAIM0,
        vec![
            request_with(REQ0, selecting(CLASS_A, 1, &memory_at_least("8Gi"))),
            prioritized(
                REQ1,
                vec![
                    sub(SUB0, selecting(CLASS_A, 1, &memory_at_least("2Gi"))),
                    sub(SUB1, selecting(CLASS_A, 1, &memory_at_least("1Gi"))),
                ],
            ),
        ],
        vec![match_attribute(constraint_on, "driver-a/driverVersion")],
    )
}

#[test]
fn prioritized_list_subrequests_with_constraints_ref_sub_request() {
    // "prioritized-list-subrequests-with-constraints-ref-sub-request": the constraint names
    // req-1/subReq-0, which device-2 breaks; req-1/subReq-1 is not constrained and takes it.
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![
            slice(
                SLICE1,
                on(NODE1),
                POOL1,
                DRIVER_A,
                vec![mem_version_device(DEVICE1, "8Gi", "1.0.0")],
            ),
            slice(
                SLICE2,
                on(NODE1),
                POOL2,
                DRIVER_A,
                vec![mem_version_device(DEVICE2, "2Gi", "2.0.0")],
            ),
        ],
        &[],
        &node(NODE1, REGION1),
        &[subrequest_claim(&[REQ0, "req-1/subReq-0"])],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result("req-1/subReq-1", DRIVER_A, POOL2, DEVICE2, false)
            ]
        )]))
    );
}

#[test]
fn prioritized_list_subrequests_with_constraints() {
    // "prioritized-list-subrequests-with-constraints-ref-parent-request": naming the parent
    // request constrains every subrequest.
    {
        let names = [REQ0, REQ1];
        let out = run(
            &[class(CLASS_A, DRIVER_A)],
            vec![
                slice(
                    SLICE1,
                    on(NODE1),
                    POOL1,
                    DRIVER_A,
                    vec![mem_version_device(DEVICE1, "8Gi", "1.0.0")],
                ),
                slice(
                    SLICE2,
                    on(NODE1),
                    POOL2,
                    DRIVER_A,
                    vec![
                        mem_version_device(DEVICE2, "2Gi", "2.0.0"),
                        mem_version_device(DEVICE3, "1Gi", "1.0.0"),
                    ],
                ),
            ],
            &[],
            &node(NODE1, REGION1),
            &[subrequest_claim(&names)],
        );
        assert_eq!(
            out,
            Ok(Some(vec![allocation(
                local(NODE1),
                vec![
                    result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                    result("req-1/subReq-1", DRIVER_A, POOL2, DEVICE3, false)
                ]
            )])),
            "constraint on {names:?}"
        );
    }
}

#[test]
fn prioritized_list_too_many_in_first_subrequest() {
    // "prioritized-list-too-many-in-first-subrequest": the first subrequest needs more devices
    // than a claim may hold, the second fits.
    let many: Vec<Device> = (0..40).map(|i| device(&format!("device-{i}"))).collect();
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![slice(SLICE1, on(NODE1), POOL1, DRIVER_A, many)],
        &[],
        &node(NODE1, REGION1),
        &[claim(
            CLAIM0,
            vec![prioritized(
                REQ0,
                vec![
                    sub(SUB0, spec(CLASS_A, AllocationMode::ExactCount(33))),
                    sub(SUB1, spec(CLASS_A, AllocationMode::ExactCount(1))),
                ],
            )],
            Vec::new(),
        )],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![result("req-0/subReq-1", DRIVER_A, POOL1, "device-0", false)]
        )]))
    );
}

fn partitionable_slices(allocatable: &[(&str, &str)], total: &str) -> Vec<ResourceSlice> {
    let devices = allocatable
        .iter()
        .map(|(name, mem)| {
            consuming(
                with_capacity(device(name), &[("driver-a/memory", mem)]),
                COUNTER_SET1,
                &[("memory", mem)],
            )
        })
        .collect();
    vec![
        slice_count(slice(SLICE1, on(NODE1), POOL1, DRIVER_A, devices), 2),
        slice_count(
            counter_slice(SLICE2, on(NODE1), POOL1, DRIVER_A, COUNTER_SET1, &[("memory", total)]),
            2,
        ),
    ]
}

#[test]
fn partitionable_devices_single_device() {
    // "partitionable-devices-single-device"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        partitionable_slices(&[(DEVICE1, "4Gi")], "8Gi"),
        &[],
        &node(NODE1, REGION1),
        &[simple_claim(CLAIM0, REQ0, CLASS_A)],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)]
        )]))
    );
}

#[test]
fn partitionable_devices_no_capacity_available() {
    let n = node(NODE1, REGION1);
    // "partitionable-devices-no-capacity-available": device-2 in use leaves 2Gi of 18Gi.
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        partitionable_slices(&[(DEVICE1, "4Gi"), (DEVICE2, "16Gi")], "18Gi"),
        &[id(DRIVER_A, POOL1, DEVICE2)],
        &n,
        &[simple_claim(CLAIM0, REQ0, CLASS_A)],
    );
    assert_eq!(out, Ok(None));
    // "partitionable-devices-overallocated-capacity-pool"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        partitionable_slices(&[(DEVICE1, "4Gi"), (DEVICE2, "20Gi")], "18Gi"),
        &[id(DRIVER_A, POOL1, DEVICE2)],
        &n,
        &[simple_claim(CLAIM0, REQ0, CLASS_A)],
    );
    assert_eq!(out, Ok(None));
}

#[test]
fn partitionable_devices_counters_shared_within_a_search() {
    // Two partitions of 6Gi do not fit 8Gi together: the second request takes the 2Gi one.
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        partitionable_slices(&[(DEVICE1, "6Gi"), (DEVICE2, "6Gi"), (DEVICE3, "2Gi")], "8Gi"),
        &[],
        &node(NODE1, REGION1),
        &[claim(CLAIM0, vec![request(REQ0, CLASS_A, 2)], Vec::new())],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ0, DRIVER_A, POOL1, DEVICE3, false)
            ]
        )]))
    );
}

#[test]
fn partitionable_devices_per_device_node_selection_nodename() {
    // "partitionable-devices-per-device-node-selection-nodename"
    let mut d1 = consuming(
        with_capacity(device(DEVICE1), &[("driver-a/memory", "4Gi")]),
        COUNTER_SET1,
        &[("memory", "4Gi")],
    );
    d1.node_selection = on(NODE1);
    let mut d2 = consuming(
        with_capacity(device(DEVICE2), &[("driver-a/memory", "6Gi")]),
        COUNTER_SET1,
        &[("memory", "6Gi")],
    );
    d2.node_selection = on(NODE2);
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![
            slice_count(
                slice(SLICE1, NodeSelection::FromSlice, POOL1, DRIVER_A, vec![d1, d2]),
                2,
            ),
            slice_count(
                counter_slice(
                    SLICE2,
                    NodeSelection::FromSlice,
                    POOL1,
                    DRIVER_A,
                    COUNTER_SET1,
                    &[("memory", "18Gi")],
                ),
                2,
            ),
        ],
        &[],
        &node(NODE1, REGION1),
        &[claim(
            CLAIM0,
            vec![prioritized(
                REQ0,
                vec![
                    sub(SUB0, selecting(CLASS_A, 1, &memory_at_least("6Gi"))),
                    sub(SUB1, selecting(CLASS_A, 1, &memory_at_least("4Gi"))),
                ],
            )],
            Vec::new(),
        )],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![result("req-0/subReq-1", DRIVER_A, POOL1, DEVICE1, false)]
        )]))
    );
}

#[test]
fn tainted_devices() {
    let n = node(NODE1, REGION1);
    let two = || {
        vec![slice(
            SLICE1,
            on(NODE1),
            POOL1,
            DRIVER_A,
            vec![
                tainted(device(DEVICE1), &[taint_no_schedule()]),
                tainted(device(DEVICE2), &[taint_no_execute()]),
            ],
        )]
    };
    // "tainted-two-devices"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        two(),
        &[],
        &n,
        &[simple_claim(CLAIM0, REQ0, CLASS_A)],
    );
    assert_eq!(out, Ok(None));
    // "tainted-one-device-two-taints"
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![slice(
            SLICE1,
            on(NODE1),
            POOL1,
            DRIVER_A,
            vec![tainted(device(DEVICE1), &[taint_no_schedule(), taint_no_execute()])],
        )],
        &[],
        &n,
        &[simple_claim(CLAIM0, REQ0, CLASS_A)],
    );
    assert_eq!(out, Ok(None));
    // "tainted-two-devices-tolerated": only the second device's taint is tolerated; the
    // result records the request's tolerations.
    let mut s = spec(CLASS_A, AllocationMode::ExactCount(1));
    s.tolerations.push(toleration_no_execute());
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        two(),
        &[],
        &n,
        &[claim(CLAIM0, vec![request_with(REQ0, s)], Vec::new())],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![tolerating(
                result(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                &[toleration_no_execute()]
            )]
        )]))
    );
    // "tainted-two-devices-prioritized-list-tolerated"
    let mut tolerant = spec(CLASS_A, AllocationMode::ExactCount(1));
    tolerant.tolerations.push(toleration_no_execute());
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        two(),
        &[],
        &n,
        &[claim(
            CLAIM0,
            vec![prioritized(
                REQ0,
                vec![
                    sub(SUB0, spec(CLASS_A, AllocationMode::ExactCount(1))),
                    sub(SUB1, tolerant),
                ],
            )],
            Vec::new(),
        )],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![tolerating(
                result("req-0/subReq-1", DRIVER_A, POOL1, DEVICE2, false),
                &[toleration_no_execute()]
            )]
        )]))
    );
    // "tainted-no-effect" (PreferNoSchedule standing for kube's None: an effect that does not
    // keep devices from being allocated).
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![slice(
            SLICE1,
            on(NODE1),
            POOL1,
            DRIVER_A,
            vec![tainted(
                device(DEVICE1),
                &[taint("taint-key", "v", DeviceTaintEffect::PreferNoSchedule)],
            )],
        )],
        &[],
        &n,
        &[simple_claim(CLAIM0, REQ0, CLASS_A)],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)]
        )]))
    );
    // "tainted-admin-access": admin access does not bypass taints.
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![slice(
            SLICE1,
            on(NODE1),
            POOL1,
            DRIVER_A,
            vec![tainted(device(DEVICE1), &[taint_no_schedule()])],
        )],
        &[id(DRIVER_A, POOL1, DEVICE1), id(DRIVER_A, POOL1, DEVICE2)],
        &n,
        &[claim(
            CLAIM0,
            vec![request_with(REQ0, admin(spec(CLASS_A, AllocationMode::ExactCount(1))))],
            Vec::new(),
        )],
    );
    assert_eq!(out, Ok(None));
}

#[test]
fn tainted_one_device_two_taints_both_tolerated() {
    // "tainted-one-device-two-taints-both-tolerated"
    let mut s = spec(CLASS_A, AllocationMode::ExactCount(1));
    s.tolerations = vec![toleration_no_schedule(), toleration_no_execute()];
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![slice(
            SLICE1,
            on(NODE1),
            POOL1,
            DRIVER_A,
            vec![tainted(device(DEVICE1), &[taint_no_schedule(), taint_no_execute()])],
        )],
        &[],
        &node(NODE1, REGION1),
        &[claim(CLAIM0, vec![request_with(REQ0, s)], Vec::new())],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![tolerating(
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                &[toleration_no_schedule(), toleration_no_execute()]
            )]
        )]))
    );
}

/// A device with kube's `withBindingConditions`.
fn binding(mut d: Device, conditions: &[&str], failures: &[&str]) -> Device {
    d.has_binding_conditions = !conditions.is_empty();
    d.binding_conditions = conditions.iter().map(|c| c.to_string()).collect();
    d.binding_failure_conditions = failures.iter().map(|c| c.to_string()).collect();
    d
}

/// kube's `deviceRequestAllocationResultWithBindingConditions`.
fn result_binding(request: &str, pool: &str, device: &str, conditions: &[&str], failures: &[&str]) -> AllocatedDevice {
    AllocatedDevice {
        binding_conditions: conditions.iter().map(|c| c.to_string()).collect(),
        binding_failure_conditions: failures.iter().map(|c| c.to_string()).collect(),
        ..result(request, DRIVER_A, pool, device, false)
    }
}

// kube's `device-binding-conditions`: a device with binding conditions is allocated, its
// conditions copied into the result.
#[test]
fn device_binding_conditions() {
    let n = node(NODE1, REGION1);
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![slice(
            SLICE1,
            on(NODE1),
            POOL1,
            DRIVER_A,
            vec![binding(device(DEVICE1), &["IsPrepare"], &["BindingFailed"])],
        )],
        &[],
        &n,
        &[simple_claim(CLAIM0, REQ0, CLASS_A)],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![result_binding(REQ0, POOL1, DEVICE1, &["IsPrepare"], &["BindingFailed"])]
        )]))
    );
}

// kube's `binding-conditions-with-and-without`.
#[test]
fn binding_conditions_with_and_without() {
    let n = node(NODE1, REGION1);
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![slice(
            SLICE1,
            on(NODE1),
            POOL1,
            DRIVER_A,
            vec![
                device(DEVICE1),
                binding(device(DEVICE2), &["IsPrepare"], &["BindingFailed"]),
            ],
        )],
        &[],
        &n,
        &[claim(
            CLAIM0,
            vec![request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1)],
            vec![],
        )],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result_binding(REQ1, POOL1, DEVICE2, &["IsPrepare"], &["BindingFailed"]),
            ]
        )]))
    );
}

// kube's `node-restriction`: a device that binds to its node, in a slice for every node of a
// label, gets the node it was allocated for as its selector.
#[test]
fn a_device_that_binds_to_its_node_restricts_the_allocation_to_it() {
    let n = node(NODE1, REGION1);
    let mut d = device(DEVICE1);
    d.binds_to_node = true;
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![slice(
            SLICE1,
            label_selector("region", REGION1),
            POOL1,
            DRIVER_A,
            vec![d],
        )],
        &[],
        &n,
        &[simple_claim(CLAIM0, REQ0, CLASS_A)],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)]
        )]))
    );
}

// ---- consumable capacity (allocator_testing.go, the `consumable-capacity-*` and
// `allow-multiple-allocations-*` cases) ----

const CAPACITY0: &str = "capacity-0";
const CAPACITY1: &str = "capacity-1";

fn amount(s: &str) -> Amount {
    Amount::parse(s).expect("test quantity")
}

/// kube's `device(name, capacity, nil)`, with `withAllowMultipleAllocations` when `multiple`:
/// capacities as the converter keeps them (qualified in `capacity`, as written with the value
/// in `capacity_policies` for a shared device).
fn cap_device(name: &str, caps: &[(&str, &str)], multiple: bool) -> Device {
    let mut d = device(name);
    d.allow_multiple_allocations = multiple;
    for (k, v) in caps {
        d.capacity.insert(format!("{DRIVER_A}/{k}"), q(v));
        if multiple {
            d.capacity_policies.insert(
                format!("{DRIVER_A}/{k}"),
                CapacityPolicy {
                    name: k.to_string(),
                    value: amount(v),
                    ..CapacityPolicy::default()
                },
            );
        }
    }
    d
}

fn with_policy(mut d: Device, cap: &str, value: &str, policy: CapacityPolicy) -> Device {
    d.capacity.insert(format!("{DRIVER_A}/{cap}"), q(value));
    d.capacity_policies.insert(
        format!("{DRIVER_A}/{cap}"),
        CapacityPolicy {
            name: cap.to_string(),
            value: amount(value),
            has_policy: true,
            ..policy
        },
    );
    d
}

/// kube's `withCapacityRequestPolicyRange`: default 2, min 2, step 2, max 4.
fn with_range(d: Device, cap: &str, value: &str) -> Device {
    with_policy(
        d,
        cap,
        value,
        CapacityPolicy {
            default: Some(amount("2")),
            valid_range: Some(CapacityRange {
                min: Some(amount("2")),
                max: Some(amount("4")),
                step: Some(amount("2")),
            }),
            ..CapacityPolicy::default()
        },
    )
}

/// kube's `withCapacityRequestPolicyValidValues`: the default first, then `more`.
fn with_valid_values(d: Device, default: &str, cap: &str, value: &str, more: &[&str]) -> Device {
    let mut values = vec![amount(default)];
    values.extend(more.iter().map(|v| amount(v)));
    with_policy(
        d,
        cap,
        value,
        CapacityPolicy {
            default: Some(amount(default)),
            valid_values: values,
            ..CapacityPolicy::default()
        },
    )
}

/// kube's `withCapacityRequest`: `capacity-0` asked.
fn asking(mut s: RequestSpec, value: &str) -> RequestSpec {
    s.capacity_requests.insert(CAPACITY0.into(), amount(value));
    s
}

fn ask(class: &str, value: &str) -> RequestSpec {
    asking(spec(class, AllocationMode::ExactCount(1)), value)
}

/// kube's `withConsumedCapacity(&fixedShareID, ...)`: a new share (its ID drawn by the writer).
fn share(mut r: AllocatedDevice, consumed: &[(&str, &str)]) -> AllocatedDevice {
    r.share_id = Some(String::new());
    r.consumed_capacity = consumed.iter().map(|(k, v)| (k.to_string(), amount(v))).collect();
    r
}

/// [`run`] with devices shared by allocated claims (kube's `allocatedCapacityDevices`).
fn run_shared(
    classes: &[DeviceClass],
    slices: Vec<ResourceSlice>,
    allocated: &[DeviceId],
    shared: &[(DeviceId, &[(&str, &str)])],
    node: &NodeSpec,
    claims: &[ResourceClaim],
) -> Outcome {
    let slices: Vec<Arc<ResourceSlice>> = slices.into_iter().map(Arc::new).collect();
    let cel = SelectorCache::new();
    let lookup = |name: &str| classes.iter().find(|c| c.name == name);
    let slices = crate::engine::devices::SliceIndex::new(slices.to_vec());
    let mut in_use = crate::engine::devices::InUse::from(allocated.iter().cloned().collect::<HashSet<_>>());
    in_use.shared_snapshot = Arc::new(
        shared
            .iter()
            .map(|(id, consumed)| {
                (
                    id.clone(),
                    consumed.iter().map(|(k, v)| (k.to_string(), q(v))).collect(),
                )
            })
            .collect(),
    );
    let allocator = Allocator::new(&lookup, &slices, &in_use, &cel);
    let refs: Vec<&ResourceClaim> = claims.iter().collect();
    allocator.allocate(node, &refs)
}

fn one_claim(name: &str, s: RequestSpec) -> ResourceClaim {
    claim(name, vec![request_with(REQ0, s)], Vec::new())
}

fn shared_slice(devices: Vec<Device>) -> Vec<ResourceSlice> {
    vec![slice(SLICE1, on(NODE1), POOL1, DRIVER_A, devices)]
}

fn alloc1(devices: Vec<AllocatedDevice>) -> Allocation {
    allocation(local(NODE1), devices)
}

#[test]
fn consumable_capacity_missing_capacity_request() {
    let n = node(NODE1, REGION1);
    let classes = [class(CLASS_A, DRIVER_A)];
    // consumable-capacity-multi-allocatable-device-with-missing-capacity-request
    let devs = || shared_slice(vec![cap_device(DEVICE1, &[(CAPACITY1, "1")], true)]);
    assert_eq!(
        run(&classes, devs(), &[], &n, &[one_claim(CLAIM0, ask(CLASS_A, "1"))]),
        Ok(None)
    );
    // ...-allocation-mode-all-with-missing-capacity-request
    let all = asking(spec(CLASS_A, AllocationMode::All), "1");
    assert_eq!(run(&classes, devs(), &[], &n, &[one_claim(CLAIM0, all)]), Ok(None));
}

#[test]
fn consumable_capacity_shares_without_requests() {
    let n = node(NODE1, REGION1);
    let classes = [class(CLASS_A, DRIVER_A)];
    let two = || vec![simple_claim(CLAIM0, REQ0, CLASS_A), simple_claim(CLAIM1, REQ0, CLASS_A)];
    // ...-without-capacity-without-capacity-request: both share device-1, nothing consumed.
    let out = run(
        &classes,
        shared_slice(vec![cap_device(DEVICE1, &[], true)]),
        &[],
        &n,
        &two(),
    );
    let r = share(result(REQ0, DRIVER_A, POOL1, DEVICE1, false), &[]);
    assert_eq!(out, Ok(Some(vec![alloc1(vec![r.clone()]), alloc1(vec![r])])));
    // ...-without-policy-without-capacity-request: each takes a whole device.
    let out = run(
        &classes,
        shared_slice(vec![
            cap_device(DEVICE1, &[(CAPACITY0, "1")], true),
            cap_device(DEVICE2, &[(CAPACITY0, "1")], true),
        ]),
        &[],
        &n,
        &two(),
    );
    assert_eq!(
        out,
        Ok(Some(vec![
            alloc1(vec![share(
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                &[(CAPACITY0, "1")]
            )]),
            alloc1(vec![share(
                result(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                &[(CAPACITY0, "1")]
            )]),
        ]))
    );
    // ...-block: one device, whose whole capacity each wants.
    let out = run(
        &classes,
        shared_slice(vec![cap_device(DEVICE1, &[(CAPACITY0, "2")], true)]),
        &[],
        &n,
        &two(),
    );
    assert_eq!(out, Ok(None));
    // ...-with-policy-without-capacity-request: the default (2) each.
    let out = run(
        &classes,
        shared_slice(vec![with_range(cap_device(DEVICE1, &[], true), CAPACITY0, "4")]),
        &[],
        &n,
        &two(),
    );
    let r = share(result(REQ0, DRIVER_A, POOL1, DEVICE1, false), &[(CAPACITY0, "2")]);
    assert_eq!(out, Ok(Some(vec![alloc1(vec![r.clone()]), alloc1(vec![r])])));
    // ...-with-zero-request-policy: valid values [0], default 0.
    let zero = || {
        shared_slice(vec![with_valid_values(
            cap_device(DEVICE1, &[], true),
            "0",
            CAPACITY0,
            "1",
            &[],
        )])
    };
    let out = run(&classes, zero(), &[], &n, &two());
    let r = share(result(REQ0, DRIVER_A, POOL1, DEVICE1, false), &[(CAPACITY0, "0")]);
    assert_eq!(out, Ok(Some(vec![alloc1(vec![r.clone()]), alloc1(vec![r])])));
    // ...-violates-zero-request-policy
    assert_eq!(
        run(&classes, zero(), &[], &n, &[one_claim(CLAIM0, ask(CLASS_A, "1"))]),
        Ok(None)
    );
}

#[test]
fn consumable_capacity_requests_and_policies() {
    let n = node(NODE1, REGION1);
    let classes = [class(CLASS_A, DRIVER_A)];
    let two_asking = |a: &str, b: &str| vec![one_claim(CLAIM0, ask(CLASS_A, a)), one_claim(CLAIM1, ask(CLASS_A, b))];
    // ...-without-policy-with-capacity-request: 1 and 1 of 2.
    let out = run(
        &classes,
        shared_slice(vec![cap_device(DEVICE1, &[(CAPACITY0, "2")], true)]),
        &[],
        &n,
        &two_asking("1", "1"),
    );
    let r = share(result(REQ0, DRIVER_A, POOL1, DEVICE1, false), &[(CAPACITY0, "1")]);
    assert_eq!(out, Ok(Some(vec![alloc1(vec![r.clone()]), alloc1(vec![r])])));
    // ...-with-range-policy-with-capacity-request: 1 rounds up to the minimum, 2.
    let ranged = |value: &str| shared_slice(vec![with_range(cap_device(DEVICE1, &[], true), CAPACITY0, value)]);
    let out = run(&classes, ranged("4"), &[], &n, &two_asking("1", "1"));
    let r = share(result(REQ0, DRIVER_A, POOL1, DEVICE1, false), &[(CAPACITY0, "2")]);
    assert_eq!(out, Ok(Some(vec![alloc1(vec![r.clone()]), alloc1(vec![r])])));
    // ...-with-range-policy-step: 3 rounds up to 2 + 2.
    let out = run(&classes, ranged("4"), &[], &n, &[one_claim(CLAIM0, ask(CLASS_A, "3"))]);
    assert_eq!(
        out,
        Ok(Some(vec![alloc1(vec![share(
            result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
            &[(CAPACITY0, "4")]
        )])]))
    );
    // ...-with-exceeded-consumable-capacity-request: 1 (→ 2) and 2 of 2.
    assert_eq!(run(&classes, ranged("2"), &[], &n, &two_asking("1", "2")), Ok(None));
    // ...-with-request-over-max-sharing-policy: 6 of 10 over the policy's max, 4.
    assert_eq!(
        run(&classes, ranged("10"), &[], &n, &[one_claim(CLAIM0, ask(CLASS_A, "6"))]),
        Ok(None)
    );
    // ...-with-valid-values-policy: 2 is valid.
    let out = run(
        &classes,
        shared_slice(vec![with_valid_values(
            cap_device(DEVICE1, &[], true),
            "1",
            CAPACITY0,
            "4",
            &["2"],
        )]),
        &[],
        &n,
        &[one_claim(CLAIM0, ask(CLASS_A, "2"))],
    );
    assert_eq!(
        out,
        Ok(Some(vec![alloc1(vec![share(
            result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
            &[(CAPACITY0, "2")]
        )])]))
    );
    // ...-with-valid-values-policy-round-up: 2 rounds up to 3.
    let out = run(
        &classes,
        shared_slice(vec![with_valid_values(
            cap_device(DEVICE1, &[], true),
            "1",
            CAPACITY0,
            "3",
            &["3"],
        )]),
        &[],
        &n,
        &[one_claim(CLAIM0, ask(CLASS_A, "2"))],
    );
    assert_eq!(
        out,
        Ok(Some(vec![alloc1(vec![share(
            result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
            &[(CAPACITY0, "3")]
        )])]))
    );
}

#[test]
fn consumable_capacity_unrepresentable_and_negative_requests_abort() {
    let n = node(NODE1, REGION1);
    let classes = [class(CLASS_A, DRIVER_A)];
    // consumable-capacity-range-policy-request-above-int64-rejected
    let out = run(
        &classes,
        shared_slice(vec![with_range(cap_device(DEVICE1, &[], true), CAPACITY0, "4")]),
        &[],
        &n,
        &[one_claim(CLAIM0, ask(CLASS_A, "18446744073709551616"))],
    );
    let e = error_text(out);
    assert!(e.contains("cannot be represented"), "{e}");
    assert!(
        e.starts_with("claim claim-0, request req-0: checking capacity for device driver-a/pool-1/device-1: capacity \"capacity-0\": "),
        "{e}"
    );
    // consumable-capacity-negative-request-aborts
    let out = run(
        &classes,
        shared_slice(vec![cap_device(DEVICE1, &[(CAPACITY0, "10")], true)]),
        &[],
        &n,
        &[one_claim(CLAIM0, ask(CLASS_A, "-5"))],
    );
    let e = error_text(out);
    assert!(e.contains("negative"), "{e}");
}

#[test]
fn consumable_capacity_in_use() {
    let n = node(NODE1, REGION1);
    let classes = [class(CLASS_A, DRIVER_A)];
    let d1 = id(DRIVER_A, POOL1, DEVICE1);
    let used: &[(&str, &str)] = &[(CAPACITY0, "2")];
    // ...-with-allocated-capacity-use-remaining: 2 of 4 in use, 2 more fit.
    let out = run_shared(
        &classes,
        shared_slice(vec![with_range(cap_device(DEVICE1, &[], true), CAPACITY0, "4")]),
        &[],
        &[(d1.clone(), used)],
        &n,
        &[one_claim(CLAIM0, ask(CLASS_A, "2"))],
    );
    assert_eq!(
        out,
        Ok(Some(vec![alloc1(vec![share(
            result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
            &[(CAPACITY0, "2")]
        )])]))
    );
    // ...-with-allocated-capacity-next-device: device-1 full, device-2 taken.
    let out = run_shared(
        &classes,
        shared_slice(vec![
            with_range(cap_device(DEVICE1, &[], true), CAPACITY0, "2"),
            with_range(cap_device(DEVICE2, &[], true), CAPACITY0, "2"),
        ]),
        &[],
        &[(d1.clone(), used)],
        &n,
        &[one_claim(CLAIM0, ask(CLASS_A, "2"))],
    );
    assert_eq!(
        out,
        Ok(Some(vec![alloc1(vec![share(
            result(REQ0, DRIVER_A, POOL1, DEVICE2, false),
            &[(CAPACITY0, "2")]
        )])]))
    );
    // ...-with-no-available-consumable-capacity
    let out = run_shared(
        &classes,
        shared_slice(vec![with_range(cap_device(DEVICE1, &[], true), CAPACITY0, "2")]),
        &[],
        &[(d1.clone(), used)],
        &n,
        &[one_claim(CLAIM0, ask(CLASS_A, "2"))],
    );
    assert_eq!(out, Ok(None));
    // allow-multiple-allocations-not-allocate-multi-allocatable-device-which-already-dedicated
    let out = run_shared(
        &classes,
        shared_slice(vec![with_range(cap_device(DEVICE1, &[], true), CAPACITY0, "2")]),
        std::slice::from_ref(&d1),
        &[],
        &n,
        &[one_claim(CLAIM0, ask(CLASS_A, "1"))],
    );
    assert_eq!(out, Ok(None));
    // allow-multiple-allocations-not-allocate-dedicated-device-which-change-from-multi-allocatable
    let out = run_shared(
        &classes,
        shared_slice(vec![with_range(cap_device(DEVICE1, &[], false), CAPACITY0, "2")]),
        &[],
        &[(d1, &[(CAPACITY0, "1")])],
        &n,
        &[one_claim(CLAIM0, ask(CLASS_A, "1"))],
    );
    assert_eq!(out, Ok(None));
}

#[test]
fn consumable_capacity_backtracks_and_prioritized_lists() {
    let n = node(NODE1, REGION1);
    let classes = [class(CLASS_A, DRIVER_A)];
    let attr = |d: Device, v: &str| with_attrs(d, &[("driver-a/stringAttribute", AttributeValue::String(v.into()))]);
    // consumable-capacity-with-multi-allocatable-device-backtrack
    let out = run(
        &classes,
        shared_slice(vec![
            attr(
                with_range(cap_device(DEVICE2, &[], true), CAPACITY0, "2"),
                "stringAttributeValue1",
            ),
            attr(
                with_range(cap_device(DEVICE1, &[], true), CAPACITY0, "4"),
                "stringAttributeValue2",
            ),
        ]),
        &[],
        &n,
        &[
            claim(
                CLAIM0,
                vec![
                    request_with(REQ0, ask(CLASS_A, "2")),
                    request_with(REQ1, ask(CLASS_A, "2")),
                ],
                vec![match_attribute(&[], "driver-a/stringAttribute")],
            ),
            one_claim(CLAIM1, ask(CLASS_A, "2")),
        ],
    );
    assert_eq!(
        out,
        Ok(Some(vec![
            alloc1(vec![
                share(result(REQ0, DRIVER_A, POOL1, DEVICE1, false), &[(CAPACITY0, "2")]),
                share(result(REQ1, DRIVER_A, POOL1, DEVICE1, false), &[(CAPACITY0, "2")]),
            ]),
            alloc1(vec![share(
                result(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                &[(CAPACITY0, "2")]
            )]),
        ]))
    );
    // consumable-capacity-multi-allocatable-device-with-subrequest
    let out = run(
        &classes,
        shared_slice(vec![with_range(cap_device(DEVICE1, &[], true), CAPACITY0, "2")]),
        &[],
        &n,
        &[claim(
            CLAIM0,
            vec![prioritized(
                REQ0,
                vec![
                    sub(SUB0, ask(CLASS_A, "4")),
                    sub(SUB1, ask(CLASS_A, "2")),
                    sub("subReq-2", spec(CLASS_A, AllocationMode::ExactCount(1))),
                ],
            )],
            Vec::new(),
        )],
    );
    assert_eq!(
        out,
        Ok(Some(vec![alloc1(vec![share(
            result("req-0/subReq-1", DRIVER_A, POOL1, DEVICE1, false),
            &[(CAPACITY0, "2")]
        )])]))
    );
}

#[test]
fn consumable_capacity_all_devices() {
    let n = node(NODE1, REGION1);
    let classes = [class(CLASS_A, DRIVER_A)];
    let all = |v: &str| asking(spec(CLASS_A, AllocationMode::All), v);
    // ...-allocation-mode-all-filter-out-no-capacity / -insufficient-capacity
    for other in [
        cap_device(DEVICE2, &[], true),
        cap_device(DEVICE2, &[(CAPACITY0, "1")], true),
    ] {
        let out = run(
            &classes,
            shared_slice(vec![cap_device(DEVICE1, &[(CAPACITY0, "2")], true), other]),
            &[],
            &n,
            &[one_claim(CLAIM0, all("2"))],
        );
        assert_eq!(
            out,
            Ok(Some(vec![alloc1(vec![share(
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                &[(CAPACITY0, "2")]
            )])]))
        );
    }
    let pair = |c1: &str, c2: &str| {
        shared_slice(vec![
            cap_device(DEVICE1, &[(CAPACITY0, c1)], true),
            cap_device(DEVICE2, &[(CAPACITY0, c2)], true),
        ])
    };
    let both = || {
        claim(
            CLAIM0,
            vec![request_with(REQ0, ask(CLASS_A, "1")), request_with(REQ1, all("1"))],
            Vec::new(),
        )
    };
    // ...-allocation-mode-all-allocating-sufficient
    let out = run(&classes, pair("2", "1"), &[], &n, &[both()]);
    assert_eq!(
        out,
        Ok(Some(vec![alloc1(vec![
            share(result(REQ0, DRIVER_A, POOL1, DEVICE1, false), &[(CAPACITY0, "1")]),
            share(result(REQ1, DRIVER_A, POOL1, DEVICE1, false), &[(CAPACITY0, "1")]),
            share(result(REQ1, DRIVER_A, POOL1, DEVICE2, false), &[(CAPACITY0, "1")]),
        ])]))
    );
    // ...-allocation-mode-all-allocating-insufficient
    assert_eq!(run(&classes, pair("1", "1"), &[], &n, &[both()]), Ok(None));
    let d1 = id(DRIVER_A, POOL1, DEVICE1);
    // ...-allocation-mode-all-in-use-sufficient
    let out = run_shared(
        &classes,
        pair("2", "1"),
        &[],
        &[(d1.clone(), &[(CAPACITY0, "1")])],
        &n,
        &[one_claim(CLAIM0, all("1"))],
    );
    assert_eq!(
        out,
        Ok(Some(vec![alloc1(vec![
            share(result(REQ0, DRIVER_A, POOL1, DEVICE1, false), &[(CAPACITY0, "1")]),
            share(result(REQ0, DRIVER_A, POOL1, DEVICE2, false), &[(CAPACITY0, "1")]),
        ])]))
    );
    // ...-allocation-mode-all-in-use-insufficient: device-1 still matches, so All fails.
    let out = run_shared(
        &classes,
        pair("1", "1"),
        &[],
        &[(d1, &[(CAPACITY0, "1")])],
        &n,
        &[one_claim(CLAIM0, all("1"))],
    );
    assert_eq!(out, Ok(None));
}

#[test]
fn consumable_capacity_on_dedicated_devices() {
    let n = node(NODE1, REGION1);
    let classes = [class(CLASS_A, DRIVER_A)];
    // consumable-capacity-dedicated-device-with-consumable-capacity-request: no share.
    let out = run(
        &classes,
        shared_slice(vec![cap_device(DEVICE1, &[(CAPACITY0, "1")], false)]),
        &[],
        &n,
        &[one_claim(CLAIM0, ask(CLASS_A, "1"))],
    );
    assert_eq!(
        out,
        Ok(Some(vec![alloc1(vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)])]))
    );
    // ...-dedicated-device-with-multiple-consumable-capacity-request: the device is one claim's.
    let out = run(
        &classes,
        shared_slice(vec![with_range(cap_device(DEVICE1, &[], false), CAPACITY0, "2")]),
        &[],
        &n,
        &[
            one_claim(CLAIM0, ask(CLASS_A, "1")),
            one_claim(CLAIM1, ask(CLASS_A, "1")),
        ],
    );
    assert_eq!(out, Ok(None));
}

#[test]
fn consumable_capacity_with_shared_counters() {
    // allow-multiple-allocations-with-partitionable-device: device-1 (4Gi) and device-3 (4Gi)
    // fill the 8Gi counter; device-2 (6Gi) does not fit beside device-1.
    let n = node(NODE1, REGION1);
    let mem = |name: &str, m: &str| consuming(cap_device(name, &[("memory", m)], true), COUNTER_SET1, &[("memory", m)]);
    let slices = vec![
        slice_count(
            slice(
                SLICE1,
                on(NODE1),
                POOL1,
                DRIVER_A,
                vec![mem(DEVICE1, "4Gi"), mem(DEVICE2, "6Gi"), mem(DEVICE3, "4Gi")],
            ),
            2,
        ),
        counter_slice(SLICE2, on(NODE1), POOL1, DRIVER_A, COUNTER_SET1, &[("memory", "8Gi")]),
    ];
    let at_least = |m: &str| format!(r#"device.capacity["driver-a"].memory.compareTo(quantity("{m}")) >= 0"#);
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        slices,
        &[],
        &n,
        &[claim(
            CLAIM0,
            vec![
                request(REQ0, CLASS_A, 1),
                prioritized(
                    REQ1,
                    vec![
                        sub(SUB0, selecting(CLASS_A, 1, &at_least("6Gi"))),
                        sub(SUB1, selecting(CLASS_A, 1, &at_least("4Gi"))),
                    ],
                ),
            ],
            Vec::new(),
        )],
    );
    assert_eq!(
        out,
        Ok(Some(vec![alloc1(vec![
            share(result(REQ0, DRIVER_A, POOL1, DEVICE1, false), &[("memory", "4Gi")]),
            share(
                result("req-1/subReq-1", DRIVER_A, POOL1, DEVICE3, false),
                &[("memory", "4Gi")]
            ),
        ])]))
    );
}

// ---- the CEL environment ----

fn gpu() -> Device {
    let mut d = device("gpu-0");
    d.attributes
        .insert("dra.example.com/model".into(), AttributeValue::String("a100".into()));
    d.attributes
        .insert("dra.example.com/cores".into(), AttributeValue::Int(108));
    d.attributes
        .insert("dra.example.com/mig".into(), AttributeValue::Bool(true));
    d.attributes.insert(
        "other.example.com/driverVersion".into(),
        AttributeValue::Version("1.2.3-rc.1".into()),
    );
    d.attributes
        .insert("unqualified".into(), AttributeValue::String("mine".into()));
    d.capacity.insert("dra.example.com/memory".into(), q("40Gi"));
    d.capacity.insert("dra.example.com/power".into(), q("250m"));
    d
}

fn eval(expr: &str) -> Result<bool, CelError> {
    SelectorCache::new().matches(expr, "dra.example.com", &gpu())
}

#[test]
fn cel_driver_and_attributes_by_domain() {
    assert_eq!(eval(r#"device.driver == "dra.example.com""#), Ok(true));
    assert_eq!(
        eval(r#"device.attributes["dra.example.com"].model == "a100""#),
        Ok(true)
    );
    assert_eq!(
        eval(r#"device.attributes["dra.example.com"].cores > 100 && device.attributes["dra.example.com"].mig"#),
        Ok(true)
    );
    // An unqualified name in the slice belongs to the driver's domain.
    assert_eq!(
        eval(r#"device.attributes["dra.example.com"].unqualified == "mine""#),
        Ok(true)
    );
    // A domain without attributes is an empty map, not an error.
    assert_eq!(eval(r#"!has(device.attributes["none.example.com"].model)"#), Ok(true));
    assert_eq!(eval("device.allowMultipleAllocations"), Ok(false));
    assert_eq!(
        eval(r#"device.attributes["dra.example.com"].exists(k, k == "cores")"#),
        Ok(true)
    );
}

#[test]
fn cel_capacity_comparisons() {
    assert_eq!(
        eval(r#"device.capacity["dra.example.com"].memory.compareTo(quantity("40Gi")) == 0"#),
        Ok(true)
    );
    assert_eq!(
        eval(r#"device.capacity["dra.example.com"].memory.isGreaterThan(quantity("32Gi"))"#),
        Ok(true)
    );
    assert_eq!(
        eval(r#"device.capacity["dra.example.com"].memory.isLessThan(quantity("32Gi"))"#),
        Ok(false)
    );
    assert_eq!(
        eval(r#"device.capacity["dra.example.com"].memory.asInteger() == 42949672960"#),
        Ok(true)
    );
    assert_eq!(
        eval(r#"!device.capacity["dra.example.com"].power.isInteger()"#),
        Ok(true)
    );
    assert_eq!(
        eval(r#"device.capacity["dra.example.com"].power.asApproximateFloat() == 0.25"#),
        Ok(true)
    );
    assert_eq!(
        eval(r#"device.capacity["dra.example.com"].power.add(quantity("750m")).asInteger() == 1"#),
        Ok(true)
    );
    assert_eq!(
        eval(r#"device.capacity["dra.example.com"].power.sub(1).sign() == -1"#),
        Ok(true)
    );
    assert_eq!(
        eval(r#"sign(quantity("0")) == 0 && isQuantity("1Ki") && !isQuantity("1KB")"#),
        Ok(true)
    );
    assert_eq!(
        eval(r#"device.capacity["dra.example.com"].power.asInteger() == 0"#),
        Err(CelError::Runtime("cannot convert value to integer".into()))
    );
}

#[test]
fn cel_semver_comparisons() {
    let v = r#"device.attributes["other.example.com"].driverVersion"#;
    assert_eq!(eval(&format!(r#"{v}.isLessThan(semver("1.2.3"))"#)), Ok(true));
    assert_eq!(eval(&format!(r#"{v}.isGreaterThan(semver("1.2.3-beta.2"))"#)), Ok(true));
    assert_eq!(
        eval(&format!(r#"{v}.compareTo(semver("1.2.3-rc.1+build.5")) == 0"#)),
        Ok(true)
    );
    assert_eq!(
        eval(&format!("{v}.major() == 1 && {v}.minor() == 2 && {v}.patch() == 3")),
        Ok(true)
    );
    assert_eq!(eval(r#"semver("1.10.0").isGreaterThan(semver("1.9.0"))"#), Ok(true));
    assert_eq!(
        eval(r#"semver("1.0.0-alpha.10").isGreaterThan(semver("1.0.0-alpha.9"))"#),
        Ok(true)
    );
    assert_eq!(
        eval(r#"isSemver("1.2.3") && !isSemver("v1.2.3") && !isSemver("01.2.3") && isSemver("v1.2", true)"#),
        Ok(true)
    );
    assert_eq!(eval(r#"semver("v01.2", true) == semver("1.2.0")"#), Ok(true));
}

#[test]
fn cel_errors() {
    // A missing attribute: cel-go's words and kube's hint.
    assert_eq!(
        eval(r#"device.attributes["dra.example.com"].missing == 1"#),
        Err(CelError::Runtime(
            "no such key: missing. consider using CEL optional chaining (.? followed by orValue()) or guarding the \
             check with has() for optional fields"
                .into()
        ))
    );
    // A result that is not a bool.
    assert_eq!(
        eval(r#"device.attributes["dra.example.com"].cores"#),
        Err(CelError::NotBool("int".into()))
    );
    assert_eq!(
        eval("device.driver").map_err(|e| e.to_string()),
        Err("CEL result of type string could not be converted to bool: unsupported type conversion from 'string' to bool".into())
    );
    // Syntax and undeclared names fail to compile.
    assert!(matches!(eval("device.driver =="), Err(CelError::Compile(_))));
    assert!(
        matches!(eval("[1].all(x, x > y)"), Err(CelError::Compile(m)) if m.contains("undeclared reference to 'y'"))
    );
    assert_eq!(eval("[1, 2].all(x, x > 0)"), Ok(true));
    // A version attribute that is no semantic version.
    let mut d = gpu();
    d.attributes
        .insert("dra.example.com/v".into(), AttributeValue::Version("1.2".into()));
    assert!(matches!(
        SelectorCache::new().matches("true", "dra.example.com", &d),
        Err(CelError::Attribute { name, .. }) if name == "dra.example.com/v"
    ));
}

#[test]
fn cel_cost_is_bounded_and_compiles_once() {
    let cache = SelectorCache::new();
    let expr = "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, \
                [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, f > 0))))))";
    assert_eq!(
        cache.matches(expr, "dra.example.com", &gpu()),
        Err(CelError::Runtime(
            "operation cancelled: actual cost limit exceeded".into()
        ))
    );
    assert_eq!(cache.check("device.driver == 1 +"), cache.check("device.driver == 1 +"));
    assert!(cache.check("device.driver != \"\"").is_ok());
}

#[test]
fn all_devices_plus_another_and_no_solution() {
    let n = node(NODE1, REGION1);
    // "all-devices-plus-another"
    let out = run(
        &[class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        vec![
            one_device(SLICE1, on(NODE1), POOL1, DRIVER_A),
            one_device(SLICE1, on(NODE1), POOL1, DRIVER_B),
        ],
        &[],
        &n,
        &[
            claim(CLAIM0, vec![all_request(REQ0, CLASS_A)], Vec::new()),
            simple_claim(CLAIM1, REQ0, CLASS_B),
        ],
    );
    assert_eq!(
        out,
        Ok(Some(vec![
            allocation(local(NODE1), vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)]),
            allocation(local(NODE1), vec![result(REQ0, DRIVER_B, POOL1, DEVICE1, false)]),
        ]))
    );
    // "all-devices-no-solution": one device, two claims both trying to allocate it.
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        vec![one_device(SLICE1, on(NODE1), POOL1, DRIVER_A)],
        &[],
        &n,
        &[
            simple_claim(CLAIM1, REQ0, CLASS_A),
            claim(CLAIM0, vec![all_request(REQ0, CLASS_A)], Vec::new()),
        ],
    );
    assert_eq!(out, Ok(None));
}

#[test]
fn prioritized_list_subrequests_with_allocation_mode_all() {
    // "prioritized-list-subrequests-with-allocation-mode-all": device-1 in use keeps the All
    // subrequest from succeeding; the next subrequest takes device-2.
    let out = run(
        &[class(CLASS_A, DRIVER_A)],
        two_device_slice(),
        &[id(DRIVER_A, POOL1, DEVICE1)],
        &node(NODE1, REGION1),
        &[claim(
            CLAIM0,
            vec![prioritized(
                REQ0,
                vec![
                    sub(SUB0, spec(CLASS_A, AllocationMode::All)),
                    sub(SUB1, spec(CLASS_A, AllocationMode::ExactCount(1))),
                ],
            )],
            Vec::new(),
        )],
    );
    assert_eq!(
        out,
        Ok(Some(vec![allocation(
            local(NODE1),
            vec![result("req-0/subReq-1", DRIVER_A, POOL1, DEVICE2, false)]
        )]))
    );
}

#[test]
fn selector_cache_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<SelectorCache>();
    let cache = SelectorCache::new();
    let d = gpu();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    cache.matches(
                        r#"device.attributes["dra.example.com"].cores == 108"#,
                        "dra.example.com",
                        &d,
                    )
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().ok(), Some(Ok(true)));
        }
    });
}

/// kube's "interrupt" subtests (`allocator_testing.go`): six devices asked of five, with no
/// deadline ("off": no error, no allocation) and with one already passed ("deadline": the
/// search stops at its first step with the deadline's error, kube's Filter wording).
#[test]
fn interrupt() {
    let n = node(NODE1, REGION1);
    let devices = vec![
        device(DEVICE1),
        device(DEVICE2),
        device(DEVICE3),
        device("device-4"),
        device("device-5"),
    ];
    let claims = [claim(CLAIM0, vec![request(REQ0, CLASS_A, 6)], Vec::new())];
    let classes = [class(CLASS_A, DRIVER_A)];
    let off = run_until(
        &classes,
        vec![slice(SLICE1, on(NODE1), POOL1, DRIVER_A, devices.clone())],
        &[],
        &n,
        &claims,
        None,
    );
    assert_eq!(off, Ok(None));
    let passed = std::time::Instant::now();
    let out = run_until(
        &classes,
        vec![slice(SLICE1, on(NODE1), POOL1, DRIVER_A, devices)],
        &[],
        &n,
        &claims,
        Some(passed),
    );
    assert_eq!(out, Err(AllocateError::TimedOut { node: NODE1.into() }));
    assert_eq!(error_text(out), "node node-1: timed out trying to allocate devices");
}

/// Forty devices over 19 NUMA nodes, twenty with distinct NUMA nodes asked: no set exists and
/// the search would try every set of at most 19 (billions). With a deadline 20ms ahead it stops
/// with the timeout error soon after; a claim that fits is allocated under a deadline as without.
#[test]
fn a_search_that_explodes_stops_at_its_deadline() {
    let n = node(NODE1, REGION1);
    let numa_devices = || -> Vec<Device> {
        (0..40)
            .map(|i| with_attrs(device(&format!("device-{i}")), &[("numa", AttributeValue::Int(i % 19))]))
            .collect()
    };
    let classes = [class(CLASS_A, DRIVER_A)];
    let exploding = [claim(
        CLAIM0,
        vec![request(REQ0, CLASS_A, 20)],
        vec![distinct_attribute(&[], "driver-a/numa")],
    )];
    let started = std::time::Instant::now();
    let out = run_until(
        &classes,
        vec![slice(SLICE1, on(NODE1), POOL1, DRIVER_A, numa_devices())],
        &[],
        &n,
        &exploding,
        Some(started + std::time::Duration::from_millis(20)),
    );
    assert_eq!(out, Err(AllocateError::TimedOut { node: NODE1.into() }));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "stopped only after {:?}",
        started.elapsed()
    );

    // Nineteen distinct NUMA nodes fit: the same answer with a deadline as without.
    let fitting = [claim(
        CLAIM0,
        vec![request(REQ0, CLASS_A, 19)],
        vec![distinct_attribute(&[], "driver-a/numa")],
    )];
    let free = run(
        &classes,
        vec![slice(SLICE1, on(NODE1), POOL1, DRIVER_A, numa_devices())],
        &[],
        &n,
        &fitting,
    );
    let timed = run_until(
        &classes,
        vec![slice(SLICE1, on(NODE1), POOL1, DRIVER_A, numa_devices())],
        &[],
        &n,
        &fitting,
        Some(std::time::Instant::now() + std::time::Duration::from_secs(60)),
    );
    assert!(matches!(&free, Ok(Some(a)) if a[0].devices.len() == 19), "{free:?}");
    assert_eq!(timed, free);
}

#[path = "packing_tests.rs"]
mod packing_tests;
