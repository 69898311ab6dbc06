package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/placement/placement/clients/go/convert"
	placementv1 "github.com/placement/placement/clients/go/placement/v1"
)

// Config is what the controller needs besides its clients.
type Config struct {
	// SchedulerName: the pods it places are the pending pods whose spec.schedulerName is this.
	SchedulerName string
	// Namespace limits the pending pods it places to one namespace ("" places them in every
	// namespace). The snapshot always covers the whole cluster.
	Namespace string
	// Policy names the scheduling policy ("" is the service's default).
	Policy string
	// DryRun ranks each pending pod (Rank) and prints the best nodes instead of binding.
	DryRun bool
	// Interval between retries of pods that fit nowhere (a cluster change retries sooner).
	Interval time.Duration
	// Logf prints what the controller does.
	Logf func(format string, args ...any)
}

// Controller keeps a placement.v1 snapshot of the cluster in sync with scheduler-service (one
// full snapshot, then deltas built from informer events) and places the pending pods naming
// its scheduler: Schedule for the batch, then a Binding per placed pod, which it assumes on its
// node until the informer shows the pod bound (kube-scheduler's assume), so the next batch
// counts it.
type Controller struct {
	cs     kubernetes.Interface
	client placementv1.PlacementServiceClient
	cfg    Config

	factory    informers.SharedInformerFactory
	podLister  corelisters.PodLister
	pdbLister  policylisters.PodDisruptionBudgetLister
	nodeSynced cache.InformerSynced
	podSynced  cache.InformerSynced
	nsSynced   cache.InformerSynced
	pdbSynced  cache.InformerSynced

	mu sync.Mutex
	// What the service's snapshot holds (or will, after the next sync), by key.
	nodes      map[string]*placementv1.Node
	pods       map[string]*placementv1.Pod // bound and assumed pods, by uid
	namespaces map[string]*placementv1.Namespace
	pdbs       map[string]*placementv1.PodDisruptionBudget // as last converted, by namespace/name
	// Budget keys changed since the last sync.
	pendingPdbs map[string]bool
	// Keys changed since the last sync.
	dirtyNodes, dirtyPods, dirtyNamespaces map[string]bool
	pdbsStale                              bool
	// Pods bound by this controller that the informer does not show bound yet: uid -> node.
	assumed map[string]string
	// Pods that fit nowhere: uid -> when to try again.
	retryAt    map[string]time.Time
	snapshotID string
	wake       chan struct{}
}

// New wires the informers; Run starts them.
func New(cs kubernetes.Interface, client placementv1.PlacementServiceClient, cfg Config) *Controller {
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	c := &Controller{
		cs: cs, client: client, cfg: cfg,
		factory:         informers.NewSharedInformerFactory(cs, 0),
		nodes:           map[string]*placementv1.Node{},
		pods:            map[string]*placementv1.Pod{},
		namespaces:      map[string]*placementv1.Namespace{},
		pdbs:            map[string]*placementv1.PodDisruptionBudget{},
		pendingPdbs:     map[string]bool{},
		dirtyNodes:      map[string]bool{},
		dirtyPods:       map[string]bool{},
		dirtyNamespaces: map[string]bool{},
		assumed:         map[string]string{},
		retryAt:         map[string]time.Time{},
		wake:            make(chan struct{}, 1),
	}
	nodeInf := c.factory.Core().V1().Nodes().Informer()
	podInf := c.factory.Core().V1().Pods().Informer()
	nsInf := c.factory.Core().V1().Namespaces().Informer()
	pdbInf := c.factory.Policy().V1().PodDisruptionBudgets().Informer()
	c.podLister = c.factory.Core().V1().Pods().Lister()
	c.pdbLister = c.factory.Policy().V1().PodDisruptionBudgets().Lister()
	c.nodeSynced, c.podSynced, c.nsSynced, c.pdbSynced = nodeInf.HasSynced, podInf.HasSynced, nsInf.HasSynced, pdbInf.HasSynced

	handle := func(apply func(obj any), remove func(obj any)) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    apply,
			UpdateFunc: func(_, obj any) { apply(obj) },
			DeleteFunc: func(obj any) {
				if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = t.Obj
				}
				remove(obj)
			},
		}
	}
	_, _ = nodeInf.AddEventHandler(handle(
		func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				c.change(func() { c.nodes[n.Name] = convert.Node(n); c.dirtyNodes[n.Name] = true })
			}
		},
		func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				c.change(func() { delete(c.nodes, n.Name); c.dirtyNodes[n.Name] = true })
			}
		}))
	_, _ = nsInf.AddEventHandler(handle(
		func(obj any) {
			if ns, ok := obj.(*corev1.Namespace); ok {
				c.change(func() { c.namespaces[ns.Name] = convert.Namespace(ns); c.dirtyNamespaces[ns.Name] = true })
			}
		},
		func(obj any) {
			if ns, ok := obj.(*corev1.Namespace); ok {
				c.change(func() { delete(c.namespaces, ns.Name); c.dirtyNamespaces[ns.Name] = true })
			}
		}))
	_, _ = podInf.AddEventHandler(handle(
		func(obj any) {
			p, ok := obj.(*corev1.Pod)
			if !ok {
				return
			}
			uid := string(p.UID)
			c.change(func() {
				c.pdbsStale = true
				switch {
				case convert.IsBound(p):
					c.pods[uid] = convert.Pod(p)
					delete(c.assumed, uid)
				case c.assumed[uid] != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed:
					// Our Binding is not in the informer's view yet: keep the assumption.
					return
				default:
					// Pending or finished: it holds no node.
					delete(c.assumed, uid)
					if _, had := c.pods[uid]; !had {
						return
					}
					delete(c.pods, uid)
				}
				c.dirtyPods[uid] = true
			})
		},
		func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				uid := string(p.UID)
				c.change(func() {
					delete(c.pods, uid)
					delete(c.assumed, uid)
					delete(c.retryAt, uid)
					c.dirtyPods[uid] = true
					c.pdbsStale = true
				})
			}
		}))
	_, _ = pdbInf.AddEventHandler(handle(
		func(any) { c.change(func() { c.pdbsStale = true }) },
		func(any) { c.change(func() { c.pdbsStale = true }) }))
	return c
}

// change applies f under the lock and wakes the loop; a cluster change may make room, so pods
// waiting for a retry are tried again.
func (c *Controller) change(f func()) {
	c.mu.Lock()
	f()
	for uid := range c.retryAt {
		delete(c.retryAt, uid)
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Run starts the informers and places pods until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.nodeSynced, c.podSynced, c.nsSynced, c.pdbSynced) {
		return errors.New("informer caches did not sync")
	}
	c.cfg.Logf("controller: caches synced; placing pods with schedulerName %q", c.cfg.SchedulerName)
	tick := time.NewTicker(c.cfg.Interval)
	defer tick.Stop()
	for {
		if err := c.cycle(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Logf("controller: %v", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.wake:
			// Let a burst of events land before the next cycle.
			time.Sleep(50 * time.Millisecond)
		case <-tick.C:
		}
	}
}

// cycle brings the service's snapshot up to date, then places the pending pods.
func (c *Controller) cycle(ctx context.Context) error {
	id, err := c.syncSnapshot(ctx)
	if err != nil {
		return err
	}
	pending := c.pending()
	if len(pending) == 0 {
		return nil
	}
	if c.cfg.DryRun {
		return c.rank(ctx, id, pending)
	}
	return c.schedule(ctx, id, pending)
}

// syncSnapshot sends a delta of what changed since the last sync, or a full snapshot the first
// time and whenever the service no longer holds the base (SNAPSHOT_NOT_FOUND).
func (c *Controller) syncSnapshot(ctx context.Context) (string, error) {
	c.mu.Lock()
	if c.pdbsStale {
		c.refreshPdbs()
	}
	base := c.snapshotID
	var req *placementv1.SyncSnapshotRequest
	if base == "" {
		req = &placementv1.SyncSnapshotRequest{Kind: &placementv1.SyncSnapshotRequest_Full{Full: c.full()}}
	} else if d := c.delta(base); d != nil {
		req = &placementv1.SyncSnapshotRequest{Kind: &placementv1.SyncSnapshotRequest_Delta{Delta: d}}
	}
	c.dirtyNodes, c.dirtyPods, c.dirtyNamespaces = map[string]bool{}, map[string]bool{}, map[string]bool{}
	full := base == ""
	if !full && req == nil {
		c.mu.Unlock()
		return base, nil
	}
	if !full {
		// A delta that fails is replaced by a full snapshot, which carries these changes too.
		c.snapshotID = ""
	}
	c.mu.Unlock()

	resp, err := c.client.SyncSnapshot(ctx, req, grpc.WaitForReady(true))
	if err != nil {
		if status.Code(err) == codes.NotFound {
			c.cfg.Logf("controller: the service lost snapshot %s; sending a full one", base)
			return c.syncSnapshot(ctx)
		}
		c.mu.Lock()
		c.snapshotID = ""
		c.mu.Unlock()
		return "", fmt.Errorf("SyncSnapshot: %w", err)
	}
	c.mu.Lock()
	c.snapshotID = resp.SnapshotId
	c.mu.Unlock()
	if full {
		c.cfg.Logf("controller: full snapshot %s: %d nodes, %d pods", resp.SnapshotId, resp.NodeCount, resp.PodCount)
	}
	return resp.SnapshotId, nil
}

// refreshPdbs converts every budget again (their disrupted pods resolve against the bound pods)
// and marks the ones that changed. Called with the lock held.
func (c *Controller) refreshPdbs() {
	c.pdbsStale = false
	budgets, err := c.pdbLister.List(labels.Everything())
	if err != nil {
		return
	}
	all, err := c.podLister.List(labels.Everything())
	if err != nil {
		return
	}
	var bound []*corev1.Pod
	for _, p := range all {
		if convert.IsBound(p) {
			bound = append(bound, p)
		}
	}
	next := map[string]*placementv1.PodDisruptionBudget{}
	for _, b := range budgets {
		next[b.Namespace+"/"+b.Name] = convert.PodDisruptionBudget(b, bound)
	}
	c.pdbs, c.pendingPdbs = next, diffPdbs(c.pdbs, next)
}

// pendingPdbs are the budget keys changed since the last sync (upserted or removed).
func diffPdbs(old, next map[string]*placementv1.PodDisruptionBudget) map[string]bool {
	out := map[string]bool{}
	for k, b := range next {
		if o, ok := old[k]; !ok || !proto.Equal(o, b) {
			out[k] = true
		}
	}
	for k := range old {
		if _, ok := next[k]; !ok {
			out[k] = true
		}
	}
	return out
}

func sortedKeys[T any](m map[string]T) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// full is the whole mirror as a snapshot. Called with the lock held.
func (c *Controller) full() *placementv1.Snapshot {
	s := &placementv1.Snapshot{}
	for _, k := range sortedKeys(c.nodes) {
		s.Nodes = append(s.Nodes, c.nodes[k])
	}
	for _, k := range sortedKeys(c.pods) {
		s.Pods = append(s.Pods, c.pods[k])
	}
	for _, k := range sortedKeys(c.namespaces) {
		s.Namespaces = append(s.Namespaces, c.namespaces[k])
	}
	for _, k := range sortedKeys(c.pdbs) {
		s.PodDisruptionBudgets = append(s.PodDisruptionBudgets, c.pdbs[k])
	}
	c.pendingPdbs = map[string]bool{}
	return s
}

// delta is what changed since the last sync, or nil for nothing. Called with the lock held.
func (c *Controller) delta(base string) *placementv1.SnapshotDelta {
	d := &placementv1.SnapshotDelta{BaseSnapshotId: base}
	for _, k := range sortedKeys(c.dirtyNodes) {
		if n, ok := c.nodes[k]; ok {
			d.UpsertNodes = append(d.UpsertNodes, n)
		} else {
			d.RemoveNodes = append(d.RemoveNodes, k)
		}
	}
	for _, k := range sortedKeys(c.dirtyPods) {
		if p, ok := c.pods[k]; ok {
			d.UpsertPods = append(d.UpsertPods, p)
		} else {
			d.RemovePodUids = append(d.RemovePodUids, k)
		}
	}
	for _, k := range sortedKeys(c.dirtyNamespaces) {
		if ns, ok := c.namespaces[k]; ok {
			d.UpsertNamespaces = append(d.UpsertNamespaces, ns)
		} else {
			d.RemoveNamespaces = append(d.RemoveNamespaces, k)
		}
	}
	for _, k := range sortedKeys(c.pendingPdbs) {
		if b, ok := c.pdbs[k]; ok {
			d.UpsertPodDisruptionBudgets = append(d.UpsertPodDisruptionBudgets, b)
		} else {
			d.RemovePodDisruptionBudgets = append(d.RemovePodDisruptionBudgets, k)
		}
	}
	c.pendingPdbs = map[string]bool{}
	if len(d.UpsertNodes)+len(d.RemoveNodes)+len(d.UpsertPods)+len(d.RemovePodUids)+len(d.UpsertNamespaces)+
		len(d.RemoveNamespaces)+len(d.UpsertPodDisruptionBudgets)+len(d.RemovePodDisruptionBudgets) == 0 {
		return nil
	}
	return d
}

// pending lists the pods to place now: ours, unbound, not being deleted, not assumed, not
// waiting for a retry; highest priority first, then oldest (kube-scheduler's queue order).
func (c *Controller) pending() []*corev1.Pod {
	all, err := c.podLister.List(labels.Everything())
	if err != nil {
		return nil
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*corev1.Pod
	for _, p := range all {
		uid := string(p.UID)
		if p.Spec.SchedulerName != c.cfg.SchedulerName || p.Spec.NodeName != "" || p.DeletionTimestamp != nil ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed ||
			(c.cfg.Namespace != "" && p.Namespace != c.cfg.Namespace) || c.assumed[uid] != "" {
			continue
		}
		if t, ok := c.retryAt[uid]; ok && now.Before(t) {
			continue
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		pi, pj := priority(out[i]), priority(out[j])
		if pi != pj {
			return pi > pj
		}
		if !out[i].CreationTimestamp.Equal(&out[j].CreationTimestamp) {
			return out[i].CreationTimestamp.Before(&out[j].CreationTimestamp)
		}
		return out[i].UID < out[j].UID
	})
	return out
}

func priority(p *corev1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

func snapshotRef(id string) *placementv1.SnapshotRef {
	return &placementv1.SnapshotRef{Source: &placementv1.SnapshotRef_SnapshotId{SnapshotId: id}}
}

// schedule places the batch and binds each placed pod.
func (c *Controller) schedule(ctx context.Context, id string, pending []*corev1.Pod) error {
	req := &placementv1.ScheduleRequest{Snapshot: snapshotRef(id), Policy: c.cfg.Policy}
	byUID := map[string]*corev1.Pod{}
	for _, p := range pending {
		req.Pods = append(req.Pods, convert.Pod(p))
		byUID[string(p.UID)] = p
	}
	resp, err := c.client.Schedule(ctx, req)
	if status.Code(err) == codes.NotFound {
		c.mu.Lock()
		c.snapshotID = ""
		c.mu.Unlock()
		return fmt.Errorf("schedule: snapshot %s is gone; resyncing", id)
	}
	if err != nil {
		return fmt.Errorf("Schedule: %w", err)
	}
	for _, placement := range resp.Placements {
		p := byUID[placement.PodUid]
		if p == nil {
			continue
		}
		switch o := placement.Outcome.(type) {
		case *placementv1.Placement_NodeName:
			c.bind(ctx, p, o.NodeName, placement.Score)
		case *placementv1.Placement_Unschedulable:
			u := o.Unschedulable
			c.cfg.Logf("controller: %s/%s fits nowhere: %s", p.Namespace, p.Name, u.Message)
			if u.NominatedNodeName != "" {
				c.cfg.Logf("controller: %s/%s would fit on %s after preempting %v (not done: this example does not preempt)",
					p.Namespace, p.Name, u.NominatedNodeName, u.VictimUids)
			}
			c.mu.Lock()
			c.retryAt[placement.PodUid] = time.Now().Add(c.cfg.Interval)
			c.mu.Unlock()
		}
	}
	return nil
}

// bind writes the Binding and assumes the pod on its node until the informer shows it bound.
func (c *Controller) bind(ctx context.Context, p *corev1.Pod, node string, score int64) {
	uid := string(p.UID)
	assumed := convert.Pod(p)
	assumed.NodeName = node
	c.mu.Lock()
	c.assumed[uid] = node
	c.pods[uid] = assumed
	c.dirtyPods[uid] = true
	c.mu.Unlock()
	err := c.cs.CoreV1().Pods(p.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{})
	if err != nil {
		c.cfg.Logf("controller: binding %s/%s to %s failed: %v", p.Namespace, p.Name, node, err)
		c.mu.Lock()
		if c.assumed[uid] == node {
			delete(c.assumed, uid)
			delete(c.pods, uid)
			c.dirtyPods[uid] = true
		}
		c.mu.Unlock()
		return
	}
	c.cfg.Logf("controller: bound %s/%s to %s (score %d)", p.Namespace, p.Name, node, score)
}

// rank prints the best nodes for each pending pod (dry run: nothing is bound).
func (c *Controller) rank(ctx context.Context, id string, pending []*corev1.Pod) error {
	limit := uint32(3)
	for _, p := range pending {
		resp, err := c.client.Rank(ctx, &placementv1.RankRequest{
			Snapshot: snapshotRef(id), Pod: convert.Pod(p), Policy: c.cfg.Policy, TopK: 3, InfeasibleLimit: &limit,
		})
		if err != nil {
			return fmt.Errorf("Rank %s/%s: %w", p.Namespace, p.Name, err)
		}
		if len(resp.Feasible) == 0 {
			c.cfg.Logf("controller: rank %s/%s: %s", p.Namespace, p.Name, resp.Message)
		}
		for i, n := range resp.Feasible {
			c.cfg.Logf("controller: rank %s/%s #%d %s total %d (%d/%d nodes feasible)",
				p.Namespace, p.Name, i+1, n.Node, n.Total, resp.FeasibleCount, resp.NodeCount)
		}
		c.mu.Lock()
		c.retryAt[string(p.UID)] = time.Now().Add(c.cfg.Interval)
		c.mu.Unlock()
	}
	return nil
}
