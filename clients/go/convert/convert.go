// Package convert turns Kubernetes core objects (k8s.io/api: Pods, Nodes, Namespaces,
// policy/v1 PodDisruptionBudgets, PersistentVolumeClaims, PersistentVolumes, storage/v1
// StorageClasses, CSINodes, CSIDrivers and CSIStorageCapacities) into placement.v1 messages.
// Dynamic Resource Allocation objects (resource.k8s.io/v1 DeviceClasses, ResourceClaims,
// ResourceSlices and DeviceTaintRules, and a pod's spec.resourceClaims) are converted too (devices.go), and so are
// scheduling.k8s.io/v1beta1 PodGroups (podgroups.go) and a pod's spec.schedulingGroup.
//
// These are the binder's conversions (binder-agent/src/model.rs) in Go: for every object of the
// corpus in tests/conformance/corpus they give the same bytes as the binder and the Python client
// (proto.MarshalOptions{Deterministic: true}), which conformance_test.go checks. Convert objects
// as the API server stores them (from an informer or a Get): admission fills spec.priority from
// the PriorityClass, spec.overhead from the RuntimeClass and the default not-ready/unreachable
// tolerations, which a pod built by hand lacks.
//
// Resource quantities are written with resource.Quantity's String, the canonical form the API
// server stores them in ("500m", "1Gi"); the service parses them.
package convert

import (
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	ndf "k8s.io/component-helpers/nodedeclaredfeatures"
	resourcehelper "k8s.io/component-helpers/resource"

	placementv1 "github.com/placement/placement/clients/go/placement/v1"
)

const (
	// GangLabel names the gang a pod belongs to (placed all together or not at all).
	GangLabel = "placement.dev/gang"
	// GangMinMembersAnnotation gives the gang's minimum size.
	GangMinMembersAnnotation = "placement.dev/gang-min-members"
	// LastAppliedAnnotation is kubectl's copy of the whole object; never sent to the service.
	LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"
	// StorageClassAnnotation is read before storageClassName (GetPersistentVolume(Claim)Class).
	StorageClassAnnotation = "volume.beta.kubernetes.io/storage-class"
	// BindCompletedAnnotation is the PV controller's mark of a claim whose binding it completed.
	BindCompletedAnnotation = "pv.kubernetes.io/bind-completed"
	// SelectedNodeAnnotation names the node chosen to provision a WaitForFirstConsumer claim's volume on.
	SelectedNodeAnnotation = "volume.kubernetes.io/selected-node"
)

// perPodLabels are set by controllers per pod, not shared by the pods of one workload.
var perPodLabels = map[string]bool{
	"statefulset.kubernetes.io/pod-name": true,
	"apps.kubernetes.io/pod-index":       true,
	"controller-revision-hash":           true,
}

// featureTargetVersion is the Kubernetes version requiredFeatures infers a pod's required node
// features for (kube-scheduler passes its own version to nodedeclaredfeatures; the binder and
// the Python client implement the inference of this version).
var featureTargetVersion = version.MustParse("1.37.0")

// defaultSpreadKinds are the controllers whose selectors kube-scheduler's default spreading uses
// (Services aside).
var defaultSpreadKinds = map[string]bool{"ReplicaSet": true, "StatefulSet": true, "ReplicationController": true}

func quantities(list corev1.ResourceList) map[string]string {
	if len(list) == 0 {
		return nil
	}
	out := make(map[string]string, len(list))
	for name, q := range list {
		out[string(name)] = q.String()
	}
	return out
}

func copyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Container converts a container: name, image, resources.requests, the ports with a host port
// (the others do not matter to placement) and restartPolicy ("Always" makes an init container a
// sidecar). Pod adds what the pod's status says of the container (allocated and actuated
// requests).
func Container(c *corev1.Container) *placementv1.Container {
	out := &placementv1.Container{
		Name:     c.Name,
		Image:    c.Image,
		Requests: quantities(c.Resources.Requests),
	}
	for _, p := range c.Ports {
		if p.HostPort <= 0 {
			continue
		}
		out.Ports = append(out.Ports, &placementv1.ContainerPort{
			ContainerPort: p.ContainerPort,
			HostPort:      p.HostPort,
			Protocol:      string(p.Protocol),
			HostIp:        p.HostIP,
		})
	}
	if c.RestartPolicy != nil {
		out.RestartPolicy = string(*c.RestartPolicy)
	}
	return out
}

// findContainerStatus is the status of the container named name: from status.containerStatuses,
// else status.initContainerStatuses, as kube's resourcehelper looks it up for any container.
func findContainerStatus(status *corev1.PodStatus, name string) *corev1.ContainerStatus {
	for i := range status.ContainerStatuses {
		if status.ContainerStatuses[i].Name == name {
			return &status.ContainerStatuses[i]
		}
	}
	for i := range status.InitContainerStatuses {
		if status.InitContainerStatuses[i].Name == name {
			return &status.InitContainerStatuses[i]
		}
	}
	return nil
}

// podContainer is Container plus what the pod's status says of it: allocatedResources and
// resources.requests of its container status (in-place resize).
func podContainer(c *corev1.Container, status *corev1.PodStatus) *placementv1.Container {
	out := Container(c)
	if cs := findContainerStatus(status, c.Name); cs != nil {
		out.AllocatedRequests = quantities(cs.AllocatedResources)
		if cs.Resources != nil {
			out.ActuatedRequests = quantities(cs.Resources.Requests)
		}
	}
	return out
}

// requiredFeatures are the node features a pod needs, as kube-scheduler's NodeDeclaredFeatures
// plugin infers them from its spec (nodedeclaredfeatures.DefaultFramework.InferForPodScheduling
// for featureTargetVersion), sorted by name. In Kubernetes 1.37: RestartAllContainersOnContainerExits
// (a container or init container with a restartPolicyRules action RestartAllContainers),
// UserNamespacesHostNetworkSupport (hostNetwork with hostUsers false) and VolumeBindMountOptions
// (a container, init container or ephemeral container mounting a volume with bindMountOptions).
func requiredFeatures(spec *corev1.PodSpec) []string {
	reqs, err := ndf.DefaultFramework.InferForPodScheduling(&ndf.PodInfo{Spec: spec}, featureTargetVersion)
	if err != nil {
		return nil
	}
	names, err := ndf.DefaultFramework.Unmap(reqs)
	if err != nil {
		return nil
	}
	sort.Strings(names)
	return names
}

func requirement(r *corev1.NodeSelectorRequirement) *placementv1.NodeSelectorRequirement {
	return &placementv1.NodeSelectorRequirement{Key: r.Key, Operator: string(r.Operator), Values: r.Values}
}

func term(t *corev1.NodeSelectorTerm) *placementv1.NodeSelectorTerm {
	out := &placementv1.NodeSelectorTerm{}
	for i := range t.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, requirement(&t.MatchExpressions[i]))
	}
	for i := range t.MatchFields {
		out.MatchFields = append(out.MatchFields, requirement(&t.MatchFields[i]))
	}
	return out
}

func labelSelector(s *metav1.LabelSelector) *placementv1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &placementv1.LabelSelector{MatchLabels: copyMap(s.MatchLabels)}
	for _, r := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, &placementv1.LabelSelectorRequirement{
			Key: r.Key, Operator: string(r.Operator), Values: r.Values,
		})
	}
	return out
}

func affinityTerm(t *corev1.PodAffinityTerm) *placementv1.PodAffinityTerm {
	return &placementv1.PodAffinityTerm{
		LabelSelector:     labelSelector(t.LabelSelector),
		Namespaces:        t.Namespaces,
		TopologyKey:       t.TopologyKey,
		NamespaceSelector: labelSelector(t.NamespaceSelector),
	}
}

func podAffinity(required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm) *placementv1.PodAffinity {
	out := &placementv1.PodAffinity{}
	for i := range required {
		out.Required = append(out.Required, affinityTerm(&required[i]))
	}
	for i := range preferred {
		out.Preferred = append(out.Preferred, &placementv1.WeightedPodAffinityTerm{
			Weight: preferred[i].Weight,
			Term:   affinityTerm(&preferred[i].PodAffinityTerm),
		})
	}
	return out
}

func spreadConstraint(c *corev1.TopologySpreadConstraint) *placementv1.TopologySpreadConstraint {
	out := &placementv1.TopologySpreadConstraint{
		MaxSkew:           c.MaxSkew,
		TopologyKey:       c.TopologyKey,
		WhenUnsatisfiable: string(c.WhenUnsatisfiable),
		LabelSelector:     labelSelector(c.LabelSelector),
		MinDomains:        c.MinDomains,
		MatchLabelKeys:    c.MatchLabelKeys,
	}
	if c.NodeAffinityPolicy != nil {
		out.NodeAffinityPolicy = string(*c.NodeAffinityPolicy)
	}
	if c.NodeTaintsPolicy != nil {
		out.NodeTaintsPolicy = string(*c.NodeTaintsPolicy)
	}
	return out
}

// defaultSpreadSelector is the selector of kube-scheduler's default spreading for a pod owned by
// a ReplicaSet, StatefulSet or ReplicationController: its labels without the per-pod ones, as
// the binder derives it (Services are not considered).
func defaultSpreadSelector(meta *metav1.ObjectMeta) *placementv1.LabelSelector {
	owned := false
	for _, o := range meta.OwnerReferences {
		if o.Controller != nil && *o.Controller && defaultSpreadKinds[o.Kind] {
			owned = true
		}
	}
	labels := map[string]string{}
	for k, v := range meta.Labels {
		if !perPodLabels[k] {
			labels[k] = v
		}
	}
	if !owned || len(labels) == 0 {
		return nil
	}
	return &placementv1.LabelSelector{MatchLabels: labels}
}

// gang is the gang named by GangLabel; a missing or malformed GangMinMembersAnnotation gives
// MinMembers 0 (the service refuses it).
func gang(meta *metav1.ObjectMeta) *placementv1.Gang {
	name, ok := meta.Labels[GangLabel]
	if !ok {
		return nil
	}
	raw := strings.TrimSpace(meta.Annotations[GangMinMembersAnnotation])
	// Rust's u32 parsing, which the binder uses, takes one leading '+'.
	min, err := strconv.ParseUint(strings.TrimPrefix(raw, "+"), 10, 32)
	if err != nil {
		min = 0
	}
	return &placementv1.Gang{Name: name, MinMembers: uint32(min)}
}

// Pod converts a pod: identity and labels, priority and preemptionPolicy, containers and init
// containers (with the allocatedResources and resources.requests of their status.containerStatuses
// or initContainerStatuses entry), overhead, the pod-level requests spec.resources.requests,
// status.allocatedResources and status.resources.requests, whether a resize is infeasible
// (resourcehelper.IsPodResizeInfeasible), the node features it requires (requiredFeatures),
// nodeName, node selector and affinity, tolerations, pod (anti-)affinity, topology spread
// constraints (or, without any, the default spreading selector of a ReplicaSet, StatefulSet or
// ReplicationController pod), status.startTime, the gang, whether the pod is terminating
// (metadata.deletionTimestamp set), the volumes the volume filters and ImageLocality read, a
// pending pod's annotations, its resource claims and the PodGroup its spec.schedulingGroup names.
func Pod(p *corev1.Pod) *placementv1.Pod {
	meta, spec := &p.ObjectMeta, &p.Spec
	out := &placementv1.Pod{
		Uid:          string(meta.UID),
		Namespace:    meta.Namespace,
		Name:         meta.Name,
		Labels:       copyMap(meta.Labels),
		Overhead:     quantities(spec.Overhead),
		NodeName:     spec.NodeName,
		NodeSelector: copyMap(spec.NodeSelector),
		Gang:         gang(meta),
		Terminating:  meta.DeletionTimestamp != nil,
	}
	if spec.Priority != nil {
		out.Priority = *spec.Priority
	}
	// A pending pod's annotations, for the decision service's CEL rules (none for a bound pod,
	// never kubectl's last-applied copy of the object), as the binder sends them.
	if spec.NodeName == "" {
		for k, v := range meta.Annotations {
			if k == LastAppliedAnnotation {
				continue
			}
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	for i := range spec.Containers {
		out.Containers = append(out.Containers, podContainer(&spec.Containers[i], &p.Status))
	}
	for i := range spec.InitContainers {
		out.InitContainers = append(out.InitContainers, podContainer(&spec.InitContainers[i], &p.Status))
	}
	if spec.Resources != nil {
		out.PodRequests = quantities(spec.Resources.Requests)
	}
	out.AllocatedRequests = quantities(p.Status.AllocatedResources)
	if p.Status.Resources != nil {
		out.ActuatedRequests = quantities(p.Status.Resources.Requests)
	}
	out.ResizeInfeasible = resourcehelper.IsPodResizeInfeasible(p)
	out.RequiredFeatures = requiredFeatures(spec)
	if a := spec.Affinity; a != nil {
		if na := a.NodeAffinity; na != nil {
			out.NodeAffinity = &placementv1.NodeAffinity{}
			if r := na.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
				sel := &placementv1.NodeSelector{}
				for i := range r.NodeSelectorTerms {
					sel.Terms = append(sel.Terms, term(&r.NodeSelectorTerms[i]))
				}
				out.NodeAffinity.Required = sel
			}
			for i := range na.PreferredDuringSchedulingIgnoredDuringExecution {
				pt := &na.PreferredDuringSchedulingIgnoredDuringExecution[i]
				out.NodeAffinity.Preferred = append(out.NodeAffinity.Preferred, &placementv1.PreferredSchedulingTerm{
					Weight: pt.Weight, Preference: term(&pt.Preference),
				})
			}
		}
		if pa := a.PodAffinity; pa != nil {
			out.PodAffinity = podAffinity(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if pa := a.PodAntiAffinity; pa != nil {
			out.PodAntiAffinity = podAffinity(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
	}
	for _, t := range spec.Tolerations {
		out.Tolerations = append(out.Tolerations, &placementv1.Toleration{
			Key:               t.Key,
			Operator:          string(t.Operator),
			Value:             t.Value,
			Effect:            string(t.Effect),
			TolerationSeconds: t.TolerationSeconds,
		})
	}
	for i := range spec.TopologySpreadConstraints {
		out.TopologySpreadConstraints = append(out.TopologySpreadConstraints, spreadConstraint(&spec.TopologySpreadConstraints[i]))
	}
	if len(out.TopologySpreadConstraints) == 0 {
		out.DefaultSpreadSelector = defaultSpreadSelector(meta)
	}
	if spec.PreemptionPolicy != nil {
		out.PreemptionPolicy = string(*spec.PreemptionPolicy)
	}
	if p.Status.StartTime != nil {
		out.StartTimeSeconds = p.Status.StartTime.Unix()
	}
	out.Volumes = volumes(meta.Name, spec.Volumes)
	out.ResourceClaims = podResourceClaims(p)
	if g := spec.SchedulingGroup; g != nil {
		out.SchedulingGroup = strOr(g.PodGroupName)
	}
	return out
}

// volumes keeps the volumes the volume filters read: claims (a generic ephemeral volume's is
// named "<pod>-<volume>"), and in-tree GCE PD, AWS EBS, iSCSI and RBD volumes; and image volumes
// with a reference (image.reference), whose images ImageLocality counts. Others are left out.
func volumes(podName string, vs []corev1.Volume) []*placementv1.Volume {
	var out []*placementv1.Volume
	for i := range vs {
		v := &vs[i]
		m := &placementv1.Volume{Name: v.Name}
		switch {
		case v.PersistentVolumeClaim != nil:
			m.ClaimName = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			m.ClaimName = podName + "-" + v.Name
			m.Ephemeral = true
		case v.GCEPersistentDisk != nil:
			m.GcePdName = v.GCEPersistentDisk.PDName
			m.ReadOnly = v.GCEPersistentDisk.ReadOnly
		case v.AWSElasticBlockStore != nil:
			m.AwsVolumeId = v.AWSElasticBlockStore.VolumeID
		case v.ISCSI != nil:
			m.IscsiIqn = v.ISCSI.IQN
			m.ReadOnly = v.ISCSI.ReadOnly
		case v.RBD != nil:
			m.RbdMonitors = v.RBD.CephMonitors
			m.RbdPool = v.RBD.RBDPool
			if m.RbdPool == "" {
				m.RbdPool = "rbd"
			}
			m.RbdImage = v.RBD.RBDImage
			m.ReadOnly = v.RBD.ReadOnly
		case v.Image != nil && v.Image.Reference != "":
			// An image volume without a reference (the API server refuses one) is left out.
			m.ImageReference = v.Image.Reference
		default:
			continue
		}
		out = append(out, m)
	}
	return out
}

func classOf(meta *metav1.ObjectMeta, specClass *string) string {
	if c, ok := meta.Annotations[StorageClassAnnotation]; ok {
		return c
	}
	if specClass != nil {
		return *specClass
	}
	return ""
}

func accessModes(modes []corev1.PersistentVolumeAccessMode) []string {
	var out []string
	for _, m := range modes {
		out = append(out, string(m))
	}
	return out
}

func strOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// PersistentVolumeClaim converts a claim: namespace, name, uid, class (the beta annotation, else
// spec.storageClassName), spec.volumeName, the bind-completed and selected-node annotations,
// access modes, the storage request, selector, volume mode, phase, whether it is being deleted,
// spec.volumeAttributesClassName and the controller owner's uid.
func PersistentVolumeClaim(c *corev1.PersistentVolumeClaim) *placementv1.PersistentVolumeClaim {
	_, bindCompleted := c.Annotations[BindCompletedAnnotation]
	selectedNode, selectedNodeSet := c.Annotations[SelectedNodeAnnotation]
	out := &placementv1.PersistentVolumeClaim{
		Namespace:                 c.Namespace,
		Name:                      c.Name,
		Uid:                       string(c.UID),
		StorageClassName:          classOf(&c.ObjectMeta, c.Spec.StorageClassName),
		VolumeName:                c.Spec.VolumeName,
		BindCompleted:             bindCompleted,
		AccessModes:               accessModes(c.Spec.AccessModes),
		Selector:                  labelSelector(c.Spec.Selector),
		VolumeMode:                "",
		Phase:                     string(c.Status.Phase),
		Deleting:                  c.DeletionTimestamp != nil,
		SelectedNode:              selectedNode,
		SelectedNodeSet:           selectedNodeSet,
		VolumeAttributesClassName: strOr(c.Spec.VolumeAttributesClassName),
	}
	if q, ok := c.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		out.StorageRequest = q.String()
	}
	if c.Spec.VolumeMode != nil {
		out.VolumeMode = string(*c.Spec.VolumeMode)
	}
	if ref := metav1.GetControllerOf(c); ref != nil {
		out.ControllerUid = string(ref.UID)
	}
	return out
}

// PersistentVolume converts a volume: name, labels, class, capacity, access modes, volume mode,
// spec.nodeAffinity.required, spec.claimRef, phase, whether it is being deleted, the CSI driver
// and volume handle, and spec.volumeAttributesClassName.
func PersistentVolume(v *corev1.PersistentVolume) *placementv1.PersistentVolume {
	out := &placementv1.PersistentVolume{
		Name:                      v.Name,
		Labels:                    copyMap(v.Labels),
		StorageClassName:          classOf(&v.ObjectMeta, &v.Spec.StorageClassName),
		AccessModes:               accessModes(v.Spec.AccessModes),
		Phase:                     string(v.Status.Phase),
		Deleting:                  v.DeletionTimestamp != nil,
		VolumeAttributesClassName: strOr(v.Spec.VolumeAttributesClassName),
	}
	if q, ok := v.Spec.Capacity[corev1.ResourceStorage]; ok {
		out.Capacity = q.String()
	}
	if v.Spec.VolumeMode != nil {
		out.VolumeMode = string(*v.Spec.VolumeMode)
	}
	if a := v.Spec.NodeAffinity; a != nil && a.Required != nil {
		sel := &placementv1.NodeSelector{}
		for i := range a.Required.NodeSelectorTerms {
			sel.Terms = append(sel.Terms, term(&a.Required.NodeSelectorTerms[i]))
		}
		out.NodeAffinity = sel
	}
	if r := v.Spec.ClaimRef; r != nil {
		out.ClaimRef = &placementv1.VolumeClaimRef{Namespace: r.Namespace, Name: r.Name, Uid: string(r.UID)}
	}
	if csi := v.Spec.CSI; csi != nil {
		out.CsiDriver = csi.Driver
		out.CsiVolumeHandle = csi.VolumeHandle
	}
	return out
}

// StorageClass converts a storage class: name, provisioner, volumeBindingMode and allowedTopologies.
func StorageClass(c *storagev1.StorageClass) *placementv1.StorageClass {
	out := &placementv1.StorageClass{Name: c.Name, Provisioner: c.Provisioner}
	if c.VolumeBindingMode != nil {
		out.VolumeBindingMode = string(*c.VolumeBindingMode)
	}
	for _, t := range c.AllowedTopologies {
		term := &placementv1.TopologySelectorTerm{}
		for _, r := range t.MatchLabelExpressions {
			term.MatchLabelExpressions = append(term.MatchLabelExpressions, &placementv1.TopologySelectorRequirement{Key: r.Key, Values: r.Values})
		}
		out.AllowedTopologies = append(out.AllowedTopologies, term)
	}
	return out
}

// CSINode converts a CSINode: each driver's allocatable.count (its attach limit on the node).
func CSINode(n *storagev1.CSINode) *placementv1.CsiNode {
	out := &placementv1.CsiNode{Name: n.Name}
	for _, d := range n.Spec.Drivers {
		m := &placementv1.CsiNodeDriver{Name: d.Name}
		if d.Allocatable != nil {
			m.AllocatableCount = d.Allocatable.Count
		}
		out.Drivers = append(out.Drivers, m)
	}
	return out
}

// CSIDriver converts a CSIDriver: whether it asks for storage capacity tracking
// (spec.storageCapacity, unset reads as false).
func CSIDriver(d *storagev1.CSIDriver) *placementv1.CsiDriver {
	return &placementv1.CsiDriver{
		Name:                          d.Name,
		StorageCapacity:               d.Spec.StorageCapacity != nil && *d.Spec.StorageCapacity,
		PreventPodSchedulingIfMissing: d.Spec.PreventPodSchedulingIfMissing != nil && *d.Spec.PreventPodSchedulingIfMissing,
	}
}

// CSIStorageCapacity converts a CSIStorageCapacity: its class, node topology, capacity and
// maximum volume size.
func CSIStorageCapacity(c *storagev1.CSIStorageCapacity) *placementv1.CsiStorageCapacity {
	out := &placementv1.CsiStorageCapacity{
		Namespace:        c.Namespace,
		Name:             c.Name,
		StorageClassName: c.StorageClassName,
	}
	if c.NodeTopology != nil {
		out.NodeTopology = labelSelector(c.NodeTopology)
	}
	if c.Capacity != nil {
		out.Capacity = c.Capacity.String()
	}
	if c.MaximumVolumeSize != nil {
		out.MaximumVolumeSize = c.MaximumVolumeSize.String()
	}
	return out
}

// Storage is what the volume filters and DynamicResources read besides pods and nodes, and the
// PodGroups.
type Storage struct {
	Claims               []*corev1.PersistentVolumeClaim
	Volumes              []*corev1.PersistentVolume
	Classes              []*storagev1.StorageClass
	CSINodes             []*storagev1.CSINode
	CSIDrivers           []*storagev1.CSIDriver
	CSIStorageCapacities []*storagev1.CSIStorageCapacity
	// DRA objects (resource.k8s.io/v1).
	DeviceClasses    []*resourcev1.DeviceClass
	ResourceClaims   []*resourcev1.ResourceClaim
	ResourceSlices   []*resourcev1.ResourceSlice
	DeviceTaintRules []*resourcev1.DeviceTaintRule
	// PodGroups (scheduling.k8s.io/v1beta1), the groups pods name in spec.schedulingGroup.
	PodGroups []*schedulingv1beta1.PodGroup
	// CompositePodGroups (scheduling.k8s.io/v1alpha3, the CompositePodGroup gate): hierarchies
	// of PodGroups.
	CompositePodGroups []*schedulingv1alpha3.CompositePodGroup
}

// Node converts a node: name, labels, taints, spec.unschedulable, status.allocatable,
// status.images and status.declaredFeatures (as given, in order).
func Node(n *corev1.Node) *placementv1.Node {
	out := &placementv1.Node{
		Name:             n.Name,
		Labels:           copyMap(n.Labels),
		Unschedulable:    n.Spec.Unschedulable,
		Allocatable:      quantities(n.Status.Allocatable),
		DeclaredFeatures: n.Status.DeclaredFeatures,
	}
	for _, t := range n.Spec.Taints {
		out.Taints = append(out.Taints, &placementv1.Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	for _, i := range n.Status.Images {
		out.Images = append(out.Images, &placementv1.ContainerImage{Names: i.Names, SizeBytes: i.SizeBytes})
	}
	return out
}

// Namespace converts a namespace: its name and labels, for the namespaceSelector of pod
// (anti-)affinity terms.
func Namespace(ns *corev1.Namespace) *placementv1.Namespace {
	return &placementv1.Namespace{Name: ns.Name, Labels: copyMap(ns.Labels)}
}

// PodDisruptionBudget converts a policy/v1 budget: namespace, name, spec.selector,
// status.disruptionsAllowed (0 without a status yet) and status.disruptedPods. The API names
// disrupted pods; the message carries uids: each name resolves against pods (e.g. the bound pods
// of a snapshot) of the budget's namespace, a name with no such pod is left out, and the uids
// are sorted.
func PodDisruptionBudget(b *policyv1.PodDisruptionBudget, pods []*corev1.Pod) *placementv1.PodDisruptionBudget {
	out := &placementv1.PodDisruptionBudget{
		Namespace:          b.Namespace,
		Name:               b.Name,
		Selector:           labelSelector(b.Spec.Selector),
		DisruptionsAllowed: b.Status.DisruptionsAllowed,
	}
	if len(b.Status.DisruptedPods) > 0 {
		seen := map[string]bool{}
		for _, p := range pods {
			if _, ok := b.Status.DisruptedPods[p.Name]; ok && p.Namespace == b.Namespace && p.UID != "" && !seen[string(p.UID)] {
				seen[string(p.UID)] = true
				out.DisruptedPodUids = append(out.DisruptedPodUids, string(p.UID))
			}
		}
		sort.Strings(out.DisruptedPodUids)
	}
	return out
}

// IsBound reports whether a pod holds node capacity: spec.nodeName set and not finished
// (Succeeded or Failed). A terminating pod is still bound until it is gone.
func IsBound(p *corev1.Pod) bool {
	return p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// Snapshot builds a full snapshot as the binder does: every node, the bound pods (IsBound), the
// namespaces and the budgets (their disrupted pods resolved against the bound pods); nodes and
// namespaces sorted by name, pods by uid, budgets by namespace and name. Pending pods belong in
// a Schedule or Rank request instead.
func Snapshot(nodes []*corev1.Node, pods []*corev1.Pod, namespaces []*corev1.Namespace, pdbs []*policyv1.PodDisruptionBudget) *placementv1.Snapshot {
	return SnapshotWithStorage(nodes, pods, namespaces, pdbs, Storage{})
}

// SnapshotWithStorage is Snapshot with the claims (sorted by namespace and name), volumes,
// storage classes, CSINodes and CSIDrivers (each sorted by name) and CSIStorageCapacities (by
// namespace and name) the volume filters read, and the DeviceClasses, ResourceSlices and
// DeviceTaintRules (each sorted by name) and ResourceClaims (by "namespace/name") DynamicResources reads, and the
// PodGroups (by "namespace/name").
func SnapshotWithStorage(nodes []*corev1.Node, pods []*corev1.Pod, namespaces []*corev1.Namespace, pdbs []*policyv1.PodDisruptionBudget, s Storage) *placementv1.Snapshot {
	out := &placementv1.Snapshot{}
	for _, c := range s.Claims {
		out.PersistentVolumeClaims = append(out.PersistentVolumeClaims, PersistentVolumeClaim(c))
	}
	sort.Slice(out.PersistentVolumeClaims, func(i, j int) bool {
		a, b := out.PersistentVolumeClaims[i], out.PersistentVolumeClaims[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	for _, v := range s.Volumes {
		out.PersistentVolumes = append(out.PersistentVolumes, PersistentVolume(v))
	}
	sort.Slice(out.PersistentVolumes, func(i, j int) bool { return out.PersistentVolumes[i].Name < out.PersistentVolumes[j].Name })
	for _, c := range s.Classes {
		out.StorageClasses = append(out.StorageClasses, StorageClass(c))
	}
	sort.Slice(out.StorageClasses, func(i, j int) bool { return out.StorageClasses[i].Name < out.StorageClasses[j].Name })
	for _, n := range s.CSINodes {
		out.CsiNodes = append(out.CsiNodes, CSINode(n))
	}
	sort.Slice(out.CsiNodes, func(i, j int) bool { return out.CsiNodes[i].Name < out.CsiNodes[j].Name })
	for _, d := range s.CSIDrivers {
		out.CsiDrivers = append(out.CsiDrivers, CSIDriver(d))
	}
	sort.Slice(out.CsiDrivers, func(i, j int) bool { return out.CsiDrivers[i].Name < out.CsiDrivers[j].Name })
	for _, c := range s.CSIStorageCapacities {
		out.CsiStorageCapacities = append(out.CsiStorageCapacities, CSIStorageCapacity(c))
	}
	sort.Slice(out.CsiStorageCapacities, func(i, j int) bool {
		a, b := out.CsiStorageCapacities[i], out.CsiStorageCapacities[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	for _, c := range s.DeviceClasses {
		out.DeviceClasses = append(out.DeviceClasses, DeviceClass(c))
	}
	sort.Slice(out.DeviceClasses, func(i, j int) bool { return out.DeviceClasses[i].Name < out.DeviceClasses[j].Name })
	for _, c := range s.ResourceClaims {
		out.ResourceClaims = append(out.ResourceClaims, ResourceClaim(c))
	}
	sort.Slice(out.ResourceClaims, func(i, j int) bool {
		a, b := out.ResourceClaims[i], out.ResourceClaims[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	for _, sl := range s.ResourceSlices {
		out.ResourceSlices = append(out.ResourceSlices, ResourceSlice(sl))
	}
	sort.Slice(out.ResourceSlices, func(i, j int) bool { return out.ResourceSlices[i].Name < out.ResourceSlices[j].Name })
	for _, r := range s.DeviceTaintRules {
		out.DeviceTaintRules = append(out.DeviceTaintRules, DeviceTaintRule(r))
	}
	sort.Slice(out.DeviceTaintRules, func(i, j int) bool { return out.DeviceTaintRules[i].Name < out.DeviceTaintRules[j].Name })
	for _, g := range s.PodGroups {
		out.PodGroups = append(out.PodGroups, PodGroup(g))
	}
	sort.Slice(out.PodGroups, func(i, j int) bool {
		a, b := out.PodGroups[i], out.PodGroups[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	for _, g := range s.CompositePodGroups {
		out.CompositePodGroups = append(out.CompositePodGroups, CompositePodGroup(g))
	}
	sort.Slice(out.CompositePodGroups, func(i, j int) bool {
		a, b := out.CompositePodGroups[i], out.CompositePodGroups[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	for _, n := range nodes {
		out.Nodes = append(out.Nodes, Node(n))
	}
	sort.Slice(out.Nodes, func(i, j int) bool { return out.Nodes[i].Name < out.Nodes[j].Name })
	var bound []*corev1.Pod
	for _, p := range pods {
		if IsBound(p) {
			bound = append(bound, p)
			out.Pods = append(out.Pods, Pod(p))
		}
	}
	sort.Slice(out.Pods, func(i, j int) bool { return out.Pods[i].Uid < out.Pods[j].Uid })
	for _, ns := range namespaces {
		out.Namespaces = append(out.Namespaces, Namespace(ns))
	}
	sort.Slice(out.Namespaces, func(i, j int) bool { return out.Namespaces[i].Name < out.Namespaces[j].Name })
	for _, b := range pdbs {
		out.PodDisruptionBudgets = append(out.PodDisruptionBudgets, PodDisruptionBudget(b, bound))
	}
	sort.Slice(out.PodDisruptionBudgets, func(i, j int) bool {
		a, b := out.PodDisruptionBudgets[i], out.PodDisruptionBudgets[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	return out
}
