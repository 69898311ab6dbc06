package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	placementv1 "github.com/placement/placement/clients/go/placement/v1"
)

// The controller against a real API server (E2E_KUBECONFIG; nodes are plain objects there, no
// kubelet runs) and a running scheduler-service (PLACEMENT_ADDR); scripts/clients-test.sh
// provides both when a cluster is given. Everything it creates carries a random run id, so
// other users of a shared cluster are not disturbed, and is deleted at the end.

type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logs) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

func setup(t *testing.T) (kubernetes.Interface, placementv1.PlacementServiceClient) {
	kubeconfig, addr := os.Getenv("E2E_KUBECONFIG"), os.Getenv("PLACEMENT_ADDR")
	if kubeconfig == "" || addr == "" {
		t.Skip("E2E_KUBECONFIG or PLACEMENT_ADDR is not set: the controller test against a real cluster is skipped")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return cs, placementv1.NewPlacementServiceClient(conn)
}

// cluster creates nodes run-n1..n3 (2 cpu each, labelled with the run id) and the namespace run.
func cluster(t *testing.T, ctx context.Context, cs kubernetes.Interface, run string) {
	t.Cleanup(func() {
		bg := context.Background()
		zero := int64(0)
		// No kubelet finishes a graceful deletion here: delete the pods at once.
		_ = cs.CoreV1().Pods(run).DeleteCollection(bg, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = cs.CoreV1().Namespaces().Delete(bg, run, metav1.DeleteOptions{})
		for i := 1; i <= 3; i++ {
			_ = cs.CoreV1().Nodes().Delete(bg, fmt.Sprintf("%s-n%d", run, i), metav1.DeleteOptions{})
		}
	})
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: run}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("%s-n%d", run, i)
		n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{"kubernetes.io/hostname": name, "placement-e2e": run},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status = corev1.NodeStatus{
			Capacity:    corev1.ResourceList{"cpu": resource.MustParse("2"), "memory": resource.MustParse("4Gi"), "pods": resource.MustParse("10")},
			Allocatable: corev1.ResourceList{"cpu": resource.MustParse("2"), "memory": resource.MustParse("4Gi"), "pods": resource.MustParse("10")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now()}},
		}
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func pendingPod(run, name, cpu string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: run, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			SchedulerName: run,
			NodeSelector:  map[string]string{"placement-e2e": run},
			Containers: []corev1.Container{{
				Name: "c", Image: "registry.k8s.io/pause:3.9",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse(cpu)}},
			}},
		},
	}
}

func runID(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "i26-go-" + hex.EncodeToString(b)
}

func startController(t *testing.T, cs kubernetes.Interface, client placementv1.PlacementServiceClient, cfg Config) (*logs, func()) {
	l := &logs{}
	cfg.Logf = l.logf
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(cs, client, cfg).Run(ctx) }()
	return l, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
		for _, line := range l.lines {
			t.Log(line)
		}
	}
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestControllerBindsPendingPodsOnARealControlPlane(t *testing.T) {
	cs, client := setup(t)
	ctx := context.Background()
	run := runID(t)
	cluster(t, ctx, cs, run)

	// Three 1.5-cpu pods on three 2-cpu nodes: one per node. A fourth fits nowhere.
	for _, name := range []string{"web-0", "web-1", "web-2", "web-3"} {
		if _, err := cs.CoreV1().Pods(run).Create(ctx, pendingPod(run, name, "1500m"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	l, stop := startController(t, cs, client, Config{SchedulerName: run, Namespace: run, Interval: time.Second})
	defer stop()

	nodeOf := func(name string) string {
		p, err := cs.CoreV1().Pods(run).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Spec.NodeName
	}
	bound := func() map[string]string {
		out := map[string]string{}
		for _, name := range []string{"web-0", "web-1", "web-2", "web-3"} {
			if n := nodeOf(name); n != "" {
				out[name] = n
			}
		}
		return out
	}
	eventually(t, "three pods bound", func() bool { return len(bound()) == 3 })
	eventually(t, "the fourth pod reported unschedulable", func() bool { return l.contains("fits nowhere: 0/") })
	placed := bound()
	used := map[string]bool{}
	for pod, node := range placed {
		if !strings.HasPrefix(node, run+"-n") {
			t.Errorf("%s bound to %s, not one of this run's nodes", pod, node)
		}
		if used[node] {
			t.Errorf("two 1.5-cpu pods on the 2-cpu node %s: %v", node, placed)
		}
		used[node] = true
	}
	var waiting string
	for _, name := range []string{"web-0", "web-1", "web-2", "web-3"} {
		if _, ok := placed[name]; !ok {
			waiting = name
		}
	}

	// Room appears: one bound pod goes, and the waiting pod takes its node.
	zero := int64(0)
	var freed string
	for pod, node := range placed {
		freed = node
		if err := cs.CoreV1().Pods(run).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		break
	}
	eventually(t, waiting+" bound to the freed node", func() bool { return nodeOf(waiting) == freed })
}

func TestControllerDryRunRanksWithoutBinding(t *testing.T) {
	cs, client := setup(t)
	ctx := context.Background()
	run := runID(t)
	cluster(t, ctx, cs, run)
	if _, err := cs.CoreV1().Pods(run).Create(ctx, pendingPod(run, "probe", "500m"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l, stop := startController(t, cs, client, Config{SchedulerName: run, Namespace: run, DryRun: true, Interval: time.Second})
	eventually(t, "the ranking printed", func() bool { return l.contains("rank " + run + "/probe #1 " + run + "-n") })
	stop()
	p, err := cs.CoreV1().Pods(run).Get(ctx, "probe", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "" {
		t.Errorf("a dry run bound the pod to %s", p.Spec.NodeName)
	}
	if !l.contains("(3/") {
		t.Errorf("want 3 feasible nodes in the ranking: %v", l.lines)
	}
}
