//! Allocating one device to a request (kube's `allocateDevice`: taints, the request's selectors,
//! constraints, counters and consumable capacity), and undoing it when the search backtracks.

use super::*;

impl<'s, 'a> Search<'s, 'a> {
    /// kube's `allocateDevice`: checks that the device is free, has the counters it consumes,
    /// is tolerated and satisfies the claim's constraints; if so records it and returns what to
    /// undo. With `must`, a constraint the device breaks is an error.
    pub(super) fn allocate_device(&mut self, r: Indices, loc: Loc, must: bool) -> Result<Option<Undo>, AllocateError> {
        let Some((slice, device)) = self.device(loc) else {
            return Ok(None);
        };
        let id = Self::device_id(slice, device);
        let data = &self.request_data[r.claim][r.request][r.sub];
        let (admin, spec, name, parent) = (data.admin_access, data.spec, data.name, data.parent);
        let multiple = device.allow_multiple_allocations;
        if !multiple && admin && self.allocating_for_claim(&id, r.claim) {
            return Ok(None);
        }
        if !admin && self.in_use(&id) {
            return Ok(None);
        }
        let mut undo = Undo::default();
        // A shared device in use has its counters counted already: a further share does not
        // consume them again.
        let skip_counters = multiple && self.capacity_in_use(&id);
        if !skip_counters && !device.consumes_counters.is_empty() {
            if !self.check_available_counters(loc.pool, device) {
                return Ok(None);
            }
            undo.counters_reserved = true;
        }
        let (base, sub) = match parent {
            Some(p) => (p, Some(name)),
            None => (name, None),
        };
        if taint_prevents_allocation(device, spec) {
            self.rollback_parts(r, loc, undo, base, sub);
            return Ok(None);
        }
        let driver = &*slice.driver;
        for i in 0..self.constraints[r.claim].len() {
            if !self.constraints[r.claim][i].add(base, sub, device, driver) {
                self.rollback_parts(r, loc, undo, base, sub);
                if must {
                    return Err(AllocateError::ConstraintNotSatisfiable {
                        claim: kobj(self.claims[r.claim]),
                        request: name.to_string(),
                        device: id,
                    });
                }
                return Ok(None);
            }
            undo.constraints_added += 1;
        }
        if !multiple {
            self.allocating.entry(id.clone()).or_default().push(r.claim);
            undo.device_marked = true;
        }
        match self.capacity_fits(r, &id, device, "rechecking capacity for device") {
            Ok(true) => {}
            Ok(false) => {
                self.rollback_parts(r, loc, undo, base, sub);
                return Ok(None);
            }
            Err(e) => {
                self.rollback_parts(r, loc, undo, base, sub);
                return Err(e);
            }
        }
        let mut consumed = BTreeMap::new();
        if multiple {
            consumed = match capacity::consumed_by(&spec.capacity_requests, device) {
                Ok(c) => c,
                Err(reason) => {
                    self.rollback_parts(r, loc, undo, base, sub);
                    return Err(AllocateError::Capacity {
                        claim: kobj(self.claims[r.claim]),
                        request: name.to_string(),
                        doing: "computing consumed capacity for device",
                        device: id.to_string(),
                        reason,
                    });
                }
            };
            // kube's allocatingCapacity.Insert.
            undo.capacity_existed = self.allocating_capacity.contains_key(&id);
            crate::engine::devices::add_consumed(self.allocating_capacity.entry(id.clone()).or_default(), &consumed);
            undo.capacity_inserted = true;
        }
        let request = match parent {
            Some(p) => format!("{p}/{name}"),
            None => name.to_string(),
        };
        self.result[r.claim].push(Picked {
            request,
            id,
            loc,
            admin_access: admin.then_some(true),
            spec,
            consumed,
            shared: multiple,
        });
        undo.result_added = true;
        Ok(Some(undo))
    }

    /// kube's `CmpRequestOverCapacity` for request `r` on a device: whether its capacity
    /// requests fit beside the device's shares in use and being allocated; an error (`doing`
    /// says where, in kube's words) when a request cannot be computed.
    pub(super) fn capacity_fits(
        &self,
        r: Indices,
        id: &DeviceId,
        device: &Device,
        doing: &'static str,
    ) -> Result<bool, AllocateError> {
        let data = &self.request_data[r.claim][r.request][r.sub];
        let requests = &data.spec.capacity_requests;
        // Nothing asked of a device without policy while no device is shared: kube's check
        // passes (each capacity consumes its own value, and nothing else does).
        if requests.is_empty()
            && !device.allow_multiple_allocations
            && device.capacity_policies.is_empty()
            && self.allocating_capacity.is_empty()
            && self.alloc.allocated.shared_snapshot.is_empty()
            && self.alloc.allocated.shared_batch.is_empty()
        {
            return Ok(true);
        }
        let current = self.alloc.allocated.consumed(id);
        capacity::fits(current.as_ref(), requests, device, self.allocating_capacity.get(id)).map_err(|reason| {
            AllocateError::Capacity {
                claim: kobj(self.claims[r.claim]),
                request: data.name.to_string(),
                doing,
                device: id.to_string(),
                reason,
            }
        })
    }

    /// kube's `deviceCapacityInUse`: a share of the device is allocated or being allocated.
    pub(super) fn capacity_in_use(&self, id: &DeviceId) -> bool {
        self.alloc.allocated.is_shared(id) || self.allocating_capacity.contains_key(id)
    }

    /// kube's `rollbackDevice` for a device picked for `r`.
    pub(super) fn rollback(&mut self, r: Indices, loc: Loc, undo: Undo) {
        let data = &self.request_data[r.claim][r.request][r.sub];
        let (base, sub) = match data.parent {
            Some(p) => (p, Some(data.name)),
            None => (data.name, None),
        };
        self.rollback_parts(r, loc, undo, base, sub);
    }

    pub(super) fn rollback_parts(&mut self, r: Indices, loc: Loc, undo: Undo, base: &str, sub: Option<&str>) {
        let Some((slice, device)) = self.device(loc) else {
            return;
        };
        if undo.result_added {
            let picked = self.result[r.claim].pop();
            if undo.capacity_inserted {
                // kube's allocatingCapacity.Remove, keeping an entry an earlier share relies on.
                let id = Self::device_id(slice, device);
                let mut empty = false;
                if let (Some(entry), Some(p)) = (self.allocating_capacity.get_mut(&id), &picked) {
                    for (name, a) in &p.consumed {
                        if let Some(v) = entry.get_mut(name) {
                            *v = crate::engine::quantity::Quantity::from_nanos(
                                v.nanos().saturating_sub(a.value.nanos()),
                            );
                        }
                    }
                    empty = entry.values().all(|v| v.is_zero());
                }
                if empty && !undo.capacity_existed {
                    self.allocating_capacity.remove(&id);
                } else if empty {
                    self.allocating_capacity.insert(id, Default::default());
                }
            }
        }
        if undo.device_marked {
            let id = Self::device_id(slice, device);
            if let Some(claims) = self.allocating.get_mut(&id) {
                if let Some(pos) = claims.iter().rposition(|c| *c == r.claim) {
                    claims.remove(pos);
                }
                if claims.is_empty() {
                    self.allocating.remove(&id);
                }
            }
        }
        for i in (0..undo.constraints_added).rev() {
            self.constraints[r.claim][i].remove(base, sub);
        }
        if undo.counters_reserved {
            self.deallocate_counters(loc.pool, device);
        }
    }
}

/// kube's `taintPreventsAllocation`: a `NoSchedule` or `NoExecute` taint the request does not
/// tolerate.
pub(super) fn taint_prevents_allocation(device: &Device, spec: &RequestSpec) -> bool {
    device.taints.iter().any(|taint| {
        matches!(
            taint.effect,
            DeviceTaintEffect::NoSchedule | DeviceTaintEffect::NoExecute
        ) && !spec.tolerations.iter().any(|t| t.tolerates(taint))
    })
}
