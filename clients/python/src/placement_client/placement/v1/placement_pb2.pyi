from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DeviceFailureKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DEVICE_FAILURE_KIND_UNSPECIFIED: _ClassVar[DeviceFailureKind]
    DEVICE_FAILURE_KIND_NO_MATCHING_DEVICE: _ClassVar[DeviceFailureKind]
    DEVICE_FAILURE_KIND_DEVICES_ALLOCATED: _ClassVar[DeviceFailureKind]
    DEVICE_FAILURE_KIND_CONSTRAINT_UNMET: _ClassVar[DeviceFailureKind]
    DEVICE_FAILURE_KIND_DEVICE_TAINTED: _ClassVar[DeviceFailureKind]
DEVICE_FAILURE_KIND_UNSPECIFIED: DeviceFailureKind
DEVICE_FAILURE_KIND_NO_MATCHING_DEVICE: DeviceFailureKind
DEVICE_FAILURE_KIND_DEVICES_ALLOCATED: DeviceFailureKind
DEVICE_FAILURE_KIND_CONSTRAINT_UNMET: DeviceFailureKind
DEVICE_FAILURE_KIND_DEVICE_TAINTED: DeviceFailureKind

class SyncSnapshotRequest(_message.Message):
    __slots__ = ("full", "delta")
    FULL_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    full: Snapshot
    delta: SnapshotDelta
    def __init__(self, full: _Optional[_Union[Snapshot, _Mapping]] = ..., delta: _Optional[_Union[SnapshotDelta, _Mapping]] = ...) -> None: ...

class SyncSnapshotResponse(_message.Message):
    __slots__ = ("snapshot_id", "node_count", "pod_count")
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_COUNT_FIELD_NUMBER: _ClassVar[int]
    POD_COUNT_FIELD_NUMBER: _ClassVar[int]
    snapshot_id: str
    node_count: int
    pod_count: int
    def __init__(self, snapshot_id: _Optional[str] = ..., node_count: _Optional[int] = ..., pod_count: _Optional[int] = ...) -> None: ...

class Snapshot(_message.Message):
    __slots__ = ("nodes", "pods", "namespaces", "pod_disruption_budgets", "persistent_volume_claims", "persistent_volumes", "storage_classes", "csi_nodes", "csi_drivers", "csi_storage_capacities", "device_classes", "resource_claims", "resource_slices", "device_taint_rules", "pod_groups", "composite_pod_groups")
    NODES_FIELD_NUMBER: _ClassVar[int]
    PODS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    POD_DISRUPTION_BUDGETS_FIELD_NUMBER: _ClassVar[int]
    PERSISTENT_VOLUME_CLAIMS_FIELD_NUMBER: _ClassVar[int]
    PERSISTENT_VOLUMES_FIELD_NUMBER: _ClassVar[int]
    STORAGE_CLASSES_FIELD_NUMBER: _ClassVar[int]
    CSI_NODES_FIELD_NUMBER: _ClassVar[int]
    CSI_DRIVERS_FIELD_NUMBER: _ClassVar[int]
    CSI_STORAGE_CAPACITIES_FIELD_NUMBER: _ClassVar[int]
    DEVICE_CLASSES_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_CLAIMS_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_SLICES_FIELD_NUMBER: _ClassVar[int]
    DEVICE_TAINT_RULES_FIELD_NUMBER: _ClassVar[int]
    POD_GROUPS_FIELD_NUMBER: _ClassVar[int]
    COMPOSITE_POD_GROUPS_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[Node]
    pods: _containers.RepeatedCompositeFieldContainer[Pod]
    namespaces: _containers.RepeatedCompositeFieldContainer[Namespace]
    pod_disruption_budgets: _containers.RepeatedCompositeFieldContainer[PodDisruptionBudget]
    persistent_volume_claims: _containers.RepeatedCompositeFieldContainer[PersistentVolumeClaim]
    persistent_volumes: _containers.RepeatedCompositeFieldContainer[PersistentVolume]
    storage_classes: _containers.RepeatedCompositeFieldContainer[StorageClass]
    csi_nodes: _containers.RepeatedCompositeFieldContainer[CsiNode]
    csi_drivers: _containers.RepeatedCompositeFieldContainer[CsiDriver]
    csi_storage_capacities: _containers.RepeatedCompositeFieldContainer[CsiStorageCapacity]
    device_classes: _containers.RepeatedCompositeFieldContainer[DeviceClass]
    resource_claims: _containers.RepeatedCompositeFieldContainer[ResourceClaim]
    resource_slices: _containers.RepeatedCompositeFieldContainer[ResourceSlice]
    device_taint_rules: _containers.RepeatedCompositeFieldContainer[DeviceTaintRule]
    pod_groups: _containers.RepeatedCompositeFieldContainer[PodGroup]
    composite_pod_groups: _containers.RepeatedCompositeFieldContainer[CompositePodGroup]
    def __init__(self, nodes: _Optional[_Iterable[_Union[Node, _Mapping]]] = ..., pods: _Optional[_Iterable[_Union[Pod, _Mapping]]] = ..., namespaces: _Optional[_Iterable[_Union[Namespace, _Mapping]]] = ..., pod_disruption_budgets: _Optional[_Iterable[_Union[PodDisruptionBudget, _Mapping]]] = ..., persistent_volume_claims: _Optional[_Iterable[_Union[PersistentVolumeClaim, _Mapping]]] = ..., persistent_volumes: _Optional[_Iterable[_Union[PersistentVolume, _Mapping]]] = ..., storage_classes: _Optional[_Iterable[_Union[StorageClass, _Mapping]]] = ..., csi_nodes: _Optional[_Iterable[_Union[CsiNode, _Mapping]]] = ..., csi_drivers: _Optional[_Iterable[_Union[CsiDriver, _Mapping]]] = ..., csi_storage_capacities: _Optional[_Iterable[_Union[CsiStorageCapacity, _Mapping]]] = ..., device_classes: _Optional[_Iterable[_Union[DeviceClass, _Mapping]]] = ..., resource_claims: _Optional[_Iterable[_Union[ResourceClaim, _Mapping]]] = ..., resource_slices: _Optional[_Iterable[_Union[ResourceSlice, _Mapping]]] = ..., device_taint_rules: _Optional[_Iterable[_Union[DeviceTaintRule, _Mapping]]] = ..., pod_groups: _Optional[_Iterable[_Union[PodGroup, _Mapping]]] = ..., composite_pod_groups: _Optional[_Iterable[_Union[CompositePodGroup, _Mapping]]] = ...) -> None: ...

class Namespace(_message.Message):
    __slots__ = ("name", "labels")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    name: str
    labels: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class SnapshotDelta(_message.Message):
    __slots__ = ("base_snapshot_id", "upsert_nodes", "remove_nodes", "upsert_pods", "remove_pod_uids", "upsert_namespaces", "remove_namespaces", "upsert_pod_disruption_budgets", "remove_pod_disruption_budgets", "upsert_persistent_volume_claims", "remove_persistent_volume_claims", "upsert_persistent_volumes", "remove_persistent_volumes", "upsert_storage_classes", "remove_storage_classes", "upsert_csi_nodes", "remove_csi_nodes", "upsert_csi_drivers", "remove_csi_drivers", "upsert_csi_storage_capacities", "remove_csi_storage_capacities", "upsert_device_classes", "remove_device_classes", "upsert_resource_claims", "remove_resource_claims", "upsert_resource_slices", "remove_resource_slices", "upsert_pod_groups", "remove_pod_groups", "upsert_device_taint_rules", "remove_device_taint_rules", "upsert_composite_pod_groups", "remove_composite_pod_groups")
    BASE_SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    UPSERT_NODES_FIELD_NUMBER: _ClassVar[int]
    REMOVE_NODES_FIELD_NUMBER: _ClassVar[int]
    UPSERT_PODS_FIELD_NUMBER: _ClassVar[int]
    REMOVE_POD_UIDS_FIELD_NUMBER: _ClassVar[int]
    UPSERT_NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    REMOVE_NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    UPSERT_POD_DISRUPTION_BUDGETS_FIELD_NUMBER: _ClassVar[int]
    REMOVE_POD_DISRUPTION_BUDGETS_FIELD_NUMBER: _ClassVar[int]
    UPSERT_PERSISTENT_VOLUME_CLAIMS_FIELD_NUMBER: _ClassVar[int]
    REMOVE_PERSISTENT_VOLUME_CLAIMS_FIELD_NUMBER: _ClassVar[int]
    UPSERT_PERSISTENT_VOLUMES_FIELD_NUMBER: _ClassVar[int]
    REMOVE_PERSISTENT_VOLUMES_FIELD_NUMBER: _ClassVar[int]
    UPSERT_STORAGE_CLASSES_FIELD_NUMBER: _ClassVar[int]
    REMOVE_STORAGE_CLASSES_FIELD_NUMBER: _ClassVar[int]
    UPSERT_CSI_NODES_FIELD_NUMBER: _ClassVar[int]
    REMOVE_CSI_NODES_FIELD_NUMBER: _ClassVar[int]
    UPSERT_CSI_DRIVERS_FIELD_NUMBER: _ClassVar[int]
    REMOVE_CSI_DRIVERS_FIELD_NUMBER: _ClassVar[int]
    UPSERT_CSI_STORAGE_CAPACITIES_FIELD_NUMBER: _ClassVar[int]
    REMOVE_CSI_STORAGE_CAPACITIES_FIELD_NUMBER: _ClassVar[int]
    UPSERT_DEVICE_CLASSES_FIELD_NUMBER: _ClassVar[int]
    REMOVE_DEVICE_CLASSES_FIELD_NUMBER: _ClassVar[int]
    UPSERT_RESOURCE_CLAIMS_FIELD_NUMBER: _ClassVar[int]
    REMOVE_RESOURCE_CLAIMS_FIELD_NUMBER: _ClassVar[int]
    UPSERT_RESOURCE_SLICES_FIELD_NUMBER: _ClassVar[int]
    REMOVE_RESOURCE_SLICES_FIELD_NUMBER: _ClassVar[int]
    UPSERT_POD_GROUPS_FIELD_NUMBER: _ClassVar[int]
    REMOVE_POD_GROUPS_FIELD_NUMBER: _ClassVar[int]
    UPSERT_DEVICE_TAINT_RULES_FIELD_NUMBER: _ClassVar[int]
    REMOVE_DEVICE_TAINT_RULES_FIELD_NUMBER: _ClassVar[int]
    UPSERT_COMPOSITE_POD_GROUPS_FIELD_NUMBER: _ClassVar[int]
    REMOVE_COMPOSITE_POD_GROUPS_FIELD_NUMBER: _ClassVar[int]
    base_snapshot_id: str
    upsert_nodes: _containers.RepeatedCompositeFieldContainer[Node]
    remove_nodes: _containers.RepeatedScalarFieldContainer[str]
    upsert_pods: _containers.RepeatedCompositeFieldContainer[Pod]
    remove_pod_uids: _containers.RepeatedScalarFieldContainer[str]
    upsert_namespaces: _containers.RepeatedCompositeFieldContainer[Namespace]
    remove_namespaces: _containers.RepeatedScalarFieldContainer[str]
    upsert_pod_disruption_budgets: _containers.RepeatedCompositeFieldContainer[PodDisruptionBudget]
    remove_pod_disruption_budgets: _containers.RepeatedScalarFieldContainer[str]
    upsert_persistent_volume_claims: _containers.RepeatedCompositeFieldContainer[PersistentVolumeClaim]
    remove_persistent_volume_claims: _containers.RepeatedScalarFieldContainer[str]
    upsert_persistent_volumes: _containers.RepeatedCompositeFieldContainer[PersistentVolume]
    remove_persistent_volumes: _containers.RepeatedScalarFieldContainer[str]
    upsert_storage_classes: _containers.RepeatedCompositeFieldContainer[StorageClass]
    remove_storage_classes: _containers.RepeatedScalarFieldContainer[str]
    upsert_csi_nodes: _containers.RepeatedCompositeFieldContainer[CsiNode]
    remove_csi_nodes: _containers.RepeatedScalarFieldContainer[str]
    upsert_csi_drivers: _containers.RepeatedCompositeFieldContainer[CsiDriver]
    remove_csi_drivers: _containers.RepeatedScalarFieldContainer[str]
    upsert_csi_storage_capacities: _containers.RepeatedCompositeFieldContainer[CsiStorageCapacity]
    remove_csi_storage_capacities: _containers.RepeatedScalarFieldContainer[str]
    upsert_device_classes: _containers.RepeatedCompositeFieldContainer[DeviceClass]
    remove_device_classes: _containers.RepeatedScalarFieldContainer[str]
    upsert_resource_claims: _containers.RepeatedCompositeFieldContainer[ResourceClaim]
    remove_resource_claims: _containers.RepeatedScalarFieldContainer[str]
    upsert_resource_slices: _containers.RepeatedCompositeFieldContainer[ResourceSlice]
    remove_resource_slices: _containers.RepeatedScalarFieldContainer[str]
    upsert_pod_groups: _containers.RepeatedCompositeFieldContainer[PodGroup]
    remove_pod_groups: _containers.RepeatedScalarFieldContainer[str]
    upsert_device_taint_rules: _containers.RepeatedCompositeFieldContainer[DeviceTaintRule]
    remove_device_taint_rules: _containers.RepeatedScalarFieldContainer[str]
    upsert_composite_pod_groups: _containers.RepeatedCompositeFieldContainer[CompositePodGroup]
    remove_composite_pod_groups: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, base_snapshot_id: _Optional[str] = ..., upsert_nodes: _Optional[_Iterable[_Union[Node, _Mapping]]] = ..., remove_nodes: _Optional[_Iterable[str]] = ..., upsert_pods: _Optional[_Iterable[_Union[Pod, _Mapping]]] = ..., remove_pod_uids: _Optional[_Iterable[str]] = ..., upsert_namespaces: _Optional[_Iterable[_Union[Namespace, _Mapping]]] = ..., remove_namespaces: _Optional[_Iterable[str]] = ..., upsert_pod_disruption_budgets: _Optional[_Iterable[_Union[PodDisruptionBudget, _Mapping]]] = ..., remove_pod_disruption_budgets: _Optional[_Iterable[str]] = ..., upsert_persistent_volume_claims: _Optional[_Iterable[_Union[PersistentVolumeClaim, _Mapping]]] = ..., remove_persistent_volume_claims: _Optional[_Iterable[str]] = ..., upsert_persistent_volumes: _Optional[_Iterable[_Union[PersistentVolume, _Mapping]]] = ..., remove_persistent_volumes: _Optional[_Iterable[str]] = ..., upsert_storage_classes: _Optional[_Iterable[_Union[StorageClass, _Mapping]]] = ..., remove_storage_classes: _Optional[_Iterable[str]] = ..., upsert_csi_nodes: _Optional[_Iterable[_Union[CsiNode, _Mapping]]] = ..., remove_csi_nodes: _Optional[_Iterable[str]] = ..., upsert_csi_drivers: _Optional[_Iterable[_Union[CsiDriver, _Mapping]]] = ..., remove_csi_drivers: _Optional[_Iterable[str]] = ..., upsert_csi_storage_capacities: _Optional[_Iterable[_Union[CsiStorageCapacity, _Mapping]]] = ..., remove_csi_storage_capacities: _Optional[_Iterable[str]] = ..., upsert_device_classes: _Optional[_Iterable[_Union[DeviceClass, _Mapping]]] = ..., remove_device_classes: _Optional[_Iterable[str]] = ..., upsert_resource_claims: _Optional[_Iterable[_Union[ResourceClaim, _Mapping]]] = ..., remove_resource_claims: _Optional[_Iterable[str]] = ..., upsert_resource_slices: _Optional[_Iterable[_Union[ResourceSlice, _Mapping]]] = ..., remove_resource_slices: _Optional[_Iterable[str]] = ..., upsert_pod_groups: _Optional[_Iterable[_Union[PodGroup, _Mapping]]] = ..., remove_pod_groups: _Optional[_Iterable[str]] = ..., upsert_device_taint_rules: _Optional[_Iterable[_Union[DeviceTaintRule, _Mapping]]] = ..., remove_device_taint_rules: _Optional[_Iterable[str]] = ..., upsert_composite_pod_groups: _Optional[_Iterable[_Union[CompositePodGroup, _Mapping]]] = ..., remove_composite_pod_groups: _Optional[_Iterable[str]] = ...) -> None: ...

class SnapshotRef(_message.Message):
    __slots__ = ("snapshot_id", "inline")
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    INLINE_FIELD_NUMBER: _ClassVar[int]
    snapshot_id: str
    inline: Snapshot
    def __init__(self, snapshot_id: _Optional[str] = ..., inline: _Optional[_Union[Snapshot, _Mapping]] = ...) -> None: ...

class RankRequest(_message.Message):
    __slots__ = ("snapshot", "pod", "policy", "top_k", "seed", "infeasible_limit")
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    POD_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    INFEASIBLE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    snapshot: SnapshotRef
    pod: Pod
    policy: str
    top_k: int
    seed: int
    infeasible_limit: int
    def __init__(self, snapshot: _Optional[_Union[SnapshotRef, _Mapping]] = ..., pod: _Optional[_Union[Pod, _Mapping]] = ..., policy: _Optional[str] = ..., top_k: _Optional[int] = ..., seed: _Optional[int] = ..., infeasible_limit: _Optional[int] = ...) -> None: ...

class RankResponse(_message.Message):
    __slots__ = ("policy", "feasible", "feasible_count", "infeasible", "message", "node_count", "nominated_node_name", "victim_uids")
    POLICY_FIELD_NUMBER: _ClassVar[int]
    FEASIBLE_FIELD_NUMBER: _ClassVar[int]
    FEASIBLE_COUNT_FIELD_NUMBER: _ClassVar[int]
    INFEASIBLE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NODE_COUNT_FIELD_NUMBER: _ClassVar[int]
    NOMINATED_NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    VICTIM_UIDS_FIELD_NUMBER: _ClassVar[int]
    policy: str
    feasible: _containers.RepeatedCompositeFieldContainer[NodeScore]
    feasible_count: int
    infeasible: _containers.RepeatedCompositeFieldContainer[InfeasibleNode]
    message: str
    node_count: int
    nominated_node_name: str
    victim_uids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, policy: _Optional[str] = ..., feasible: _Optional[_Iterable[_Union[NodeScore, _Mapping]]] = ..., feasible_count: _Optional[int] = ..., infeasible: _Optional[_Iterable[_Union[InfeasibleNode, _Mapping]]] = ..., message: _Optional[str] = ..., node_count: _Optional[int] = ..., nominated_node_name: _Optional[str] = ..., victim_uids: _Optional[_Iterable[str]] = ...) -> None: ...

class NodeScore(_message.Message):
    __slots__ = ("node", "total", "plugin_scores")
    NODE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_SCORES_FIELD_NUMBER: _ClassVar[int]
    node: str
    total: int
    plugin_scores: _containers.RepeatedCompositeFieldContainer[PluginScore]
    def __init__(self, node: _Optional[str] = ..., total: _Optional[int] = ..., plugin_scores: _Optional[_Iterable[_Union[PluginScore, _Mapping]]] = ...) -> None: ...

class PluginScore(_message.Message):
    __slots__ = ("plugin", "score", "weight")
    PLUGIN_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    plugin: str
    score: int
    weight: int
    def __init__(self, plugin: _Optional[str] = ..., score: _Optional[int] = ..., weight: _Optional[int] = ...) -> None: ...

class InfeasibleNode(_message.Message):
    __slots__ = ("node", "plugin", "reasons", "device_failures")
    NODE_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FAILURES_FIELD_NUMBER: _ClassVar[int]
    node: str
    plugin: str
    reasons: _containers.RepeatedScalarFieldContainer[str]
    device_failures: _containers.RepeatedCompositeFieldContainer[DeviceRequestFailure]
    def __init__(self, node: _Optional[str] = ..., plugin: _Optional[str] = ..., reasons: _Optional[_Iterable[str]] = ..., device_failures: _Optional[_Iterable[_Union[DeviceRequestFailure, _Mapping]]] = ...) -> None: ...

class DeviceRequestFailure(_message.Message):
    __slots__ = ("claim", "request", "kind", "message")
    CLAIM_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    claim: str
    request: str
    kind: DeviceFailureKind
    message: str
    def __init__(self, claim: _Optional[str] = ..., request: _Optional[str] = ..., kind: _Optional[_Union[DeviceFailureKind, str]] = ..., message: _Optional[str] = ...) -> None: ...

class ScheduleRequest(_message.Message):
    __slots__ = ("snapshot", "pods", "policy", "seed", "assume")
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    PODS_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    ASSUME_FIELD_NUMBER: _ClassVar[int]
    snapshot: SnapshotRef
    pods: _containers.RepeatedCompositeFieldContainer[Pod]
    policy: str
    seed: int
    assume: bool
    def __init__(self, snapshot: _Optional[_Union[SnapshotRef, _Mapping]] = ..., pods: _Optional[_Iterable[_Union[Pod, _Mapping]]] = ..., policy: _Optional[str] = ..., seed: _Optional[int] = ..., assume: _Optional[bool] = ...) -> None: ...

class ScheduleResponse(_message.Message):
    __slots__ = ("policy", "placements", "assumed_snapshot_id", "pod_groups")
    POLICY_FIELD_NUMBER: _ClassVar[int]
    PLACEMENTS_FIELD_NUMBER: _ClassVar[int]
    ASSUMED_SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    POD_GROUPS_FIELD_NUMBER: _ClassVar[int]
    policy: str
    placements: _containers.RepeatedCompositeFieldContainer[Placement]
    assumed_snapshot_id: str
    pod_groups: _containers.RepeatedCompositeFieldContainer[PodGroupResult]
    def __init__(self, policy: _Optional[str] = ..., placements: _Optional[_Iterable[_Union[Placement, _Mapping]]] = ..., assumed_snapshot_id: _Optional[str] = ..., pod_groups: _Optional[_Iterable[_Union[PodGroupResult, _Mapping]]] = ...) -> None: ...

class PodGroupResult(_message.Message):
    __slots__ = ("namespace", "name", "reason", "message", "domain", "levels")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    LEVELS_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    reason: str
    message: str
    domain: str
    levels: _containers.RepeatedCompositeFieldContainer[LevelDomain]
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., domain: _Optional[str] = ..., levels: _Optional[_Iterable[_Union[LevelDomain, _Mapping]]] = ...) -> None: ...

class LevelDomain(_message.Message):
    __slots__ = ("composite_pod_group", "topology_key", "domain")
    COMPOSITE_POD_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_KEY_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    composite_pod_group: str
    topology_key: str
    domain: str
    def __init__(self, composite_pod_group: _Optional[str] = ..., topology_key: _Optional[str] = ..., domain: _Optional[str] = ...) -> None: ...

class Placement(_message.Message):
    __slots__ = ("pod_uid", "node_name", "unschedulable", "score", "feasible_nodes", "claim_bindings", "claim_allocations")
    POD_UID_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    UNSCHEDULABLE_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    FEASIBLE_NODES_FIELD_NUMBER: _ClassVar[int]
    CLAIM_BINDINGS_FIELD_NUMBER: _ClassVar[int]
    CLAIM_ALLOCATIONS_FIELD_NUMBER: _ClassVar[int]
    pod_uid: str
    node_name: str
    unschedulable: Unschedulable
    score: int
    feasible_nodes: int
    claim_bindings: _containers.RepeatedCompositeFieldContainer[ClaimBinding]
    claim_allocations: _containers.RepeatedCompositeFieldContainer[ClaimAllocation]
    def __init__(self, pod_uid: _Optional[str] = ..., node_name: _Optional[str] = ..., unschedulable: _Optional[_Union[Unschedulable, _Mapping]] = ..., score: _Optional[int] = ..., feasible_nodes: _Optional[int] = ..., claim_bindings: _Optional[_Iterable[_Union[ClaimBinding, _Mapping]]] = ..., claim_allocations: _Optional[_Iterable[_Union[ClaimAllocation, _Mapping]]] = ...) -> None: ...

class ClaimAllocation(_message.Message):
    __slots__ = ("claim_namespace", "claim_name", "claim_uid", "allocation", "extended_resource_claim")
    CLAIM_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    CLAIM_NAME_FIELD_NUMBER: _ClassVar[int]
    CLAIM_UID_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_FIELD_NUMBER: _ClassVar[int]
    EXTENDED_RESOURCE_CLAIM_FIELD_NUMBER: _ClassVar[int]
    claim_namespace: str
    claim_name: str
    claim_uid: str
    allocation: AllocationResult
    extended_resource_claim: ExtendedResourceClaim
    def __init__(self, claim_namespace: _Optional[str] = ..., claim_name: _Optional[str] = ..., claim_uid: _Optional[str] = ..., allocation: _Optional[_Union[AllocationResult, _Mapping]] = ..., extended_resource_claim: _Optional[_Union[ExtendedResourceClaim, _Mapping]] = ...) -> None: ...

class ExtendedResourceClaim(_message.Message):
    __slots__ = ("requests", "request_mappings")
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_MAPPINGS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[DeviceRequest]
    request_mappings: _containers.RepeatedCompositeFieldContainer[ContainerExtendedResourceRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[DeviceRequest, _Mapping]]] = ..., request_mappings: _Optional[_Iterable[_Union[ContainerExtendedResourceRequest, _Mapping]]] = ...) -> None: ...

class ContainerExtendedResourceRequest(_message.Message):
    __slots__ = ("container_name", "resource_name", "request_name")
    CONTAINER_NAME_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_NAME_FIELD_NUMBER: _ClassVar[int]
    container_name: str
    resource_name: str
    request_name: str
    def __init__(self, container_name: _Optional[str] = ..., resource_name: _Optional[str] = ..., request_name: _Optional[str] = ...) -> None: ...

class ClaimBinding(_message.Message):
    __slots__ = ("claim_namespace", "claim_name", "volume_name", "selected_node")
    CLAIM_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    CLAIM_NAME_FIELD_NUMBER: _ClassVar[int]
    VOLUME_NAME_FIELD_NUMBER: _ClassVar[int]
    SELECTED_NODE_FIELD_NUMBER: _ClassVar[int]
    claim_namespace: str
    claim_name: str
    volume_name: str
    selected_node: str
    def __init__(self, claim_namespace: _Optional[str] = ..., claim_name: _Optional[str] = ..., volume_name: _Optional[str] = ..., selected_node: _Optional[str] = ...) -> None: ...

class Unschedulable(_message.Message):
    __slots__ = ("message", "reasons", "nominated_node_name", "victim_uids", "gang", "error", "deallocate_claim")
    class ReasonsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    NOMINATED_NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    VICTIM_UIDS_FIELD_NUMBER: _ClassVar[int]
    GANG_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    DEALLOCATE_CLAIM_FIELD_NUMBER: _ClassVar[int]
    message: str
    reasons: _containers.ScalarMap[str, int]
    nominated_node_name: str
    victim_uids: _containers.RepeatedScalarFieldContainer[str]
    gang: str
    error: bool
    deallocate_claim: ClaimDeallocation
    def __init__(self, message: _Optional[str] = ..., reasons: _Optional[_Mapping[str, int]] = ..., nominated_node_name: _Optional[str] = ..., victim_uids: _Optional[_Iterable[str]] = ..., gang: _Optional[str] = ..., error: _Optional[bool] = ..., deallocate_claim: _Optional[_Union[ClaimDeallocation, _Mapping]] = ...) -> None: ...

class ClaimDeallocation(_message.Message):
    __slots__ = ("claim_namespace", "claim_name", "claim_uid")
    CLAIM_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    CLAIM_NAME_FIELD_NUMBER: _ClassVar[int]
    CLAIM_UID_FIELD_NUMBER: _ClassVar[int]
    claim_namespace: str
    claim_name: str
    claim_uid: str
    def __init__(self, claim_namespace: _Optional[str] = ..., claim_name: _Optional[str] = ..., claim_uid: _Optional[str] = ...) -> None: ...

class ListPoliciesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListPoliciesResponse(_message.Message):
    __slots__ = ("policies", "default_policy")
    POLICIES_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_POLICY_FIELD_NUMBER: _ClassVar[int]
    policies: _containers.RepeatedCompositeFieldContainer[PolicyInfo]
    default_policy: str
    def __init__(self, policies: _Optional[_Iterable[_Union[PolicyInfo, _Mapping]]] = ..., default_policy: _Optional[str] = ...) -> None: ...

class PolicyInfo(_message.Message):
    __slots__ = ("name", "description", "digest", "filters", "scores", "scoring_strategy", "source", "filter_rules", "score_rules")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    SCORING_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    FILTER_RULES_FIELD_NUMBER: _ClassVar[int]
    SCORE_RULES_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    digest: str
    filters: _containers.RepeatedScalarFieldContainer[str]
    scores: _containers.RepeatedCompositeFieldContainer[PluginWeight]
    scoring_strategy: str
    source: str
    filter_rules: _containers.RepeatedCompositeFieldContainer[FilterRule]
    score_rules: _containers.RepeatedCompositeFieldContainer[ScoreRule]
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., digest: _Optional[str] = ..., filters: _Optional[_Iterable[str]] = ..., scores: _Optional[_Iterable[_Union[PluginWeight, _Mapping]]] = ..., scoring_strategy: _Optional[str] = ..., source: _Optional[str] = ..., filter_rules: _Optional[_Iterable[_Union[FilterRule, _Mapping]]] = ..., score_rules: _Optional[_Iterable[_Union[ScoreRule, _Mapping]]] = ...) -> None: ...

class FilterRule(_message.Message):
    __slots__ = ("name", "expression", "reason")
    NAME_FIELD_NUMBER: _ClassVar[int]
    EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    name: str
    expression: str
    reason: str
    def __init__(self, name: _Optional[str] = ..., expression: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ScoreRule(_message.Message):
    __slots__ = ("name", "expression", "weight")
    NAME_FIELD_NUMBER: _ClassVar[int]
    EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    name: str
    expression: str
    weight: int
    def __init__(self, name: _Optional[str] = ..., expression: _Optional[str] = ..., weight: _Optional[int] = ...) -> None: ...

class PluginWeight(_message.Message):
    __slots__ = ("plugin", "weight")
    PLUGIN_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    plugin: str
    weight: int
    def __init__(self, plugin: _Optional[str] = ..., weight: _Optional[int] = ...) -> None: ...

class Pod(_message.Message):
    __slots__ = ("uid", "namespace", "name", "labels", "priority", "containers", "init_containers", "overhead", "node_name", "node_selector", "node_affinity", "tolerations", "pod_affinity", "pod_anti_affinity", "topology_spread_constraints", "default_spread_selector", "preemption_policy", "start_time_seconds", "gang", "terminating", "annotations", "volumes", "pod_requests", "allocated_requests", "actuated_requests", "resize_infeasible", "required_features", "resource_claims", "scheduling_group")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class OverheadEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class NodeSelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class PodRequestsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AllocatedRequestsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class ActuatedRequestsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    UID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    INIT_CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    OVERHEAD_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    NODE_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    NODE_AFFINITY_FIELD_NUMBER: _ClassVar[int]
    TOLERATIONS_FIELD_NUMBER: _ClassVar[int]
    POD_AFFINITY_FIELD_NUMBER: _ClassVar[int]
    POD_ANTI_AFFINITY_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_SPREAD_CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_SPREAD_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_POLICY_FIELD_NUMBER: _ClassVar[int]
    START_TIME_SECONDS_FIELD_NUMBER: _ClassVar[int]
    GANG_FIELD_NUMBER: _ClassVar[int]
    TERMINATING_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    VOLUMES_FIELD_NUMBER: _ClassVar[int]
    POD_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    ALLOCATED_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    ACTUATED_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    RESIZE_INFEASIBLE_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_FEATURES_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_CLAIMS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_GROUP_FIELD_NUMBER: _ClassVar[int]
    uid: str
    namespace: str
    name: str
    labels: _containers.ScalarMap[str, str]
    priority: int
    containers: _containers.RepeatedCompositeFieldContainer[Container]
    init_containers: _containers.RepeatedCompositeFieldContainer[Container]
    overhead: _containers.ScalarMap[str, str]
    node_name: str
    node_selector: _containers.ScalarMap[str, str]
    node_affinity: NodeAffinity
    tolerations: _containers.RepeatedCompositeFieldContainer[Toleration]
    pod_affinity: PodAffinity
    pod_anti_affinity: PodAffinity
    topology_spread_constraints: _containers.RepeatedCompositeFieldContainer[TopologySpreadConstraint]
    default_spread_selector: LabelSelector
    preemption_policy: str
    start_time_seconds: int
    gang: Gang
    terminating: bool
    annotations: _containers.ScalarMap[str, str]
    volumes: _containers.RepeatedCompositeFieldContainer[Volume]
    pod_requests: _containers.ScalarMap[str, str]
    allocated_requests: _containers.ScalarMap[str, str]
    actuated_requests: _containers.ScalarMap[str, str]
    resize_infeasible: bool
    required_features: _containers.RepeatedScalarFieldContainer[str]
    resource_claims: _containers.RepeatedCompositeFieldContainer[PodResourceClaim]
    scheduling_group: str
    def __init__(self, uid: _Optional[str] = ..., namespace: _Optional[str] = ..., name: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., priority: _Optional[int] = ..., containers: _Optional[_Iterable[_Union[Container, _Mapping]]] = ..., init_containers: _Optional[_Iterable[_Union[Container, _Mapping]]] = ..., overhead: _Optional[_Mapping[str, str]] = ..., node_name: _Optional[str] = ..., node_selector: _Optional[_Mapping[str, str]] = ..., node_affinity: _Optional[_Union[NodeAffinity, _Mapping]] = ..., tolerations: _Optional[_Iterable[_Union[Toleration, _Mapping]]] = ..., pod_affinity: _Optional[_Union[PodAffinity, _Mapping]] = ..., pod_anti_affinity: _Optional[_Union[PodAffinity, _Mapping]] = ..., topology_spread_constraints: _Optional[_Iterable[_Union[TopologySpreadConstraint, _Mapping]]] = ..., default_spread_selector: _Optional[_Union[LabelSelector, _Mapping]] = ..., preemption_policy: _Optional[str] = ..., start_time_seconds: _Optional[int] = ..., gang: _Optional[_Union[Gang, _Mapping]] = ..., terminating: _Optional[bool] = ..., annotations: _Optional[_Mapping[str, str]] = ..., volumes: _Optional[_Iterable[_Union[Volume, _Mapping]]] = ..., pod_requests: _Optional[_Mapping[str, str]] = ..., allocated_requests: _Optional[_Mapping[str, str]] = ..., actuated_requests: _Optional[_Mapping[str, str]] = ..., resize_infeasible: _Optional[bool] = ..., required_features: _Optional[_Iterable[str]] = ..., resource_claims: _Optional[_Iterable[_Union[PodResourceClaim, _Mapping]]] = ..., scheduling_group: _Optional[str] = ...) -> None: ...

class PodResourceClaim(_message.Message):
    __slots__ = ("name", "resource_claim_name", "resource_claim_template_name", "generated_claim_name")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_CLAIM_NAME_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_CLAIM_TEMPLATE_NAME_FIELD_NUMBER: _ClassVar[int]
    GENERATED_CLAIM_NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    resource_claim_name: str
    resource_claim_template_name: str
    generated_claim_name: str
    def __init__(self, name: _Optional[str] = ..., resource_claim_name: _Optional[str] = ..., resource_claim_template_name: _Optional[str] = ..., generated_claim_name: _Optional[str] = ...) -> None: ...

class Volume(_message.Message):
    __slots__ = ("name", "claim_name", "ephemeral", "gce_pd_name", "aws_volume_id", "iscsi_iqn", "rbd_monitors", "rbd_pool", "rbd_image", "read_only", "image_reference")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CLAIM_NAME_FIELD_NUMBER: _ClassVar[int]
    EPHEMERAL_FIELD_NUMBER: _ClassVar[int]
    GCE_PD_NAME_FIELD_NUMBER: _ClassVar[int]
    AWS_VOLUME_ID_FIELD_NUMBER: _ClassVar[int]
    ISCSI_IQN_FIELD_NUMBER: _ClassVar[int]
    RBD_MONITORS_FIELD_NUMBER: _ClassVar[int]
    RBD_POOL_FIELD_NUMBER: _ClassVar[int]
    RBD_IMAGE_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    IMAGE_REFERENCE_FIELD_NUMBER: _ClassVar[int]
    name: str
    claim_name: str
    ephemeral: bool
    gce_pd_name: str
    aws_volume_id: str
    iscsi_iqn: str
    rbd_monitors: _containers.RepeatedScalarFieldContainer[str]
    rbd_pool: str
    rbd_image: str
    read_only: bool
    image_reference: str
    def __init__(self, name: _Optional[str] = ..., claim_name: _Optional[str] = ..., ephemeral: _Optional[bool] = ..., gce_pd_name: _Optional[str] = ..., aws_volume_id: _Optional[str] = ..., iscsi_iqn: _Optional[str] = ..., rbd_monitors: _Optional[_Iterable[str]] = ..., rbd_pool: _Optional[str] = ..., rbd_image: _Optional[str] = ..., read_only: _Optional[bool] = ..., image_reference: _Optional[str] = ...) -> None: ...

class PersistentVolumeClaim(_message.Message):
    __slots__ = ("namespace", "name", "uid", "storage_class_name", "volume_name", "bind_completed", "access_modes", "storage_request", "selector", "volume_mode", "phase", "deleting", "selected_node", "volume_attributes_class_name", "controller_uid", "selected_node_set")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    STORAGE_CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    VOLUME_NAME_FIELD_NUMBER: _ClassVar[int]
    BIND_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    ACCESS_MODES_FIELD_NUMBER: _ClassVar[int]
    STORAGE_REQUEST_FIELD_NUMBER: _ClassVar[int]
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    VOLUME_MODE_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    DELETING_FIELD_NUMBER: _ClassVar[int]
    SELECTED_NODE_FIELD_NUMBER: _ClassVar[int]
    VOLUME_ATTRIBUTES_CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_UID_FIELD_NUMBER: _ClassVar[int]
    SELECTED_NODE_SET_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    uid: str
    storage_class_name: str
    volume_name: str
    bind_completed: bool
    access_modes: _containers.RepeatedScalarFieldContainer[str]
    storage_request: str
    selector: LabelSelector
    volume_mode: str
    phase: str
    deleting: bool
    selected_node: str
    volume_attributes_class_name: str
    controller_uid: str
    selected_node_set: bool
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., uid: _Optional[str] = ..., storage_class_name: _Optional[str] = ..., volume_name: _Optional[str] = ..., bind_completed: _Optional[bool] = ..., access_modes: _Optional[_Iterable[str]] = ..., storage_request: _Optional[str] = ..., selector: _Optional[_Union[LabelSelector, _Mapping]] = ..., volume_mode: _Optional[str] = ..., phase: _Optional[str] = ..., deleting: _Optional[bool] = ..., selected_node: _Optional[str] = ..., volume_attributes_class_name: _Optional[str] = ..., controller_uid: _Optional[str] = ..., selected_node_set: _Optional[bool] = ...) -> None: ...

class PersistentVolume(_message.Message):
    __slots__ = ("name", "labels", "storage_class_name", "capacity", "access_modes", "volume_mode", "node_affinity", "claim_ref", "phase", "deleting", "csi_driver", "csi_volume_handle", "volume_attributes_class_name")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    STORAGE_CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    ACCESS_MODES_FIELD_NUMBER: _ClassVar[int]
    VOLUME_MODE_FIELD_NUMBER: _ClassVar[int]
    NODE_AFFINITY_FIELD_NUMBER: _ClassVar[int]
    CLAIM_REF_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    DELETING_FIELD_NUMBER: _ClassVar[int]
    CSI_DRIVER_FIELD_NUMBER: _ClassVar[int]
    CSI_VOLUME_HANDLE_FIELD_NUMBER: _ClassVar[int]
    VOLUME_ATTRIBUTES_CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    labels: _containers.ScalarMap[str, str]
    storage_class_name: str
    capacity: str
    access_modes: _containers.RepeatedScalarFieldContainer[str]
    volume_mode: str
    node_affinity: NodeSelector
    claim_ref: VolumeClaimRef
    phase: str
    deleting: bool
    csi_driver: str
    csi_volume_handle: str
    volume_attributes_class_name: str
    def __init__(self, name: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., storage_class_name: _Optional[str] = ..., capacity: _Optional[str] = ..., access_modes: _Optional[_Iterable[str]] = ..., volume_mode: _Optional[str] = ..., node_affinity: _Optional[_Union[NodeSelector, _Mapping]] = ..., claim_ref: _Optional[_Union[VolumeClaimRef, _Mapping]] = ..., phase: _Optional[str] = ..., deleting: _Optional[bool] = ..., csi_driver: _Optional[str] = ..., csi_volume_handle: _Optional[str] = ..., volume_attributes_class_name: _Optional[str] = ...) -> None: ...

class VolumeClaimRef(_message.Message):
    __slots__ = ("namespace", "name", "uid")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    uid: str
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., uid: _Optional[str] = ...) -> None: ...

class StorageClass(_message.Message):
    __slots__ = ("name", "provisioner", "volume_binding_mode", "allowed_topologies")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROVISIONER_FIELD_NUMBER: _ClassVar[int]
    VOLUME_BINDING_MODE_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_TOPOLOGIES_FIELD_NUMBER: _ClassVar[int]
    name: str
    provisioner: str
    volume_binding_mode: str
    allowed_topologies: _containers.RepeatedCompositeFieldContainer[TopologySelectorTerm]
    def __init__(self, name: _Optional[str] = ..., provisioner: _Optional[str] = ..., volume_binding_mode: _Optional[str] = ..., allowed_topologies: _Optional[_Iterable[_Union[TopologySelectorTerm, _Mapping]]] = ...) -> None: ...

class TopologySelectorTerm(_message.Message):
    __slots__ = ("match_label_expressions",)
    MATCH_LABEL_EXPRESSIONS_FIELD_NUMBER: _ClassVar[int]
    match_label_expressions: _containers.RepeatedCompositeFieldContainer[TopologySelectorRequirement]
    def __init__(self, match_label_expressions: _Optional[_Iterable[_Union[TopologySelectorRequirement, _Mapping]]] = ...) -> None: ...

class TopologySelectorRequirement(_message.Message):
    __slots__ = ("key", "values")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    key: str
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, key: _Optional[str] = ..., values: _Optional[_Iterable[str]] = ...) -> None: ...

class CsiNode(_message.Message):
    __slots__ = ("name", "drivers")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DRIVERS_FIELD_NUMBER: _ClassVar[int]
    name: str
    drivers: _containers.RepeatedCompositeFieldContainer[CsiNodeDriver]
    def __init__(self, name: _Optional[str] = ..., drivers: _Optional[_Iterable[_Union[CsiNodeDriver, _Mapping]]] = ...) -> None: ...

class CsiNodeDriver(_message.Message):
    __slots__ = ("name", "allocatable_count")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ALLOCATABLE_COUNT_FIELD_NUMBER: _ClassVar[int]
    name: str
    allocatable_count: int
    def __init__(self, name: _Optional[str] = ..., allocatable_count: _Optional[int] = ...) -> None: ...

class CsiDriver(_message.Message):
    __slots__ = ("name", "storage_capacity", "prevent_pod_scheduling_if_missing")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STORAGE_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    PREVENT_POD_SCHEDULING_IF_MISSING_FIELD_NUMBER: _ClassVar[int]
    name: str
    storage_capacity: bool
    prevent_pod_scheduling_if_missing: bool
    def __init__(self, name: _Optional[str] = ..., storage_capacity: _Optional[bool] = ..., prevent_pod_scheduling_if_missing: _Optional[bool] = ...) -> None: ...

class CsiStorageCapacity(_message.Message):
    __slots__ = ("namespace", "name", "storage_class_name", "node_topology", "capacity", "maximum_volume_size")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STORAGE_CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    NODE_TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    MAXIMUM_VOLUME_SIZE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    storage_class_name: str
    node_topology: LabelSelector
    capacity: str
    maximum_volume_size: str
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., storage_class_name: _Optional[str] = ..., node_topology: _Optional[_Union[LabelSelector, _Mapping]] = ..., capacity: _Optional[str] = ..., maximum_volume_size: _Optional[str] = ...) -> None: ...

class PodAffinity(_message.Message):
    __slots__ = ("required", "preferred")
    REQUIRED_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_FIELD_NUMBER: _ClassVar[int]
    required: _containers.RepeatedCompositeFieldContainer[PodAffinityTerm]
    preferred: _containers.RepeatedCompositeFieldContainer[WeightedPodAffinityTerm]
    def __init__(self, required: _Optional[_Iterable[_Union[PodAffinityTerm, _Mapping]]] = ..., preferred: _Optional[_Iterable[_Union[WeightedPodAffinityTerm, _Mapping]]] = ...) -> None: ...

class PodAffinityTerm(_message.Message):
    __slots__ = ("label_selector", "namespaces", "topology_key", "namespace_selector")
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_KEY_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    label_selector: LabelSelector
    namespaces: _containers.RepeatedScalarFieldContainer[str]
    topology_key: str
    namespace_selector: LabelSelector
    def __init__(self, label_selector: _Optional[_Union[LabelSelector, _Mapping]] = ..., namespaces: _Optional[_Iterable[str]] = ..., topology_key: _Optional[str] = ..., namespace_selector: _Optional[_Union[LabelSelector, _Mapping]] = ...) -> None: ...

class WeightedPodAffinityTerm(_message.Message):
    __slots__ = ("weight", "term")
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    weight: int
    term: PodAffinityTerm
    def __init__(self, weight: _Optional[int] = ..., term: _Optional[_Union[PodAffinityTerm, _Mapping]] = ...) -> None: ...

class Gang(_message.Message):
    __slots__ = ("name", "min_members")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MIN_MEMBERS_FIELD_NUMBER: _ClassVar[int]
    name: str
    min_members: int
    def __init__(self, name: _Optional[str] = ..., min_members: _Optional[int] = ...) -> None: ...

class PodGroup(_message.Message):
    __slots__ = ("namespace", "name", "uid", "generation", "gang", "topology_keys", "priority_class_name", "priority", "preemption_policy", "disruption_mode", "workload_ref", "parent_composite_pod_group_name", "initially_scheduled")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    GANG_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_KEYS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_POLICY_FIELD_NUMBER: _ClassVar[int]
    DISRUPTION_MODE_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_REF_FIELD_NUMBER: _ClassVar[int]
    PARENT_COMPOSITE_POD_GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
    INITIALLY_SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    uid: str
    generation: int
    gang: GangSchedulingPolicy
    topology_keys: _containers.RepeatedScalarFieldContainer[str]
    priority_class_name: str
    priority: int
    preemption_policy: str
    disruption_mode: str
    workload_ref: WorkloadReference
    parent_composite_pod_group_name: str
    initially_scheduled: bool
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., uid: _Optional[str] = ..., generation: _Optional[int] = ..., gang: _Optional[_Union[GangSchedulingPolicy, _Mapping]] = ..., topology_keys: _Optional[_Iterable[str]] = ..., priority_class_name: _Optional[str] = ..., priority: _Optional[int] = ..., preemption_policy: _Optional[str] = ..., disruption_mode: _Optional[str] = ..., workload_ref: _Optional[_Union[WorkloadReference, _Mapping]] = ..., parent_composite_pod_group_name: _Optional[str] = ..., initially_scheduled: _Optional[bool] = ...) -> None: ...

class CompositePodGroup(_message.Message):
    __slots__ = ("namespace", "name", "uid", "parent_composite_pod_group_name", "min_group_count", "topology_keys", "priority", "preemption_policy")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    PARENT_COMPOSITE_POD_GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
    MIN_GROUP_COUNT_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_KEYS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_POLICY_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    uid: str
    parent_composite_pod_group_name: str
    min_group_count: int
    topology_keys: _containers.RepeatedScalarFieldContainer[str]
    priority: int
    preemption_policy: str
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., uid: _Optional[str] = ..., parent_composite_pod_group_name: _Optional[str] = ..., min_group_count: _Optional[int] = ..., topology_keys: _Optional[_Iterable[str]] = ..., priority: _Optional[int] = ..., preemption_policy: _Optional[str] = ...) -> None: ...

class GangSchedulingPolicy(_message.Message):
    __slots__ = ("min_count",)
    MIN_COUNT_FIELD_NUMBER: _ClassVar[int]
    min_count: int
    def __init__(self, min_count: _Optional[int] = ...) -> None: ...

class WorkloadReference(_message.Message):
    __slots__ = ("workload_name", "template_name")
    WORKLOAD_NAME_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_NAME_FIELD_NUMBER: _ClassVar[int]
    workload_name: str
    template_name: str
    def __init__(self, workload_name: _Optional[str] = ..., template_name: _Optional[str] = ...) -> None: ...

class PodDisruptionBudget(_message.Message):
    __slots__ = ("namespace", "name", "selector", "disruptions_allowed", "disrupted_pod_uids")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    DISRUPTIONS_ALLOWED_FIELD_NUMBER: _ClassVar[int]
    DISRUPTED_POD_UIDS_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    selector: LabelSelector
    disruptions_allowed: int
    disrupted_pod_uids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., selector: _Optional[_Union[LabelSelector, _Mapping]] = ..., disruptions_allowed: _Optional[int] = ..., disrupted_pod_uids: _Optional[_Iterable[str]] = ...) -> None: ...

class LabelSelector(_message.Message):
    __slots__ = ("match_labels", "match_expressions")
    class MatchLabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    MATCH_LABELS_FIELD_NUMBER: _ClassVar[int]
    MATCH_EXPRESSIONS_FIELD_NUMBER: _ClassVar[int]
    match_labels: _containers.ScalarMap[str, str]
    match_expressions: _containers.RepeatedCompositeFieldContainer[LabelSelectorRequirement]
    def __init__(self, match_labels: _Optional[_Mapping[str, str]] = ..., match_expressions: _Optional[_Iterable[_Union[LabelSelectorRequirement, _Mapping]]] = ...) -> None: ...

class LabelSelectorRequirement(_message.Message):
    __slots__ = ("key", "operator", "values")
    KEY_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    key: str
    operator: str
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, key: _Optional[str] = ..., operator: _Optional[str] = ..., values: _Optional[_Iterable[str]] = ...) -> None: ...

class TopologySpreadConstraint(_message.Message):
    __slots__ = ("max_skew", "topology_key", "when_unsatisfiable", "label_selector", "min_domains", "node_affinity_policy", "node_taints_policy", "match_label_keys")
    MAX_SKEW_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_KEY_FIELD_NUMBER: _ClassVar[int]
    WHEN_UNSATISFIABLE_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    MIN_DOMAINS_FIELD_NUMBER: _ClassVar[int]
    NODE_AFFINITY_POLICY_FIELD_NUMBER: _ClassVar[int]
    NODE_TAINTS_POLICY_FIELD_NUMBER: _ClassVar[int]
    MATCH_LABEL_KEYS_FIELD_NUMBER: _ClassVar[int]
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    label_selector: LabelSelector
    min_domains: int
    node_affinity_policy: str
    node_taints_policy: str
    match_label_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, max_skew: _Optional[int] = ..., topology_key: _Optional[str] = ..., when_unsatisfiable: _Optional[str] = ..., label_selector: _Optional[_Union[LabelSelector, _Mapping]] = ..., min_domains: _Optional[int] = ..., node_affinity_policy: _Optional[str] = ..., node_taints_policy: _Optional[str] = ..., match_label_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class Container(_message.Message):
    __slots__ = ("name", "image", "requests", "ports", "restart_policy", "allocated_requests", "actuated_requests")
    class RequestsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AllocatedRequestsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class ActuatedRequestsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    RESTART_POLICY_FIELD_NUMBER: _ClassVar[int]
    ALLOCATED_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    ACTUATED_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    image: str
    requests: _containers.ScalarMap[str, str]
    ports: _containers.RepeatedCompositeFieldContainer[ContainerPort]
    restart_policy: str
    allocated_requests: _containers.ScalarMap[str, str]
    actuated_requests: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., image: _Optional[str] = ..., requests: _Optional[_Mapping[str, str]] = ..., ports: _Optional[_Iterable[_Union[ContainerPort, _Mapping]]] = ..., restart_policy: _Optional[str] = ..., allocated_requests: _Optional[_Mapping[str, str]] = ..., actuated_requests: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ContainerPort(_message.Message):
    __slots__ = ("container_port", "host_port", "protocol", "host_ip")
    CONTAINER_PORT_FIELD_NUMBER: _ClassVar[int]
    HOST_PORT_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    HOST_IP_FIELD_NUMBER: _ClassVar[int]
    container_port: int
    host_port: int
    protocol: str
    host_ip: str
    def __init__(self, container_port: _Optional[int] = ..., host_port: _Optional[int] = ..., protocol: _Optional[str] = ..., host_ip: _Optional[str] = ...) -> None: ...

class NodeAffinity(_message.Message):
    __slots__ = ("required", "preferred")
    REQUIRED_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_FIELD_NUMBER: _ClassVar[int]
    required: NodeSelector
    preferred: _containers.RepeatedCompositeFieldContainer[PreferredSchedulingTerm]
    def __init__(self, required: _Optional[_Union[NodeSelector, _Mapping]] = ..., preferred: _Optional[_Iterable[_Union[PreferredSchedulingTerm, _Mapping]]] = ...) -> None: ...

class NodeSelector(_message.Message):
    __slots__ = ("terms",)
    TERMS_FIELD_NUMBER: _ClassVar[int]
    terms: _containers.RepeatedCompositeFieldContainer[NodeSelectorTerm]
    def __init__(self, terms: _Optional[_Iterable[_Union[NodeSelectorTerm, _Mapping]]] = ...) -> None: ...

class NodeSelectorTerm(_message.Message):
    __slots__ = ("match_expressions", "match_fields")
    MATCH_EXPRESSIONS_FIELD_NUMBER: _ClassVar[int]
    MATCH_FIELDS_FIELD_NUMBER: _ClassVar[int]
    match_expressions: _containers.RepeatedCompositeFieldContainer[NodeSelectorRequirement]
    match_fields: _containers.RepeatedCompositeFieldContainer[NodeSelectorRequirement]
    def __init__(self, match_expressions: _Optional[_Iterable[_Union[NodeSelectorRequirement, _Mapping]]] = ..., match_fields: _Optional[_Iterable[_Union[NodeSelectorRequirement, _Mapping]]] = ...) -> None: ...

class NodeSelectorRequirement(_message.Message):
    __slots__ = ("key", "operator", "values")
    KEY_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    key: str
    operator: str
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, key: _Optional[str] = ..., operator: _Optional[str] = ..., values: _Optional[_Iterable[str]] = ...) -> None: ...

class PreferredSchedulingTerm(_message.Message):
    __slots__ = ("weight", "preference")
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    PREFERENCE_FIELD_NUMBER: _ClassVar[int]
    weight: int
    preference: NodeSelectorTerm
    def __init__(self, weight: _Optional[int] = ..., preference: _Optional[_Union[NodeSelectorTerm, _Mapping]] = ...) -> None: ...

class Toleration(_message.Message):
    __slots__ = ("key", "operator", "value", "effect", "toleration_seconds")
    KEY_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    TOLERATION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    key: str
    operator: str
    value: str
    effect: str
    toleration_seconds: int
    def __init__(self, key: _Optional[str] = ..., operator: _Optional[str] = ..., value: _Optional[str] = ..., effect: _Optional[str] = ..., toleration_seconds: _Optional[int] = ...) -> None: ...

class Node(_message.Message):
    __slots__ = ("name", "labels", "taints", "unschedulable", "allocatable", "images", "declared_features")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AllocatableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    TAINTS_FIELD_NUMBER: _ClassVar[int]
    UNSCHEDULABLE_FIELD_NUMBER: _ClassVar[int]
    ALLOCATABLE_FIELD_NUMBER: _ClassVar[int]
    IMAGES_FIELD_NUMBER: _ClassVar[int]
    DECLARED_FEATURES_FIELD_NUMBER: _ClassVar[int]
    name: str
    labels: _containers.ScalarMap[str, str]
    taints: _containers.RepeatedCompositeFieldContainer[Taint]
    unschedulable: bool
    allocatable: _containers.ScalarMap[str, str]
    images: _containers.RepeatedCompositeFieldContainer[ContainerImage]
    declared_features: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., taints: _Optional[_Iterable[_Union[Taint, _Mapping]]] = ..., unschedulable: _Optional[bool] = ..., allocatable: _Optional[_Mapping[str, str]] = ..., images: _Optional[_Iterable[_Union[ContainerImage, _Mapping]]] = ..., declared_features: _Optional[_Iterable[str]] = ...) -> None: ...

class Taint(_message.Message):
    __slots__ = ("key", "value", "effect")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    effect: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ..., effect: _Optional[str] = ...) -> None: ...

class ContainerImage(_message.Message):
    __slots__ = ("names", "size_bytes")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    size_bytes: int
    def __init__(self, names: _Optional[_Iterable[str]] = ..., size_bytes: _Optional[int] = ...) -> None: ...

class DeviceClass(_message.Message):
    __slots__ = ("name", "selectors", "extended_resource_name", "creation_timestamp_seconds")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SELECTORS_FIELD_NUMBER: _ClassVar[int]
    EXTENDED_RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    CREATION_TIMESTAMP_SECONDS_FIELD_NUMBER: _ClassVar[int]
    name: str
    selectors: _containers.RepeatedScalarFieldContainer[str]
    extended_resource_name: str
    creation_timestamp_seconds: int
    def __init__(self, name: _Optional[str] = ..., selectors: _Optional[_Iterable[str]] = ..., extended_resource_name: _Optional[str] = ..., creation_timestamp_seconds: _Optional[int] = ...) -> None: ...

class ResourceClaim(_message.Message):
    __slots__ = ("namespace", "name", "uid", "requests", "constraints", "allocation", "reserved_for", "deleting", "controller_uid", "devices")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_FIELD_NUMBER: _ClassVar[int]
    RESERVED_FOR_FIELD_NUMBER: _ClassVar[int]
    DELETING_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_UID_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    uid: str
    requests: _containers.RepeatedCompositeFieldContainer[DeviceRequest]
    constraints: _containers.RepeatedCompositeFieldContainer[DeviceConstraint]
    allocation: AllocationResult
    reserved_for: _containers.RepeatedCompositeFieldContainer[ResourceClaimConsumer]
    deleting: bool
    controller_uid: str
    devices: _containers.RepeatedCompositeFieldContainer[AllocatedDeviceStatus]
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., uid: _Optional[str] = ..., requests: _Optional[_Iterable[_Union[DeviceRequest, _Mapping]]] = ..., constraints: _Optional[_Iterable[_Union[DeviceConstraint, _Mapping]]] = ..., allocation: _Optional[_Union[AllocationResult, _Mapping]] = ..., reserved_for: _Optional[_Iterable[_Union[ResourceClaimConsumer, _Mapping]]] = ..., deleting: _Optional[bool] = ..., controller_uid: _Optional[str] = ..., devices: _Optional[_Iterable[_Union[AllocatedDeviceStatus, _Mapping]]] = ...) -> None: ...

class AllocatedDeviceStatus(_message.Message):
    __slots__ = ("driver", "pool", "device", "share_id", "true_conditions")
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    SHARE_ID_FIELD_NUMBER: _ClassVar[int]
    TRUE_CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    driver: str
    pool: str
    device: str
    share_id: str
    true_conditions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, driver: _Optional[str] = ..., pool: _Optional[str] = ..., device: _Optional[str] = ..., share_id: _Optional[str] = ..., true_conditions: _Optional[_Iterable[str]] = ...) -> None: ...

class DeviceRequest(_message.Message):
    __slots__ = ("name", "exactly", "first_available")
    NAME_FIELD_NUMBER: _ClassVar[int]
    EXACTLY_FIELD_NUMBER: _ClassVar[int]
    FIRST_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    name: str
    exactly: ExactDeviceRequest
    first_available: _containers.RepeatedCompositeFieldContainer[DeviceSubRequest]
    def __init__(self, name: _Optional[str] = ..., exactly: _Optional[_Union[ExactDeviceRequest, _Mapping]] = ..., first_available: _Optional[_Iterable[_Union[DeviceSubRequest, _Mapping]]] = ...) -> None: ...

class ExactDeviceRequest(_message.Message):
    __slots__ = ("device_class_name", "selectors", "allocation_mode", "count", "admin_access", "tolerations", "capacity_requests")
    class CapacityRequestsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    DEVICE_CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    SELECTORS_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_MODE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    ADMIN_ACCESS_FIELD_NUMBER: _ClassVar[int]
    TOLERATIONS_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    device_class_name: str
    selectors: _containers.RepeatedScalarFieldContainer[str]
    allocation_mode: str
    count: int
    admin_access: bool
    tolerations: _containers.RepeatedCompositeFieldContainer[Toleration]
    capacity_requests: _containers.ScalarMap[str, str]
    def __init__(self, device_class_name: _Optional[str] = ..., selectors: _Optional[_Iterable[str]] = ..., allocation_mode: _Optional[str] = ..., count: _Optional[int] = ..., admin_access: _Optional[bool] = ..., tolerations: _Optional[_Iterable[_Union[Toleration, _Mapping]]] = ..., capacity_requests: _Optional[_Mapping[str, str]] = ...) -> None: ...

class DeviceSubRequest(_message.Message):
    __slots__ = ("name", "device_class_name", "selectors", "allocation_mode", "count", "tolerations", "capacity_requests")
    class CapacityRequestsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEVICE_CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    SELECTORS_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_MODE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    TOLERATIONS_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    device_class_name: str
    selectors: _containers.RepeatedScalarFieldContainer[str]
    allocation_mode: str
    count: int
    tolerations: _containers.RepeatedCompositeFieldContainer[Toleration]
    capacity_requests: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., device_class_name: _Optional[str] = ..., selectors: _Optional[_Iterable[str]] = ..., allocation_mode: _Optional[str] = ..., count: _Optional[int] = ..., tolerations: _Optional[_Iterable[_Union[Toleration, _Mapping]]] = ..., capacity_requests: _Optional[_Mapping[str, str]] = ...) -> None: ...

class DeviceConstraint(_message.Message):
    __slots__ = ("requests", "match_attribute", "distinct_attribute")
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    MATCH_ATTRIBUTE_FIELD_NUMBER: _ClassVar[int]
    DISTINCT_ATTRIBUTE_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedScalarFieldContainer[str]
    match_attribute: str
    distinct_attribute: str
    def __init__(self, requests: _Optional[_Iterable[str]] = ..., match_attribute: _Optional[str] = ..., distinct_attribute: _Optional[str] = ...) -> None: ...

class AllocationResult(_message.Message):
    __slots__ = ("devices", "node_selector", "allocation_timestamp_seconds")
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    NODE_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_TIMESTAMP_SECONDS_FIELD_NUMBER: _ClassVar[int]
    devices: _containers.RepeatedCompositeFieldContainer[DeviceRequestAllocationResult]
    node_selector: NodeSelector
    allocation_timestamp_seconds: int
    def __init__(self, devices: _Optional[_Iterable[_Union[DeviceRequestAllocationResult, _Mapping]]] = ..., node_selector: _Optional[_Union[NodeSelector, _Mapping]] = ..., allocation_timestamp_seconds: _Optional[int] = ...) -> None: ...

class DeviceRequestAllocationResult(_message.Message):
    __slots__ = ("request", "driver", "pool", "device", "admin_access", "tolerations", "consumed_capacity", "share_id", "binding_conditions", "binding_failure_conditions")
    class ConsumedCapacityEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    ADMIN_ACCESS_FIELD_NUMBER: _ClassVar[int]
    TOLERATIONS_FIELD_NUMBER: _ClassVar[int]
    CONSUMED_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    SHARE_ID_FIELD_NUMBER: _ClassVar[int]
    BINDING_CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    BINDING_FAILURE_CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool
    tolerations: _containers.RepeatedCompositeFieldContainer[Toleration]
    consumed_capacity: _containers.ScalarMap[str, str]
    share_id: str
    binding_conditions: _containers.RepeatedScalarFieldContainer[str]
    binding_failure_conditions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, request: _Optional[str] = ..., driver: _Optional[str] = ..., pool: _Optional[str] = ..., device: _Optional[str] = ..., admin_access: _Optional[bool] = ..., tolerations: _Optional[_Iterable[_Union[Toleration, _Mapping]]] = ..., consumed_capacity: _Optional[_Mapping[str, str]] = ..., share_id: _Optional[str] = ..., binding_conditions: _Optional[_Iterable[str]] = ..., binding_failure_conditions: _Optional[_Iterable[str]] = ...) -> None: ...

class ResourceClaimConsumer(_message.Message):
    __slots__ = ("api_group", "resource", "name", "uid")
    API_GROUP_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    api_group: str
    resource: str
    name: str
    uid: str
    def __init__(self, api_group: _Optional[str] = ..., resource: _Optional[str] = ..., name: _Optional[str] = ..., uid: _Optional[str] = ...) -> None: ...

class ResourceSlice(_message.Message):
    __slots__ = ("name", "driver", "pool_name", "pool_generation", "pool_resource_slice_count", "node_name", "node_selector", "all_nodes", "per_device_node_selection", "devices", "shared_counters")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    POOL_NAME_FIELD_NUMBER: _ClassVar[int]
    POOL_GENERATION_FIELD_NUMBER: _ClassVar[int]
    POOL_RESOURCE_SLICE_COUNT_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    NODE_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    ALL_NODES_FIELD_NUMBER: _ClassVar[int]
    PER_DEVICE_NODE_SELECTION_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    SHARED_COUNTERS_FIELD_NUMBER: _ClassVar[int]
    name: str
    driver: str
    pool_name: str
    pool_generation: int
    pool_resource_slice_count: int
    node_name: str
    node_selector: NodeSelector
    all_nodes: bool
    per_device_node_selection: bool
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    shared_counters: _containers.RepeatedCompositeFieldContainer[CounterSet]
    def __init__(self, name: _Optional[str] = ..., driver: _Optional[str] = ..., pool_name: _Optional[str] = ..., pool_generation: _Optional[int] = ..., pool_resource_slice_count: _Optional[int] = ..., node_name: _Optional[str] = ..., node_selector: _Optional[_Union[NodeSelector, _Mapping]] = ..., all_nodes: _Optional[bool] = ..., per_device_node_selection: _Optional[bool] = ..., devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ..., shared_counters: _Optional[_Iterable[_Union[CounterSet, _Mapping]]] = ...) -> None: ...

class Device(_message.Message):
    __slots__ = ("name", "attributes", "capacity", "consumes_counters", "node_name", "node_selector", "all_nodes", "taints", "allow_multiple_allocations", "binding_conditions", "capacity_request_policies", "binding_failure_conditions", "binds_to_node")
    class AttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: DeviceAttribute
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[DeviceAttribute, _Mapping]] = ...) -> None: ...
    class CapacityEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class CapacityRequestPoliciesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: CapacityRequestPolicy
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[CapacityRequestPolicy, _Mapping]] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    CONSUMES_COUNTERS_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    NODE_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    ALL_NODES_FIELD_NUMBER: _ClassVar[int]
    TAINTS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_MULTIPLE_ALLOCATIONS_FIELD_NUMBER: _ClassVar[int]
    BINDING_CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_REQUEST_POLICIES_FIELD_NUMBER: _ClassVar[int]
    BINDING_FAILURE_CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    BINDS_TO_NODE_FIELD_NUMBER: _ClassVar[int]
    name: str
    attributes: _containers.MessageMap[str, DeviceAttribute]
    capacity: _containers.ScalarMap[str, str]
    consumes_counters: _containers.RepeatedCompositeFieldContainer[DeviceCounterConsumption]
    node_name: str
    node_selector: NodeSelector
    all_nodes: bool
    taints: _containers.RepeatedCompositeFieldContainer[DeviceTaint]
    allow_multiple_allocations: bool
    binding_conditions: _containers.RepeatedScalarFieldContainer[str]
    capacity_request_policies: _containers.MessageMap[str, CapacityRequestPolicy]
    binding_failure_conditions: _containers.RepeatedScalarFieldContainer[str]
    binds_to_node: bool
    def __init__(self, name: _Optional[str] = ..., attributes: _Optional[_Mapping[str, DeviceAttribute]] = ..., capacity: _Optional[_Mapping[str, str]] = ..., consumes_counters: _Optional[_Iterable[_Union[DeviceCounterConsumption, _Mapping]]] = ..., node_name: _Optional[str] = ..., node_selector: _Optional[_Union[NodeSelector, _Mapping]] = ..., all_nodes: _Optional[bool] = ..., taints: _Optional[_Iterable[_Union[DeviceTaint, _Mapping]]] = ..., allow_multiple_allocations: _Optional[bool] = ..., binding_conditions: _Optional[_Iterable[str]] = ..., capacity_request_policies: _Optional[_Mapping[str, CapacityRequestPolicy]] = ..., binding_failure_conditions: _Optional[_Iterable[str]] = ..., binds_to_node: _Optional[bool] = ...) -> None: ...

class CapacityRequestPolicy(_message.Message):
    __slots__ = ("default", "valid_values", "valid_range")
    DEFAULT_FIELD_NUMBER: _ClassVar[int]
    VALID_VALUES_FIELD_NUMBER: _ClassVar[int]
    VALID_RANGE_FIELD_NUMBER: _ClassVar[int]
    default: str
    valid_values: _containers.RepeatedScalarFieldContainer[str]
    valid_range: CapacityRequestPolicyRange
    def __init__(self, default: _Optional[str] = ..., valid_values: _Optional[_Iterable[str]] = ..., valid_range: _Optional[_Union[CapacityRequestPolicyRange, _Mapping]] = ...) -> None: ...

class CapacityRequestPolicyRange(_message.Message):
    __slots__ = ("min", "max", "step")
    MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    min: str
    max: str
    step: str
    def __init__(self, min: _Optional[str] = ..., max: _Optional[str] = ..., step: _Optional[str] = ...) -> None: ...

class DeviceAttribute(_message.Message):
    __slots__ = ("int", "bool", "string", "version")
    INT_FIELD_NUMBER: _ClassVar[int]
    BOOL_FIELD_NUMBER: _ClassVar[int]
    STRING_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    int: int
    bool: bool
    string: str
    version: str
    def __init__(self, int: _Optional[int] = ..., bool: _Optional[bool] = ..., string: _Optional[str] = ..., version: _Optional[str] = ...) -> None: ...

class DeviceTaint(_message.Message):
    __slots__ = ("key", "value", "effect", "time_added_seconds")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    TIME_ADDED_SECONDS_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    effect: str
    time_added_seconds: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ..., effect: _Optional[str] = ..., time_added_seconds: _Optional[int] = ...) -> None: ...

class DeviceTaintRule(_message.Message):
    __slots__ = ("name", "device_selector", "taint")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEVICE_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    TAINT_FIELD_NUMBER: _ClassVar[int]
    name: str
    device_selector: DeviceTaintSelector
    taint: DeviceTaint
    def __init__(self, name: _Optional[str] = ..., device_selector: _Optional[_Union[DeviceTaintSelector, _Mapping]] = ..., taint: _Optional[_Union[DeviceTaint, _Mapping]] = ...) -> None: ...

class DeviceTaintSelector(_message.Message):
    __slots__ = ("driver", "pool", "device")
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    driver: str
    pool: str
    device: str
    def __init__(self, driver: _Optional[str] = ..., pool: _Optional[str] = ..., device: _Optional[str] = ...) -> None: ...

class CounterSet(_message.Message):
    __slots__ = ("name", "counters")
    class CountersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    name: str
    counters: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., counters: _Optional[_Mapping[str, str]] = ...) -> None: ...

class DeviceCounterConsumption(_message.Message):
    __slots__ = ("counter_set", "counters")
    class CountersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    COUNTER_SET_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    counter_set: str
    counters: _containers.ScalarMap[str, str]
    def __init__(self, counter_set: _Optional[str] = ..., counters: _Optional[_Mapping[str, str]] = ...) -> None: ...
