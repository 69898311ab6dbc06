package convert

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Unit tests of the PodGroup conversion's choices the corpus does not reach (conformance_test.go
// holds the conversions to the binder's bytes).

func basicGroup() *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "ml"},
		Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}},
		},
	}
}

func TestABasicPodGroupLeavesTheRestUnset(t *testing.T) {
	got := PodGroup(basicGroup())
	if got.Gang != nil || got.Priority != nil || got.WorkloadRef != nil || got.DisruptionMode != "" ||
		got.InitiallyScheduled || len(got.TopologyKeys) != 0 {
		t.Fatalf("basic group: %v", got)
	}
	if got.Namespace != "ml" || got.Name != "g" {
		t.Fatalf("identity: %v", got)
	}
}

func TestPodGroupDisruptionModeNamesTheMemberThatIsSet(t *testing.T) {
	for _, c := range []struct {
		mode *schedulingv1beta1.DisruptionMode
		want string
	}{
		{nil, ""},
		{&schedulingv1beta1.DisruptionMode{}, ""},
		{&schedulingv1beta1.DisruptionMode{Single: &schedulingv1beta1.SingleDisruptionMode{}}, "Single"},
		{&schedulingv1beta1.DisruptionMode{All: &schedulingv1beta1.AllDisruptionMode{}}, "All"},
	} {
		g := basicGroup()
		g.Spec.DisruptionMode = c.mode
		if got := PodGroup(g).DisruptionMode; got != c.want {
			t.Errorf("%+v: %q, want %q", c.mode, got, c.want)
		}
	}
}

func TestOnlyATruePodGroupInitiallyScheduledConditionCounts(t *testing.T) {
	condition := func(typ string, status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: "R"}
	}
	for _, c := range []struct {
		conditions []metav1.Condition
		want       bool
	}{
		{nil, false},
		{[]metav1.Condition{condition(PodGroupInitiallyScheduled, metav1.ConditionFalse)}, false},
		{[]metav1.Condition{condition(PodGroupInitiallyScheduled, metav1.ConditionUnknown)}, false},
		{[]metav1.Condition{condition("DisruptionTarget", metav1.ConditionTrue)}, false},
		{[]metav1.Condition{condition("DisruptionTarget", metav1.ConditionFalse), condition(PodGroupInitiallyScheduled, metav1.ConditionTrue)}, true},
	} {
		g := basicGroup()
		g.Status.Conditions = c.conditions
		if got := PodGroup(g).InitiallyScheduled; got != c.want {
			t.Errorf("%v: %v, want %v", c.conditions, got, c.want)
		}
	}
}

func TestPodGroupPriorityIsCopied(t *testing.T) {
	g := basicGroup()
	g.Spec.Priority = ptr[int32](7)
	out := PodGroup(g)
	*g.Spec.Priority = 8
	if out.Priority == nil || *out.Priority != 7 {
		t.Fatalf("priority: %v", out.Priority)
	}
}

func TestPodSchedulingGroup(t *testing.T) {
	p := plainPod()
	if got := Pod(p).SchedulingGroup; got != "" {
		t.Fatalf("no group: %q", got)
	}
	p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{}
	if got := Pod(p).SchedulingGroup; got != "" {
		t.Fatalf("no podGroupName: %q", got)
	}
	p.Spec.SchedulingGroup.PodGroupName = ptr("trainer")
	if got := Pod(p).SchedulingGroup; got != "trainer" {
		t.Fatalf("group: %q", got)
	}
}

func TestACompositePodGroupCarriesItsParentCountAndKey(t *testing.T) {
	parent := "job"
	prio := int32(5)
	got := CompositePodGroup(&schedulingv1alpha3.CompositePodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "block", Namespace: "ml", UID: "u-2"},
		Spec: schedulingv1alpha3.CompositePodGroupSpec{
			ParentCompositePodGroupName: &parent,
			SchedulingPolicy: schedulingv1alpha3.CompositePodGroupSchedulingPolicy{
				Gang: &schedulingv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: 2},
			},
			SchedulingConstraints: &schedulingv1alpha3.CompositePodGroupSchedulingConstraints{
				Topology: []schedulingv1alpha3.TopologyConstraint{{Key: "example.com/block"}},
			},
			Priority: &prio,
		},
	})
	if got.Namespace != "ml" || got.Name != "block" || got.Uid != "u-2" || got.ParentCompositePodGroupName != "job" ||
		got.GetMinGroupCount() != 2 || len(got.TopologyKeys) != 1 || got.TopologyKeys[0] != "example.com/block" ||
		got.GetPriority() != 5 {
		t.Fatalf("composite: %v", got)
	}
	basic := CompositePodGroup(&schedulingv1alpha3.CompositePodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: "ml"},
		Spec: schedulingv1alpha3.CompositePodGroupSpec{
			SchedulingPolicy: schedulingv1alpha3.CompositePodGroupSchedulingPolicy{Basic: &schedulingv1alpha3.CompositeBasicSchedulingPolicy{}},
		},
	})
	if basic.MinGroupCount != nil || basic.ParentCompositePodGroupName != "" || basic.Priority != nil {
		t.Fatalf("basic composite: %v", basic)
	}
}
