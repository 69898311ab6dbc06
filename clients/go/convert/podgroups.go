package convert

// PodGroups (scheduling.k8s.io/v1beta1, Kubernetes 1.37's Workload API behind the
// GenericWorkload gate), the groups pods name in spec.schedulingGroup.podGroupName, as the binder
// converts them (binder-agent/src/projection/podgroups.rs).

import (
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	placementv1 "github.com/placement/placement/clients/go/placement/v1"
)

// PodGroupInitiallyScheduled is the status condition kube-scheduler sets once a group's
// scheduling requirement was met.
const PodGroupInitiallyScheduled = "PodGroupInitiallyScheduled"

// disruptionMode names spec.disruptionMode: "Single" when single is set, "All" when all is, else
// empty (unset).
func disruptionMode(m *schedulingv1beta1.DisruptionMode) string {
	switch {
	case m == nil:
		return ""
	case m.Single != nil:
		return "Single"
	case m.All != nil:
		return "All"
	}
	return ""
}

// PodGroup converts a PodGroup: namespace, name, uid, metadata.generation,
// spec.schedulingPolicy.gang.minCount (no gang for the basic policy), the keys of
// spec.schedulingConstraints.topology, priorityClassName, priority (unset when the API server
// resolved none), preemptionPolicy, disruptionMode ("Single", "All" or empty), workloadRef,
// parentCompositePodGroupName, and whether status.conditions has PodGroupInitiallyScheduled
// with status True.
func PodGroup(g *schedulingv1beta1.PodGroup) *placementv1.PodGroup {
	spec := &g.Spec
	out := &placementv1.PodGroup{
		Namespace:                   g.Namespace,
		Name:                        g.Name,
		Uid:                         string(g.UID),
		Generation:                  g.Generation,
		PriorityClassName:           spec.PriorityClassName,
		DisruptionMode:              disruptionMode(spec.DisruptionMode),
		ParentCompositePodGroupName: strOr(spec.ParentCompositePodGroupName),
	}
	if gang := spec.SchedulingPolicy.Gang; gang != nil {
		out.Gang = &placementv1.GangSchedulingPolicy{MinCount: gang.MinCount}
	}
	if c := spec.SchedulingConstraints; c != nil {
		for _, t := range c.Topology {
			out.TopologyKeys = append(out.TopologyKeys, t.Key)
		}
	}
	if spec.Priority != nil {
		p := *spec.Priority
		out.Priority = &p
	}
	if spec.PreemptionPolicy != nil {
		out.PreemptionPolicy = string(*spec.PreemptionPolicy)
	}
	if w := spec.WorkloadRef; w != nil {
		out.WorkloadRef = &placementv1.WorkloadReference{WorkloadName: w.WorkloadName, TemplateName: w.TemplateName}
	}
	for _, c := range g.Status.Conditions {
		if c.Type == PodGroupInitiallyScheduled && c.Status == metav1.ConditionTrue {
			out.InitiallyScheduled = true
		}
	}
	return out
}

// CompositePodGroup converts a CompositePodGroup (scheduling.k8s.io/v1alpha3, Kubernetes 1.37's
// CompositePodGroup gate) as the binder does: namespace, name, uid,
// spec.parentCompositePodGroupName, spec.schedulingPolicy.gang.minGroupCount (unset for the
// basic policy), the keys of spec.schedulingConstraints.topology, priority (unset when the API
// server resolved none) and preemptionPolicy.
func CompositePodGroup(g *schedulingv1alpha3.CompositePodGroup) *placementv1.CompositePodGroup {
	spec := &g.Spec
	out := &placementv1.CompositePodGroup{
		Namespace:                   g.Namespace,
		Name:                        g.Name,
		Uid:                         string(g.UID),
		ParentCompositePodGroupName: strOr(spec.ParentCompositePodGroupName),
	}
	if gang := spec.SchedulingPolicy.Gang; gang != nil {
		n := gang.MinGroupCount
		out.MinGroupCount = &n
	}
	if c := spec.SchedulingConstraints; c != nil {
		for _, t := range c.Topology {
			out.TopologyKeys = append(out.TopologyKeys, t.Key)
		}
	}
	if spec.Priority != nil {
		p := *spec.Priority
		out.Priority = &p
	}
	if spec.PreemptionPolicy != nil {
		out.PreemptionPolicy = string(*spec.PreemptionPolicy)
	}
	return out
}
