package convert

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
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
