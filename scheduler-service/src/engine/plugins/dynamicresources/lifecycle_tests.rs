//! The claim's lifecycle as kube-scheduler 1.37's DynamicResources (`dynamicresources.go`) sees
//! it: a claim shared up to the `reservedFor` limit, a template's claim the pod does not
//! control, and PostFilter's deallocation of an unused claim pinned to nodes the pod cannot use.

use crate::engine::devices::{Consumer, PodClaimRef, ResourceClaim};
use crate::engine::framework::{Deadline, Decision, Evaluator};
use crate::engine::model::{PodSpec, Requirement, SelectorOp, SelectorTerm};
use crate::engine::plugins::dynamicresources::{ClaimDeallocation, DEALLOCATED, NOT_AVAILABLE};
use crate::engine::policy::Policy;
use crate::engine::profile::Profile;
use crate::engine::snapshot::Snapshot;

use super::tests::{allocated, cluster, gpus, schedule, slice, with_claims};

/// kube's message for a pod every node refuses in PreFilter with `m`.
fn fit(m: &str) -> String {
    format!("0/3 nodes are available: {m}. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
}

/// `claim`, allocated on `node`'s `gpu-0` with a node selector naming `node`, as kube's
/// allocator writes a node-local allocation.
fn pinned(name: &str, node: &str) -> ResourceClaim {
    let mut c = allocated(name, node, &["gpu-0"]);
    if let Some(a) = c.allocation.as_mut() {
        a.node_selector = Some(vec![SelectorTerm {
            match_expressions: vec![],
            match_fields: vec![Requirement {
                key: "metadata.name".into(),
                op: SelectorOp::In(vec![node.into()]),
            }],
        }]);
    }
    c
}

fn pod_consumer(uid: &str) -> Consumer {
    Consumer {
        api_group: String::new(),
        resource: "pods".into(),
        name: uid.into(),
        uid: uid.into(),
    }
}

/// A pod whose entry `gpu` names a template, whose claim the resourceclaim controller created
/// as `claim`.
fn from_template(uid: &str, claim: &str) -> PodSpec {
    let mut p = with_claims(uid, &[]);
    p.resource_claims = vec![PodClaimRef {
        name: "gpu".into(),
        claim_name: Some(claim.into()),
        from_template: true,
    }];
    p
}

/// kube 1.37.2's PreFilter refuses an allocated claim with "resourceclaim in use" only when
/// `!resourceclaim.CanBeReserved(claim) && !resourceclaim.IsReservedForPod(pod, claim)`, and
/// `CanBeReserved` (`k8s.io/dynamic-resource-allocation/resourceclaim/resourceclaim.go`) is
/// `return true` ("Currently no restrictions on sharing..."): a claim whose `reservedFor` holds
/// `ResourceClaimReservedForMaxSize` (256) other pods passes PreFilter and Filter, and the pod is
/// placed on the claim's node. The limit is the API server's (`validateResourceClaimStatusUpdate`
/// refuses the 257th entry), met by PreBind's write, which kube reports as a SchedulerError
/// (`test/integration/dra/resourceclaim.go`).
#[test]
fn a_claim_reserved_for_the_maximum_of_other_pods_is_not_refused_as_in_use() {
    let mut full = pinned("shared", "n2");
    full.reserved_for = (0..256).map(|i| pod_consumer(&format!("other-{i}"))).collect();
    let snap = cluster(vec![slice("n1", "a100", 1), slice("n2", "a100", 1)], vec![full]);
    let out = schedule(&snap, &[with_claims("p1", &["shared"])]);
    assert_eq!(out[0], Ok(("n2".into(), vec![])));
}

/// `resourceclaim.IsForPod`: a template's claim must be controlled by the pod (kube's
/// `foreachPodResourceClaim`, `mustCheckOwner`); the error is PreFilter's
/// UnschedulableAndUnresolvable status on every node.
#[test]
fn a_template_claim_the_pod_does_not_control_is_refused_with_kubes_message() {
    let owned_by = |name: &str, controller: Option<&str>| {
        let mut c = gpus(name, 1);
        c.controller_uid = controller.map(String::from);
        c
    };
    let snap = cluster(
        vec![slice("n1", "a100", 4)],
        vec![
            owned_by("p1-gpu-abcde", Some("p1")),
            owned_by("p2-gpu-abcde", Some("someone-else")),
            owned_by("p3-gpu-abcde", Some("")),
            owned_by("p4-gpu-abcde", None),
            owned_by("by-name", Some("someone-else")),
        ],
    );
    let out = schedule(
        &snap,
        &[
            from_template("p1", "p1-gpu-abcde"),
            from_template("p2", "p2-gpu-abcde"),
            from_template("p3", "p3-gpu-abcde"),
            from_template("p4", "p4-gpu-abcde"),
            // An entry naming the claim (resourceClaimName): no owner check.
            with_claims("p5", &["by-name"]),
        ],
    );
    assert_eq!(out[0], Ok(("n1".into(), vec!["p1-gpu-abcde=n1/gpu-0".into()])));
    assert_eq!(
        out[1],
        Err(fit(
            "ResourceClaim default/p2-gpu-abcde was not created for Pod default/p2 (Pod is not owner)"
        ))
    );
    assert_eq!(
        out[2],
        Err(fit(
            "ResourceClaim default/p3-gpu-abcde was not created for Pod default/p3 (Pod is not owner)"
        ))
    );
    // The caller did not say who controls it: not checked.
    assert_eq!(out[3], Ok(("n1".into(), vec!["p4-gpu-abcde=n1/gpu-1".into()])));
    assert_eq!(out[4], Ok(("n1".into(), vec!["by-name=n1/gpu-2".into()])));
}

/// A pod whose required node affinity names `nodes`, with the claim `claim`.
fn only_on(uid: &str, claim: &str, nodes: &[&str]) -> PodSpec {
    let mut p = with_claims(uid, &[claim]);
    p.required_affinity = Some(vec![SelectorTerm {
        match_expressions: vec![],
        match_fields: vec![Requirement {
            key: "metadata.name".into(),
            op: SelectorOp::In(nodes.iter().map(|n| (*n).into()).collect()),
        }],
    }]);
    p
}

/// Each pod's decision: `Ok(node)` or its message and the claim PostFilter deallocates.
fn decide(snap: &Snapshot, pods: &[PodSpec]) -> Vec<Result<String, (String, Option<ClaimDeallocation>)>> {
    let profile = Profile::new(Policy::kube_default());
    Evaluator::new(&profile, snap)
        .schedule(pods, 0, Deadline::none())
        .unwrap()
        .into_iter()
        .map(|d| match d {
            Decision::Node { node, .. } => Ok(node),
            Decision::Unschedulable(diag) => Err((diag.message(), diag.deallocate.clone())),
        })
        .collect()
}

fn deallocation(name: &str) -> Option<ClaimDeallocation> {
    Some(ClaimDeallocation {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
    })
}

/// kube's `PostFilter` and `deallocateOrDeletePodClaims` (`dynamicresources.go`): a pod no node
/// fits, whose allocated claim Filter found not available on some node and which no other pod
/// uses, gets the claim deallocated (its allocation, reservations and device statuses cleared),
/// and the plugin's "deallocation of ResourceClaim completed" precedes DefaultPreemption's
/// message, joined with ", " (`RunPostFilterPlugins`). A claim another pod uses stays.
#[test]
fn post_filter_deallocates_an_unused_claim_pinned_to_nodes_the_pod_cannot_use() {
    let unused = pinned("unused", "n2");
    let mut own = pinned("own", "n2");
    own.reserved_for = vec![pod_consumer("p2")];
    let mut used = pinned("used", "n2");
    used.reserved_for = vec![pod_consumer("other")];
    let mut shared = pinned("shared", "n2");
    shared.reserved_for = vec![pod_consumer("p4"), pod_consumer("other")];
    let fits = pinned("fits", "n1");
    let snap = cluster(
        vec![slice("n1", "a100", 2), slice("n2", "a100", 4)],
        vec![unused, own, used, shared, fits],
    );
    let out = decide(
        &snap,
        &[
            only_on("p1", "unused", &["n1", "n3"]),
            only_on("p2", "own", &["n1", "n3"]),
            only_on("p3", "used", &["n1", "n3"]),
            only_on("p4", "shared", &["n1", "n3"]),
            only_on("p5", "fits", &["n1", "n3"]),
        ],
    );
    let message = |post: &str| {
        format!(
            "0/3 nodes are available: 1 node(s) didn't satisfy plugin(s) [NodeAffinity], \
             2 resourceclaim not available on the node. {post}preemption: 0/3 nodes are available: \
             3 Preemption is not helpful for scheduling."
        )
    };
    let deallocated = message("deallocation of ResourceClaim completed, ");
    assert_eq!(out[0], Err((deallocated.clone(), deallocation("unused"))));
    assert_eq!(out[1], Err((deallocated, deallocation("own"))));
    assert_eq!(out[2], Err((message(""), None)));
    assert_eq!(out[3], Err((message(""), None)));
    assert_eq!(out[4], Ok("n1".into()));
}

/// A claim allocated by an earlier pod of the batch is in flight, not unused: a later pod that
/// cannot go where it was allocated does not deallocate it. Nor does a pod no node fits for
/// another reason (Filter never found its claim unavailable).
#[test]
fn post_filter_leaves_claims_allocated_in_the_batch_and_claims_filter_never_refused() {
    let snap = cluster(
        vec![slice("n1", "a100", 1), slice("n2", "a100", 1)],
        vec![gpus("fresh", 1), gpus("three", 3)],
    );
    let out = decide(
        &snap,
        &[
            only_on("p1", "fresh", &["n2"]),
            only_on("p2", "fresh", &["n1", "n3"]),
            with_claims("p3", &["three"]),
        ],
    );
    assert_eq!(out[0], Ok("n2".into()));
    assert!(
        matches!(&out[1], Err((m, None)) if m.contains(NOT_AVAILABLE) && !m.contains(DEALLOCATED)),
        "{:?}",
        out[1]
    );
    assert!(
        matches!(&out[2], Err((m, None)) if !m.contains(DEALLOCATED)),
        "{:?}",
        out[2]
    );
}

/// `claim` pinned on `node`'s `gpu-0`, the device's binding conditions `IsReady` (failure
/// `Failed`) copied into the allocation, allocated `age` seconds ago, its status reporting the
/// conditions `true_conditions` True.
fn binding(name: &str, node: &str, age: i64, true_conditions: &[&str]) -> ResourceClaim {
    let mut c = pinned(name, node);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    if let Some(a) = c.allocation.as_mut() {
        a.timestamp = Some(now - age);
        for d in &mut a.devices {
            d.binding_conditions = vec!["IsReady".into()];
            d.binding_failure_conditions = vec!["Failed".into()];
        }
        c.device_statuses = a
            .devices
            .iter()
            .map(|d| crate::engine::devices::DeviceStatus {
                device: d.device.clone(),
                share_id: None,
                true_conditions: true_conditions.iter().map(|t| t.to_string()).collect(),
            })
            .collect();
    }
    c
}

/// kube's Filter for an allocated claim with binding conditions (`isClaimReadyForBinding`,
/// `isClaimTimeout`, `dynamicresources.go`): a failure condition True, or conditions not met
/// `bindingTimeout` (600s) after the allocation, make the claim unavailable on every node, and
/// PostFilter deallocates it so that the pod's next attempt allocates other devices. A claim still
/// within its timeout, or whose conditions are met, keeps its node.
#[test]
fn a_claim_whose_binding_failed_or_timed_out_is_deallocated() {
    let snap = cluster(
        vec![slice("n1", "a100", 2), slice("n2", "a100", 2)],
        vec![
            binding("failed", "n1", 5, &["Failed"]),
            binding("timed-out", "n1", 601, &[]),
            binding("waiting", "n1", 30, &[]),
            binding("ready", "n1", 601, &["IsReady"]),
        ],
    );
    let out = decide(
        &snap,
        &[
            with_claims("p1", &["failed"]),
            with_claims("p2", &["timed-out"]),
            with_claims("p3", &["waiting"]),
            with_claims("p4", &["ready"]),
        ],
    );
    let stuck = "0/3 nodes are available: 3 resourceclaim not available on the node. deallocation of \
                 ResourceClaim completed, preemption: 0/3 nodes are available: 3 Preemption is not helpful \
                 for scheduling.";
    assert_eq!(out[0], Err((stuck.to_string(), deallocation("failed"))));
    assert_eq!(out[1], Err((stuck.to_string(), deallocation("timed-out"))));
    assert_eq!(out[2], Ok("n1".into()));
    assert_eq!(out[3], Ok("n1".into()));
}
