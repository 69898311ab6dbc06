"""The conversion contract (tests/conformance/README.md): placement_client.convert turns every
object of the corpus into the same bytes as the binder's conversion, which wrote
tests/conformance/expected (binder-agent/tests/conformance.rs keeps those files current).

The objects are read as the ``kubernetes`` client reads them from the API server
(``V1Pod.from_json``: the client's own models) and written in the canonical encoding
(``placement_client.canonical.serialize``: Python's own deterministic serialization orders
string map keys of which one is a prefix of another differently, see that module)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import text_format
from kubernetes import client as k8s

from placement_client import canonical, convert
from placement_client import placement_pb2 as pb

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "tests" / "conformance" / "corpus"
EXPECTED = ROOT / "tests" / "conformance" / "expected"

MODELS = {
    "Pod": k8s.V1Pod,
    "Node": k8s.V1Node,
    "Namespace": k8s.V1Namespace,
    "PodDisruptionBudget": k8s.V1PodDisruptionBudget,
    "PersistentVolumeClaim": k8s.V1PersistentVolumeClaim,
    "PersistentVolume": k8s.V1PersistentVolume,
    "StorageClass": k8s.V1StorageClass,
    "CSINode": k8s.V1CSINode,
    "CSIDriver": k8s.V1CSIDriver,
    "CSIStorageCapacity": k8s.V1CSIStorageCapacity,
    "DeviceClass": k8s.V1DeviceClass,
    # resource.k8s.io/v1's ResourceClaim (V1ResourceClaim is core/v1's pod entry).
    "ResourceClaim": k8s.ResourceV1ResourceClaim,
    "ResourceSlice": k8s.V1ResourceSlice,
    "DeviceTaintRule": k8s.V1DeviceTaintRule,
    "PodGroup": k8s.V1beta1PodGroup,
    "CompositePodGroup": k8s.V1alpha3CompositePodGroup,
}


def _corpus():
    files = sorted(CORPUS.glob("*.json"))
    assert files, f"no corpus in {CORPUS}"
    out = []
    for path in files:
        text = path.read_text()
        kind = json.loads(text)["kind"]
        assert kind in MODELS, f"{path.name}: kind {kind} is not part of the contract"
        out.append((path.stem, kind, MODELS[kind].from_json(text)))
    return out


CORPUS_OBJECTS = _corpus()


def _by_kind(kind):
    return [obj for _, k, obj in CORPUS_OBJECTS if k == kind]


def _snapshot() -> pb.Snapshot:
    return convert.snapshot_from(
        _by_kind("Node"),
        _by_kind("Pod"),
        namespaces=_by_kind("Namespace"),
        pdbs=_by_kind("PodDisruptionBudget"),
        claims=_by_kind("PersistentVolumeClaim"),
        volumes=_by_kind("PersistentVolume"),
        storage_classes=_by_kind("StorageClass"),
        csi_nodes=_by_kind("CSINode"),
        csi_drivers=_by_kind("CSIDriver"),
        csi_storage_capacities=_by_kind("CSIStorageCapacity"),
        device_classes=_by_kind("DeviceClass"),
        resource_claims=_by_kind("ResourceClaim"),
        resource_slices=_by_kind("ResourceSlice"),
        pod_groups=_by_kind("PodGroup"),
        device_taint_rules=_by_kind("DeviceTaintRule"),
        composite_pod_groups=_by_kind("CompositePodGroup"),
    )


def _message(kind, obj):
    if kind == "Pod":
        return convert.pod_to_proto(obj)
    if kind == "Node":
        return convert.node_to_proto(obj)
    if kind == "Namespace":
        return convert.namespace_to_proto(obj)
    if kind == "PersistentVolumeClaim":
        return convert.pvc_to_proto(obj)
    if kind == "PersistentVolume":
        return convert.pv_to_proto(obj)
    if kind == "StorageClass":
        return convert.storage_class_to_proto(obj)
    if kind == "CSINode":
        return convert.csi_node_to_proto(obj)
    if kind == "CSIDriver":
        return convert.csi_driver_to_proto(obj)
    if kind == "CSIStorageCapacity":
        return convert.csi_storage_capacity_to_proto(obj)
    if kind == "DeviceClass":
        return convert.device_class_to_proto(obj)
    if kind == "ResourceClaim":
        return convert.resource_claim_to_proto(obj)
    if kind == "ResourceSlice":
        return convert.resource_slice_to_proto(obj)
    if kind == "DeviceTaintRule":
        return convert.device_taint_rule_to_proto(obj)
    if kind == "PodGroup":
        return convert.pod_group_to_proto(obj)
    if kind == "CompositePodGroup":
        return convert.composite_pod_group_to_proto(obj)
    # Budgets resolve disruptedPods against the snapshot's (bound) pods, as the binder does.
    return convert.pdb_to_proto(obj, [p for p in _by_kind("Pod") if convert.is_bound(p)])


def _check(name, message):
    path = EXPECTED / f"{name}.binpb"
    assert path.exists(), f"{path} is missing: run PLACEMENT_UPDATE_GOLDEN=1 cargo test -p binder-agent --test conformance"
    want = path.read_bytes()
    have = canonical.serialize(message)
    # The canonical form only reorders: Python's own bytes decode to the same message.
    assert type(message).FromString(message.SerializeToString(deterministic=True)) == type(message).FromString(have)
    if have != want:
        expected = type(message).FromString(want)
        pytest.fail(
            f"{name}: the Python conversion differs from the binder's\n"
            f"--- binder\n{text_format.MessageToString(expected)}--- python\n{text_format.MessageToString(message)}"
        )


@pytest.mark.parametrize("name,kind,obj", CORPUS_OBJECTS, ids=[n for n, _, _ in CORPUS_OBJECTS])
def test_each_object_converts_to_the_binders_bytes(name, kind, obj):
    _check(name, _message(kind, obj))


def test_the_snapshot_is_the_binders_bytes():
    _check("snapshot", _snapshot())


def test_no_expected_file_lacks_its_corpus_object():
    names = {n for n, _, _ in CORPUS_OBJECTS} | {"snapshot"}
    extra = sorted(p.stem for p in EXPECTED.glob("*.binpb") if p.stem not in names)
    assert not extra, f"expected files without a corpus object: {extra}"


def test_canonical_bytes_sort_map_keys_bytewise():
    node = pb.Node(name="n", labels={"app.kubernetes.io/name": "web", "app": "web", "zone": ""})
    data = canonical.serialize(node)
    assert data.index(b"\x0a\x03app\x12") < data.index(b"\x0a\x16app.kubernetes.io/name") < data.index(b"\x0a\x04zone")
    assert pb.Node.FromString(data) == node
