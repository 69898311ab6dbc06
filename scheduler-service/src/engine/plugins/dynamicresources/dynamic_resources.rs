//! DynamicResources (kube-scheduler's `framework/plugins/dynamicresources/dynamicresources.go`):
//! its PreFilter ([`PodDevices::pre_filter`]: the pod's claims exist and are not being deleted,
//! their classes exist, the allocated ones restrict the nodes), its Filter
//! ([`PodDevices::filter`]: the allocated claims' node selectors match, the others are allocated
//! on the node by the structured allocator), its Score ([`score`]: prioritized lists' first
//! choices preferred) and its Reserve ([`PodDevices::reserve`]: what a batch allocated is no one
//! else's). Messages are kube's, word for word.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::allocator::diagnose::RequestFailure;
use super::allocator::{AllocateError, Allocator};
use super::cel::SelectorCache;
use super::device_packing::Packing;
use super::extended_resources::{ExtendedClaim, ExtendedResources};
use crate::engine::devices::{
    Allocation, DeviceId, DeviceIndex, DeviceObjects, Fit, InUse, PodClaimRef, RequestKind, ResourceClaim, SliceIndex,
};
use crate::engine::model::{NodeSpec, PodSpec, SelectorTerm};

/// kube's `FirstAvailableDeviceRequestMaxSize`: the score of a prioritized list's first choice.
pub const FIRST_AVAILABLE_MAX: i64 = 8;

/// Most verdicts a pod keeps (distinct node device signatures); past it, nodes are allocated
/// for one by one.
const MAX_VERDICTS: usize = 64;

/// Filter's rejection when a claim to allocate cannot be allocated on the node.
pub const CANNOT_ALLOCATE: &str = "cannot allocate all claims";
/// Filter's rejection when an allocated claim's node selector does not match the node.
pub const NOT_AVAILABLE: &str = "resourceclaim not available on the node";
/// PostFilter's message when it deallocated a claim (`deallocateOrDeletePodClaims`).
pub const DEALLOCATED: &str = "deallocation of ResourceClaim completed";

/// A claim kube's PostFilter deallocates (`dynamicresources.go`, `deallocateOrDeletePodClaims`):
/// the caller clears its `status.allocation`, `status.reservedFor` and `status.devices` in one
/// status update, so that the pod's next attempt allocates it elsewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimDeallocation {
    /// The claim's namespace.
    pub namespace: String,
    /// The claim's name.
    pub name: String,
    /// The claim's uid, as the snapshot had it.
    pub uid: String,
}

/// A claim allocated for one pod of a batch: the claim's identity and `status.allocation`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimAllocation {
    /// The claim's namespace.
    pub namespace: String,
    /// The claim's name.
    pub name: String,
    /// The claim's uid.
    pub uid: String,
    /// The allocation chosen.
    pub allocation: Allocation,
    /// For the pod's special claim for extended resources backed by DRA, which does not exist
    /// yet (its name and uid are empty): what the caller creates it with.
    pub extended: Option<ExtendedClaim>,
}

/// What the pods of a batch placed so far allocated (kube's in-flight allocations of the
/// claims tracker): claims allocated, by `namespace/name`, and their devices.
#[derive(Debug, Default, Clone)]
pub struct BatchDevices {
    claims: HashMap<String, Allocation>,
    in_use: imbl::HashSet<DeviceId>,
    /// The devices the batch took, by node index, as bits in the node's signature order (a
    /// dense vector shared with the pods decided since: a placement copies its pointers, a pod's
    /// view copies nothing).
    busy_nodes: Arc<BatchBusy>,
    /// The shared devices the batch took, with the capacity its shares consume.
    shared: imbl::HashMap<DeviceId, crate::engine::devices::Consumed>,
    /// Per node index with shared devices the batch took: the sum of their
    /// [`crate::engine::devices::shared_term`]s (batch consumption only).
    shared_nodes: imbl::HashMap<usize, u64>,
}

/// The devices a batch took, by node index, as bits in the node's signature order.
type BatchBusy = Vec<Option<Arc<[u64]>>>;

/// A node device signature and the verdict of a pod's claims on nodes of that signature.
type Verdict = (u64, Result<Fit, Rejection>);

impl BatchDevices {
    /// Records a placed pod's allocations on node `node` (its index in the snapshot; kube's
    /// Reserve: `SignalClaimPendingAllocation`), `slices` placing their devices in the node's
    /// signature order.
    pub fn record(&mut self, slices: &SliceIndex, node: usize, allocated: &[ClaimAllocation]) {
        let mut bits = crate::engine::devices::BusyNodes::default();
        // With signatures in use every device is node-local: the pod's node's.
        slices.in_use_bits(
            &mut bits,
            |_| Some(node as u32),
            allocated
                .iter()
                .flat_map(|c| c.allocation.devices.iter())
                .filter(|d| d.admin_access != Some(true) && d.share_id.is_none())
                .map(|d| &d.device),
        );
        for (node, b) in bits {
            let busy = Arc::make_mut(&mut self.busy_nodes);
            let n = node as usize;
            if busy.len() <= n {
                busy.resize(n + 1, None);
            }
            let mut merged: Vec<u64> = busy[n].as_deref().unwrap_or_default().to_vec();
            if merged.len() < b.len() {
                merged.resize(b.len(), 0);
            }
            for (w, x) in merged.iter_mut().zip(b) {
                *w |= x;
            }
            busy[n] = Some(Arc::from(merged));
        }
        for c in allocated {
            for d in &c.allocation.devices {
                if d.admin_access == Some(true) {
                    continue;
                }
                if d.share_id.is_none() {
                    self.in_use.insert(d.device.clone());
                    continue;
                }
                // A share: its capacity is counted on the device, and on the node's signature.
                let old = self.shared.get(&d.device).cloned();
                let mut consumed = old.clone().unwrap_or_default();
                crate::engine::devices::add_consumed(&mut consumed, &d.consumed_capacity);
                if let Some((_, i)) = slices.position(&d.device) {
                    let t = self.shared_nodes.entry(node).or_default();
                    if let Some(old) = &old {
                        *t = t.wrapping_sub(crate::engine::devices::shared_term(i, old));
                    }
                    *t = t.wrapping_add(crate::engine::devices::shared_term(i, &consumed));
                }
                self.shared.insert(d.device.clone(), consumed);
            }
            // The special claim is the pod's alone: no later pod looks it up.
            if c.extended.is_none() {
                self.claims
                    .insert(format!("{}/{}", c.namespace, c.name), c.allocation.clone());
            }
        }
    }
}

/// Why Filter rejects a node, or fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// `UnschedulableAndUnresolvable` with kube's message.
    Unschedulable(String),
    /// An error (a broken selector, a class gone): kube aborts the pod's scheduling cycle with it.
    Error(String),
}

/// DynamicResources' PreFilter state for one pod (kube's `stateData`).
#[derive(Debug, Clone)]
pub struct PodDevices {
    /// The pod's claims, in `spec.resourceClaims` order (entries without a claim left out),
    /// with an allocation made earlier in the batch filled in.
    claims: Vec<Arc<ResourceClaim>>,
    /// Per claim: the nodes its allocation is available on (`None`: not allocated, or every node).
    available_on: Vec<Option<Vec<SelectorTerm>>>,
    /// Indices of the claims to allocate.
    to_allocate: Vec<usize>,
    /// The objects the allocator reads (shared, copy-on-write).
    objects: DeviceObjects,
    /// Every ResourceSlice, by node.
    slices: Arc<SliceIndex>,
    /// The devices in use: the snapshot's allocated claims' and the batch's.
    in_use: InUse,
    /// The compiled selectors.
    cel: Arc<SelectorCache>,
    /// The first error Filter met (kube aborts the pod's scheduling cycle with it).
    error: Arc<std::sync::Mutex<Option<String>>>,
    /// The nodes with devices in use (the snapshot's, then the batch's): their signatures take
    /// the devices in use into account.
    busy_nodes: (Arc<crate::engine::devices::BusyNodes>, Arc<BatchBusy>),
    /// The nodes with shared devices in use (the snapshot's, then the batch's): the sums of
    /// their [`crate::engine::devices::shared_term`]s, which their signatures take into account.
    shared_nodes: (Arc<std::collections::HashMap<u32, u64>>, imbl::HashMap<usize, u64>),
    /// Each node's base signature, in snapshot order.
    signatures: Arc<[Option<u64>]>,
    /// Filter's verdict (and Score's raw score) per node device signature
    /// ([`SliceIndex::base_signature`], [`SliceIndex::with_use`]): nodes whose devices look alike are allocated for once.
    verdicts: Arc<std::sync::Mutex<Vec<Verdict>>>,
    /// What the pod's claims ask ([`crate::engine::devices::claims_key`]) and the snapshot's
    /// index whose verdicts pods share, when none of its claims is allocated.
    shared: Option<(u64, Arc<DeviceIndex>)>,
    /// The pod's extended resources backed by DRA, when it requests some (its special claim).
    extended: Option<ExtendedResources>,
    /// How long Filter's allocation on one node may search (kube's
    /// `DynamicResourcesArgs.filterTimeout`); `None`: no limit.
    filter_timeout: Option<std::time::Duration>,
    /// Per claim (in `claims` order): allocated, and its devices' binding failed or timed out
    /// ([`PodDevices::with_binding_timeout`]).
    binding_stuck: Vec<bool>,
    /// Placement's `DevicePacking`, when the profile enables it ([`PodDevices::with_packing`]).
    packing: Option<Arc<Packing>>,
}

/// The process's compiled DRA selectors (kube's scheduler-wide `cel.Cache`).
pub fn selectors() -> &'static Arc<SelectorCache> {
    static CACHE: std::sync::LazyLock<Arc<SelectorCache>> = std::sync::LazyLock::new(|| Arc::new(SelectorCache::new()));
    &CACHE
}

/// The claim name a pod's entry refers to (kube's `resourceclaim.Name`): `Ok(None)` when the
/// entry needs no claim, `Err` with kube's message while the template's claim is not created.
fn claim_name<'a>(pod: &PodSpec, entry: &'a PodClaimRef) -> Result<Option<&'a str>, String> {
    match &entry.claim_name {
        Some(name) if name.is_empty() => Ok(None),
        Some(name) => Ok(Some(name)),
        None => Err(format!(
            "pod \"{}/{}\": ResourceClaim not created yet",
            pod.namespace, pod.name
        )),
    }
}

/// kube's `resourceclaim.IsForPod` (`k8s.io/dynamic-resource-allocation/resourceclaim/
/// resourceclaim.go`), which `foreachPodResourceClaim` (`dynamicresources.go`) calls on a claim
/// reached through a template (`resourceclaim.Name`'s `mustCheckOwner`): the pod must be the
/// claim's controller. Its error becomes PreFilter's `UnschedulableAndUnresolvable` status
/// (`podResourceClaims`, `statusUnschedulable`). The namespace check cannot fail here (the claim
/// is looked up in the pod's namespace), nor the PodGroup owner (`DRAWorkloadResourceClaims`, off
/// in 1.37). A claim whose controller the caller did not send is not checked.
fn is_for_pod(pod: &PodSpec, claim: &ResourceClaim) -> Result<(), String> {
    match &claim.controller_uid {
        Some(uid) if uid.as_str() != &*pod.uid => Err(format!(
            "ResourceClaim {}/{} was not created for Pod {}/{} (Pod is not owner)",
            claim.namespace, claim.name, pod.namespace, pod.name
        )),
        _ => Ok(()),
    }
}

impl PodDevices {
    /// kube's PreFilter: `Ok(None)` when the pod uses no claim (Skip), `Err` with the message of
    /// an `UnschedulableAndUnresolvable` status for every node.
    pub fn pre_filter(
        objects: &DeviceObjects,
        index: &Arc<DeviceIndex>,
        cel: &Arc<SelectorCache>,
        pod: &PodSpec,
        batch: &BatchDevices,
    ) -> Result<Option<Self>, String> {
        let extended = ExtendedResources::of(objects, pod);
        if pod.resource_claims.is_empty() && extended.is_none() {
            return Ok(None);
        }
        let mut claims = Vec::with_capacity(pod.resource_claims.len());
        for entry in &pod.resource_claims {
            let Some(name) = claim_name(pod, entry)? else {
                continue;
            };
            let key = format!("{}/{}", pod.namespace, name);
            let Some(claim) = objects.claims.get(&key) else {
                return Err(format!("could not find ResourceClaim \"{key}\""));
            };
            if claim.deleting {
                return Err(format!("resourceclaim \"{name}\" is being deleted"));
            }
            if entry.from_template {
                is_for_pod(pod, claim)?;
            }
            let claim = match batch.claims.get(&key) {
                // Allocated for an earlier pod of the batch: allocated, for this one.
                Some(a) if claim.allocation.is_none() => {
                    let mut c = (**claim).clone();
                    c.allocation = Some(a.clone());
                    Arc::new(c)
                }
                _ => Arc::clone(claim),
            };
            claims.push(claim);
        }
        if claims.is_empty() && extended.is_none() {
            return Ok(None);
        }
        let mut available_on = Vec::with_capacity(claims.len());
        let mut to_allocate = Vec::new();
        for (i, claim) in claims.iter().enumerate() {
            match &claim.allocation {
                Some(a) => available_on.push(a.node_selector.clone()),
                None => {
                    available_on.push(None);
                    to_allocate.push(i);
                    for request in &claim.requests {
                        match &request.kind {
                            RequestKind::Exactly(spec) => validate_class(objects, &spec.class, &request.name)?,
                            RequestKind::FirstAvailable(subs) => {
                                for (sub, spec) in subs {
                                    validate_class(objects, &spec.class, &format!("{}/{sub}", request.name))?;
                                }
                            }
                        }
                    }
                }
            }
        }
        let in_use = InUse {
            snapshot: Arc::clone(&index.in_use),
            batch: batch.in_use.clone(),
            shared_snapshot: Arc::clone(&index.shared),
            shared_batch: batch.shared.clone(),
        };
        let shared_nodes = (Arc::clone(&index.shared_nodes), batch.shared_nodes.clone());
        let busy_nodes = (Arc::clone(&index.busy_nodes), Arc::clone(&batch.busy_nodes));
        // Pods whose claims all wait for an allocation share verdicts through the snapshot (not
        // those with a special claim, which differs from node to node).
        let claims_key = (to_allocate.len() == claims.len() && extended.is_none())
            .then(|| crate::engine::devices::claims_key(claims.iter().map(|c| &**c)));
        Ok(Some(Self {
            claims,
            available_on,
            to_allocate,
            objects: objects.clone(),
            slices: Arc::clone(&index.slices),
            in_use,
            cel: Arc::clone(cel),
            error: Arc::default(),
            busy_nodes,
            shared_nodes,
            signatures: Arc::clone(&index.signatures),
            verdicts: Arc::default(),
            shared: claims_key.map(|k| (k, Arc::clone(index))),
            extended,
            filter_timeout: None,
            binding_stuck: Vec::new(),
            packing: None,
        }))
    }

    /// The state with Filter's allocation on one node limited to `timeout` (the profile's
    /// `DynamicResourcesArgs.filterTimeout`; `None` or zero: no limit, as kube with `0s`). Past
    /// it, Filter fails on the node with kube's `node <name>: timed out trying to allocate
    /// devices`, an error that ends the pod's scheduling cycle ([`PodDevices::error`]). A timeout
    /// is not shared with other pods' verdicts (errors never are): each pod's search is timed
    /// on its own, as in kube.
    /// The state with placement's `DevicePacking` on (`Some`): Filter's allocation walks each
    /// node's devices in packing order and Score reads the node's packing score
    /// ([`super::device_packing`]).
    pub fn with_packing(mut self, packing: Option<Arc<Packing>>) -> Self {
        if let Some(p) = &packing {
            // The verdicts other pods share hold the packing score, and packing may pick other
            // devices: pods with and without it share none.
            if let Some((key, _)) = &mut self.shared {
                *key = mix(*key, packing_key(p));
            }
        }
        self.packing = packing;
        self
    }

    /// Whether the profile packs devices ([`PodDevices::with_packing`]).
    pub fn packs(&self) -> bool {
        self.packing.is_some()
    }

    pub fn with_filter_timeout(mut self, timeout: Option<std::time::Duration>) -> Self {
        self.filter_timeout = timeout.filter(|t| !t.is_zero());
        self
    }

    /// The state with the claims whose devices' binding failed or timed out marked (kube's
    /// Filter: `isClaimReadyForBinding` returned an error, or the claim is not ready and
    /// `isClaimTimeout`, `bindingTimeout` after its `allocationTimestamp`): such a claim is
    /// not available on any node, so PostFilter may deallocate it and the pod try other devices.
    pub fn with_binding_timeout(mut self, timeout: std::time::Duration) -> Self {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        self.binding_stuck = self.claims.iter().map(|c| binding_stuck(c, timeout, now)).collect();
        self
    }

    /// kube's Filter (and Score) on one node: `Ok` with the node's raw score when the pod's
    /// claims can be allocated there, or the rejection. The allocation is made once per node
    /// device signature ([`SliceIndex::base_signature`], [`SliceIndex::with_use`]): a node whose devices look like those of a
    /// node already evaluated for this pod gets that node's verdict, which the allocator, reading
    /// nothing else of either node, would give it.
    pub fn verdict(&self, index: usize, node: &NodeSpec) -> Result<Fit, Rejection> {
        // kube cancels the Filter calls still running at the first error (the parallelizer's
        // `SendErrorWithCancel`): the pod's cycle ends with it, so no other node is searched
        // (with a filter timeout, each could take that long).
        if let Some(e) = self.error.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            return Err(Rejection::Error(e.clone()));
        }
        let delegated = self.delegated(node)?;
        self.allocated_claims_available(node)?;
        if self.to_allocate.is_empty() && delegated == 0 {
            return Ok(Fit {
                priority: self.score(&[]),
                packing: 0,
            });
        }
        let Some(mut signature) = self.signature(index) else {
            return self.fit(node);
        };
        if let Some(e) = &self.extended {
            // The special claim asks for what the node's allocatable lacks: nodes alike in
            // devices but not in that get verdicts of their own.
            if e.too_many() {
                return self.fit(node);
            }
            signature = mix(signature, delegated);
        }
        // A pod meets few distinct signatures: a short list, scanned, beats a hash table.
        if let Some((_, v)) = self
            .verdicts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(s, _)| *s == signature)
        {
            return v.clone();
        }
        let v = self.shared_verdict(signature, node);
        let mut verdicts = self.verdicts.lock().unwrap_or_else(|e| e.into_inner());
        if verdicts.len() < MAX_VERDICTS {
            verdicts.push((signature, v.clone()));
        }
        v
    }

    /// The device signature of the node at `index` with the devices in use for this pod
    /// ([`SliceIndex::base_signature`], [`SliceIndex::with_use`]), if it has one.
    #[inline]
    pub fn signature(&self, index: usize) -> Option<u64> {
        let snapshot_use = if self.busy_nodes.0.is_empty() {
            None
        } else {
            self.busy_nodes.0.get(&(index as u32)).map(Vec::as_slice)
        };
        let batch_use = self.busy_nodes.1.get(index).and_then(Option::as_deref);
        let base = self.signatures.get(index).copied().flatten()?;
        let sig = match (snapshot_use, batch_use) {
            (None, None) => base,
            (a, b) => SliceIndex::with_use(base, &[a.unwrap_or_default(), b.unwrap_or_default()]),
        };
        // The capacity consumed on the node's shared devices (snapshot, then batch).
        // (Most snapshots share no device: no lookup then.)
        let shared = (
            (!self.shared_nodes.0.is_empty())
                .then(|| self.shared_nodes.0.get(&(index as u32)).copied())
                .flatten(),
            (!self.shared_nodes.1.is_empty())
                .then(|| self.shared_nodes.1.get(&index).copied())
                .flatten(),
        );
        Some(match shared {
            (None, None) => sig,
            (a, b) => mix(
                sig,
                (u128::from(a.unwrap_or(0)) << 64 | u128::from(b.unwrap_or(0))) ^ (1 << 127),
            ),
        })
    }

    /// [`PodDevices::signature`] for Rank's diagnosis: with the pod's special claim, the
    /// extended resources the node must provide through DRA mixed in (nodes alike in devices
    /// but not in allocatable get diagnoses of their own).
    pub fn diagnosis_signature(&self, index: usize, node: &NodeSpec) -> Option<u64> {
        let signature = self.signature(index)?;
        match &self.extended {
            None => Some(signature),
            Some(e) if e.too_many() => None,
            Some(_) => self.delegated(node).ok().map(|d| mix(signature, d)),
        }
    }

    /// Why the pod's claims cannot be allocated on `node`, request by request
    /// ([`Allocator::diagnose`]): empty when they can be, when an allocated claim is not available
    /// there (Filter's own reason says so) or when the allocator meets an error (Filter reports
    /// it). For explanations only: Rank calls it on the nodes Filter refused with
    /// [`CANNOT_ALLOCATE`]; nodes with one [`PodDevices::signature`] get the same answer.
    /// The special claim for extended resources is diagnosed as one more claim, named
    /// `<extended-resources>` (kube's in-memory name), with its requests for the node.
    pub fn diagnose(&self, node: &NodeSpec) -> Vec<RequestFailure> {
        if self.delegated(node).is_err() || self.allocated_claims_available(node).is_err() {
            return Vec::new();
        }
        let special = self
            .extended
            .as_ref()
            .and_then(|e| Some(e.claim(node)?.resource_claim(e.namespace())));
        if self.to_allocate.is_empty() && special.is_none() {
            return Vec::new();
        }
        let classes = |name: &str| self.objects.classes.get(name).map(|c| &**c);
        let allocator = Allocator::new(&classes, &self.slices, &self.in_use, &self.cel);
        let claims: Vec<&ResourceClaim> = self
            .to_allocate
            .iter()
            .map(|&i| &*self.claims[i])
            .chain(special.as_ref())
            .collect();
        allocator.diagnose(node, &claims).unwrap_or_default()
    }

    /// The verdict of the pods of the snapshot whose claims ask what this pod's ask, on nodes of
    /// this signature; computed on `node` (and kept) when there is none yet, or when its search
    /// took at least this pod's filter timeout (kube, searching for this pod, would time out).
    fn shared_verdict(&self, signature: u64, node: &NodeSpec) -> Result<Fit, Rejection> {
        let Some((key, index)) = &self.shared else {
            return self.fit(node);
        };
        let kept = index
            .verdicts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(*key, signature))
            .cloned();
        if let Some((v, took)) = kept {
            if self.filter_timeout.is_none_or(|t| took < t) {
                return v.map_err(Rejection::Unschedulable);
            }
        }
        let started = std::time::Instant::now();
        let v = self.fit(node);
        let took = started.elapsed();
        let keep = match &v {
            Ok(fit) => Some(Ok(*fit)),
            Err(Rejection::Unschedulable(m)) => Some(Err(m.clone())),
            Err(Rejection::Error(_)) => None,
        };
        if let Some(keep) = keep {
            let mut verdicts = index.verdicts.lock().unwrap_or_else(|e| e.into_inner());
            if verdicts.len() >= crate::engine::devices::MAX_SHARED_VERDICTS {
                verdicts.clear();
            }
            verdicts.insert((*key, signature), (keep, took));
        }
        v
    }

    /// kube's `filterExtendedResources`: which of the pod's extended resources `node` must
    /// provide through DRA ([`ExtendedResources::delegated`]), or the rejection.
    fn delegated(&self, node: &NodeSpec) -> Result<u128, Rejection> {
        match &self.extended {
            None => Ok(0),
            Some(e) => e.delegated(node).map_err(|m| Rejection::Unschedulable(m.to_string())),
        }
    }

    /// kube's PostFilter (`dynamicresources.go`, `PostFilter` and `deallocateOrDeletePodClaims`),
    /// for a pod no node fits after Filter rejected some node with [`NOT_AVAILABLE`]: among the
    /// claims allocated (in the snapshot, not by an earlier pod of the batch) whose node selector
    /// does not match one of `nodes` (kube's `unavailableClaims`), the first, in the pod's
    /// order, reserved for no pod or for this pod alone. kube walks a set, in random order; with
    /// one such claim the choice is kube's. kube's set holds the claims unavailable on the nodes
    /// that reached DynamicResources' Filter (the last filter); this one also those unavailable
    /// only on nodes an earlier filter rejected, which matters only when the pod has two such
    /// claims.
    pub fn post_filter<'n>(
        &self,
        pod: &PodSpec,
        nodes: impl Iterator<Item = &'n NodeSpec> + Clone,
    ) -> Option<ClaimDeallocation> {
        self.claims
            .iter()
            .zip(&self.available_on)
            .enumerate()
            .find_map(|(i, (claim, selector))| {
                let selector = selector.as_ref()?;
                let stuck = self.binding_stuck.get(i).copied().unwrap_or(false);
                // Allocated by an earlier pod of the batch: in flight, not the snapshot's.
                let own = self.objects.claims.get(&claim.key())?;
                own.allocation.as_ref()?;
                let unused = match own.reserved_for.as_slice() {
                    [] => true,
                    [only] => only.uid == *pod.uid,
                    _ => false,
                };
                let unavailable = stuck || nodes.clone().any(|n| !selector.iter().any(|t| t.matches(n)));
                (unused && unavailable).then(|| ClaimDeallocation {
                    namespace: own.namespace.clone(),
                    name: own.name.clone(),
                    uid: own.uid.clone(),
                })
            })
    }

    /// kube's Filter for the claims allocated already: their node selectors match `node`.
    fn allocated_claims_available(&self, node: &NodeSpec) -> Result<(), Rejection> {
        if self.binding_stuck.iter().any(|s| *s) {
            return Err(Rejection::Unschedulable(NOT_AVAILABLE.to_string()));
        }
        for selector in self.available_on.iter().flatten() {
            if !selector.iter().any(|t| t.matches(node)) {
                return Err(Rejection::Unschedulable(NOT_AVAILABLE.to_string()));
            }
        }
        Ok(())
    }

    /// The structured allocator on one node: the allocations of the claims to allocate (in
    /// claim order, then the special claim for extended resources when the node must provide
    /// some through DRA), or the rejection.
    pub fn allocate(&self, node: &NodeSpec) -> Result<Vec<Allocation>, Rejection> {
        self.allocate_scored(node).map(|(a, _)| a)
    }

    /// Filter's allocation on `node` and what it scores ([`Fit`]).
    fn fit(&self, node: &NodeSpec) -> Result<Fit, Rejection> {
        self.allocate_scored(node).map(|(a, packing)| Fit {
            priority: self.score(&a),
            packing,
        })
    }

    /// [`PodDevices::allocate`] with `DevicePacking`'s score of the node (0 with it off).
    fn allocate_scored(&self, node: &NodeSpec) -> Result<(Vec<Allocation>, i64), Rejection> {
        // kube's `context.WithTimeout` around the allocator's `Allocate` call in Filter.
        let deadline = self
            .filter_timeout
            .and_then(|t| std::time::Instant::now().checked_add(t));
        self.allocate_until(node, deadline)
    }

    /// [`PodDevices::allocate`] with the search stopped at `deadline`.
    fn allocate_until(
        &self,
        node: &NodeSpec,
        deadline: Option<std::time::Instant>,
    ) -> Result<(Vec<Allocation>, i64), Rejection> {
        self.delegated(node)?;
        self.allocated_claims_available(node)?;
        let special = self
            .extended
            .as_ref()
            .and_then(|e| Some(e.claim(node)?.resource_claim(e.namespace())));
        if self.to_allocate.is_empty() && special.is_none() {
            return Ok((Vec::new(), 0));
        }
        let classes = |name: &str| self.objects.classes.get(name).map(|c| &**c);
        let allocator =
            Allocator::new(&classes, &self.slices, &self.in_use, &self.cel).with_packing(self.packing.as_deref());
        let claims: Vec<&ResourceClaim> = self
            .to_allocate
            .iter()
            .map(|&i| &*self.claims[i])
            .chain(special.as_ref())
            .collect();
        match allocator.allocate_scored(node, &claims, deadline) {
            Ok(Some((results, packing))) if results.len() == claims.len() => Ok((results, packing)),
            Ok(_) => Err(Rejection::Unschedulable(CANNOT_ALLOCATE.to_string())),
            Err(e @ AllocateError::InvalidPools) => Err(Rejection::Unschedulable(e.to_string())),
            Err(e) => {
                let message = e.to_string();
                let mut first = self.error.lock().unwrap_or_else(|e| e.into_inner());
                first.get_or_insert_with(|| message.clone());
                Err(Rejection::Error(message))
            }
        }
    }

    /// The first error Filter met on some node, if any: kube's scheduling cycle ends with
    /// `running "DynamicResources" filter plugin: <error>` for the pod, whatever other nodes gave.
    pub fn error(&self) -> Option<String> {
        self.error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|e| format!("running \"DynamicResources\" filter plugin: {e}"))
    }

    /// kube's Reserve on the chosen node: the claims allocated there, for the caller to write
    /// (PreBind) and for the batch to count ([`BatchDevices::record`]).
    pub fn reserve(&self, node: &NodeSpec) -> Vec<ClaimAllocation> {
        // Filter found these allocations in time (kube's Reserve reuses them): not timed again.
        let Ok((results, _)) = self.allocate_until(node, None) else {
            return Vec::new();
        };
        let mut results = results.into_iter();
        let mut out: Vec<ClaimAllocation> = self
            .to_allocate
            .iter()
            .zip(results.by_ref())
            .map(|(&i, allocation)| {
                let c = &self.claims[i];
                ClaimAllocation {
                    namespace: c.namespace.clone(),
                    name: c.name.clone(),
                    uid: c.uid.clone(),
                    allocation,
                    extended: None,
                }
            })
            .collect();
        // The special claim's allocation comes last (kube's Reserve: the node's copy of the
        // special claim replaces the in-memory one).
        if let (Some(e), Some(allocation)) = (&self.extended, results.next()) {
            if let Some(claim) = e.claim(node) {
                out.push(ClaimAllocation {
                    namespace: e.namespace().to_string(),
                    name: String::new(),
                    uid: String::new(),
                    allocation,
                    extended: Some(claim),
                });
            }
        }
        out
    }

    /// kube's Score (`computeScore`) for the allocations Filter made on a node: for every claim
    /// and every prioritized-list request, `8 - i` for the `i`-th subrequest allocated.
    pub fn score(&self, allocations: &[Allocation]) -> i64 {
        let mut score = 0;
        let mut next = allocations.iter();
        for claim in &self.claims {
            let allocation = match &claim.allocation {
                Some(a) => a,
                None => match next.next() {
                    Some(a) => a,
                    None => return score,
                },
            };
            let chosen: HashSet<&str> = allocation
                .devices
                .iter()
                .map(|d| d.request.as_str())
                .filter(|r| r.contains('/'))
                .collect();
            for request in &claim.requests {
                if let RequestKind::FirstAvailable(subs) = &request.kind {
                    for (i, (sub, _)) in subs.iter().enumerate() {
                        if chosen.contains(format!("{}/{sub}", request.name).as_str()) {
                            score += FIRST_AVAILABLE_MAX - i as i64;
                        }
                    }
                }
            }
        }
        score
    }

    /// Whether some claim has a prioritized list, or the profile packs devices (only then can
    /// scores differ between nodes).
    pub fn scores(&self) -> bool {
        self.packing.is_some()
            || self.claims.iter().any(|c| {
                c.requests
                    .iter()
                    .any(|r| matches!(r.kind, RequestKind::FirstAvailable(_)))
            })
    }
}

/// The plugin, through the plugins' contract: its Filter on a node for a pod with claims (a
/// pod without passes every node).
pub struct DynamicResources;

impl crate::engine::plugins::contract::Filter for DynamicResources {
    type In<'a> = Option<&'a PodDevices>;
    type Rejection = Arc<str>;

    fn filter(
        input: Self::In<'_>,
        node: &crate::engine::snapshot::NodeView<'_>,
        reject: &mut impl FnMut(Arc<str>),
    ) -> bool {
        let Some(devices) = input else {
            return true;
        };
        match devices.verdict(node.index, &node.entry.spec) {
            Ok(_) => true,
            Err(Rejection::Unschedulable(m) | Rejection::Error(m)) => {
                reject(Arc::from(m));
                false
            }
        }
    }
}

impl crate::engine::plugins::contract::Score for DynamicResources {
    type In<'a> = Option<&'a PodDevices>;

    /// kube's Score: the allocations Filter makes on the node, scored by [`PodDevices::score`];
    /// 0 for a pod without prioritized lists.
    fn score(input: Self::In<'_>, node: &crate::engine::snapshot::NodeView<'_>) -> i64 {
        match input {
            Some(d) if d.scores() => d.verdict(node.index, &node.entry.spec).map_or(0, |f| f.priority),
            _ => 0,
        }
    }
}

/// The packing arguments, hashed into the key of shared verdicts.
fn packing_key(p: &Packing) -> u128 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    p.hash(&mut h);
    u128::from(h.finish()) | 1 << 100
}

/// Placement's `DevicePacking` score plugin ([`super::device_packing`]): the node's packing score
/// for the allocation Filter made there; 0 for a pod without claims or with the plugin off.
pub struct DevicePacking;

impl crate::engine::plugins::contract::Score for DevicePacking {
    type In<'a> = Option<&'a PodDevices>;

    fn score(input: Self::In<'_>, node: &crate::engine::snapshot::NodeView<'_>) -> i64 {
        match input {
            Some(d) if d.packs() => d.verdict(node.index, &node.entry.spec).map_or(0, |f| f.packing),
            _ => 0,
        }
    }
}

/// A node device signature combined with the extended resources the node must provide through
/// DRA.
fn mix(signature: u64, delegated: u128) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (signature, delegated).hash(&mut h);
    h.finish()
}

/// kube's `validateDeviceClass`.
fn validate_class(objects: &DeviceObjects, class: &str, request: &str) -> Result<(), String> {
    if objects.classes.contains_key(class) {
        Ok(())
    } else {
        Err(format!("request {request}: device class {class} does not exist"))
    }
}

/// kube's `isClaimReadyForBinding` and `isClaimTimeout` (`dynamicresources.go`) for an allocated
/// claim: true when a device's binding failure condition is True, or when a device's binding
/// conditions are not all True (or it has no status entry) and `timeout` has passed since the
/// allocation's timestamp (`now`, in seconds). Claims without binding conditions never are.
fn binding_stuck(claim: &ResourceClaim, timeout: std::time::Duration, now: i64) -> bool {
    let Some(allocation) = &claim.allocation else {
        return false;
    };
    let mut ready = true;
    for d in allocation.devices.iter().filter(|d| !d.binding_conditions.is_empty()) {
        // kube's `getAllocatedDeviceStatus`: driver, pool and device (not the share ID).
        let status = claim.device_statuses.iter().find(|s| s.device == d.device);
        let Some(status) = status else {
            ready = false;
            break;
        };
        let is_true = |t: &String| status.true_conditions.iter().any(|c| c == t);
        if d.binding_failure_conditions.iter().any(is_true) {
            return true;
        }
        if !d.binding_conditions.iter().all(is_true) {
            ready = false;
            break;
        }
    }
    if ready {
        return false;
    }
    let has_conditions = allocation.devices.iter().any(|d| !d.binding_conditions.is_empty());
    match allocation.timestamp {
        Some(at) if has_conditions => at.saturating_add(timeout.as_secs() as i64) < now,
        _ => false,
    }
}
