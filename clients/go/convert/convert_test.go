package convert

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Unit tests of single fields; conformance_test.go holds the conversions to the binder's bytes.

func list(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func plainPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "nginx"}}},
	}
}

func TestPodLevelRequestsAndResizeStatus(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
		Spec: corev1.PodSpec{
			NodeName: "n1",
			Containers: []corev1.Container{
				{Name: "main", Resources: corev1.ResourceRequirements{Requests: list("cpu", "1", "memory", "1Gi")}},
				{Name: "nostatus", Resources: corev1.ResourceRequirements{Requests: list("cpu", "100m")}},
			},
			InitContainers: []corev1.Container{
				{Name: "sidecar", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: list("cpu", "200m")}},
				// Its status is in containerStatuses: kube's findContainerStatus looks there first.
				{Name: "misplaced"},
			},
			Resources: &corev1.ResourceRequirements{
				Requests: list("cpu", "2", "memory", "2Gi", "hugepages-2Mi", "64Mi"),
				Limits:   list("cpu", "4"),
			},
		},
		Status: corev1.PodStatus{
			AllocatedResources: list("cpu", "1500m", "memory", "2Gi"),
			Resources:          &corev1.ResourceRequirements{Requests: list("cpu", "1", "memory", "2Gi"), Limits: list("cpu", "3")},
			ContainerStatuses: []corev1.ContainerStatus{
				{
					Name:               "main",
					AllocatedResources: list("cpu", "1500m", "memory", "1Gi"),
					Resources:          &corev1.ResourceRequirements{Requests: list("cpu", "1200m", "memory", "1Gi")},
				},
				{Name: "misplaced", AllocatedResources: list("cpu", "50m")},
			},
			InitContainerStatuses: []corev1.ContainerStatus{
				{Name: "sidecar", AllocatedResources: list("cpu", "300m"), Resources: &corev1.ResourceRequirements{Requests: list("cpu", "250m")}},
				{Name: "misplaced", AllocatedResources: list("cpu", "999")},
			},
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
				{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible},
			},
		},
	}
	m := Pod(p)
	check := func(what string, got, want map[string]string) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	check("pod_requests", m.PodRequests, map[string]string{"cpu": "2", "memory": "2Gi", "hugepages-2Mi": "64Mi"})
	check("allocated_requests", m.AllocatedRequests, map[string]string{"cpu": "1500m", "memory": "2Gi"})
	check("actuated_requests", m.ActuatedRequests, map[string]string{"cpu": "1", "memory": "2Gi"})
	if !m.ResizeInfeasible {
		t.Error("resize_infeasible = false, want true")
	}
	main, nostatus := m.Containers[0], m.Containers[1]
	check("main allocated", main.AllocatedRequests, map[string]string{"cpu": "1500m", "memory": "1Gi"})
	check("main actuated", main.ActuatedRequests, map[string]string{"cpu": "1200m", "memory": "1Gi"})
	check("main requests", main.Requests, map[string]string{"cpu": "1", "memory": "1Gi"})
	if nostatus.AllocatedRequests != nil || nostatus.ActuatedRequests != nil {
		t.Errorf("a container without status has allocated %v, actuated %v", nostatus.AllocatedRequests, nostatus.ActuatedRequests)
	}
	sidecar, misplaced := m.InitContainers[0], m.InitContainers[1]
	check("sidecar allocated", sidecar.AllocatedRequests, map[string]string{"cpu": "300m"})
	check("sidecar actuated", sidecar.ActuatedRequests, map[string]string{"cpu": "250m"})
	check("misplaced allocated", misplaced.AllocatedRequests, map[string]string{"cpu": "50m"})
	if misplaced.ActuatedRequests != nil {
		t.Errorf("misplaced actuated = %v, want none", misplaced.ActuatedRequests)
	}

	bare := Pod(plainPod())
	if bare.PodRequests != nil || bare.AllocatedRequests != nil || bare.ActuatedRequests != nil || bare.ResizeInfeasible {
		t.Errorf("a plain pod has pod-level requests or resize status: %v", bare)
	}
	if c := bare.Containers[0]; c.AllocatedRequests != nil || c.ActuatedRequests != nil {
		t.Errorf("a plain pod's container has status requests: %v", c)
	}
}

func TestResizeInfeasibleReadsTheFirstPodResizePendingCondition(t *testing.T) {
	pending := func(reason string) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: reason}
	}
	for _, tc := range []struct {
		name       string
		conditions []corev1.PodCondition
		want       bool
	}{
		{"none", nil, false},
		{"infeasible", []corev1.PodCondition{pending(corev1.PodReasonInfeasible)}, true},
		{"deferred", []corev1.PodCondition{pending(corev1.PodReasonDeferred)}, false},
		{"deferred first", []corev1.PodCondition{pending(corev1.PodReasonDeferred), pending(corev1.PodReasonInfeasible)}, false},
		{"after another type", []corev1.PodCondition{{Type: corev1.PodScheduled, Reason: corev1.PodReasonInfeasible}, pending(corev1.PodReasonInfeasible)}, true},
		{"other type only", []corev1.PodCondition{{Type: corev1.PodResizeInProgress, Reason: corev1.PodReasonInfeasible}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := plainPod()
			p.Status.Conditions = tc.conditions
			if got := Pod(p).ResizeInfeasible; got != tc.want {
				t.Errorf("resize_infeasible = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRequiredFeatures(t *testing.T) {
	yes, no := true, false
	restartAll := []corev1.ContainerRestartRule{{
		Action:    corev1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
	}}
	restartOne := []corev1.ContainerRestartRule{{
		Action:    corev1.ContainerRestartRuleActionRestart,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
	}}
	bindMount := []corev1.VolumeMount{{Name: "data", MountPath: "/data", BindMountOptions: []string{"noexec"}}}
	for _, tc := range []struct {
		name string
		edit func(s *corev1.PodSpec)
		want []string
	}{
		{"plain", func(s *corev1.PodSpec) {}, nil},
		{"restart all in a container", func(s *corev1.PodSpec) { s.Containers[0].RestartPolicyRules = restartAll }, []string{"RestartAllContainersOnContainerExits"}},
		{"restart all in an init container", func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "init", RestartPolicyRules: restartAll}}
		}, []string{"RestartAllContainersOnContainerExits"}},
		{"restart one", func(s *corev1.PodSpec) { s.Containers[0].RestartPolicyRules = restartOne }, nil},
		{"host network without host users", func(s *corev1.PodSpec) { s.HostNetwork = true; s.HostUsers = &no }, []string{"UserNamespacesHostNetworkSupport"}},
		{"host network, host users unset", func(s *corev1.PodSpec) { s.HostNetwork = true }, nil},
		{"host network with host users", func(s *corev1.PodSpec) { s.HostNetwork = true; s.HostUsers = &yes }, nil},
		{"host users false alone", func(s *corev1.PodSpec) { s.HostUsers = &no }, nil},
		{"bind mount options in a container", func(s *corev1.PodSpec) { s.Containers[0].VolumeMounts = bindMount }, []string{"VolumeBindMountOptions"}},
		{"bind mount options in an init container", func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "init", VolumeMounts: bindMount}}
		}, []string{"VolumeBindMountOptions"}},
		{"bind mount options in an ephemeral container", func(s *corev1.PodSpec) {
			s.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", VolumeMounts: bindMount}}}
		}, []string{"VolumeBindMountOptions"}},
		{"empty bind mount options", func(s *corev1.PodSpec) {
			s.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data", BindMountOptions: []string{}}}
		}, nil},
		{"all three, sorted", func(s *corev1.PodSpec) {
			s.Containers[0].VolumeMounts = bindMount
			s.HostNetwork, s.HostUsers = true, &no
			s.InitContainers = []corev1.Container{{Name: "init", RestartPolicyRules: restartAll}}
		}, []string{"RestartAllContainersOnContainerExits", "UserNamespacesHostNetworkSupport", "VolumeBindMountOptions"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := plainPod()
			tc.edit(&p.Spec)
			if got := Pod(p).RequiredFeatures; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("required_features = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestImageVolumesAreKeptInSpecOrder(t *testing.T) {
	p := plainPod()
	p.Spec.Volumes = []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "model", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "ghcr.io/example/model:v1", PullPolicy: corev1.PullIfNotPresent}}},
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0"}}},
		{Name: "noref", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{}}},
	}
	type vol struct{ name, claim, image string }
	var got []vol
	for _, v := range Pod(p).Volumes {
		got = append(got, vol{v.Name, v.ClaimName, v.ImageReference})
	}
	// An image volume without a reference (the API server refuses one) is left out, as the binder does.
	want := []vol{{"model", "", "ghcr.io/example/model:v1"}, {"data", "data-0", ""}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("volumes = %v, want %v", got, want)
	}
}

func TestNodeDeclaredFeatures(t *testing.T) {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: corev1.NodeStatus{
			// As given, in order.
			DeclaredFeatures: []string{"VolumeBindMountOptions", "RestartAllContainersOnContainerExits", "SomeFutureFeature"},
		},
	}
	want := []string{"VolumeBindMountOptions", "RestartAllContainersOnContainerExits", "SomeFutureFeature"}
	if got := Node(n).DeclaredFeatures; !reflect.DeepEqual(got, want) {
		t.Errorf("declared_features = %q, want %q", got, want)
	}
	if got := Node(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}).DeclaredFeatures; got != nil {
		t.Errorf("a node without declared features has %q", got)
	}
}
