// Command example syncs a two-node snapshot into a running scheduler-service, schedules a
// batch of three pods (two fit, one asks for 64 cpu) and prints the placements. It exits
// non-zero unless exactly the first two pods are placed and the third is unschedulable with
// kube-scheduler's "0/2 nodes are available: ... Insufficient cpu" message.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	placementv1 "github.com/placement/placement/clients/go/placement/v1"
)

func node(name string) *placementv1.Node {
	return &placementv1.Node{
		Name:        name,
		Labels:      map[string]string{"kubernetes.io/hostname": name},
		Allocatable: map[string]string{"cpu": "4", "memory": "8Gi", "pods": "110"},
	}
}

func pod(name, cpu, memory string) *placementv1.Pod {
	return &placementv1.Pod{
		Uid:       "uid-" + name,
		Namespace: "default",
		Name:      name,
		Containers: []*placementv1.Container{{
			Name:     "main",
			Image:    "registry.k8s.io/pause:3.9",
			Requests: map[string]string{"cpu": cpu, "memory": memory},
		}},
	}
}

func run(addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connect %s: %w", addr, err)
	}
	defer conn.Close()
	client := placementv1.NewPlacementServiceClient(conn)

	// WaitForReady: the first call waits (within ctx) for a server that is still starting.
	synced, err := client.SyncSnapshot(ctx, &placementv1.SyncSnapshotRequest{
		Kind: &placementv1.SyncSnapshotRequest_Full{Full: &placementv1.Snapshot{
			Nodes: []*placementv1.Node{node("node-a"), node("node-b")},
		}},
	}, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("SyncSnapshot: %w", err)
	}
	fmt.Printf("snapshot %s: %d nodes, %d pods\n", synced.SnapshotId, synced.NodeCount, synced.PodCount)

	resp, err := client.Schedule(ctx, &placementv1.ScheduleRequest{
		Snapshot: &placementv1.SnapshotRef{Source: &placementv1.SnapshotRef_SnapshotId{SnapshotId: synced.SnapshotId}},
		Pods: []*placementv1.Pod{
			pod("web-1", "1", "1Gi"),
			pod("web-2", "2", "2Gi"),
			pod("huge", "64", "1Gi"),
		},
	})
	if err != nil {
		return fmt.Errorf("Schedule: %w", err)
	}
	fmt.Printf("policy %q\n", resp.Policy)
	placed := 0
	for _, p := range resp.Placements {
		switch o := p.Outcome.(type) {
		case *placementv1.Placement_NodeName:
			placed++
			fmt.Printf("%-10s -> %s (score %d, %d feasible nodes)\n", p.PodUid, o.NodeName, p.Score, p.FeasibleNodes)
		case *placementv1.Placement_Unschedulable:
			fmt.Printf("%-10s unschedulable: %s\n", p.PodUid, o.Unschedulable.Message)
		default:
			fmt.Printf("%-10s no outcome\n", p.PodUid)
		}
	}

	if len(resp.Placements) != 3 {
		return fmt.Errorf("want 3 placements, got %d", len(resp.Placements))
	}
	if placed != 2 || resp.Placements[0].GetNodeName() == "" || resp.Placements[1].GetNodeName() == "" {
		return fmt.Errorf("want the first 2 pods placed, got %d placed", placed)
	}
	msg := resp.Placements[2].GetUnschedulable().GetMessage()
	if !strings.HasPrefix(msg, "0/2 nodes are available:") || !strings.Contains(msg, "Insufficient cpu") {
		return fmt.Errorf("unexpected unschedulable message for the third pod: %q", msg)
	}
	return nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "scheduler-service gRPC address (host:port)")
	timeout := flag.Duration("timeout", 10*time.Second, "deadline for connecting and all calls")
	flag.Parse()
	if err := run(*addr, *timeout); err != nil {
		log.Printf("example: %v", err)
		os.Exit(1)
	}
	fmt.Println("example: ok")
}
