"""Converters from the official ``kubernetes`` client's objects to placement.v1 messages.

Written against the attribute names of ``kubernetes.client`` models (``V1Pod``, ``V1Node``,
``V1Namespace``, ``V1PodDisruptionBudget``, ...), i.e. snake_case Python attributes such as
``pod.spec.init_containers`` or ``node.status.allocatable``, as returned by
``CoreV1Api().list_pod_for_all_namespaces()`` or built by hand. The ``kubernetes`` package itself
is not imported: any object with the same attributes works. Missing (``None``) fields map to the
proto defaults.

DRA objects (resource.k8s.io/v1 ``V1DeviceClass``, ``ResourceV1ResourceClaim`` and
``V1ResourceSlice``, and a pod's spec.resource_claims) are converted as well, and so are
scheduling.k8s.io/v1beta1 ``V1beta1PodGroup`` objects and a pod's spec.scheduling_group.

These are the same conversions as the binder's (``binder-agent/src/model.rs``): for every object
of the corpus in ``tests/conformance/corpus`` they give byte-identical messages
(``SerializeToString(deterministic=True)``), which ``tests/test_conformance.py`` checks. Convert
the objects as the API server stores them (read them back, or take them from a watch): admission
fills spec.priority from the PriorityClass, spec.overhead from the RuntimeClass and the default
not-ready/unreachable tolerations, and a pod built by hand lacks them.

Resource quantities are passed through as strings ("250m", "8Gi"); the service parses them.
"""

from __future__ import annotations

import calendar
import datetime
import re
from typing import Any, Iterable, Mapping, Optional

from placement_client.placement.v1 import placement_pb2 as pb

__all__ = [
    "pod_to_proto",
    "node_to_proto",
    "namespace_to_proto",
    "pdb_to_proto",
    "pvc_to_proto",
    "pv_to_proto",
    "storage_class_to_proto",
    "csi_node_to_proto",
    "csi_driver_to_proto",
    "csi_storage_capacity_to_proto",
    "device_class_to_proto",
    "resource_claim_to_proto",
    "resource_slice_to_proto",
    "allocation_result_to_proto",
    "pod_group_to_proto",
    "composite_pod_group_to_proto",
    "container_to_proto",
    "snapshot_from",
    "is_bound",
    "GANG_LABEL",
    "GANG_MIN_MEMBERS_ANNOTATION",
]

# Phases of pods that no longer hold resources; kube-scheduler does not count them.
_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})

#: The label naming a pod's gang (a group placed all together or not at all).
GANG_LABEL = "placement.dev/gang"
#: The annotation giving a gang's minimum size.
GANG_MIN_MEMBERS_ANNOTATION = "placement.dev/gang-min-members"
#: The annotation kubectl writes with a copy of the whole object; never sent to the service.
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"

# Labels a controller sets per pod, not shared by the pods of one workload.
_PER_POD_LABELS = frozenset(
    {"statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index", "controller-revision-hash"}
)
# Controllers whose selectors kube-scheduler's default spreading uses (Services aside).
_DEFAULT_SPREAD_KINDS = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})
_U32_MAX = 2**32 - 1
#: The annotation read before storageClassName (Kubernetes' GetPersistentVolume(Claim)Class).
ANN_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
#: The PV controller's mark of a claim whose binding it completed.
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
#: The node chosen to provision a WaitForFirstConsumer claim's volume on.
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
#: The PodGroup status condition kube-scheduler sets once a group's scheduling requirement was met.
POD_GROUP_INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
_UNSIGNED = re.compile(r"\+?[0-9]+")
# The node features kube's nodedeclaredfeatures.InferForPodScheduling (Kubernetes 1.37) infers
# from a pod's spec; the other registered features infer nothing for scheduling.
_FEATURE_RESTART_ALL_CONTAINERS = "RestartAllContainersOnContainerExits"
_FEATURE_USER_NAMESPACES_HOST_NETWORK = "UserNamespacesHostNetworkSupport"
_FEATURE_VOLUME_BIND_MOUNT_OPTIONS = "VolumeBindMountOptions"


def _str_map(m: Optional[Mapping[str, Any]]) -> dict:
    """A label/selector/quantity map with string values (quantities may be given as numbers)."""
    return {str(k): str(v) for k, v in (m or {}).items()}


def _list(xs: Optional[Iterable[Any]]) -> list:
    return list(xs or [])


def _seconds(t: Any) -> int:
    """A metav1.Time (``datetime``, or an RFC 3339 string) as whole seconds since the epoch."""
    if t is None:
        return 0
    if isinstance(t, str):
        t = datetime.datetime.fromisoformat(t.replace("Z", "+00:00"))
    if t.tzinfo is None:
        return calendar.timegm(t.timetuple())
    return int(t.timestamp() // 1)


def container_to_proto(c: Any, status: Any = None) -> pb.Container:
    """``V1Container`` -> ``placement.v1.Container`` (name, image, resources.requests, host ports, restart_policy).

    Only ports with a host port are kept: the others do not matter to placement. ``status`` is
    the container's ``V1ContainerStatus`` (``pod_to_proto`` looks it up): its allocated_resources
    and resources.requests give allocated_requests and actuated_requests.
    """
    resources = getattr(c, "resources", None)
    requests = getattr(resources, "requests", None) if resources is not None else None
    return pb.Container(
        name=c.name or "",
        image=getattr(c, "image", None) or "",
        requests=_str_map(requests),
        ports=[
            pb.ContainerPort(
                container_port=p.container_port or 0,
                host_port=p.host_port,
                protocol=getattr(p, "protocol", None) or "",
                host_ip=getattr(p, "host_ip", None) or "",
            )
            for p in _list(getattr(c, "ports", None))
            if (getattr(p, "host_port", None) or 0) > 0
        ],
        # V1Container.restart_policy exists in kubernetes client >= 29 (sidecar containers).
        restart_policy=getattr(c, "restart_policy", None) or "",
        allocated_requests=_str_map(getattr(status, "allocated_resources", None)),
        actuated_requests=_str_map(getattr(getattr(status, "resources", None), "requests", None)),
    )


def _container_status(status: Any, name: Any) -> Any:
    """The ``V1ContainerStatus`` of the container named ``name``: from status.container_statuses,
    else status.init_container_statuses (kube's resourcehelper looks any container up so)."""
    for key in ("container_statuses", "init_container_statuses"):
        for cs in _list(getattr(status, key, None)):
            if getattr(cs, "name", None) == name:
                return cs
    return None


def _resize_infeasible(status: Any) -> bool:
    """Whether the first PodResizePending condition has reason Infeasible (kube's
    resourcehelper.IsPodResizeInfeasible)."""
    for c in _list(getattr(status, "conditions", None)):
        if getattr(c, "type", None) == "PodResizePending":
            return getattr(c, "reason", None) == "Infeasible"
    return False


def _required_features(spec: Any) -> list:
    """The node features the pod needs, sorted by name, as kube's
    nodedeclaredfeatures.DefaultFramework.InferForPodScheduling infers them in Kubernetes 1.37:
    RestartAllContainersOnContainerExits (a container or init container with a
    restart_policy_rules action RestartAllContainers), UserNamespacesHostNetworkSupport
    (host_network with host_users false) and VolumeBindMountOptions (a container, init container
    or ephemeral container mounting a volume with bind_mount_options)."""
    containers = _list(getattr(spec, "containers", None))
    init_containers = _list(getattr(spec, "init_containers", None))
    ephemeral_containers = _list(getattr(spec, "ephemeral_containers", None))
    out = []
    if any(
        getattr(rule, "action", None) == "RestartAllContainers"
        for c in containers + init_containers
        for rule in _list(getattr(c, "restart_policy_rules", None))
    ):
        out.append(_FEATURE_RESTART_ALL_CONTAINERS)
    host_users = getattr(spec, "host_users", None)
    if getattr(spec, "host_network", None) and host_users is not None and not host_users:
        out.append(_FEATURE_USER_NAMESPACES_HOST_NETWORK)
    if any(
        _list(getattr(m, "bind_mount_options", None))
        for c in containers + init_containers + ephemeral_containers
        for m in _list(getattr(c, "volume_mounts", None))
    ):
        out.append(_FEATURE_VOLUME_BIND_MOUNT_OPTIONS)
    return sorted(out)


def _requirement(r: Any) -> pb.NodeSelectorRequirement:
    return pb.NodeSelectorRequirement(key=r.key or "", operator=r.operator or "", values=_list(r.values))


def _term(t: Any) -> pb.NodeSelectorTerm:
    return pb.NodeSelectorTerm(
        match_expressions=[_requirement(r) for r in _list(getattr(t, "match_expressions", None))],
        match_fields=[_requirement(r) for r in _list(getattr(t, "match_fields", None))],
    )


def _node_affinity(spec: Any) -> Optional[pb.NodeAffinity]:
    affinity = getattr(spec, "affinity", None)
    na = getattr(affinity, "node_affinity", None) if affinity is not None else None
    if na is None:
        return None
    out = pb.NodeAffinity()
    required = getattr(na, "required_during_scheduling_ignored_during_execution", None)
    if required is not None:
        out.required.CopyFrom(pb.NodeSelector(terms=[_term(t) for t in _list(required.node_selector_terms)]))
    for p in _list(getattr(na, "preferred_during_scheduling_ignored_during_execution", None)):
        out.preferred.append(pb.PreferredSchedulingTerm(weight=p.weight or 0, preference=_term(p.preference)))
    return out


def _label_selector(s: Any) -> pb.LabelSelector:
    return pb.LabelSelector(
        match_labels=_str_map(getattr(s, "match_labels", None)),
        match_expressions=[
            pb.LabelSelectorRequirement(key=r.key or "", operator=r.operator or "", values=_list(r.values))
            for r in _list(getattr(s, "match_expressions", None))
        ],
    )


def _affinity_term(t: Any) -> pb.PodAffinityTerm:
    out = pb.PodAffinityTerm(namespaces=_list(getattr(t, "namespaces", None)), topology_key=t.topology_key or "")
    if getattr(t, "label_selector", None) is not None:
        out.label_selector.CopyFrom(_label_selector(t.label_selector))
    if getattr(t, "namespace_selector", None) is not None:
        out.namespace_selector.CopyFrom(_label_selector(t.namespace_selector))
    return out


def _pod_affinity(a: Any) -> Optional[pb.PodAffinity]:
    """``V1PodAffinity`` or ``V1PodAntiAffinity`` -> ``placement.v1.PodAffinity``."""
    if a is None:
        return None
    return pb.PodAffinity(
        required=[
            _affinity_term(t) for t in _list(getattr(a, "required_during_scheduling_ignored_during_execution", None))
        ],
        preferred=[
            pb.WeightedPodAffinityTerm(weight=w.weight or 0, term=_affinity_term(w.pod_affinity_term))
            for w in _list(getattr(a, "preferred_during_scheduling_ignored_during_execution", None))
        ],
    )


def _spread_constraint(c: Any) -> pb.TopologySpreadConstraint:
    out = pb.TopologySpreadConstraint(
        max_skew=c.max_skew or 0,
        topology_key=c.topology_key or "",
        when_unsatisfiable=c.when_unsatisfiable or "",
        node_affinity_policy=getattr(c, "node_affinity_policy", None) or "",
        node_taints_policy=getattr(c, "node_taints_policy", None) or "",
        match_label_keys=_list(getattr(c, "match_label_keys", None)),
    )
    if getattr(c, "label_selector", None) is not None:
        out.label_selector.CopyFrom(_label_selector(c.label_selector))
    if getattr(c, "min_domains", None) is not None:
        out.min_domains = int(c.min_domains)
    return out


def _toleration(t: Any) -> pb.Toleration:
    out = pb.Toleration(
        key=t.key or "",
        operator=t.operator or "",
        value=getattr(t, "value", None) or "",
        effect=t.effect or "",
    )
    if getattr(t, "toleration_seconds", None) is not None:
        out.toleration_seconds = int(t.toleration_seconds)
    return out


def _default_spread_selector(meta: Any) -> Optional[pb.LabelSelector]:
    """The selector of kube-scheduler's default spreading for a pod owned by a ReplicaSet,
    StatefulSet or ReplicationController: its labels without the per-pod ones (as the binder
    derives it; Services are not considered)."""
    owned = any(
        getattr(o, "controller", None) is True and getattr(o, "kind", None) in _DEFAULT_SPREAD_KINDS
        for o in _list(getattr(meta, "owner_references", None))
    )
    labels = {k: v for k, v in _str_map(getattr(meta, "labels", None)).items() if k not in _PER_POD_LABELS}
    if not owned or not labels:
        return None
    return pb.LabelSelector(match_labels=labels)


def _gang(meta: Any) -> Optional[pb.Gang]:
    """The gang named by the label ``placement.dev/gang``; a missing or malformed
    ``placement.dev/gang-min-members`` annotation gives min_members 0 (the service refuses it)."""
    labels = getattr(meta, "labels", None) or {}
    if GANG_LABEL not in labels:
        return None
    raw = str((getattr(meta, "annotations", None) or {}).get(GANG_MIN_MEMBERS_ANNOTATION, "")).strip()
    min_members = int(raw) if _UNSIGNED.fullmatch(raw) and int(raw) <= _U32_MAX else 0
    return pb.Gang(name=str(labels[GANG_LABEL]), min_members=min_members)


def pod_to_proto(pod: Any) -> pb.Pod:
    """``V1Pod`` -> ``placement.v1.Pod``.

    Reads metadata.{uid, namespace, name, labels, annotations, owner_references,
    deletion_timestamp}, spec.{priority, preemption_policy, containers, init_containers,
    overhead, resources.requests, node_name, node_selector, affinity, tolerations,
    topology_spread_constraints, volumes, resource_claims, scheduling_group} and status.{start_time,
    allocated_resources, resources.requests, conditions, container_statuses,
    init_container_statuses, resource_claim_statuses}. Each
    container's allocated and actuated requests come from its entry in status.container_statuses,
    else status.init_container_statuses (matched by name). ``resize_infeasible`` is set when the
    first PodResizePending condition has reason Infeasible, and ``required_features`` holds the
    node features kube infers from the spec (restart_policy_rules, host_network with host_users
    false, bind_mount_options; see ``_required_features``). A pod owned by a ReplicaSet,
    StatefulSet or ReplicationController and without explicit spread constraints gets
    ``default_spread_selector`` from its labels, as the binder does. A pod without metadata.uid
    gets "<namespace>/<name>" as uid and one without metadata.namespace "default" (objects read
    from the API server always have both).
    """
    meta = pod.metadata
    spec = pod.spec
    status = getattr(pod, "status", None)
    namespace = getattr(meta, "namespace", None) or "default"
    uid = getattr(meta, "uid", None) or f"{namespace}/{meta.name}"
    spread = [_spread_constraint(c) for c in _list(getattr(spec, "topology_spread_constraints", None))]
    out = pb.Pod(
        uid=uid,
        namespace=namespace,
        name=meta.name or "",
        labels=_str_map(getattr(meta, "labels", None)),
        priority=getattr(spec, "priority", None) or 0,
        containers=[container_to_proto(c, _container_status(status, c.name)) for c in _list(spec.containers)],
        init_containers=[
            container_to_proto(c, _container_status(status, c.name))
            for c in _list(getattr(spec, "init_containers", None))
        ],
        overhead=_str_map(getattr(spec, "overhead", None)),
        pod_requests=_str_map(getattr(getattr(spec, "resources", None), "requests", None)),
        allocated_requests=_str_map(getattr(status, "allocated_resources", None)),
        actuated_requests=_str_map(getattr(getattr(status, "resources", None), "requests", None)),
        resize_infeasible=_resize_infeasible(status),
        required_features=_required_features(spec),
        node_name=getattr(spec, "node_name", None) or "",
        node_selector=_str_map(getattr(spec, "node_selector", None)),
        tolerations=[_toleration(t) for t in _list(getattr(spec, "tolerations", None))],
        topology_spread_constraints=spread,
        preemption_policy=getattr(spec, "preemption_policy", None) or "",
        start_time_seconds=_seconds(getattr(status, "start_time", None)),
        terminating=getattr(meta, "deletion_timestamp", None) is not None,
        volumes=_volumes(meta.name or "", spec),
        resource_claims=_pod_resource_claims(spec, status),
        scheduling_group=getattr(getattr(spec, "scheduling_group", None), "pod_group_name", None) or "",
    )
    affinity = _node_affinity(spec)
    if affinity is not None:
        out.node_affinity.CopyFrom(affinity)
    spec_affinity = getattr(spec, "affinity", None)
    pod_affinity = _pod_affinity(getattr(spec_affinity, "pod_affinity", None))
    if pod_affinity is not None:
        out.pod_affinity.CopyFrom(pod_affinity)
    pod_anti_affinity = _pod_affinity(getattr(spec_affinity, "pod_anti_affinity", None))
    if pod_anti_affinity is not None:
        out.pod_anti_affinity.CopyFrom(pod_anti_affinity)
    if not spread:
        selector = _default_spread_selector(meta)
        if selector is not None:
            out.default_spread_selector.CopyFrom(selector)
    gang = _gang(meta)
    if gang is not None:
        out.gang.CopyFrom(gang)
    # A pending pod's annotations, for the decision service's CEL rules (the binder sends none for
    # a bound pod, and never kubectl's last-applied copy of the object).
    if not out.node_name:
        for key, value in (getattr(meta, "annotations", None) or {}).items():
            if key != LAST_APPLIED_ANNOTATION:
                out.annotations[key] = str(value)
    return out


def _volumes(pod_name: str, spec: Any) -> list:
    """The volumes the volume filters read: claims (a generic ephemeral volume's is named
    "<pod>-<volume>"), and in-tree GCE PD, AWS EBS, iSCSI and RBD volumes; and image volumes
    with a reference (image.reference), whose images ImageLocality counts. Others are left out."""
    out = []
    for v in _list(getattr(spec, "volumes", None)):
        m = pb.Volume(name=v.name or "")
        pvc = getattr(v, "persistent_volume_claim", None)
        gce = getattr(v, "gce_persistent_disk", None)
        aws = getattr(v, "aws_elastic_block_store", None)
        iscsi = getattr(v, "iscsi", None)
        rbd = getattr(v, "rbd", None)
        image = getattr(v, "image", None)
        if pvc is not None:
            m.claim_name = pvc.claim_name or ""
        elif getattr(v, "ephemeral", None) is not None:
            m.claim_name = f"{pod_name}-{v.name}"
            m.ephemeral = True
        elif gce is not None:
            m.gce_pd_name = gce.pd_name or ""
            m.read_only = bool(getattr(gce, "read_only", None))
        elif aws is not None:
            m.aws_volume_id = aws.volume_id or ""
        elif iscsi is not None:
            m.iscsi_iqn = iscsi.iqn or ""
            m.read_only = bool(getattr(iscsi, "read_only", None))
        elif rbd is not None:
            m.rbd_monitors.extend(_list(rbd.monitors))
            m.rbd_pool = getattr(rbd, "pool", None) or "rbd"
            m.rbd_image = rbd.image or ""
            m.read_only = bool(getattr(rbd, "read_only", None))
        elif image is not None and getattr(image, "reference", None):
            # An image volume without a reference (the API server refuses one) is left out.
            m.image_reference = image.reference
        else:
            continue
        out.append(m)
    return out


def _class_of(meta: Any, spec_class: Optional[str]) -> str:
    annotations = getattr(meta, "annotations", None) or {}
    if ANN_STORAGE_CLASS in annotations:
        return str(annotations[ANN_STORAGE_CLASS])
    return spec_class or ""


def pvc_to_proto(pvc: Any) -> pb.PersistentVolumeClaim:
    """``V1PersistentVolumeClaim`` -> ``placement.v1.PersistentVolumeClaim``.

    Reads metadata.{namespace, name, uid, annotations (class, bind-completed, selected-node),
    owner_references (the controller's uid), deletion_timestamp}, spec.{storage_class_name,
    volume_name, access_modes, resources.requests["storage"], selector, volume_mode,
    volume_attributes_class_name} and status.phase.
    """
    meta = pvc.metadata
    spec = getattr(pvc, "spec", None)
    status = getattr(pvc, "status", None)
    annotations = getattr(meta, "annotations", None) or {}
    requests = getattr(getattr(spec, "resources", None), "requests", None) or {}
    controller = next(
        (o for o in _list(getattr(meta, "owner_references", None)) if getattr(o, "controller", None)), None
    )
    out = pb.PersistentVolumeClaim(
        namespace=getattr(meta, "namespace", None) or "",
        name=meta.name or "",
        uid=getattr(meta, "uid", None) or "",
        storage_class_name=_class_of(meta, getattr(spec, "storage_class_name", None)),
        volume_name=getattr(spec, "volume_name", None) or "",
        bind_completed=ANN_BIND_COMPLETED in annotations,
        access_modes=_list(getattr(spec, "access_modes", None)),
        storage_request=str(requests["storage"]) if "storage" in requests else "",
        volume_mode=getattr(spec, "volume_mode", None) or "",
        phase=getattr(status, "phase", None) or "",
        deleting=getattr(meta, "deletion_timestamp", None) is not None,
        selected_node=str(annotations.get(ANN_SELECTED_NODE, "")),
        selected_node_set=ANN_SELECTED_NODE in annotations,
        volume_attributes_class_name=getattr(spec, "volume_attributes_class_name", None) or "",
        controller_uid=(getattr(controller, "uid", None) or "") if controller is not None else "",
    )
    selector = getattr(spec, "selector", None)
    if selector is not None:
        out.selector.CopyFrom(_label_selector(selector))
    return out


def pv_to_proto(pv: Any) -> pb.PersistentVolume:
    """``V1PersistentVolume`` -> ``placement.v1.PersistentVolume``.

    Reads metadata.{name, labels, annotations (class), deletion_timestamp},
    spec.{storage_class_name, capacity["storage"], access_modes, volume_mode,
    node_affinity.required, claim_ref, csi.{driver, volume_handle}, volume_attributes_class_name}
    and status.phase.
    """
    meta = pv.metadata
    spec = getattr(pv, "spec", None)
    status = getattr(pv, "status", None)
    capacity = getattr(spec, "capacity", None) or {}
    csi = getattr(spec, "csi", None)
    out = pb.PersistentVolume(
        name=meta.name or "",
        labels=_str_map(getattr(meta, "labels", None)),
        storage_class_name=_class_of(meta, getattr(spec, "storage_class_name", None)),
        capacity=str(capacity["storage"]) if "storage" in capacity else "",
        access_modes=_list(getattr(spec, "access_modes", None)),
        volume_mode=getattr(spec, "volume_mode", None) or "",
        phase=getattr(status, "phase", None) or "",
        deleting=getattr(meta, "deletion_timestamp", None) is not None,
        csi_driver=(csi.driver or "") if csi is not None else "",
        csi_volume_handle=(csi.volume_handle or "") if csi is not None else "",
        volume_attributes_class_name=getattr(spec, "volume_attributes_class_name", None) or "",
    )
    required = getattr(getattr(spec, "node_affinity", None), "required", None)
    if required is not None:
        out.node_affinity.CopyFrom(
            pb.NodeSelector(terms=[_term(t) for t in _list(required.node_selector_terms)])
        )
    ref = getattr(spec, "claim_ref", None)
    if ref is not None:
        out.claim_ref.CopyFrom(
            pb.VolumeClaimRef(
                namespace=getattr(ref, "namespace", None) or "",
                name=getattr(ref, "name", None) or "",
                uid=getattr(ref, "uid", None) or "",
            )
        )
    return out


def storage_class_to_proto(sc: Any) -> pb.StorageClass:
    """``V1StorageClass`` -> ``placement.v1.StorageClass`` (name, provisioner,
    volume_binding_mode, allowed_topologies)."""
    return pb.StorageClass(
        name=sc.metadata.name or "",
        provisioner=getattr(sc, "provisioner", None) or "",
        volume_binding_mode=getattr(sc, "volume_binding_mode", None) or "",
        allowed_topologies=[
            pb.TopologySelectorTerm(
                match_label_expressions=[
                    pb.TopologySelectorRequirement(key=r.key or "", values=_list(r.values))
                    for r in _list(getattr(t, "match_label_expressions", None))
                ]
            )
            for t in _list(getattr(sc, "allowed_topologies", None))
        ],
    )


def csi_node_to_proto(n: Any) -> pb.CsiNode:
    """``V1CSINode`` -> ``placement.v1.CsiNode``: each driver's allocatable.count (the attach limit)."""
    drivers = []
    for d in _list(getattr(getattr(n, "spec", None), "drivers", None)):
        m = pb.CsiNodeDriver(name=d.name or "")
        count = getattr(getattr(d, "allocatable", None), "count", None)
        if count is not None:
            m.allocatable_count = count
        drivers.append(m)
    return pb.CsiNode(name=n.metadata.name or "", drivers=drivers)


def csi_driver_to_proto(d: Any) -> pb.CsiDriver:
    """``V1CSIDriver`` -> ``placement.v1.CsiDriver``: whether the driver asks for storage capacity
    tracking (``spec.storageCapacity``, unset reads as false)."""
    return pb.CsiDriver(
        name=d.metadata.name or "",
        storage_capacity=bool(getattr(getattr(d, "spec", None), "storage_capacity", None)),
        prevent_pod_scheduling_if_missing=bool(
            getattr(getattr(d, "spec", None), "prevent_pod_scheduling_if_missing", None)
        ),
    )


def csi_storage_capacity_to_proto(c: Any) -> pb.CsiStorageCapacity:
    """``V1CSIStorageCapacity`` -> ``placement.v1.CsiStorageCapacity`` (class, node topology,
    capacity and maximum volume size)."""
    capacity = getattr(c, "capacity", None)
    maximum = getattr(c, "maximum_volume_size", None)
    out = pb.CsiStorageCapacity(
        namespace=c.metadata.namespace or "",
        name=c.metadata.name or "",
        storage_class_name=getattr(c, "storage_class_name", None) or "",
        capacity=str(capacity) if capacity is not None else "",
        maximum_volume_size=str(maximum) if maximum is not None else "",
    )
    topology = getattr(c, "node_topology", None)
    if topology is not None:
        out.node_topology.CopyFrom(_label_selector(topology))
    return out


# --- Dynamic Resource Allocation (resource.k8s.io/v1), as binder-agent/src/projection/devices.rs ---


def _device_selectors(selectors: Any) -> list:
    """The CEL expressions of ``V1DeviceSelector`` objects, in order (a selector without cel is
    left out)."""
    out = []
    for s in _list(selectors):
        cel = getattr(s, "cel", None)
        if cel is not None:
            out.append(getattr(cel, "expression", None) or "")
    return out


def _node_selector(s: Any) -> pb.NodeSelector:
    return pb.NodeSelector(terms=[_term(t) for t in _list(getattr(s, "node_selector_terms", None))])


def _device_toleration(t: Any) -> pb.Toleration:
    out = pb.Toleration(
        key=getattr(t, "key", None) or "",
        operator=getattr(t, "operator", None) or "",
        value=getattr(t, "value", None) or "",
        effect=getattr(t, "effect", None) or "",
    )
    if getattr(t, "toleration_seconds", None) is not None:
        out.toleration_seconds = int(t.toleration_seconds)
    return out


def _device_tolerations(ts: Any) -> list:
    return [_device_toleration(t) for t in _list(ts)]


def _capacity_requests(c: Any) -> dict:
    """``V1CapacityRequirements.requests``: quantities by capacity name, as given."""
    return _str_map(getattr(c, "requests", None) if c is not None else None)


def _counters(counters: Any) -> dict:
    """``V1Counter`` values by name, quantities as given."""
    return {str(k): str(getattr(v, "value", None) or "") for k, v in (counters or {}).items()}


def device_class_to_proto(c: Any) -> pb.DeviceClass:
    """``V1DeviceClass`` -> ``placement.v1.DeviceClass``: metadata.name, the CEL expressions of
    spec.selectors (selectors without cel are left out), spec.extended_resource_name and
    metadata.creation_timestamp in seconds (0 when unset)."""
    spec = getattr(c, "spec", None)
    return pb.DeviceClass(
        name=c.metadata.name or "",
        selectors=_device_selectors(getattr(spec, "selectors", None)),
        extended_resource_name=getattr(spec, "extended_resource_name", None) or "",
        creation_timestamp_seconds=_seconds(getattr(c.metadata, "creation_timestamp", None)),
    )


def allocation_result_to_proto(a: Any) -> pb.AllocationResult:
    """``V1AllocationResult`` (a claim's status.allocation) -> ``placement.v1.AllocationResult``:
    devices.results (request, driver, pool, device, admin_access when given, tolerations, and for
    a share of a device that allows multiple allocations its share_id and consumed_capacity) and
    node_selector."""
    out = pb.AllocationResult()
    for r in _list(getattr(getattr(a, "devices", None), "results", None)):
        m = pb.DeviceRequestAllocationResult(
            request=getattr(r, "request", None) or "",
            driver=getattr(r, "driver", None) or "",
            pool=getattr(r, "pool", None) or "",
            device=getattr(r, "device", None) or "",
            tolerations=_device_tolerations(getattr(r, "tolerations", None)),
        )
        admin_access = getattr(r, "admin_access", None)
        if admin_access is not None:
            m.admin_access = bool(admin_access)
        share_id = getattr(r, "share_id", None)
        if share_id is not None:
            m.share_id = str(share_id)
        m.binding_conditions.extend(_list(getattr(r, "binding_conditions", None)))
        m.binding_failure_conditions.extend(_list(getattr(r, "binding_failure_conditions", None)))
        for k, v in (getattr(r, "consumed_capacity", None) or {}).items():
            m.consumed_capacity[str(k)] = str(v)
        out.devices.append(m)
    node_selector = getattr(a, "node_selector", None)
    if node_selector is not None:
        out.node_selector.CopyFrom(_node_selector(node_selector))
    timestamp = getattr(a, "allocation_timestamp", None)
    if timestamp is not None:
        out.allocation_timestamp_seconds = _seconds(timestamp)
    return out


def resource_claim_to_proto(c: Any) -> pb.ResourceClaim:
    """``ResourceV1ResourceClaim`` (resource.k8s.io/v1) -> ``placement.v1.ResourceClaim``.

    Reads metadata.{namespace, name, uid, deletion_timestamp}, spec.devices.{requests (exactly
    or first_available; selectors as CEL expressions, capacity.requests as given), constraints}
    and status.{allocation, reserved_for}.
    """
    meta = c.metadata
    devices = getattr(getattr(c, "spec", None), "devices", None)
    status = getattr(c, "status", None)
    requests = []
    for r in _list(getattr(devices, "requests", None)):
        m = pb.DeviceRequest(name=getattr(r, "name", None) or "")
        e = getattr(r, "exactly", None)
        if e is not None:
            m.exactly.CopyFrom(
                pb.ExactDeviceRequest(
                    device_class_name=getattr(e, "device_class_name", None) or "",
                    selectors=_device_selectors(getattr(e, "selectors", None)),
                    allocation_mode=getattr(e, "allocation_mode", None) or "",
                    count=getattr(e, "count", None) or 0,
                    admin_access=bool(getattr(e, "admin_access", None)),
                    tolerations=_device_tolerations(getattr(e, "tolerations", None)),
                    capacity_requests=_capacity_requests(getattr(e, "capacity", None)),
                )
            )
        for s in _list(getattr(r, "first_available", None)):
            m.first_available.append(
                pb.DeviceSubRequest(
                    name=getattr(s, "name", None) or "",
                    device_class_name=getattr(s, "device_class_name", None) or "",
                    selectors=_device_selectors(getattr(s, "selectors", None)),
                    allocation_mode=getattr(s, "allocation_mode", None) or "",
                    count=getattr(s, "count", None) or 0,
                    tolerations=_device_tolerations(getattr(s, "tolerations", None)),
                    capacity_requests=_capacity_requests(getattr(s, "capacity", None)),
                )
            )
        requests.append(m)
    out = pb.ResourceClaim(
        namespace=getattr(meta, "namespace", None) or "",
        name=meta.name or "",
        uid=getattr(meta, "uid", None) or "",
        requests=requests,
        constraints=[
            pb.DeviceConstraint(
                requests=_list(getattr(k, "requests", None)),
                match_attribute=getattr(k, "match_attribute", None) or "",
                distinct_attribute=getattr(k, "distinct_attribute", None) or "",
            )
            for k in _list(getattr(devices, "constraints", None))
        ],
        reserved_for=[
            pb.ResourceClaimConsumer(
                api_group=getattr(r, "api_group", None) or "",
                resource=getattr(r, "resource", None) or "",
                name=getattr(r, "name", None) or "",
                uid=getattr(r, "uid", None) or "",
            )
            for r in _list(getattr(status, "reserved_for", None))
        ],
        deleting=getattr(meta, "deletion_timestamp", None) is not None,
        # The controller's uid ("" for none): the engine refuses a template's claim the pod does
        # not control, as kube-scheduler does (resourceclaim.IsForPod).
        controller_uid=next(
            (
                getattr(o, "uid", None) or ""
                for o in _list(getattr(meta, "owner_references", None))
                if getattr(o, "controller", None)
            ),
            "",
        ),
    )
    allocation = getattr(status, "allocation", None)
    if allocation is not None:
        out.allocation.CopyFrom(allocation_result_to_proto(allocation))
    # status.devices: the conditions drivers report, those True by type (binding conditions).
    for d in _list(getattr(status, "devices", None)):
        m = pb.AllocatedDeviceStatus(
            driver=getattr(d, "driver", None) or "",
            pool=getattr(d, "pool", None) or "",
            device=getattr(d, "device", None) or "",
            true_conditions=[
                getattr(c, "type", None) or ""
                for c in _list(getattr(d, "conditions", None))
                if getattr(c, "status", None) == "True"
            ],
        )
        share_id = getattr(d, "share_id", None)
        if share_id is not None:
            m.share_id = str(share_id)
        out.devices.append(m)
    return out


def _device_attribute(a: Any) -> Optional[pb.DeviceAttribute]:
    """A ``V1DeviceAttribute``'s single value (int, else bool, else string, else version), or
    ``None`` when none is set (e.g. a list-valued attribute): such an attribute is left out."""
    for field in ("int", "bool", "string", "version"):
        value = getattr(a, field, None)
        if value is not None:
            return pb.DeviceAttribute(**{field: value})
    return None


def _device_taint(t: Any) -> pb.DeviceTaint:
    """A ``V1DeviceTaint``: key, value, effect and time_added in seconds (0 when unset)."""
    return pb.DeviceTaint(
        key=getattr(t, "key", None) or "",
        value=getattr(t, "value", None) or "",
        effect=getattr(t, "effect", None) or "",
        time_added_seconds=_seconds(getattr(t, "time_added", None)),
    )


def device_taint_rule_to_proto(r: Any) -> pb.DeviceTaintRule:
    """``V1DeviceTaintRule`` (resource.k8s.io/v1) -> ``placement.v1.DeviceTaintRule``:
    metadata.name, spec.device_selector (driver, pool and device, each when set; unset when the
    rule has none) and spec.taint."""
    spec = getattr(r, "spec", None)
    out = pb.DeviceTaintRule(name=r.metadata.name or "")
    selector = getattr(spec, "device_selector", None)
    if selector is not None:
        s = pb.DeviceTaintSelector()
        for field in ("driver", "pool", "device"):
            value = getattr(selector, field, None)
            if value is not None:
                setattr(s, field, value)
        out.device_selector.CopyFrom(s)
    taint = getattr(spec, "taint", None)
    if taint is not None:
        out.taint.CopyFrom(_device_taint(taint))
    return out


def _capacity_request_policy(p: Any) -> pb.CapacityRequestPolicy:
    """``V1CapacityRequestPolicy`` -> ``placement.v1.CapacityRequestPolicy``."""
    out = pb.CapacityRequestPolicy(valid_values=[str(v) for v in _list(getattr(p, "valid_values", None))])
    default = getattr(p, "default", None)
    if default is not None:
        out.default = str(default)
    r = getattr(p, "valid_range", None)
    if r is not None:
        out.valid_range.min = str(getattr(r, "min", None) or "")
        for name in ("max", "step"):
            v = getattr(r, name, None)
            if v is not None:
                setattr(out.valid_range, name, str(v))
    return out


def _device(d: Any) -> pb.Device:
    out = pb.Device(
        name=getattr(d, "name", None) or "",
        capacity={str(k): str(getattr(v, "value", None) or "") for k, v in (getattr(d, "capacity", None) or {}).items()},
        consumes_counters=[
            pb.DeviceCounterConsumption(
                counter_set=getattr(c, "counter_set", None) or "",
                counters=_counters(getattr(c, "counters", None)),
            )
            for c in _list(getattr(d, "consumes_counters", None))
        ],
        node_name=getattr(d, "node_name", None) or "",
        all_nodes=bool(getattr(d, "all_nodes", None)),
        taints=[_device_taint(t) for t in _list(getattr(d, "taints", None))],
        allow_multiple_allocations=bool(getattr(d, "allow_multiple_allocations", None)),
        binding_conditions=_list(getattr(d, "binding_conditions", None)),
        binding_failure_conditions=_list(getattr(d, "binding_failure_conditions", None)),
        binds_to_node=bool(getattr(d, "binds_to_node", None)),
    )
    for key, c in (getattr(d, "capacity", None) or {}).items():
        policy = getattr(c, "request_policy", None)
        if policy is not None:
            out.capacity_request_policies[str(key)].CopyFrom(_capacity_request_policy(policy))
    for key, a in (getattr(d, "attributes", None) or {}).items():
        attribute = _device_attribute(a)
        if attribute is not None:
            out.attributes[str(key)].CopyFrom(attribute)
    node_selector = getattr(d, "node_selector", None)
    if node_selector is not None:
        out.node_selector.CopyFrom(_node_selector(node_selector))
    return out


def resource_slice_to_proto(s: Any) -> pb.ResourceSlice:
    """``V1ResourceSlice`` (resource.k8s.io/v1) -> ``placement.v1.ResourceSlice``.

    Reads metadata.name and spec.{driver, pool.{name, generation, resource_slice_count},
    node_name, node_selector, all_nodes, per_device_node_selection, devices, shared_counters}.
    Each device keeps its attributes that have a value (int, bool, string or version; others are
    left out), capacities' values and counter consumption (quantities as given), its own node
    selection, taints, allow_multiple_allocations and binding_conditions.
    """
    spec = getattr(s, "spec", None)
    pool = getattr(spec, "pool", None)
    out = pb.ResourceSlice(
        name=s.metadata.name or "",
        driver=getattr(spec, "driver", None) or "",
        pool_name=getattr(pool, "name", None) or "",
        pool_generation=getattr(pool, "generation", None) or 0,
        pool_resource_slice_count=getattr(pool, "resource_slice_count", None) or 0,
        node_name=getattr(spec, "node_name", None) or "",
        all_nodes=bool(getattr(spec, "all_nodes", None)),
        per_device_node_selection=bool(getattr(spec, "per_device_node_selection", None)),
        devices=[_device(d) for d in _list(getattr(spec, "devices", None))],
        shared_counters=[
            pb.CounterSet(name=getattr(c, "name", None) or "", counters=_counters(getattr(c, "counters", None)))
            for c in _list(getattr(spec, "shared_counters", None))
        ],
    )
    node_selector = getattr(spec, "node_selector", None)
    if node_selector is not None:
        out.node_selector.CopyFrom(_node_selector(node_selector))
    return out


def _pod_resource_claims(spec: Any, status: Any) -> list:
    """A pod's spec.resource_claims. An entry naming a template gets generated_claim_name from
    its status.resource_claim_statuses entry (matched by name; "" when that entry names no
    claim), and none while the entry is missing."""
    statuses = _list(getattr(status, "resource_claim_statuses", None))
    out = []
    for c in _list(getattr(spec, "resource_claims", None)):
        m = pb.PodResourceClaim(
            name=getattr(c, "name", None) or "",
            resource_claim_name=getattr(c, "resource_claim_name", None) or "",
            resource_claim_template_name=getattr(c, "resource_claim_template_name", None) or "",
        )
        if m.resource_claim_template_name:
            entry = next((s for s in statuses if getattr(s, "name", None) == c.name), None)
            if entry is not None:
                m.generated_claim_name = getattr(entry, "resource_claim_name", None) or ""
        out.append(m)
    return out


# --- PodGroups (scheduling.k8s.io/v1beta1), as binder-agent/src/projection/podgroups.rs ---


def _disruption_mode(m: Any) -> str:
    """spec.disruption_mode as a name: "Single" when single is set, "All" when all is, else "".
    (The client reads an empty ``{}`` member as an empty dict: set, though falsy.)"""
    if m is None:
        return ""
    if getattr(m, "single", None) is not None:
        return "Single"
    if getattr(m, "all", None) is not None:
        return "All"
    return ""


def pod_group_to_proto(g: Any) -> pb.PodGroup:
    """``V1beta1PodGroup`` (scheduling.k8s.io/v1beta1) -> ``placement.v1.PodGroup``.

    Reads metadata.{namespace, name, uid, generation}, spec.{scheduling_policy.gang.min_count (no
    gang for the basic policy), scheduling_constraints.topology[].key, priority_class_name,
    priority (unset when the API server resolved none), preemption_policy, disruption_mode
    ("Single", "All" or ""), workload_ref, parent_composite_pod_group_name} and whether
    status.conditions has PodGroupInitiallyScheduled with status "True".
    """
    meta = g.metadata
    spec = getattr(g, "spec", None)
    status = getattr(g, "status", None)
    out = pb.PodGroup(
        namespace=getattr(meta, "namespace", None) or "",
        name=getattr(meta, "name", None) or "",
        uid=getattr(meta, "uid", None) or "",
        generation=getattr(meta, "generation", None) or 0,
        topology_keys=[
            getattr(t, "key", None) or ""
            for t in _list(getattr(getattr(spec, "scheduling_constraints", None), "topology", None))
        ],
        priority_class_name=getattr(spec, "priority_class_name", None) or "",
        preemption_policy=getattr(spec, "preemption_policy", None) or "",
        disruption_mode=_disruption_mode(getattr(spec, "disruption_mode", None)),
        parent_composite_pod_group_name=getattr(spec, "parent_composite_pod_group_name", None) or "",
        initially_scheduled=any(
            getattr(c, "type", None) == POD_GROUP_INITIALLY_SCHEDULED and getattr(c, "status", None) == "True"
            for c in _list(getattr(status, "conditions", None))
        ),
    )
    gang = getattr(getattr(spec, "scheduling_policy", None), "gang", None)
    if gang is not None:
        out.gang.CopyFrom(pb.GangSchedulingPolicy(min_count=getattr(gang, "min_count", None) or 0))
    priority = getattr(spec, "priority", None)
    if priority is not None:
        out.priority = int(priority)
    ref = getattr(spec, "workload_ref", None)
    if ref is not None:
        out.workload_ref.CopyFrom(
            pb.WorkloadReference(
                workload_name=getattr(ref, "workload_name", None) or "",
                template_name=getattr(ref, "template_name", None) or "",
            )
        )
    return out


def composite_pod_group_to_proto(g: Any) -> pb.CompositePodGroup:
    """``V1alpha3CompositePodGroup`` (scheduling.k8s.io/v1alpha3, the CompositePodGroup gate) ->
    ``placement.v1.CompositePodGroup``, as binder-agent/src/projection/podgroups.rs converts it.

    Reads metadata.{namespace, name, uid}, spec.{parent_composite_pod_group_name,
    scheduling_policy.gang.min_group_count (unset for the basic policy),
    scheduling_constraints.topology[].key, priority (unset when the API server resolved none),
    preemption_policy}. Accepts the client's model objects or plain dicts with the same
    snake_case attribute names.
    """
    meta = g.metadata
    spec = getattr(g, "spec", None)
    out = pb.CompositePodGroup(
        namespace=getattr(meta, "namespace", None) or "",
        name=getattr(meta, "name", None) or "",
        uid=getattr(meta, "uid", None) or "",
        parent_composite_pod_group_name=getattr(spec, "parent_composite_pod_group_name", None) or "",
        topology_keys=[
            getattr(t, "key", None) or ""
            for t in _list(getattr(getattr(spec, "scheduling_constraints", None), "topology", None))
        ],
        preemption_policy=getattr(spec, "preemption_policy", None) or "",
    )
    gang = getattr(getattr(spec, "scheduling_policy", None), "gang", None)
    if gang is not None:
        out.min_group_count = int(getattr(gang, "min_group_count", None) or 0)
    priority = getattr(spec, "priority", None)
    if priority is not None:
        out.priority = int(priority)
    return out


def node_to_proto(node: Any) -> pb.Node:
    """``V1Node`` -> ``placement.v1.Node``.

    Reads metadata.{name,labels}, spec.{taints,unschedulable} and
    status.{allocatable,images,declared_features} (the declared features as given, in order).
    """
    meta = node.metadata
    spec = getattr(node, "spec", None)
    status = getattr(node, "status", None)
    return pb.Node(
        name=meta.name or "",
        labels=_str_map(getattr(meta, "labels", None)),
        taints=[
            pb.Taint(key=t.key or "", value=getattr(t, "value", None) or "", effect=t.effect or "")
            for t in _list(getattr(spec, "taints", None))
        ],
        unschedulable=bool(getattr(spec, "unschedulable", None)),
        allocatable=_str_map(getattr(status, "allocatable", None)),
        images=[
            pb.ContainerImage(names=_list(i.names), size_bytes=getattr(i, "size_bytes", None) or 0)
            for i in _list(getattr(status, "images", None))
        ],
        declared_features=_list(getattr(status, "declared_features", None)),
    )


def namespace_to_proto(ns: Any) -> pb.Namespace:
    """``V1Namespace`` -> ``placement.v1.Namespace`` (metadata.name and metadata.labels), for the
    namespaceSelector of pod (anti-)affinity terms."""
    meta = ns.metadata
    return pb.Namespace(name=meta.name or "", labels=_str_map(getattr(meta, "labels", None)))


def pdb_to_proto(pdb: Any, pods: Iterable[Any] = ()) -> pb.PodDisruptionBudget:
    """``V1PodDisruptionBudget`` (policy/v1) -> ``placement.v1.PodDisruptionBudget``.

    Reads metadata.{namespace,name}, spec.selector, status.disruptions_allowed (0 without a
    status yet, as the API server's eviction check treats it) and status.disrupted_pods. The API
    names disrupted pods; the message carries uids: each name is resolved against ``pods``
    (``V1Pod`` objects, e.g. the bound pods of a snapshot) of the budget's namespace, and a name
    with no such pod is left out. The uids are sorted.
    """
    meta = pdb.metadata
    namespace = getattr(meta, "namespace", None) or ""
    spec = getattr(pdb, "spec", None)
    status = getattr(pdb, "status", None)
    disrupted = set((getattr(status, "disrupted_pods", None) or {}).keys())
    uids = sorted(
        {
            str(p.metadata.uid)
            for p in pods
            if disrupted
            and (getattr(p.metadata, "namespace", None) or "default") == namespace
            and p.metadata.name in disrupted
            and getattr(p.metadata, "uid", None)
        }
    )
    out = pb.PodDisruptionBudget(
        namespace=namespace,
        name=meta.name or "",
        disruptions_allowed=(getattr(status, "disruptions_allowed", None) or 0) if status is not None else 0,
        disrupted_pod_uids=uids,
    )
    selector = getattr(spec, "selector", None) if spec is not None else None
    if selector is not None:
        out.selector.CopyFrom(_label_selector(selector))
    return out


def is_bound(pod: Any) -> bool:
    """True for a ``V1Pod`` that occupies node capacity: spec.node_name set and not terminated.

    A terminating pod (metadata.deletion_timestamp set) is still bound: it holds its node until
    it is gone, and its message says it is terminating.
    """
    phase = getattr(getattr(pod, "status", None), "phase", None)
    return bool(getattr(pod.spec, "node_name", None)) and phase not in _TERMINAL_PHASES


def snapshot_from(
    nodes: Iterable[Any],
    pods: Iterable[Any] = (),
    namespaces: Iterable[Any] = (),
    pdbs: Iterable[Any] = (),
    claims: Iterable[Any] = (),
    volumes: Iterable[Any] = (),
    storage_classes: Iterable[Any] = (),
    csi_nodes: Iterable[Any] = (),
    csi_drivers: Iterable[Any] = (),
    csi_storage_capacities: Iterable[Any] = (),
    device_classes: Iterable[Any] = (),
    resource_claims: Iterable[Any] = (),
    resource_slices: Iterable[Any] = (),
    pod_groups: Iterable[Any] = (),
    device_taint_rules: Iterable[Any] = (),
    composite_pod_groups: Iterable[Any] = (),
) -> pb.Snapshot:
    """A full ``placement.v1.Snapshot`` from ``V1Node``, ``V1Pod``, ``V1Namespace`` and
    ``V1PodDisruptionBudget`` objects, as the binder builds it.

    Only bound, non-terminated pods are kept (see :func:`is_bound`); pending pods belong in a
    ScheduleRequest / RankRequest instead. Budgets' disrupted pods resolve against the kept pods.
    Without namespaces, a pod affinity term's namespaceSelector matches no namespace. Nodes and
    namespaces are sorted by name, pods by uid and budgets by namespace and name. Claims
    (``V1PersistentVolumeClaim``, sorted by namespace and name), volumes (``V1PersistentVolume``),
    storage classes (``V1StorageClass``), CSINodes (``V1CSINode``) and CSIDrivers (``V1CSIDriver``),
    each sorted by name, and CSIStorageCapacities (``V1CSIStorageCapacity``, sorted by namespace and
    name) feed the volume filters. DeviceClasses (``V1DeviceClass``), ResourceSlices
    (``V1ResourceSlice``) and DeviceTaintRules (``V1DeviceTaintRule``), each sorted by name, and
    ResourceClaims (``ResourceV1ResourceClaim``, sorted by "namespace/name") feed DynamicResources. PodGroups (``V1beta1PodGroup``) and
    CompositePodGroups (``V1alpha3CompositePodGroup``) are sorted by "namespace/name".
    """
    bound = [p for p in pods if is_bound(p)]
    out_pods = sorted((pod_to_proto(p) for p in bound), key=lambda p: p.uid.encode())
    out_pdbs = sorted(
        (pdb_to_proto(b, bound) for b in pdbs), key=lambda b: f"{b.namespace}/{b.name}".encode()
    )
    return pb.Snapshot(
        nodes=sorted((node_to_proto(n) for n in nodes), key=lambda n: n.name.encode()),
        pods=out_pods,
        namespaces=sorted((namespace_to_proto(n) for n in namespaces), key=lambda n: n.name.encode()),
        pod_disruption_budgets=out_pdbs,
        persistent_volume_claims=sorted(
            (pvc_to_proto(c) for c in claims), key=lambda c: f"{c.namespace}/{c.name}".encode()
        ),
        persistent_volumes=sorted((pv_to_proto(v) for v in volumes), key=lambda v: v.name.encode()),
        storage_classes=sorted((storage_class_to_proto(c) for c in storage_classes), key=lambda c: c.name.encode()),
        csi_nodes=sorted((csi_node_to_proto(n) for n in csi_nodes), key=lambda n: n.name.encode()),
        csi_drivers=sorted((csi_driver_to_proto(d) for d in csi_drivers), key=lambda d: d.name.encode()),
        csi_storage_capacities=sorted(
            (csi_storage_capacity_to_proto(c) for c in csi_storage_capacities),
            key=lambda c: f"{c.namespace}/{c.name}".encode(),
        ),
        device_classes=sorted((device_class_to_proto(c) for c in device_classes), key=lambda c: c.name.encode()),
        resource_claims=sorted(
            (resource_claim_to_proto(c) for c in resource_claims), key=lambda c: f"{c.namespace}/{c.name}".encode()
        ),
        resource_slices=sorted((resource_slice_to_proto(s) for s in resource_slices), key=lambda s: s.name.encode()),
        device_taint_rules=sorted(
            (device_taint_rule_to_proto(r) for r in device_taint_rules), key=lambda r: r.name.encode()
        ),
        pod_groups=sorted(
            (pod_group_to_proto(g) for g in pod_groups), key=lambda g: f"{g.namespace}/{g.name}".encode()
        ),
        composite_pod_groups=sorted(
            (composite_pod_group_to_proto(g) for g in composite_pod_groups),
            key=lambda g: f"{g.namespace}/{g.name}".encode(),
        ),
    )
