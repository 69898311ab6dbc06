"""Tests of the placement-client package against the real scheduler-service binary.

The binary comes from $SCHEDULER_SERVICE_BIN, else target/release/scheduler-service, else
target/debug/scheduler-service (relative to the repository root); build it with
`cargo build -p scheduler-service`.
"""

from __future__ import annotations

import datetime
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from kubernetes import client as k8s

from placement_client import convert
from placement_client import placement_pb2 as pb
from placement_client import placement_pb2_grpc as pb_grpc

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def _binary() -> Path:
    env = os.environ.get("SCHEDULER_SERVICE_BIN")
    if env:
        return Path(env)
    for profile in ("release", "debug"):
        path = ROOT / "target" / profile / "scheduler-service"
        if path.exists():
            return path
    pytest.fail("scheduler-service not built: run `cargo build -p scheduler-service` or set SCHEDULER_SERVICE_BIN")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def addr(tmp_path_factory):
    binary = _binary()
    assert binary.exists(), f"{binary} does not exist"
    log = tmp_path_factory.mktemp("server") / "scheduler-service.log"
    # A port taken between _free_port() and the bind makes the server exit: retry a few times.
    for _ in range(3):
        address = f"127.0.0.1:{_free_port()}"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [str(binary), "--listen", address, "--metrics-listen", "off"], stdout=out, stderr=subprocess.STDOUT
            )
        channel = grpc.insecure_channel(address)
        try:
            deadline = time.monotonic() + 30
            while proc.poll() is None and time.monotonic() < deadline:
                try:
                    grpc.channel_ready_future(channel).result(timeout=0.5)
                    break
                except grpc.FutureTimeoutError:
                    continue
            else:
                proc.kill()
                proc.wait()
                continue
        finally:
            channel.close()
        try:
            yield address
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return
    pytest.fail(f"scheduler-service did not start; log:\n{log.read_text()}")


@pytest.fixture
def stub(addr):
    with grpc.insecure_channel(addr) as channel:
        yield pb_grpc.PlacementServiceStub(channel)


def _node(name: str) -> pb.Node:
    return pb.Node(name=name, allocatable={"cpu": "4", "memory": "8Gi", "pods": "110"})


def _pod(name: str, cpu: str) -> pb.Pod:
    return pb.Pod(
        uid=f"uid-{name}",
        namespace="default",
        name=name,
        containers=[pb.Container(name="main", requests={"cpu": cpu, "memory": "1Gi"})],
    )


def test_list_policies(stub):
    resp = stub.ListPolicies(pb.ListPoliciesRequest(), timeout=10)
    assert resp.default_policy
    assert resp.policies[0].name == resp.default_policy


def test_sync_and_schedule(stub):
    synced = stub.SyncSnapshot(pb.SyncSnapshotRequest(full=pb.Snapshot(nodes=[_node("n1"), _node("n2")])), timeout=10)
    assert synced.snapshot_id
    assert (synced.node_count, synced.pod_count) == (2, 0)

    resp = stub.Schedule(
        pb.ScheduleRequest(
            snapshot=pb.SnapshotRef(snapshot_id=synced.snapshot_id),
            pods=[_pod("a", "1"), _pod("b", "2"), _pod("huge", "64")],
        ),
        timeout=10,
    )
    assert [p.pod_uid for p in resp.placements] == ["uid-a", "uid-b", "uid-huge"]
    assert [p.WhichOneof("outcome") for p in resp.placements] == ["node_name", "node_name", "unschedulable"]
    assert {resp.placements[0].node_name, resp.placements[1].node_name} <= {"n1", "n2"}
    unsched = resp.placements[2].unschedulable
    assert unsched.message.startswith("0/2 nodes are available:"), unsched.message
    assert "Insufficient cpu" in unsched.message
    assert unsched.reasons["Insufficient cpu"] == 2


def test_unknown_snapshot_is_not_found(stub):
    with pytest.raises(grpc.RpcError) as err:
        stub.Schedule(
            pb.ScheduleRequest(snapshot=pb.SnapshotRef(snapshot_id="no-such-snapshot"), pods=[_pod("a", "1")]), timeout=10
        )
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_errors_about_huge_values_keep_their_code(stub):
    """gRPC's C core (this client) refuses a status over its metadata limit (8 KiB) and reports
    RESOURCE_EXHAUSTED instead: the service quotes only a short prefix of a caller's value, so the
    caller sees INVALID_ARGUMENT, and NOT_FOUND for an unknown snapshot id of any length (which the
    re-send-a-full-snapshot protocol relies on)."""
    huge = "x" * 20000
    bad = _pod("bad", huge)
    with pytest.raises(grpc.RpcError) as err:
        stub.Rank(pb.RankRequest(snapshot=pb.SnapshotRef(inline=pb.Snapshot(nodes=[_node("n1")])), pod=bad), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    assert "(20000 bytes)" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        stub.Schedule(pb.ScheduleRequest(snapshot=pb.SnapshotRef(snapshot_id=huge), pods=[_pod("a", "1")]), timeout=10)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND, err.value.details()


def test_example_script(addr):
    result = subprocess.run(
        [sys.executable, str(HERE.parent / "examples" / "schedule.py"), "--addr", addr],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "example: ok" in result.stdout


# --- converters from kubernetes.client objects ---


def _k8s_node(name: str, cpu: str = "4", taints=None, labels=None) -> k8s.V1Node:
    return k8s.V1Node(
        metadata=k8s.V1ObjectMeta(name=name, labels=labels or {"kubernetes.io/hostname": name}),
        spec=k8s.V1NodeSpec(taints=taints),
        status=k8s.V1NodeStatus(
            allocatable={"cpu": cpu, "memory": "8Gi", "pods": "110"},
            images=[k8s.V1ContainerImage(names=["registry.k8s.io/pause:3.9"], size_bytes=300000)],
        ),
    )


def _k8s_pod(name: str, cpu: str, node_name=None, phase=None, host_port=None, **spec) -> k8s.V1Pod:
    return k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name=name, namespace="team-a", uid=f"uid-{name}", labels={"app": name}),
        spec=k8s.V1PodSpec(
            node_name=node_name,
            containers=[
                k8s.V1Container(
                    name="main",
                    image="nginx:1.27",
                    resources=k8s.V1ResourceRequirements(requests={"cpu": cpu, "memory": "256Mi"}),
                    ports=[k8s.V1ContainerPort(container_port=80, host_port=host_port, protocol="TCP")],
                )
            ],
            **spec,
        ),
        status=k8s.V1PodStatus(phase=phase) if phase else None,
    )


def test_convert_pod():
    kpod = _k8s_pod(
        "web",
        "250m",
        host_port=8080,
        priority=1000,
        node_selector={"disktype": "ssd"},
        overhead={"cpu": "10m"},
        init_containers=[
            k8s.V1Container(name="init", image="busybox", resources=k8s.V1ResourceRequirements(requests={"cpu": "1"}))
        ],
        tolerations=[
            k8s.V1Toleration(key="dedicated", operator="Equal", value="web", effect="NoSchedule"),
            k8s.V1Toleration(key="node.kubernetes.io/not-ready", operator="Exists", effect="NoExecute", toleration_seconds=300),
        ],
        affinity=k8s.V1Affinity(
            node_affinity=k8s.V1NodeAffinity(
                required_during_scheduling_ignored_during_execution=k8s.V1NodeSelector(
                    node_selector_terms=[
                        k8s.V1NodeSelectorTerm(
                            match_expressions=[k8s.V1NodeSelectorRequirement(key="zone", operator="In", values=["a", "b"])],
                            match_fields=[
                                k8s.V1NodeSelectorRequirement(key="metadata.name", operator="NotIn", values=["n9"])
                            ],
                        )
                    ]
                ),
                preferred_during_scheduling_ignored_during_execution=[
                    k8s.V1PreferredSchedulingTerm(
                        weight=20,
                        preference=k8s.V1NodeSelectorTerm(
                            match_expressions=[k8s.V1NodeSelectorRequirement(key="gpu", operator="Exists")]
                        ),
                    )
                ],
            )
        ),
    )
    p = convert.pod_to_proto(kpod)
    assert (p.uid, p.namespace, p.name, dict(p.labels)) == ("uid-web", "team-a", "web", {"app": "web"})
    assert p.priority == 1000
    assert dict(p.node_selector) == {"disktype": "ssd"}
    assert dict(p.overhead) == {"cpu": "10m"}
    assert p.node_name == ""
    (c,) = p.containers
    assert (c.name, c.image, dict(c.requests)) == ("main", "nginx:1.27", {"cpu": "250m", "memory": "256Mi"})
    assert (c.ports[0].container_port, c.ports[0].host_port, c.ports[0].protocol) == (80, 8080, "TCP")
    assert [(i.name, dict(i.requests)) for i in p.init_containers] == [("init", {"cpu": "1"})]
    assert [(t.key, t.operator, t.value, t.effect) for t in p.tolerations] == [
        ("dedicated", "Equal", "web", "NoSchedule"),
        ("node.kubernetes.io/not-ready", "Exists", "", "NoExecute"),
    ]
    assert not p.tolerations[0].HasField("toleration_seconds")
    assert p.tolerations[1].toleration_seconds == 300
    (term,) = p.node_affinity.required.terms
    assert [(r.key, r.operator, list(r.values)) for r in term.match_expressions] == [("zone", "In", ["a", "b"])]
    assert [(r.key, r.operator, list(r.values)) for r in term.match_fields] == [("metadata.name", "NotIn", ["n9"])]
    (pref,) = p.node_affinity.preferred
    assert pref.weight == 20 and pref.preference.match_expressions[0].key == "gpu"


def test_convert_minimal_pod_has_no_affinity():
    p = convert.pod_to_proto(k8s.V1Pod(metadata=k8s.V1ObjectMeta(name="bare"), spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="c")])))
    assert p.uid == "default/bare" and p.namespace == "default"
    assert not p.HasField("node_affinity")
    assert dict(p.containers[0].requests) == {}


def test_convert_pod_affinity_and_spread():
    sel = k8s.V1LabelSelector(match_labels={"app": "web"})
    kpod = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="web-1", namespace="shop", uid="u1", labels={"app": "web"}),
        spec=k8s.V1PodSpec(
            containers=[k8s.V1Container(name="c")],
            affinity=k8s.V1Affinity(
                pod_anti_affinity=k8s.V1PodAntiAffinity(
                    required_during_scheduling_ignored_during_execution=[
                        k8s.V1PodAffinityTerm(
                            label_selector=sel,
                            topology_key="kubernetes.io/hostname",
                            namespace_selector=k8s.V1LabelSelector(match_labels={"tier": "web"}),
                        )
                    ]
                ),
                pod_affinity=k8s.V1PodAffinity(
                    preferred_during_scheduling_ignored_during_execution=[
                        k8s.V1WeightedPodAffinityTerm(
                            weight=7,
                            pod_affinity_term=k8s.V1PodAffinityTerm(label_selector=sel, topology_key="zone"),
                        )
                    ]
                ),
            ),
            topology_spread_constraints=[
                k8s.V1TopologySpreadConstraint(
                    max_skew=1,
                    topology_key="zone",
                    when_unsatisfiable="DoNotSchedule",
                    label_selector=sel,
                    min_domains=2,
                    match_label_keys=["pod-template-hash"],
                )
            ],
        ),
    )
    p = convert.pod_to_proto(kpod)
    anti = p.pod_anti_affinity.required[0]
    assert anti.topology_key == "kubernetes.io/hostname"
    assert dict(anti.label_selector.match_labels) == {"app": "web"}
    assert dict(anti.namespace_selector.match_labels) == {"tier": "web"}
    assert p.pod_affinity.preferred[0].weight == 7
    c = p.topology_spread_constraints[0]
    assert (c.max_skew, c.min_domains, list(c.match_label_keys)) == (1, 2, ["pod-template-hash"])
    assert not p.HasField("default_spread_selector")


def test_convert_node():
    knode = _k8s_node("n1", taints=[k8s.V1Taint(key="dedicated", value="web", effect="NoSchedule")])
    knode.spec.unschedulable = True
    n = convert.node_to_proto(knode)
    assert n.name == "n1"
    assert dict(n.labels) == {"kubernetes.io/hostname": "n1"}
    assert dict(n.allocatable) == {"cpu": "4", "memory": "8Gi", "pods": "110"}
    assert [(t.key, t.value, t.effect) for t in n.taints] == [("dedicated", "web", "NoSchedule")]
    assert n.unschedulable
    assert [(list(i.names), i.size_bytes) for i in n.images] == [(["registry.k8s.io/pause:3.9"], 300000)]


def test_snapshot_from_keeps_bound_running_pods():
    pods = [
        _k8s_pod("running", "1", node_name="n1", phase="Running"),
        _k8s_pod("pending", "1"),
        _k8s_pod("done", "1", node_name="n1", phase="Succeeded"),
    ]
    snap = convert.snapshot_from([_k8s_node("n1")], pods)
    assert [n.name for n in snap.nodes] == ["n1"]
    assert [p.uid for p in snap.pods] == ["uid-running"]


def test_converted_objects_schedule(stub):
    """Kubernetes objects -> converters -> the real service: a taint, a bound pod and capacity."""
    nodes = [
        _k8s_node("n1", cpu="4"),
        _k8s_node("n2", cpu="4", taints=[k8s.V1Taint(key="dedicated", value="db", effect="NoSchedule")]),
    ]
    bound = [_k8s_pod("existing", "3", node_name="n1", phase="Running")]
    synced = stub.SyncSnapshot(pb.SyncSnapshotRequest(full=convert.snapshot_from(nodes, bound)), timeout=10)
    assert (synced.node_count, synced.pod_count) == (2, 1)

    pending = [
        _k8s_pod("fits", "500m"),  # n1 has 1 cpu left, n2 is tainted
        _k8s_pod(
            "tolerates", "2", tolerations=[k8s.V1Toleration(key="dedicated", operator="Equal", value="db", effect="NoSchedule")]
        ),
        _k8s_pod("too-big", "2"),  # n1: 0.5 cpu left, n2: tainted
    ]
    resp = stub.Schedule(
        pb.ScheduleRequest(
            snapshot=pb.SnapshotRef(snapshot_id=synced.snapshot_id), pods=[convert.pod_to_proto(p) for p in pending]
        ),
        timeout=10,
    )
    fits, tolerates, too_big = resp.placements
    assert fits.node_name == "n1"
    assert tolerates.node_name == "n2"
    assert too_big.WhichOneof("outcome") == "unschedulable"
    msg = too_big.unschedulable.message
    assert msg.startswith("0/2 nodes are available:"), msg
    assert "Insufficient cpu" in msg and "untolerated taint" in msg, msg


# --- what the converters carry, through the real service ---


def _hosts(*names: str, cpu: str = "4") -> list:
    return [_k8s_node(n, cpu=cpu) for n in names]


def _schedule(stub, snapshot, pods):
    synced = stub.SyncSnapshot(pb.SyncSnapshotRequest(full=snapshot), timeout=10)
    return stub.Schedule(
        pb.ScheduleRequest(snapshot=pb.SnapshotRef(snapshot_id=synced.snapshot_id), pods=[convert.pod_to_proto(p) for p in pods]),
        timeout=10,
    ).placements


def _web(name, node=None, deleting=False, labels=None, **spec):
    pod = _k8s_pod(name, "100m", node_name=node, phase="Running" if node else None, **spec)
    pod.metadata.labels = labels or {"app": "web"}
    if deleting:
        pod.metadata.deletion_timestamp = datetime.datetime(2026, 11, 26, 3, 4, 41, tzinfo=datetime.timezone.utc)
    return pod


def _spread(when: str):
    return [
        k8s.V1TopologySpreadConstraint(
            max_skew=1,
            topology_key="kubernetes.io/hostname",
            when_unsatisfiable=when,
            label_selector=k8s.V1LabelSelector(match_labels={"app": "web"}),
        )
    ]


def test_terminating_pods_do_not_count_for_topology_spread(stub):
    """Two terminating app=web pods on node-a, one running on node-b: kube-scheduler skips the
    terminating ones, so the next app=web pod goes to node-a (DoNotSchedule) or ranks it first."""
    bound = [_web("old-1", "node-a", deleting=True), _web("old-2", "node-a", deleting=True), _web("new-1", "node-b")]
    snapshot = convert.snapshot_from(_hosts("node-a", "node-b"), bound)
    assert [p.terminating for p in snapshot.pods] == [False, True, True]  # sorted by uid: new-1, old-1, old-2
    (placed,) = _schedule(stub, snapshot, [_web("new-2", topology_spread_constraints=_spread("DoNotSchedule"))])
    assert placed.node_name == "node-a"
    assert placed.feasible_nodes == 1

    synced = stub.SyncSnapshot(pb.SyncSnapshotRequest(full=snapshot), timeout=10)
    ranked = stub.Rank(
        pb.RankRequest(
            snapshot=pb.SnapshotRef(snapshot_id=synced.snapshot_id),
            pod=convert.pod_to_proto(_web("new-2", topology_spread_constraints=_spread("ScheduleAnyway"))),
        ),
        timeout=10,
    )
    assert [n.node for n in ranked.feasible] == ["node-a", "node-b"]


def test_preemption_policy_never_is_carried(stub):
    """A pod with preemptionPolicy Never that fits nowhere gets no nomination and no victim."""
    low = _k8s_pod("low", "4", node_name="n1", phase="Running", priority=0)
    urgent = _k8s_pod("urgent", "2", priority=1000, preemption_policy="Never")
    assert convert.pod_to_proto(urgent).preemption_policy == "Never"
    (placement,) = _schedule(stub, convert.snapshot_from(_hosts("n1"), [low]), [urgent])
    u = placement.unschedulable
    assert u.nominated_node_name == "" and list(u.victim_uids) == []
    assert u.message.endswith("preemption: not eligible due to preemptionPolicy=Never."), u.message
    # The same pod allowed to preempt evicts the low one.
    urgent.spec.preemption_policy = "PreemptLowerPriority"
    (placement,) = _schedule(stub, convert.snapshot_from(_hosts("n1"), [low]), [urgent])
    assert (placement.unschedulable.nominated_node_name, list(placement.unschedulable.victim_uids)) == ("n1", ["uid-low"])


def test_start_time_picks_the_victim_that_started_last(stub):
    """Preemption prefers the node whose victims started last; the start time must be carried."""
    early = _k8s_pod("early", "4", node_name="n1", phase="Running", priority=0)
    late = _k8s_pod("late", "4", node_name="n2", phase="Running", priority=0)
    early.status.start_time = datetime.datetime(2026, 11, 1, tzinfo=datetime.timezone.utc)
    late.status.start_time = datetime.datetime(2026, 11, 20, tzinfo=datetime.timezone.utc)
    assert convert.pod_to_proto(late).start_time_seconds == 1795132800
    urgent = _k8s_pod("urgent", "2", priority=1000)
    (placement,) = _schedule(stub, convert.snapshot_from(_hosts("n1", "n2"), [early, late]), [urgent])
    assert (placement.unschedulable.nominated_node_name, list(placement.unschedulable.victim_uids)) == ("n2", ["uid-late"])


def test_namespace_selectors_match_the_converted_namespaces(stub):
    """A pod affinity term with a namespaceSelector matches pods of the namespaces given to
    snapshot_from; without them it matches none, as kube-scheduler with no such namespace."""
    db = _k8s_pod("db", "100m", node_name="n1", phase="Running")
    db.metadata.namespace = "data"
    db.metadata.labels = {"app": "db"}
    namespaces = [
        k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name="data", labels={"team": "data"})),
        k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name="team-a", labels={"team": "a"})),
    ]
    near_db = _k8s_pod(
        "api",
        "100m",
        affinity=k8s.V1Affinity(
            pod_affinity=k8s.V1PodAffinity(
                required_during_scheduling_ignored_during_execution=[
                    k8s.V1PodAffinityTerm(
                        label_selector=k8s.V1LabelSelector(match_labels={"app": "db"}),
                        namespace_selector=k8s.V1LabelSelector(match_labels={"team": "data"}),
                        topology_key="kubernetes.io/hostname",
                    )
                ]
            )
        ),
    )
    snapshot = convert.snapshot_from(_hosts("n1", "n2"), [db], namespaces=namespaces)
    assert [n.name for n in snapshot.namespaces] == ["data", "team-a"]
    (placement,) = _schedule(stub, snapshot, [near_db])
    assert placement.node_name == "n1"
    (placement,) = _schedule(stub, convert.snapshot_from(_hosts("n1", "n2"), [db]), [near_db])
    assert placement.WhichOneof("outcome") == "unschedulable"


def test_convert_pdb_resolves_disrupted_pods_to_uids():
    pods = [_k8s_pod("web-1", "1", node_name="n1", phase="Running"), _k8s_pod("web-2", "1", node_name="n1", phase="Running")]
    pdb = k8s.V1PodDisruptionBudget(
        metadata=k8s.V1ObjectMeta(name="web", namespace="team-a"),
        spec=k8s.V1PodDisruptionBudgetSpec(selector=k8s.V1LabelSelector(match_labels={"app": "web"})),
        status=k8s.V1PodDisruptionBudgetStatus(
            current_healthy=2,
            desired_healthy=1,
            expected_pods=2,
            disruptions_allowed=1,
            disrupted_pods={"web-2": datetime.datetime(2026, 11, 26, tzinfo=datetime.timezone.utc), "gone": datetime.datetime(2026, 11, 26, tzinfo=datetime.timezone.utc)},
        ),
    )
    b = convert.pdb_to_proto(pdb, pods)
    assert (b.namespace, b.name, b.disruptions_allowed, list(b.disrupted_pod_uids)) == ("team-a", "web", 1, ["uid-web-2"])
    assert dict(b.selector.match_labels) == {"app": "web"}
    bare = convert.pdb_to_proto(k8s.V1PodDisruptionBudget(metadata=k8s.V1ObjectMeta(name="x", namespace="team-a")))
    assert not bare.HasField("selector") and bare.disruptions_allowed == 0
    snap = convert.snapshot_from([_k8s_node("n1")], pods, pdbs=[pdb])
    assert list(snap.pod_disruption_budgets[0].disrupted_pod_uids) == ["uid-web-2"]


def _plain_pod(**spec) -> k8s.V1Pod:
    return k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="p", namespace="ns", uid="u"),
        spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="main", image="nginx")], **spec),
    )


def test_convert_pod_level_requests_and_resize_status():
    requests = k8s.V1ResourceRequirements
    kpod = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="p", namespace="ns", uid="u"),
        spec=k8s.V1PodSpec(
            node_name="n1",
            containers=[
                k8s.V1Container(name="main", resources=requests(requests={"cpu": "1", "memory": "1Gi"})),
                k8s.V1Container(name="nostatus", resources=requests(requests={"cpu": "100m"})),
            ],
            init_containers=[
                k8s.V1Container(name="sidecar", restart_policy="Always", resources=requests(requests={"cpu": "200m"})),
                # Its status is in container_statuses: kube's findContainerStatus looks there first.
                k8s.V1Container(name="misplaced"),
            ],
            resources=requests(requests={"cpu": "2", "memory": "2Gi", "hugepages-2Mi": "64Mi"}, limits={"cpu": "4"}),
        ),
        status=k8s.V1PodStatus(
            allocated_resources={"cpu": "1500m", "memory": "2Gi"},
            resources=requests(requests={"cpu": "1", "memory": "2Gi"}, limits={"cpu": "3"}),
            container_statuses=[
                k8s.V1ContainerStatus(
                    name="main",
                    image="",
                    image_id="",
                    ready=True,
                    restart_count=0,
                    allocated_resources={"cpu": "1500m", "memory": "1Gi"},
                    resources=requests(requests={"cpu": "1200m", "memory": "1Gi"}),
                ),
                k8s.V1ContainerStatus(
                    name="misplaced", image="", image_id="", ready=True, restart_count=0, allocated_resources={"cpu": "50m"}
                ),
            ],
            init_container_statuses=[
                k8s.V1ContainerStatus(
                    name="sidecar",
                    image="",
                    image_id="",
                    ready=True,
                    restart_count=0,
                    allocated_resources={"cpu": "300m"},
                    resources=requests(requests={"cpu": "250m"}),
                ),
                k8s.V1ContainerStatus(
                    name="misplaced", image="", image_id="", ready=True, restart_count=0, allocated_resources={"cpu": "999"}
                ),
            ],
            conditions=[
                k8s.V1PodCondition(type="Ready", status="True"),
                k8s.V1PodCondition(type="PodResizePending", status="True", reason="Infeasible"),
            ],
        ),
    )
    p = convert.pod_to_proto(kpod)
    assert dict(p.pod_requests) == {"cpu": "2", "memory": "2Gi", "hugepages-2Mi": "64Mi"}
    assert dict(p.allocated_requests) == {"cpu": "1500m", "memory": "2Gi"}
    assert dict(p.actuated_requests) == {"cpu": "1", "memory": "2Gi"}
    assert p.resize_infeasible
    main, nostatus = p.containers
    assert dict(main.requests) == {"cpu": "1", "memory": "1Gi"}
    assert dict(main.allocated_requests) == {"cpu": "1500m", "memory": "1Gi"}
    assert dict(main.actuated_requests) == {"cpu": "1200m", "memory": "1Gi"}
    assert dict(nostatus.allocated_requests) == {} and dict(nostatus.actuated_requests) == {}
    sidecar, misplaced = p.init_containers
    assert dict(sidecar.allocated_requests) == {"cpu": "300m"}
    assert dict(sidecar.actuated_requests) == {"cpu": "250m"}
    assert dict(misplaced.allocated_requests) == {"cpu": "50m"}
    assert dict(misplaced.actuated_requests) == {}

    bare = convert.pod_to_proto(_plain_pod())
    assert (dict(bare.pod_requests), dict(bare.allocated_requests), dict(bare.actuated_requests)) == ({}, {}, {})
    assert not bare.resize_infeasible
    assert dict(bare.containers[0].allocated_requests) == {} and dict(bare.containers[0].actuated_requests) == {}


def _pending(reason):
    return k8s.V1PodCondition(type="PodResizePending", status="True", reason=reason)


@pytest.mark.parametrize(
    "conditions,want",
    [
        (None, False),
        ([_pending("Infeasible")], True),
        ([_pending("Deferred")], False),
        ([_pending("Deferred"), _pending("Infeasible")], False),
        ([k8s.V1PodCondition(type="PodScheduled", status="True", reason="Infeasible"), _pending("Infeasible")], True),
        ([k8s.V1PodCondition(type="PodResizeInProgress", status="True", reason="Infeasible")], False),
    ],
    ids=["none", "infeasible", "deferred", "deferred-first", "after-another-type", "other-type-only"],
)
def test_convert_resize_infeasible_reads_the_first_pod_resize_pending_condition(conditions, want):
    kpod = _plain_pod()
    kpod.status = k8s.V1PodStatus(conditions=conditions)
    assert convert.pod_to_proto(kpod).resize_infeasible is want


_RESTART_ALL = [
    k8s.V1ContainerRestartRule(
        action="RestartAllContainers", exit_codes=k8s.V1ContainerRestartRuleOnExitCodes(operator="In", values=[42])
    )
]
_RESTART_ONE = [
    k8s.V1ContainerRestartRule(action="Restart", exit_codes=k8s.V1ContainerRestartRuleOnExitCodes(operator="In", values=[42]))
]
_BIND_MOUNT = [k8s.V1VolumeMount(name="data", mount_path="/data", bind_mount_options=["noexec"])]
_RESTART_FEATURE = "RestartAllContainersOnContainerExits"
_USERNS_FEATURE = "UserNamespacesHostNetworkSupport"
_BIND_FEATURE = "VolumeBindMountOptions"


@pytest.mark.parametrize(
    "spec,main,want",
    [
        ({}, {}, []),
        ({}, {"restart_policy_rules": _RESTART_ALL}, [_RESTART_FEATURE]),
        ({"init_containers": [k8s.V1Container(name="init", restart_policy_rules=_RESTART_ALL)]}, {}, [_RESTART_FEATURE]),
        ({}, {"restart_policy_rules": _RESTART_ONE}, []),
        ({"host_network": True, "host_users": False}, {}, [_USERNS_FEATURE]),
        ({"host_network": True}, {}, []),
        ({"host_network": True, "host_users": True}, {}, []),
        ({"host_users": False}, {}, []),
        ({}, {"volume_mounts": _BIND_MOUNT}, [_BIND_FEATURE]),
        ({"init_containers": [k8s.V1Container(name="init", volume_mounts=_BIND_MOUNT)]}, {}, [_BIND_FEATURE]),
        ({"ephemeral_containers": [k8s.V1EphemeralContainer(name="debug", volume_mounts=_BIND_MOUNT)]}, {}, [_BIND_FEATURE]),
        ({}, {"volume_mounts": [k8s.V1VolumeMount(name="data", mount_path="/data", bind_mount_options=[])]}, []),
        (
            {
                "host_network": True,
                "host_users": False,
                "init_containers": [k8s.V1Container(name="init", restart_policy_rules=_RESTART_ALL)],
            },
            {"volume_mounts": _BIND_MOUNT},
            [_RESTART_FEATURE, _USERNS_FEATURE, _BIND_FEATURE],
        ),
    ],
    ids=[
        "plain",
        "restart-all-in-a-container",
        "restart-all-in-an-init-container",
        "restart-one",
        "host-network-without-host-users",
        "host-network-host-users-unset",
        "host-network-with-host-users",
        "host-users-false-alone",
        "bind-mount-options-in-a-container",
        "bind-mount-options-in-an-init-container",
        "bind-mount-options-in-an-ephemeral-container",
        "empty-bind-mount-options",
        "all-three-sorted",
    ],
)
def test_convert_required_features(spec, main, want):
    kpod = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="p", namespace="ns", uid="u"),
        spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="main", image="nginx", **main)], **spec),
    )
    assert list(convert.pod_to_proto(kpod).required_features) == want


def test_convert_image_volumes_are_kept_in_spec_order():
    kpod = _plain_pod(
        volumes=[
            k8s.V1Volume(name="scratch", empty_dir=k8s.V1EmptyDirVolumeSource()),
            k8s.V1Volume(
                name="model", image=k8s.V1ImageVolumeSource(reference="ghcr.io/example/model:v1", pull_policy="IfNotPresent")
            ),
            k8s.V1Volume(
                name="data", persistent_volume_claim=k8s.V1PersistentVolumeClaimVolumeSource(claim_name="data-0")
            ),
            k8s.V1Volume(name="noref", image=k8s.V1ImageVolumeSource()),
        ]
    )
    assert [(v.name, v.claim_name, v.image_reference) for v in convert.pod_to_proto(kpod).volumes] == [
        ("model", "", "ghcr.io/example/model:v1"),
        ("data", "data-0", ""),
    ]  # an image volume without a reference (the API server refuses one) is left out, as the binder does


def test_convert_node_declared_features():
    knode = _k8s_node("n1")
    # As given, in order.
    knode.status.declared_features = ["VolumeBindMountOptions", "RestartAllContainersOnContainerExits", "SomeFutureFeature"]
    assert list(convert.node_to_proto(knode).declared_features) == [
        "VolumeBindMountOptions",
        "RestartAllContainersOnContainerExits",
        "SomeFutureFeature",
    ]
    assert list(convert.node_to_proto(_k8s_node("n2")).declared_features) == []


def test_convert_device_attributes_without_a_value_are_left_out():
    kslice = k8s.V1ResourceSlice(
        metadata=k8s.V1ObjectMeta(name="s"),
        spec=k8s.V1ResourceSliceSpec(
            driver="d",
            pool=k8s.V1ResourcePool(name="p", generation=1, resource_slice_count=1),
            devices=[
                k8s.V1Device(
                    name="dev",
                    attributes={
                        "zero": k8s.V1DeviceAttribute(int=0),
                        "off": k8s.V1DeviceAttribute(bool=False),
                        "list": k8s.V1DeviceAttribute(ints=[1, 2]),
                        "empty": k8s.V1DeviceAttribute(),
                    },
                )
            ],
        ),
    )
    attrs = convert.resource_slice_to_proto(kslice).devices[0].attributes
    # As the binder: a zero or false value is a value; a list-valued or empty attribute is dropped.
    assert sorted(attrs) == ["off", "zero"]
    assert attrs["zero"].WhichOneof("value") == "int" and attrs["off"].WhichOneof("value") == "bool"


def test_convert_device_class_keeps_only_cel_selectors():
    kclass = k8s.V1DeviceClass(
        metadata=k8s.V1ObjectMeta(name="c"),
        spec=k8s.V1DeviceClassSpec(
            selectors=[k8s.V1DeviceSelector(), k8s.V1DeviceSelector(cel=k8s.V1CELDeviceSelector(expression="true"))]
        ),
    )
    assert list(convert.device_class_to_proto(kclass).selectors) == ["true"]


def test_convert_pod_resource_claims_generated_names():
    kpod = _plain_pod()
    kpod.spec.resource_claims = [
        k8s.V1PodResourceClaim(name="made", resource_claim_template_name="t"),
        k8s.V1PodResourceClaim(name="unneeded", resource_claim_template_name="t"),
        k8s.V1PodResourceClaim(name="waiting", resource_claim_template_name="t"),
        k8s.V1PodResourceClaim(name="named", resource_claim_name="c"),
    ]
    kpod.status = k8s.V1PodStatus(
        resource_claim_statuses=[
            k8s.V1PodResourceClaimStatus(name="made", resource_claim_name="p-made-x"),
            k8s.V1PodResourceClaimStatus(name="unneeded"),
            k8s.V1PodResourceClaimStatus(name="named", resource_claim_name="ignored"),
        ]
    )
    claims = convert.pod_to_proto(kpod).resource_claims
    got = [(c.name, c.HasField("generated_claim_name"), c.generated_claim_name) for c in claims]
    # Set only for a template entry with a status entry: its claim name, or "" (no claim needed).
    assert got == [("made", True, "p-made-x"), ("unneeded", True, ""), ("waiting", False, ""), ("named", False, "")]
    assert claims[3].resource_claim_name == "c"


def _basic_group(**spec) -> k8s.V1beta1PodGroup:
    return k8s.V1beta1PodGroup(
        metadata=k8s.V1ObjectMeta(name="g", namespace="ml"),
        spec=k8s.V1beta1PodGroupSpec(
            scheduling_policy=k8s.V1beta1PodGroupSchedulingPolicy(basic={}),
            **spec,
        ),
    )


def test_convert_a_basic_pod_group_leaves_the_rest_unset():
    group = convert.pod_group_to_proto(_basic_group())
    assert (group.namespace, group.name) == ("ml", "g")
    assert not group.HasField("gang") and not group.HasField("priority") and not group.HasField("workload_ref")
    assert group.disruption_mode == "" and not group.initially_scheduled and list(group.topology_keys) == []


def test_convert_pod_group_disruption_mode_names_the_member_that_is_set():
    modes = [
        None,
        k8s.V1beta1DisruptionMode(),
        k8s.V1beta1DisruptionMode(single={}),
        k8s.V1beta1DisruptionMode(all={}),
    ]
    # An empty member ({}) is set, though falsy in Python.
    assert [convert.pod_group_to_proto(_basic_group(disruption_mode=m)).disruption_mode for m in modes] == [
        "",
        "",
        "Single",
        "All",
    ]


def test_convert_only_a_true_pod_group_initially_scheduled_condition_counts():
    def scheduled(*conditions):
        group = _basic_group()
        group.status = k8s.V1beta1PodGroupStatus(
            conditions=[
                k8s.V1Condition(
                    type=t,
                    status=s,
                    reason="R",
                    message="",
                    last_transition_time=datetime.datetime(2026, 11, 29, tzinfo=datetime.timezone.utc),
                )
                for t, s in conditions
            ]
        )
        return convert.pod_group_to_proto(group).initially_scheduled

    assert not scheduled()
    assert not scheduled(("PodGroupInitiallyScheduled", "False"))
    assert not scheduled(("PodGroupInitiallyScheduled", "Unknown"))
    assert not scheduled(("DisruptionTarget", "True"))
    assert scheduled(("DisruptionTarget", "False"), ("PodGroupInitiallyScheduled", "True"))


def test_convert_pod_group_priority_zero_is_set():
    group = convert.pod_group_to_proto(_basic_group(priority=0))
    # The API server's resolved priority 0 is a value, as the binder sends it.
    assert group.HasField("priority") and group.priority == 0


def test_convert_a_composite_pod_group_carries_its_parent_count_and_key():
    # Plain objects with the client's snake_case names (as the client's models read).
    from types import SimpleNamespace as O

    g = convert.composite_pod_group_to_proto(
        O(
            metadata=O(namespace="ml", name="block", uid="u-2"),
            spec=O(
                parent_composite_pod_group_name="job",
                scheduling_policy=O(gang=O(min_group_count=2)),
                scheduling_constraints=O(topology=[O(key="example.com/block")]),
                priority=5,
                preemption_policy=None,
            ),
        )
    )
    assert (g.namespace, g.name, g.uid, g.parent_composite_pod_group_name) == ("ml", "block", "u-2", "job")
    assert g.HasField("min_group_count") and g.min_group_count == 2
    assert list(g.topology_keys) == ["example.com/block"] and g.priority == 5
    basic = convert.composite_pod_group_to_proto(
        O(metadata=O(namespace="ml", name="root", uid=None), spec=O(scheduling_policy=O(gang=None, basic={})))
    )
    assert not basic.HasField("min_group_count") and not basic.HasField("priority")
    assert basic.parent_composite_pod_group_name == ""


def test_convert_pod_scheduling_group():
    assert convert.pod_to_proto(_plain_pod()).scheduling_group == ""
    assert convert.pod_to_proto(_plain_pod(scheduling_group=k8s.V1PodSchedulingGroup())).scheduling_group == ""
    named = _plain_pod(scheduling_group=k8s.V1PodSchedulingGroup(pod_group_name="trainer"))
    assert convert.pod_to_proto(named).scheduling_group == "trainer"
