//! Which devices a request may take: kube's `validateDeviceRequest` and `isSelectable`
//! (`allocator_incubating.go`).

use super::*;

impl<'s, 'a> Search<'s, 'a> {
    /// kube's `validateDeviceRequest`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn validate_request(
        &mut self,
        ci: usize,
        ri: usize,
        si: usize,
        spec: &'a RequestSpec,
        name: &'a str,
        parent: Option<&'a str>,
        admin_access: bool,
    ) -> Result<RequestData<'a>, AllocateError> {
        let claim = self.claims[ci];
        if spec.class.is_empty() {
            return Err(AllocateError::MissingClassName {
                claim: kobj(claim),
                request: name.to_string(),
            });
        }
        let class = (self.alloc.classes)(&spec.class).ok_or_else(|| AllocateError::ClassNotFound {
            claim: kobj(claim),
            request: name.to_string(),
            class: spec.class.clone(),
        })?;
        let mut data = RequestData {
            spec,
            name,
            parent,
            admin_access,
            class,
            num_devices: 0,
            all_devices: Vec::new(),
        };
        match spec.mode {
            // A negative count (refused by API validation) asks for no device.
            AllocationMode::ExactCount(n) => data.num_devices = usize::try_from(n).unwrap_or(0),
            AllocationMode::All => {
                for pi in 0..self.pools.len() {
                    let (incomplete, invalid, slices) = {
                        let pool = &self.pools[pi];
                        (pool.incomplete, pool.invalid, pool.slices.clone())
                    };
                    if incomplete {
                        return Err(AllocateError::AllDevicesPoolIncomplete {
                            claim: kobj(claim),
                            request: name.to_string(),
                            pool: self.pools[pi].id(),
                        });
                    }
                    if invalid {
                        return Err(AllocateError::AllDevicesPoolInvalid {
                            claim: kobj(claim),
                            request: name.to_string(),
                            pool: self.pools[pi].id(),
                        });
                    }
                    for (sl, slice) in slices.iter().enumerate() {
                        for d in 0..slice.devices.len() {
                            let loc = Loc {
                                pool: pi,
                                slice: sl,
                                device: d,
                            };
                            if !self.is_selectable(ci, ri, si, class, spec, loc)? {
                                continue;
                            }
                            // Static capacity only: what is left is checked when allocating.
                            let device = &slice.devices[d];
                            match capacity::fits(None, &spec.capacity_requests, device, None) {
                                Ok(true) => data.all_devices.push(loc),
                                Ok(false) => {}
                                Err(reason) => {
                                    return Err(AllocateError::Capacity {
                                        claim: kobj(claim),
                                        request: name.to_string(),
                                        doing: "checking capacity for device",
                                        device: device.name.to_string(),
                                        reason,
                                    })
                                }
                            }
                        }
                    }
                }
                data.num_devices = data.all_devices.len();
            }
        }
        Ok(data)
    }

    /// kube's `isSelectable`: class selectors, request selectors, per-device node selection.
    /// Devices this port does not allocate (multiple allocations, binding conditions) are not
    /// selectable.
    pub(super) fn is_selectable(
        &mut self,
        ci: usize,
        ri: usize,
        si: usize,
        class: &'a DeviceClass,
        spec: &'a RequestSpec,
        loc: Loc,
    ) -> Result<bool, AllocateError> {
        let Some((slice, device)) = self.device(loc) else {
            return Ok(false);
        };
        let key = (loc, ci, ri, si);
        if let Some(m) = self.matches.get(&key) {
            return Ok(*m);
        }
        let cel = self.alloc.cel;
        let driver = &*slice.driver;
        let shape = self.alloc.slices.shape(device);
        // Whether the device matches every selector, or the first one that failed (its index).
        let all_match = |selectors: &[Arc<str>]| -> Result<bool, (usize, CelError)> {
            for (i, expr) in selectors.iter().enumerate() {
                if !cel.matches_shaped(expr, driver, device, shape).map_err(|e| (i, e))? {
                    return Ok(false);
                }
            }
            Ok(true)
        };
        let device_id = || Self::device_id(slice, device);
        let class_match = all_match(&class.selectors).map_err(|(index, source)| match source {
            CelError::Compile(_) => AllocateError::ClassSelectorCompile {
                class: class.name.clone(),
                index,
                source: Box::new(source),
            },
            _ => AllocateError::ClassSelectorRuntime {
                class: class.name.clone(),
                index,
                device: device_id(),
                source: Box::new(source),
            },
        })?;
        let request_match = class_match
            && all_match(&spec.selectors).map_err(|(index, source)| {
                let claim = kobj(self.claims[ci]);
                match source {
                    CelError::Compile(_) => AllocateError::ClaimSelectorCompile {
                        claim,
                        index,
                        source: Box::new(source),
                    },
                    _ => AllocateError::ClaimSelectorRuntime {
                        claim,
                        index,
                        device: device_id(),
                        source: Box::new(source),
                    },
                }
            })?;
        if !request_match {
            self.matches.insert(key, false);
            return Ok(false);
        }
        if slice.node_selection == NodeSelection::FromSlice && !node_matches(self.node, &device.node_selection) {
            self.matches.insert(key, false);
            return Ok(false);
        }
        self.matches.insert(key, true);
        Ok(true)
    }
}
