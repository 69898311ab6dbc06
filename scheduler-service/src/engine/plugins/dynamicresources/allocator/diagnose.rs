//! Why the allocator cannot allocate a pod's claims on a node, request by request. kube-scheduler
//! says only `cannot allocate all claims`; [`Allocator::diagnose`] re-runs the allocator's
//! matching on one node to say which request failed and why:
//!
//! 1. each request (each subrequest of a prioritized list) on its own: how many of the node's
//!    devices match its class and its selectors ([`FailureKind::NoMatchingDevice`] when fewer
//!    than it asks for), how many of those are allocated to claims, lack shared counters or lack
//!    the capacity the request asks for beside what the device's shares consume
//!    ([`FailureKind::DevicesAllocated`]) or have taints it does not tolerate
//!    ([`FailureKind::DeviceTainted`]);
//! 2. when each request can be met alone: the requests together, claim after claim, without
//!    their constraints (too few free devices for all of them: [`FailureKind::DevicesAllocated`]);
//! 3. then with the constraints, claim after claim, each constraint alone and then together
//!    ([`FailureKind::ConstraintUnmet`], with the values the free matching devices have).
//!
//! Only explanations call it (Rank lists it on the nodes DynamicResources refused); the
//! scheduling path never does. Messages name no device (only counts, taints and attribute
//! values), so nodes with one device signature get the same diagnosis.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::allocate::taint_prevents_allocation;
use super::constraints::lookup_attribute;
use super::{AllocateError, Allocator, Indices, Loc, Search, Stop};
use crate::engine::devices::{AllocationMode, AttributeValue, DeviceTaintEffect, ResourceClaim};
use crate::engine::model::NodeSpec;

/// Why a request cannot be met on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FailureKind {
    /// Fewer of the node's devices than the request asks for match its class and its selectors.
    NoMatchingDevice,
    /// Enough devices match, but too few are free: the others are allocated to claims (or their
    /// shared counters are taken), or the pod's other requests take them.
    DevicesAllocated,
    /// A `matchAttribute` or `distinctAttribute` constraint of the claim cannot be met.
    ConstraintUnmet,
    /// Enough devices match and are free, but too few without taints the request does not
    /// tolerate.
    DeviceTainted,
}

/// Why one request of a pod's claims (or one constraint of a claim) cannot be met on a node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RequestFailure {
    /// The claim's name (in the pod's namespace).
    pub claim: String,
    /// The request's name, `request/subrequest` for an entry of a prioritized list; for a
    /// constraint, the requests it names (`, `-separated).
    pub request: String,
    /// The category.
    pub kind: FailureKind,
    /// What was found, with the numbers.
    pub message: String,
}

/// What one request (or subrequest) finds among the node's devices.
#[derive(Debug, Default)]
struct Tally {
    /// Devices of the node's complete, valid pools.
    devices: usize,
    /// Of them, devices placement never allocates (binding conditions).
    unsupported: usize,
    /// Pools for the node that are being updated (incomplete) or invalid: not counted.
    unusable_pools: usize,
    /// Devices matching the class's selectors.
    of_class: usize,
    /// Devices matching the class's and the request's selectors (and per-device node selection).
    matching: usize,
    /// Matching devices in use (allocated to a claim).
    in_use: usize,
    /// Matching devices not in use whose shared counters are taken.
    no_counters: usize,
    /// Matching devices not in use, with their counters, without the capacity the request asks
    /// for (beside what their shares consume), or whose policy the request violates.
    no_capacity: usize,
    /// Matching devices with a taint the request does not tolerate.
    tainted: usize,
    /// Matching devices not in use, with their counters, whatever their taints.
    available: usize,
    /// Matching devices not in use, with their counters, without untolerated taints.
    free: usize,
    /// The untolerated taints, `key=value:Effect`.
    taints: BTreeSet<String>,
}

fn taint_text(t: &crate::engine::devices::DeviceTaint) -> String {
    let effect = match t.effect {
        DeviceTaintEffect::NoSchedule => "NoSchedule",
        DeviceTaintEffect::PreferNoSchedule => "PreferNoSchedule",
        DeviceTaintEffect::NoExecute => "NoExecute",
    };
    if t.value.is_empty() {
        format!("{}:{effect}", t.key)
    } else {
        format!("{}={}:{effect}", t.key, t.value)
    }
}

fn value_text(v: &AttributeValue) -> String {
    match v {
        AttributeValue::Int(i) => i.to_string(),
        AttributeValue::Bool(b) => b.to_string(),
        AttributeValue::String(s) | AttributeValue::Version(s) => format!("{s:?}"),
    }
}

fn devices(n: usize) -> String {
    if n == 1 {
        "1 device".to_string()
    } else {
        format!("{n} devices")
    }
}

impl Tally {
    /// The failure of a request asking for `mode` of class `class`, if it fails alone.
    fn failure(&self, mode: AllocationMode, class: &str) -> Option<(FailureKind, String)> {
        let not_free = |t: &Self| {
            let mut parts = Vec::new();
            if t.in_use > 0 {
                parts.push(format!("{} allocated to claims", t.in_use));
            }
            if t.no_counters > 0 {
                parts.push(format!("{} without free shared counters", t.no_counters));
            }
            if t.no_capacity > 0 {
                parts.push(format!(
                    "{} without enough capacity left for the request",
                    t.no_capacity
                ));
            }
            if t.tainted > 0 {
                parts.push(format!(
                    "{} with taints the request does not tolerate ({})",
                    t.tainted,
                    t.taints.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
            parts.join(", ")
        };
        let requested = match mode {
            AllocationMode::ExactCount(n) => usize::try_from(n).unwrap_or(0),
            AllocationMode::All => self.matching.max(1),
        };
        if requested == 0 {
            return None;
        }
        if self.matching < requested {
            let mut m = match (mode, self.devices, self.of_class, self.matching) {
                (_, 0, _, _) => "the node has no devices".to_string(),
                (_, n, 0, _) => format!("none of the node's {} is of class {class}", devices(n)),
                (_, _, c, 0) => format!("{} of class {class}, none matches the request's selectors", devices(c)),
                (_, n, _, m) => format!(
                    "{requested} requested, only {m} of the node's {} {} class {class} and the request's selectors",
                    devices(n),
                    if m == 1 { "matches" } else { "match" }
                ),
            };
            if self.unsupported > 0 {
                m.push_str(&format!(
                    " ({} with binding conditions, which placement does not allocate)",
                    self.unsupported
                ));
            }
            if self.unusable_pools > 0 {
                let s = if self.unusable_pools == 1 { "" } else { "s" };
                m.push_str(&format!(
                    "; {} pool{s} for the node incomplete or invalid, not counted",
                    self.unusable_pools
                ));
            }
            return Some((FailureKind::NoMatchingDevice, m));
        }
        let (ok, tainted_only) = match mode {
            AllocationMode::ExactCount(_) => (self.free >= requested, self.available >= requested),
            // All: every matching device, so none may be unavailable or tainted.
            AllocationMode::All => (self.free == self.matching, self.available == self.matching),
        };
        if ok {
            return None;
        }
        let asked = match mode {
            AllocationMode::ExactCount(_) => format!("{requested} requested"),
            AllocationMode::All => "all requested".to_string(),
        };
        let kind = if tainted_only {
            FailureKind::DeviceTainted
        } else {
            FailureKind::DevicesAllocated
        };
        Some((
            kind,
            format!("{asked}; {} match, {}", devices(self.matching), not_free(self)),
        ))
    }
}

impl<'s, 'a> Search<'s, 'a> {
    /// What request `ci`/`ri`/`si` finds among the node's devices; with `values`, also the
    /// free matching devices' values of `attribute` (by location, so that a device two requests
    /// match counts once).
    fn tally(
        &mut self,
        ci: usize,
        ri: usize,
        si: usize,
        mut values: Option<(&str, &mut HashMap<Loc, Option<&'a AttributeValue>>)>,
    ) -> Result<Tally, AllocateError> {
        let mut t = Tally::default();
        let (class, spec, admin) = {
            let d = &self.request_data[ci][ri][si];
            (d.class, d.spec, d.admin_access)
        };
        for pi in 0..self.pools.len() {
            if self.pools[pi].incomplete || self.pools[pi].invalid {
                t.unusable_pools += 1;
                continue;
            }
            for sl in 0..self.pools[pi].slices.len() {
                let slice = self.pools[pi].slices[sl];
                for (d, device) in slice.devices.iter().enumerate() {
                    t.devices += 1;
                    if device.has_binding_conditions {
                        t.unsupported += 1;
                        continue;
                    }
                    let loc = Loc {
                        pool: pi,
                        slice: sl,
                        device: d,
                    };
                    if !self.is_selectable(ci, ri, si, class, spec, loc)? {
                        if self.class_matches(class, loc) {
                            t.of_class += 1;
                        }
                        continue;
                    }
                    t.of_class += 1;
                    t.matching += 1;
                    let id = Self::device_id(slice, device);
                    let in_use = !admin && self.in_use(&id);
                    let skip_counters = device.allow_multiple_allocations && self.capacity_in_use(&id);
                    let counters = !in_use
                        && !skip_counters
                        && !device.consumes_counters.is_empty()
                        && if self.check_available_counters(pi, device) {
                            self.deallocate_counters(pi, device);
                            false
                        } else {
                            true
                        };
                    let tainted = taint_prevents_allocation(device, spec);
                    let no_capacity = !in_use && !counters && {
                        let current = self.alloc.allocated.consumed(&id);
                        !matches!(
                            super::capacity::fits(
                                current.as_ref(),
                                &spec.capacity_requests,
                                device,
                                self.allocating_capacity.get(&id)
                            ),
                            Ok(true)
                        )
                    };
                    t.in_use += usize::from(in_use);
                    t.no_counters += usize::from(counters);
                    t.no_capacity += usize::from(no_capacity);
                    if tainted {
                        t.tainted += 1;
                        t.taints.extend(
                            device
                                .taints
                                .iter()
                                .filter(|taint| {
                                    matches!(
                                        taint.effect,
                                        DeviceTaintEffect::NoSchedule | DeviceTaintEffect::NoExecute
                                    ) && !spec.tolerations.iter().any(|tol| tol.tolerates(taint))
                                })
                                .map(taint_text),
                        );
                    }
                    if !in_use && !counters && !no_capacity {
                        t.available += 1;
                        if !tainted {
                            t.free += 1;
                            if let Some((attribute, values)) = values.as_mut() {
                                values.insert(loc, lookup_attribute(device, &slice.driver, attribute));
                            }
                        }
                    }
                }
            }
        }
        Ok(t)
    }

    /// Whether the device at `loc` matches the class's selectors (a selector that fails counts
    /// as no match: [`Search::is_selectable`] has reported such errors already).
    fn class_matches(&self, class: &crate::engine::devices::DeviceClass, loc: Loc) -> bool {
        let Some((slice, device)) = self.device(loc) else {
            return false;
        };
        let shape = self.alloc.slices.shape(device);
        class
            .selectors
            .iter()
            .all(|e| matches!(self.alloc.cel.matches_shaped(e, &slice.driver, device, shape), Ok(true)))
    }

    /// The failure of constraint `j` of claim `ci`: how many devices its requests need and the
    /// values of its attribute among the free devices that match them.
    fn constraint_failure(&mut self, ci: usize, j: usize) -> Result<RequestFailure, AllocateError> {
        let (requests, attribute, distinct) = {
            let c = &self.constraints[ci][j];
            (c.requests, c.attribute, c.distinct)
        };
        let claim = self.claims[ci];
        let mut values: HashMap<Loc, Option<&'a AttributeValue>> = HashMap::new();
        let mut needed = 0usize;
        for ri in 0..claim.requests.len() {
            let mut least: Option<usize> = None;
            for si in 0..self.request_data[ci][ri].len() {
                let (name, parent, num) = {
                    let d = &self.request_data[ci][ri][si];
                    (d.name, d.parent, d.num_devices)
                };
                let applies = {
                    let c = &self.constraints[ci][j];
                    match parent {
                        Some(p) => c.applies(p, Some(name)),
                        None => c.applies(name, None),
                    }
                };
                if !applies {
                    continue;
                }
                self.tally(ci, ri, si, Some((attribute, &mut values)))?;
                least = Some(least.map_or(num, |l: usize| l.min(num)));
            }
            needed += least.unwrap_or(0);
        }
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        let mut without = 0;
        for v in values.values() {
            match v {
                Some(v) => *counts.entry(value_text(v)).or_default() += 1,
                None => without += 1,
            }
        }
        let mut found: Vec<String> = counts.iter().map(|(v, n)| format!("{v} ({n})")).collect();
        if without > 0 {
            found.push(format!("{without} without the attribute"));
        }
        let found = if found.is_empty() {
            "no free device matches".to_string()
        } else {
            format!("the free devices that match have {}", found.join(", "))
        };
        let (name, must) = if distinct {
            ("distinctAttribute", "must each have a value of their own")
        } else {
            ("matchAttribute", "must share one value")
        };
        let request = if requests.is_empty() {
            claim
                .requests
                .iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        } else {
            requests.join(", ")
        };
        Ok(RequestFailure {
            claim: claim.name.clone(),
            request,
            kind: FailureKind::ConstraintUnmet,
            message: format!("{name} {attribute}: {needed} devices {must}; {found}"),
        })
    }
}

impl<'a> Allocator<'a> {
    /// Why `claims` (the pod's claims to allocate, in order) cannot be allocated on `node`: the
    /// requests that fail and why (see the module's documentation); empty when they can be. An
    /// error is the one [`Allocator::allocate`] meets (a broken selector, a class gone, …).
    pub fn diagnose(
        &self,
        node: &NodeSpec,
        claims: &[&'a ResourceClaim],
    ) -> Result<Vec<RequestFailure>, AllocateError> {
        // 1. Each request on its own.
        let mut search = self.prepare(node, claims)?;
        let mut failures = Vec::new();
        for (ci, claim) in claims.iter().enumerate() {
            for ri in 0..claim.requests.len() {
                let mut request_failures = Vec::new();
                for si in 0..search.request_data[ci][ri].len() {
                    let (mode, class, name, parent) = {
                        let d = &search.request_data[ci][ri][si];
                        (d.spec.mode, d.class, d.name, d.parent)
                    };
                    match search.tally(ci, ri, si, None)?.failure(mode, &class.name) {
                        Some((kind, message)) => request_failures.push(RequestFailure {
                            claim: claim.name.clone(),
                            request: match parent {
                                Some(p) => format!("{p}/{name}"),
                                None => name.to_string(),
                            },
                            kind,
                            message,
                        }),
                        // One subrequest that can be met is enough.
                        None => {
                            request_failures.clear();
                            break;
                        }
                    }
                }
                failures.extend(request_failures);
            }
        }
        if !failures.is_empty() {
            return Ok(failures);
        }
        // 2. The requests together, claim after claim, without constraints.
        for k in 1..=claims.len() {
            if self.trial(node, &claims[..k], |_, _| false)? {
                continue;
            }
            let claim = claims[k - 1];
            let requests: Vec<&str> = claim.requests.iter().map(|r| r.name.as_str()).collect();
            let message = match (k, requests.len()) {
                // One request that can be met alone but not as a whole: its devices' shared
                // counters do not cover them together.
                (1, 1) => "enough matching devices are free one by one, but their shared counters do not cover \
                           them together"
                    .to_string(),
                (1, _) => format!(
                    "each request can be met alone, but too few devices are free for {} together",
                    requests.join(" and ")
                ),
                _ => {
                    let earlier: Vec<&str> = claims[..k - 1].iter().map(|c| c.name.as_str()).collect();
                    format!(
                        "can be met alone, but too few devices are free once the pod's claim{} {} {} theirs",
                        if earlier.len() == 1 { "" } else { "s" },
                        earlier.join(", "),
                        if earlier.len() == 1 { "has" } else { "have" }
                    )
                }
            };
            return Ok(vec![RequestFailure {
                claim: claim.name.clone(),
                request: requests.join(", "),
                kind: FailureKind::DevicesAllocated,
                message,
            }]);
        }
        // 3. With the constraints, claim after claim: each constraint alone, then all of them.
        for k in 1..=claims.len() {
            let last = k - 1;
            if self.trial(node, &claims[..k], |_, _| true)? {
                continue;
            }
            let mut search = self.prepare(node, &claims[..k])?;
            for j in 0..claims[last].constraints.len() {
                if !self.trial(node, &claims[..k], |ci, i| ci < last || i == j)? {
                    return Ok(vec![search.constraint_failure(last, j)?]);
                }
            }
            let mut out = Vec::new();
            for j in 0..claims[last].constraints.len() {
                let mut f = search.constraint_failure(last, j)?;
                f.message
                    .push_str(" (met alone, not together with the claim's other constraints)");
                out.push(f);
            }
            return Ok(out);
        }
        Ok(Vec::new())
    }

    /// Whether `claims` can be allocated on `node` with only the constraints `keep(claim,
    /// constraint)` selects.
    fn trial(
        &self,
        node: &NodeSpec,
        claims: &[&'a ResourceClaim],
        keep: impl Fn(usize, usize) -> bool,
    ) -> Result<bool, AllocateError> {
        let mut search = self.prepare(node, claims)?;
        for (ci, constraints) in search.constraints.iter_mut().enumerate() {
            let mut i = 0;
            constraints.retain(|_| {
                i += 1;
                keep(ci, i - 1)
            });
        }
        match search.allocate_one(Indices::default(), false, Loc::default()) {
            Ok(done) => Ok(done),
            Err(Stop::MaxSize) => Err(AllocateError::MaxSizeExceeded),
            Err(Stop::Fatal(e)) => Err(e),
        }
    }
}
