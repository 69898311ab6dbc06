"""Converters from the official ``kubernetes`` client's objects to placement.v1 messages.

Written against the attribute names of ``kubernetes.client`` models (``V1Pod``, ``V1Node``,
``V1Container``, ...), i.e. snake_case Python attributes such as ``pod.spec.init_containers``
or ``node.status.allocatable``, as returned by ``CoreV1Api().list_pod_for_all_namespaces()``
or built by hand. The ``kubernetes`` package itself is not imported: any object with the
same attributes works. Missing (``None``) fields map to the proto defaults.

Resource quantities are passed through as strings ("250m", "8Gi"); the service parses them.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

from placement_client.placement.v1 import placement_pb2 as pb

__all__ = [
    "pod_to_proto",
    "node_to_proto",
    "container_to_proto",
    "snapshot_from",
    "is_bound",
]

# Phases of pods that no longer hold resources; kube-scheduler does not count them.
_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def _str_map(m: Optional[Mapping[str, Any]]) -> dict:
    """A label/selector/quantity map with string values (quantities may be given as numbers)."""
    return {str(k): str(v) for k, v in (m or {}).items()}


def _list(xs: Optional[Iterable[Any]]) -> list:
    return list(xs or [])


def container_to_proto(c: Any) -> pb.Container:
    """``V1Container`` -> ``placement.v1.Container`` (name, image, resources.requests, ports, restart_policy)."""
    resources = getattr(c, "resources", None)
    requests = getattr(resources, "requests", None) if resources is not None else None
    return pb.Container(
        name=c.name or "",
        image=getattr(c, "image", None) or "",
        requests=_str_map(requests),
        ports=[
            pb.ContainerPort(
                container_port=p.container_port or 0,
                host_port=getattr(p, "host_port", None) or 0,
                protocol=getattr(p, "protocol", None) or "",
                host_ip=getattr(p, "host_ip", None) or "",
            )
            for p in _list(getattr(c, "ports", None))
        ],
        # V1Container.restart_policy exists in kubernetes client >= 29 (sidecar containers).
        restart_policy=getattr(c, "restart_policy", None) or "",
    )


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


def pod_to_proto(pod: Any) -> pb.Pod:
    """``V1Pod`` -> ``placement.v1.Pod``.

    Reads metadata.{uid,namespace,name,labels} and spec.{priority, containers,
    init_containers, overhead, node_name, node_selector, affinity.{node_affinity, pod_affinity,
    pod_anti_affinity}, tolerations, topology_spread_constraints}. The default spreading selector
    (``default_spread_selector``) is left unset: it comes from the pod's workload objects.
    A pod without metadata.uid gets "<namespace>/<name>" as uid (uids must be unique within a
    snapshot and a batch; objects read from the API server always have one).
    """
    meta = pod.metadata
    spec = pod.spec
    namespace = getattr(meta, "namespace", None) or "default"
    uid = getattr(meta, "uid", None) or f"{namespace}/{meta.name}"
    out = pb.Pod(
        uid=uid,
        namespace=namespace,
        name=meta.name or "",
        labels=_str_map(getattr(meta, "labels", None)),
        priority=getattr(spec, "priority", None) or 0,
        containers=[container_to_proto(c) for c in _list(spec.containers)],
        init_containers=[container_to_proto(c) for c in _list(getattr(spec, "init_containers", None))],
        overhead=_str_map(getattr(spec, "overhead", None)),
        node_name=getattr(spec, "node_name", None) or "",
        node_selector=_str_map(getattr(spec, "node_selector", None)),
        tolerations=[_toleration(t) for t in _list(getattr(spec, "tolerations", None))],
        topology_spread_constraints=[
            _spread_constraint(c) for c in _list(getattr(spec, "topology_spread_constraints", None))
        ],
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
    return out


def node_to_proto(node: Any) -> pb.Node:
    """``V1Node`` -> ``placement.v1.Node``.

    Reads metadata.{name,labels}, spec.{taints,unschedulable} and status.{allocatable,images}.
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
    )


def is_bound(pod: Any) -> bool:
    """True for a ``V1Pod`` that occupies node capacity: spec.node_name set and not terminated."""
    phase = getattr(getattr(pod, "status", None), "phase", None)
    return bool(getattr(pod.spec, "node_name", None)) and phase not in _TERMINAL_PHASES


def snapshot_from(nodes: Iterable[Any], pods: Iterable[Any] = ()) -> pb.Snapshot:
    """A full ``placement.v1.Snapshot`` from ``V1Node`` objects and ``V1Pod`` objects.

    Only bound, non-terminated pods are kept (see :func:`is_bound`); pending pods belong in a
    ScheduleRequest / RankRequest instead.
    """
    return pb.Snapshot(
        nodes=[node_to_proto(n) for n in nodes],
        pods=[pod_to_proto(p) for p in pods if is_bound(p)],
    )
