package convert

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	storagev1 "k8s.io/api/storage/v1"

	placementv1 "github.com/placement/placement/clients/go/placement/v1"
)

// The conversion contract (tests/conformance/README.md): every object of the corpus converts to
// the bytes of tests/conformance/expected, which the binder's conversion wrote
// (binder-agent/tests/conformance.rs keeps them current).

var conformanceDir = filepath.Join("..", "..", "..", "tests", "conformance")

type corpusObject struct {
	name string
	kind string
	obj  any
}

type corpus struct {
	objects    []corpusObject
	pods       []*corev1.Pod
	nodes      []*corev1.Node
	namespaces []*corev1.Namespace
	pdbs       []*policyv1.PodDisruptionBudget
	storage    Storage
}

func loadCorpus(t *testing.T) *corpus {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(conformanceDir, "corpus", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus in %s: %v", conformanceDir, err)
	}
	sort.Strings(files)
	c := &corpus{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var head struct{ Kind string }
		if err := json.Unmarshal(data, &head); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		var obj any
		switch head.Kind {
		case "Pod":
			p := &corev1.Pod{}
			obj = p
			c.pods = append(c.pods, p)
		case "Node":
			n := &corev1.Node{}
			obj = n
			c.nodes = append(c.nodes, n)
		case "Namespace":
			ns := &corev1.Namespace{}
			obj = ns
			c.namespaces = append(c.namespaces, ns)
		case "PodDisruptionBudget":
			b := &policyv1.PodDisruptionBudget{}
			obj = b
			c.pdbs = append(c.pdbs, b)
		case "PersistentVolumeClaim":
			o := &corev1.PersistentVolumeClaim{}
			obj = o
			c.storage.Claims = append(c.storage.Claims, o)
		case "PersistentVolume":
			o := &corev1.PersistentVolume{}
			obj = o
			c.storage.Volumes = append(c.storage.Volumes, o)
		case "StorageClass":
			o := &storagev1.StorageClass{}
			obj = o
			c.storage.Classes = append(c.storage.Classes, o)
		case "CSINode":
			o := &storagev1.CSINode{}
			obj = o
			c.storage.CSINodes = append(c.storage.CSINodes, o)
		case "CSIDriver":
			o := &storagev1.CSIDriver{}
			obj = o
			c.storage.CSIDrivers = append(c.storage.CSIDrivers, o)
		case "CSIStorageCapacity":
			o := &storagev1.CSIStorageCapacity{}
			obj = o
			c.storage.CSIStorageCapacities = append(c.storage.CSIStorageCapacities, o)
		case "DeviceClass":
			o := &resourcev1.DeviceClass{}
			obj = o
			c.storage.DeviceClasses = append(c.storage.DeviceClasses, o)
		case "ResourceClaim":
			o := &resourcev1.ResourceClaim{}
			obj = o
			c.storage.ResourceClaims = append(c.storage.ResourceClaims, o)
		case "ResourceSlice":
			o := &resourcev1.ResourceSlice{}
			obj = o
			c.storage.ResourceSlices = append(c.storage.ResourceSlices, o)
		case "DeviceTaintRule":
			o := &resourcev1.DeviceTaintRule{}
			obj = o
			c.storage.DeviceTaintRules = append(c.storage.DeviceTaintRules, o)
		case "PodGroup":
			o := &schedulingv1beta1.PodGroup{}
			obj = o
			c.storage.PodGroups = append(c.storage.PodGroups, o)
		case "CompositePodGroup":
			o := &schedulingv1alpha3.CompositePodGroup{}
			obj = o
			c.storage.CompositePodGroups = append(c.storage.CompositePodGroups, o)
		default:
			t.Fatalf("%s: kind %q is not part of the contract", f, head.Kind)
		}
		if err := json.Unmarshal(data, obj); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		c.objects = append(c.objects, corpusObject{name: name, kind: head.Kind, obj: obj})
	}
	return c
}

func (c *corpus) boundPods() []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range c.pods {
		if IsBound(p) {
			out = append(out, p)
		}
	}
	return out
}

func checkExpected(t *testing.T, name string, msg proto.Message) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join(conformanceDir, "expected", name+".binpb"))
	if err != nil {
		t.Fatalf("%s: %v (run PLACEMENT_UPDATE_GOLDEN=1 cargo test -p binder-agent --test conformance)", name, err)
	}
	have, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		t.Fatalf("%s: marshal: %v", name, err)
	}
	if !bytes.Equal(have, want) {
		expected := msg.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(want, expected); err != nil {
			t.Fatalf("%s: expected file does not decode: %v", name, err)
		}
		t.Errorf("%s: the Go conversion differs from the binder's\n--- binder\n%s\n--- go\n%s",
			name, prototext.Format(expected), prototext.Format(msg))
	}
}

func TestEachObjectConvertsToTheBindersBytes(t *testing.T) {
	c := loadCorpus(t)
	for _, o := range c.objects {
		t.Run(o.name, func(t *testing.T) {
			var msg proto.Message
			switch obj := o.obj.(type) {
			case *corev1.Pod:
				msg = Pod(obj)
			case *corev1.Node:
				msg = Node(obj)
			case *corev1.Namespace:
				msg = Namespace(obj)
			case *policyv1.PodDisruptionBudget:
				// Budgets resolve disruptedPods against the snapshot's pods, as the binder does.
				msg = PodDisruptionBudget(obj, c.boundPods())
			case *corev1.PersistentVolumeClaim:
				msg = PersistentVolumeClaim(obj)
			case *corev1.PersistentVolume:
				msg = PersistentVolume(obj)
			case *storagev1.StorageClass:
				msg = StorageClass(obj)
			case *storagev1.CSINode:
				msg = CSINode(obj)
			case *storagev1.CSIDriver:
				msg = CSIDriver(obj)
			case *storagev1.CSIStorageCapacity:
				msg = CSIStorageCapacity(obj)
			case *resourcev1.DeviceClass:
				msg = DeviceClass(obj)
			case *resourcev1.ResourceClaim:
				msg = ResourceClaim(obj)
			case *resourcev1.ResourceSlice:
				msg = ResourceSlice(obj)
			case *resourcev1.DeviceTaintRule:
				msg = DeviceTaintRule(obj)
			case *schedulingv1beta1.PodGroup:
				msg = PodGroup(obj)
			case *schedulingv1alpha3.CompositePodGroup:
				msg = CompositePodGroup(obj)
			}
			checkExpected(t, o.name, msg)
		})
	}
}

func TestTheSnapshotIsTheBindersBytes(t *testing.T) {
	c := loadCorpus(t)
	var snap *placementv1.Snapshot = SnapshotWithStorage(c.nodes, c.pods, c.namespaces, c.pdbs, c.storage)
	checkExpected(t, "snapshot", snap)
}

func TestNoExpectedFileLacksItsCorpusObject(t *testing.T) {
	c := loadCorpus(t)
	names := map[string]bool{"snapshot": true}
	for _, o := range c.objects {
		names[o.name] = true
	}
	files, _ := filepath.Glob(filepath.Join(conformanceDir, "expected", "*.binpb"))
	for _, f := range files {
		if n := strings.TrimSuffix(filepath.Base(f), ".binpb"); !names[n] {
			t.Errorf("expected file %s has no corpus object", f)
		}
	}
}
