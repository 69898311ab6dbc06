#!/usr/bin/env python3
"""Python twin of clients/go/cmd/example: sync a two-node snapshot into a running
scheduler-service, schedule three pods (two fit, one asks for 64 cpu), print the placements.

Exits non-zero unless the first two pods are placed and the third is unschedulable with
kube-scheduler's "0/2 nodes are available: ... Insufficient cpu" message.

    python examples/schedule.py --addr 127.0.0.1:50051
"""

from __future__ import annotations

import argparse
import sys

import grpc

from placement_client import placement_pb2 as pb
from placement_client import placement_pb2_grpc as pb_grpc


def node(name: str) -> pb.Node:
    return pb.Node(
        name=name,
        labels={"kubernetes.io/hostname": name},
        allocatable={"cpu": "4", "memory": "8Gi", "pods": "110"},
    )


def pod(name: str, cpu: str, memory: str) -> pb.Pod:
    return pb.Pod(
        uid=f"uid-{name}",
        namespace="default",
        name=name,
        containers=[pb.Container(name="main", image="registry.k8s.io/pause:3.9", requests={"cpu": cpu, "memory": memory})],
    )


def run(addr: str, timeout: float = 10.0) -> list[str]:
    """Runs the example; returns the problems found (empty when all is as expected)."""
    with grpc.insecure_channel(addr) as channel:
        grpc.channel_ready_future(channel).result(timeout=timeout)
        stub = pb_grpc.PlacementServiceStub(channel)
        synced = stub.SyncSnapshot(
            pb.SyncSnapshotRequest(full=pb.Snapshot(nodes=[node("node-a"), node("node-b")])), timeout=timeout
        )
        print(f"snapshot {synced.snapshot_id}: {synced.node_count} nodes, {synced.pod_count} pods")
        resp = stub.Schedule(
            pb.ScheduleRequest(
                snapshot=pb.SnapshotRef(snapshot_id=synced.snapshot_id),
                pods=[pod("web-1", "1", "1Gi"), pod("web-2", "2", "2Gi"), pod("huge", "64", "1Gi")],
            ),
            timeout=timeout,
        )
    print(f"policy {resp.policy!r}")
    for p in resp.placements:
        if p.WhichOneof("outcome") == "node_name":
            print(f"{p.pod_uid:<10} -> {p.node_name} (score {p.score}, {p.feasible_nodes} feasible nodes)")
        else:
            print(f"{p.pod_uid:<10} unschedulable: {p.unschedulable.message}")

    problems = []
    outcomes = [p.WhichOneof("outcome") for p in resp.placements]
    if outcomes != ["node_name", "node_name", "unschedulable"]:
        problems.append(f"want [node_name, node_name, unschedulable], got {outcomes}")
    else:
        msg = resp.placements[2].unschedulable.message
        if not msg.startswith("0/2 nodes are available:") or "Insufficient cpu" not in msg:
            problems.append(f"unexpected unschedulable message for the third pod: {msg!r}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--addr", default="127.0.0.1:50051", help="scheduler-service gRPC address (host:port)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds for connecting and each call")
    args = parser.parse_args()
    problems = run(args.addr, args.timeout)
    for p in problems:
        print(f"example: {p}", file=sys.stderr)
    if not problems:
        print("example: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
