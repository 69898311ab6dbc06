// Command controller is an example Kubernetes scheduler built on scheduler-service: client-go
// informers keep a placement.v1 snapshot of the cluster (nodes, bound pods, namespaces,
// PodDisruptionBudgets, converted by package convert) in sync with the service through
// SyncSnapshot deltas, and the pending pods whose spec.schedulerName names this controller are
// placed with Schedule and bound with a Binding (or, with -dry-run, ranked with Rank and printed).
//
//	controller -kubeconfig ~/.kube/config -addr 127.0.0.1:50051 -scheduler-name placement-go-example
//
// It is an example: one replica, no leader election, no preemption (a nomination is printed,
// not acted on), no events. The binder (binder-agent) is the production scheduler.
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	placementv1 "github.com/placement/placement/clients/go/placement/v1"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (empty: in-cluster config)")
	addr := flag.String("addr", "127.0.0.1:50051", "scheduler-service gRPC address (host:port)")
	name := flag.String("scheduler-name", "placement-go-example", "place the pending pods whose spec.schedulerName is this")
	namespace := flag.String("namespace", "", "place pending pods of this namespace only (empty: every namespace)")
	policy := flag.String("policy", "", "scheduling policy (empty: the service's default)")
	dryRun := flag.Bool("dry-run", false, "rank pending pods and print the best nodes instead of binding them")
	interval := flag.Duration("interval", 5*time.Second, "retry interval for pods that fit nowhere")
	flag.Parse()

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatalf("controller: kubeconfig: %v", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatalf("controller: %v", err)
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatalf("controller: connect %s: %v", *addr, err)
	}
	defer conn.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := New(cs, placementv1.NewPlacementServiceClient(conn), Config{
		SchedulerName: *name, Namespace: *namespace, Policy: *policy, DryRun: *dryRun,
		Interval: *interval, Logf: log.Printf,
	})
	if err := c.Run(ctx); err != nil {
		log.Fatalf("controller: %v", err)
	}
}
