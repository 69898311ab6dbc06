package convert

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Unit tests of the DRA conversions' choices the corpus does not reach (conformance_test.go
// holds the conversions to the binder's bytes).

func ptr[T any](v T) *T { return &v }

func TestDeviceAttributesWithoutAValueAreDropped(t *testing.T) {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver: "d",
			Devices: []resourcev1.Device{{
				Name: "dev",
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
					"zero":  {IntValue: ptr[int64](0)},
					"off":   {BoolValue: ptr(false)},
					"list":  {IntValues: []int64{1, 2}},
					"empty": {},
				},
			}},
		},
	}
	attrs := ResourceSlice(s).Devices[0].Attributes
	if len(attrs) != 2 || attrs["zero"].GetInt() != 0 || attrs["zero"].GetValue() == nil || attrs["off"].GetValue() == nil {
		t.Fatalf("attributes: %v", attrs)
	}
}

func TestDeviceClassKeepsOnlyCELSelectors(t *testing.T) {
	c := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{
			{}, {CEL: &resourcev1.CELDeviceSelector{Expression: "true"}},
		}},
	}
	if got := DeviceClass(c).Selectors; len(got) != 1 || got[0] != "true" {
		t.Fatalf("selectors: %v", got)
	}
}

func TestPodResourceClaimsGeneratedNames(t *testing.T) {
	p := plainPod()
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{
		{Name: "made", ResourceClaimTemplateName: ptr("t")},
		{Name: "unneeded", ResourceClaimTemplateName: ptr("t")},
		{Name: "waiting", ResourceClaimTemplateName: ptr("t")},
		{Name: "named", ResourceClaimName: ptr("c")},
	}
	p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{
		{Name: "made", ResourceClaimName: ptr("p-made-x")},
		{Name: "unneeded"},
		{Name: "named", ResourceClaimName: ptr("ignored")},
	}
	got := Pod(p).ResourceClaims
	if len(got) != 4 {
		t.Fatalf("claims: %v", got)
	}
	if got[0].GeneratedClaimName == nil || *got[0].GeneratedClaimName != "p-made-x" {
		t.Errorf("made: %v", got[0])
	}
	if got[1].GeneratedClaimName == nil || *got[1].GeneratedClaimName != "" {
		t.Errorf("unneeded: %v", got[1])
	}
	if got[2].GeneratedClaimName != nil {
		t.Errorf("waiting: %v", got[2])
	}
	if got[3].GeneratedClaimName != nil || got[3].ResourceClaimName != "c" {
		t.Errorf("named: %v", got[3])
	}
}
