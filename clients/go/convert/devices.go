package convert

// Dynamic Resource Allocation objects (resource.k8s.io/v1): DeviceClasses, ResourceClaims,
// ResourceSlices and DeviceTaintRules, and a pod's spec.resourceClaims with the claim names its
// status.resourceClaimStatuses gives, as the binder converts them
// (binder-agent/src/projection/devices.rs).

import (
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	placementv1 "github.com/placement/placement/clients/go/placement/v1"
)

// deviceSelectors keeps the CEL expressions of selectors, in order; a selector without cel is
// left out.
func deviceSelectors(s []resourcev1.DeviceSelector) []string {
	var out []string
	for _, sel := range s {
		if sel.CEL != nil {
			out = append(out, sel.CEL.Expression)
		}
	}
	return out
}

func nodeSelector(s *corev1.NodeSelector) *placementv1.NodeSelector {
	if s == nil {
		return nil
	}
	out := &placementv1.NodeSelector{}
	for i := range s.NodeSelectorTerms {
		out.Terms = append(out.Terms, term(&s.NodeSelectorTerms[i]))
	}
	return out
}

func deviceTolerations(ts []resourcev1.DeviceToleration) []*placementv1.Toleration {
	var out []*placementv1.Toleration
	for _, t := range ts {
		out = append(out, &placementv1.Toleration{
			Key:               t.Key,
			Operator:          string(t.Operator),
			Value:             t.Value,
			Effect:            string(t.Effect),
			TolerationSeconds: t.TolerationSeconds,
		})
	}
	return out
}

func capacityRequests(c *resourcev1.CapacityRequirements) map[string]string {
	if c == nil || len(c.Requests) == 0 {
		return nil
	}
	out := make(map[string]string, len(c.Requests))
	for k, q := range c.Requests {
		out[string(k)] = q.String()
	}
	return out
}

func counters(c map[string]resourcev1.Counter) map[string]string {
	if len(c) == 0 {
		return nil
	}
	out := make(map[string]string, len(c))
	for k, v := range c {
		out[k] = v.Value.String()
	}
	return out
}

// DeviceClass converts a DeviceClass: name, the CEL expressions of spec.selectors (selectors
// without cel are left out), spec.extendedResourceName and metadata.creationTimestamp in seconds
// (0 when unset).
func DeviceClass(c *resourcev1.DeviceClass) *placementv1.DeviceClass {
	out := &placementv1.DeviceClass{
		Name:                 c.Name,
		Selectors:            deviceSelectors(c.Spec.Selectors),
		ExtendedResourceName: strOr(c.Spec.ExtendedResourceName),
	}
	if !c.CreationTimestamp.IsZero() {
		out.CreationTimestampSeconds = c.CreationTimestamp.Unix()
	}
	return out
}

// AllocationResult converts a claim's status.allocation: the allocated devices (request, driver,
// pool, device, adminAccess, tolerations, and for a share of a device that allows multiple
// allocations its shareID and consumedCapacity) and the node selector.
func AllocationResult(a *resourcev1.AllocationResult) *placementv1.AllocationResult {
	out := &placementv1.AllocationResult{NodeSelector: nodeSelector(a.NodeSelector)}
	if a.AllocationTimestamp != nil {
		v := a.AllocationTimestamp.Unix()
		out.AllocationTimestampSeconds = &v
	}
	for _, r := range a.Devices.Results {
		m := &placementv1.DeviceRequestAllocationResult{
			Request:     r.Request,
			Driver:      r.Driver,
			Pool:        r.Pool,
			Device:      r.Device,
			Tolerations: deviceTolerations(r.Tolerations),
		}
		if r.AdminAccess != nil {
			v := *r.AdminAccess
			m.AdminAccess = &v
		}
		if r.ShareID != nil {
			v := string(*r.ShareID)
			m.ShareId = &v
		}
		m.BindingConditions = r.BindingConditions
		m.BindingFailureConditions = r.BindingFailureConditions
		for k, q := range r.ConsumedCapacity {
			if m.ConsumedCapacity == nil {
				m.ConsumedCapacity = map[string]string{}
			}
			m.ConsumedCapacity[string(k)] = q.String()
		}
		out.Devices = append(out.Devices, m)
	}
	return out
}

// ResourceClaim converts a ResourceClaim: namespace, name, uid, spec.devices.requests (exactly or
// firstAvailable, selectors as CEL expressions, capacity requests as quantities) and constraints,
// status.allocation and status.reservedFor, whether it is being deleted, and its controller's uid.
func ResourceClaim(c *resourcev1.ResourceClaim) *placementv1.ResourceClaim {
	out := &placementv1.ResourceClaim{
		Namespace: c.Namespace,
		Name:      c.Name,
		Uid:       string(c.UID),
		Deleting:  c.DeletionTimestamp != nil,
	}
	// The controller's uid ("" for none): the engine refuses a template's claim the pod does not
	// control, as kube-scheduler does (resourceclaim.IsForPod).
	controller := ""
	if ref := metav1.GetControllerOf(c); ref != nil {
		controller = string(ref.UID)
	}
	out.ControllerUid = &controller
	for _, r := range c.Spec.Devices.Requests {
		req := &placementv1.DeviceRequest{Name: r.Name}
		if e := r.Exactly; e != nil {
			req.Exactly = &placementv1.ExactDeviceRequest{
				DeviceClassName:  e.DeviceClassName,
				Selectors:        deviceSelectors(e.Selectors),
				AllocationMode:   string(e.AllocationMode),
				Count:            e.Count,
				AdminAccess:      e.AdminAccess != nil && *e.AdminAccess,
				Tolerations:      deviceTolerations(e.Tolerations),
				CapacityRequests: capacityRequests(e.Capacity),
			}
		}
		for _, s := range r.FirstAvailable {
			req.FirstAvailable = append(req.FirstAvailable, &placementv1.DeviceSubRequest{
				Name:             s.Name,
				DeviceClassName:  s.DeviceClassName,
				Selectors:        deviceSelectors(s.Selectors),
				AllocationMode:   string(s.AllocationMode),
				Count:            s.Count,
				Tolerations:      deviceTolerations(s.Tolerations),
				CapacityRequests: capacityRequests(s.Capacity),
			})
		}
		out.Requests = append(out.Requests, req)
	}
	for _, k := range c.Spec.Devices.Constraints {
		m := &placementv1.DeviceConstraint{Requests: k.Requests}
		if k.MatchAttribute != nil {
			m.MatchAttribute = string(*k.MatchAttribute)
		}
		if k.DistinctAttribute != nil {
			m.DistinctAttribute = string(*k.DistinctAttribute)
		}
		out.Constraints = append(out.Constraints, m)
	}
	if a := c.Status.Allocation; a != nil {
		out.Allocation = AllocationResult(a)
	}
	for _, r := range c.Status.ReservedFor {
		out.ReservedFor = append(out.ReservedFor, &placementv1.ResourceClaimConsumer{
			ApiGroup: r.APIGroup,
			Resource: r.Resource,
			Name:     r.Name,
			Uid:      string(r.UID),
		})
	}
	// status.devices: the conditions drivers report, those True by type (binding conditions).
	for _, d := range c.Status.Devices {
		m := &placementv1.AllocatedDeviceStatus{Driver: d.Driver, Pool: d.Pool, Device: d.Device}
		if d.ShareID != nil {
			v := *d.ShareID
			m.ShareId = &v
		}
		for _, cond := range d.Conditions {
			if cond.Status == metav1.ConditionTrue {
				m.TrueConditions = append(m.TrueConditions, cond.Type)
			}
		}
		out.Devices = append(out.Devices, m)
	}
	return out
}

// deviceAttribute is an attribute's single value (int, else bool, else string, else version),
// or nil when none of them is set (a list-valued attribute): the binder leaves such an
// attribute out.
func deviceAttribute(a *resourcev1.DeviceAttribute) *placementv1.DeviceAttribute {
	switch {
	case a.IntValue != nil:
		return &placementv1.DeviceAttribute{Value: &placementv1.DeviceAttribute_Int{Int: *a.IntValue}}
	case a.BoolValue != nil:
		return &placementv1.DeviceAttribute{Value: &placementv1.DeviceAttribute_Bool{Bool: *a.BoolValue}}
	case a.StringValue != nil:
		return &placementv1.DeviceAttribute{Value: &placementv1.DeviceAttribute_String_{String_: *a.StringValue}}
	case a.VersionValue != nil:
		return &placementv1.DeviceAttribute{Value: &placementv1.DeviceAttribute_Version{Version: *a.VersionValue}}
	}
	return nil
}

// capacityRequestPolicy converts a device capacity's requestPolicy (nil without one).
func capacityRequestPolicy(p *resourcev1.CapacityRequestPolicy) *placementv1.CapacityRequestPolicy {
	if p == nil {
		return nil
	}
	out := &placementv1.CapacityRequestPolicy{}
	if p.Default != nil {
		v := p.Default.String()
		out.Default = &v
	}
	for _, v := range p.ValidValues {
		out.ValidValues = append(out.ValidValues, v.String())
	}
	if r := p.ValidRange; r != nil {
		out.ValidRange = &placementv1.CapacityRequestPolicyRange{}
		if r.Min != nil {
			out.ValidRange.Min = r.Min.String()
		}
		if r.Max != nil {
			v := r.Max.String()
			out.ValidRange.Max = &v
		}
		if r.Step != nil {
			v := r.Step.String()
			out.ValidRange.Step = &v
		}
	}
	return out
}

func device(d *resourcev1.Device) *placementv1.Device {
	out := &placementv1.Device{
		Name:                     d.Name,
		NodeName:                 strOr(d.NodeName),
		NodeSelector:             nodeSelector(d.NodeSelector),
		AllNodes:                 d.AllNodes != nil && *d.AllNodes,
		AllowMultipleAllocations: d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations,
		BindingConditions:        d.BindingConditions,
		BindingFailureConditions: d.BindingFailureConditions,
		BindsToNode:              d.BindsToNode != nil && *d.BindsToNode,
	}
	for k, a := range d.Attributes {
		if m := deviceAttribute(&a); m != nil {
			if out.Attributes == nil {
				out.Attributes = map[string]*placementv1.DeviceAttribute{}
			}
			out.Attributes[string(k)] = m
		}
	}
	for k, c := range d.Capacity {
		if out.Capacity == nil {
			out.Capacity = map[string]string{}
		}
		out.Capacity[string(k)] = c.Value.String()
		if p := capacityRequestPolicy(c.RequestPolicy); p != nil {
			if out.CapacityRequestPolicies == nil {
				out.CapacityRequestPolicies = map[string]*placementv1.CapacityRequestPolicy{}
			}
			out.CapacityRequestPolicies[string(k)] = p
		}
	}
	for _, c := range d.ConsumesCounters {
		out.ConsumesCounters = append(out.ConsumesCounters, &placementv1.DeviceCounterConsumption{
			CounterSet: c.CounterSet,
			Counters:   counters(c.Counters),
		})
	}
	for i := range d.Taints {
		out.Taints = append(out.Taints, deviceTaint(&d.Taints[i]))
	}
	return out
}

// deviceTaint converts a device taint: key, value, effect and timeAdded in seconds (0 when
// unset).
func deviceTaint(t *resourcev1.DeviceTaint) *placementv1.DeviceTaint {
	out := &placementv1.DeviceTaint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)}
	if t.TimeAdded != nil && !t.TimeAdded.IsZero() {
		out.TimeAddedSeconds = t.TimeAdded.Unix()
	}
	return out
}

// DeviceTaintRule converts a DeviceTaintRule: name, spec.deviceSelector (driver, pool and device,
// each when set; unset when the rule has none) and spec.taint.
func DeviceTaintRule(r *resourcev1.DeviceTaintRule) *placementv1.DeviceTaintRule {
	out := &placementv1.DeviceTaintRule{
		Name:  r.Name,
		Taint: deviceTaint(&r.Spec.Taint),
	}
	if s := r.Spec.DeviceSelector; s != nil {
		out.DeviceSelector = &placementv1.DeviceTaintSelector{Driver: s.Driver, Pool: s.Pool, Device: s.Device}
	}
	return out
}

// ResourceSlice converts a ResourceSlice: name, driver, pool (name, generation, slice count),
// the node selection (nodeName, nodeSelector, allNodes or perDeviceNodeSelection), the devices
// (attributes with a value, capacities, counter consumption, per-device node selection, taints,
// allowMultipleAllocations, bindingConditions) and sharedCounters.
func ResourceSlice(s *resourcev1.ResourceSlice) *placementv1.ResourceSlice {
	spec := &s.Spec
	out := &placementv1.ResourceSlice{
		Name:                   s.Name,
		Driver:                 spec.Driver,
		PoolName:               spec.Pool.Name,
		PoolGeneration:         spec.Pool.Generation,
		PoolResourceSliceCount: spec.Pool.ResourceSliceCount,
		NodeName:               strOr(spec.NodeName),
		NodeSelector:           nodeSelector(spec.NodeSelector),
		AllNodes:               spec.AllNodes != nil && *spec.AllNodes,
		PerDeviceNodeSelection: spec.PerDeviceNodeSelection != nil && *spec.PerDeviceNodeSelection,
	}
	for i := range spec.Devices {
		out.Devices = append(out.Devices, device(&spec.Devices[i]))
	}
	for _, c := range spec.SharedCounters {
		out.SharedCounters = append(out.SharedCounters, &placementv1.CounterSet{Name: c.Name, Counters: counters(c.Counters)})
	}
	return out
}

// podResourceClaims converts a pod's spec.resourceClaims. An entry naming a template gets the
// claim its status.resourceClaimStatuses entry names (generated_claim_name; empty when the
// controller decided no claim is needed), and none while that entry is missing.
func podResourceClaims(p *corev1.Pod) []*placementv1.PodResourceClaim {
	var out []*placementv1.PodResourceClaim
	for _, c := range p.Spec.ResourceClaims {
		m := &placementv1.PodResourceClaim{
			Name:                      c.Name,
			ResourceClaimName:         strOr(c.ResourceClaimName),
			ResourceClaimTemplateName: strOr(c.ResourceClaimTemplateName),
		}
		if m.ResourceClaimTemplateName != "" {
			for _, s := range p.Status.ResourceClaimStatuses {
				if s.Name == c.Name {
					name := strOr(s.ResourceClaimName)
					m.GeneratedClaimName = &name
					break
				}
			}
		}
		out = append(out, m)
	}
	return out
}
