//! Storage and DRA objects as the watches show them, and the volume choices and device
//! allocations assumed for decided pods until the watches show them (kube-scheduler's assume caches).

use placement_scheduler::proto;

use super::{assumed_extended_claim, ClusterState, Key};
use crate::projection::{TrackedKey, TrackedObject};

impl ClusterState {
    /// Adds or replaces a claim, volume, storage class or CSINode; returns whether it changed.
    /// An assumed volume choice the object now shows (the volume refers to the claim; the claim
    /// selects the node or is bound) is dropped: the watched object takes its place.
    pub fn apply_storage(&mut self, obj: TrackedObject) -> bool {
        let key = obj.key();
        if self.storage.get(&key) == Some(&obj) {
            return false;
        }
        if self
            .assumed_storage
            .get(&key)
            .is_some_and(|(assumed, _)| shows_assumption(&obj, assumed))
        {
            self.assumed_storage.remove(&key);
        }
        // A claim allocated and reserved for a pod whose special claim for extended resources
        // is assumed, with the same devices: the claim PreBind created; it takes the assumed
        // one's place.
        if let TrackedObject::ResourceClaim(c) = &obj {
            if let Some(allocation) = &c.allocation {
                for r in &c.reserved_for {
                    let assumed =
                        TrackedKey::ResourceClaim(format!("{}/{}", c.namespace, assumed_extended_claim(&r.uid)));
                    let devices = |a: &proto::AllocationResult| -> Vec<(String, String, String)> {
                        let mut d: Vec<_> = a
                            .devices
                            .iter()
                            .map(|d| (d.driver.clone(), d.pool.clone(), d.device.clone()))
                            .collect();
                        d.sort();
                        d
                    };
                    let same = matches!(
                        self.assumed_storage.get(&assumed),
                        Some((TrackedObject::ResourceClaim(a), _))
                            if a.allocation.as_ref().map(devices) == Some(devices(allocation))
                    );
                    if same {
                        self.assumed_storage.remove(&assumed);
                        self.record(Key::Storage(assumed));
                    }
                }
            }
        }
        self.storage.insert(key.clone(), obj);
        self.record(Key::Storage(key));
        true
    }

    /// Removes a claim, volume, storage class or CSINode (and any assumption on it); returns
    /// whether it was known.
    pub fn delete_storage(&mut self, key: &TrackedKey) -> bool {
        self.assumed_storage.remove(key);
        if self.storage.remove(key).is_some() {
            self.record(Key::Storage(key.clone()));
            return true;
        }
        false
    }

    /// Assumes the volume choices of a decided pod (`uid`) as the decision service assumed them:
    /// each chosen volume's `claim_ref` set to its claim (uid included), each claim to provision
    /// with its `selected_node`. Returns the keys assumed anew; a choice whose claim or volume is
    /// unknown, or that the object shows already (watched or assumed), assumes nothing.
    pub fn assume_storage(&mut self, uid: &str, bindings: &[proto::ClaimBinding]) -> Vec<TrackedKey> {
        use proto::claim_binding::Target;
        let mut keys = Vec::new();
        for b in bindings {
            let claim_key = TrackedKey::Claim(format!("{}/{}", b.claim_namespace, b.claim_name));
            // As the decision service assumes them: on the objects as snapshots show them (an
            // earlier assumption included), so a choice assumed already is not assumed again.
            let Some(TrackedObject::Claim(claim)) = self.storage_view(&claim_key) else {
                continue;
            };
            let (key, assumed) = match &b.target {
                Some(Target::VolumeName(pv)) => {
                    let key = TrackedKey::Volume(pv.clone());
                    let Some(TrackedObject::Volume(v)) = self.storage_view(&key) else {
                        continue;
                    };
                    let claim_ref = proto::VolumeClaimRef {
                        namespace: claim.namespace.clone(),
                        name: claim.name.clone(),
                        uid: claim.uid.clone(),
                    };
                    if v.claim_ref.as_ref() == Some(&claim_ref) {
                        continue;
                    }
                    let mut v = v.clone();
                    v.claim_ref = Some(claim_ref);
                    (key, TrackedObject::Volume(v))
                }
                Some(Target::SelectedNode(node)) => {
                    if claim.selected_node == *node {
                        continue;
                    }
                    let mut c = claim.clone();
                    c.selected_node = node.clone();
                    (claim_key, TrackedObject::Claim(c))
                }
                None => continue,
            };
            self.assumed_storage.insert(key.clone(), (assumed, uid.to_string()));
            self.record(Key::Storage(key.clone()));
            keys.push(key);
        }
        keys
    }

    /// Assumes the device allocations of a decided pod (`uid`, named `name`) as the decision
    /// service assumed them: each claim allocated, with the pod in `reservedFor`, until the watch
    /// shows the claim allocated or its PreBind gives it up. Returns the keys assumed anew; an
    /// allocation of a claim that is unknown, or allocated already (watched or assumed), assumes
    /// nothing.
    pub fn assume_devices(&mut self, uid: &str, name: &str, allocations: &[proto::ClaimAllocation]) -> Vec<TrackedKey> {
        let mut keys = Vec::new();
        for a in allocations {
            if a.extended_resource_claim.is_some() {
                // The special claim for extended resources does not exist yet: its devices are
                // assumed under a name no real claim has, until the watch shows the claim PreBind
                // creates (see `apply_storage`).
                let key = TrackedKey::ResourceClaim(format!("{}/{}", a.claim_namespace, assumed_extended_claim(uid)));
                let c = proto::ResourceClaim {
                    namespace: a.claim_namespace.clone(),
                    name: assumed_extended_claim(uid),
                    allocation: a.allocation.clone(),
                    reserved_for: vec![proto::ResourceClaimConsumer {
                        api_group: String::new(),
                        resource: "pods".into(),
                        name: name.to_string(),
                        uid: uid.to_string(),
                    }],
                    ..Default::default()
                };
                self.assumed_storage
                    .insert(key.clone(), (TrackedObject::ResourceClaim(c), uid.to_string()));
                self.record(Key::Storage(key.clone()));
                keys.push(key);
                continue;
            }
            let key = TrackedKey::ResourceClaim(format!("{}/{}", a.claim_namespace, a.claim_name));
            let Some(TrackedObject::ResourceClaim(claim)) = self.storage_view(&key) else {
                continue;
            };
            if claim.allocation.is_some() {
                continue;
            }
            let mut c = claim.clone();
            c.allocation = a.allocation.clone();
            c.reserved_for.push(proto::ResourceClaimConsumer {
                api_group: String::new(),
                resource: "pods".into(),
                name: name.to_string(),
                uid: uid.to_string(),
            });
            self.assumed_storage
                .insert(key.clone(), (TrackedObject::ResourceClaim(c), uid.to_string()));
            self.record(Key::Storage(key.clone()));
            keys.push(key);
        }
        keys
    }

    /// Drops the volume choices assumed for the pod `uid` (its PreBind failed or was given up).
    pub fn forget_storage(&mut self, uid: &str) {
        let keys: Vec<TrackedKey> = self
            .assumed_storage
            .iter()
            .filter(|(_, (_, owner))| owner == uid)
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.assumed_storage.remove(&key);
            self.record(Key::Storage(key));
        }
    }

    /// Number of assumed volume choices not yet seen through the watches.
    pub fn assumed_storage_count(&self) -> usize {
        self.assumed_storage.len()
    }

    /// A storage object as snapshots show it: the assumed choice, else the watched object.
    pub(super) fn storage_view(&self, key: &TrackedKey) -> Option<&TrackedObject> {
        self.assumed_storage
            .get(key)
            .map(|(o, _)| o)
            .or_else(|| self.storage.get(key))
    }

    /// The DeviceClasses, as the watch shows them.
    pub fn device_classes(&self) -> Vec<proto::DeviceClass> {
        self.storage
            .values()
            .filter_map(|o| match o {
                TrackedObject::DeviceClass(c) => Some(c.clone()),
                _ => None,
            })
            .collect()
    }

    /// The storage object with this identity.
    pub fn storage_object(&self, key: &TrackedKey) -> Option<&TrackedObject> {
        self.storage.get(key)
    }
}

/// Whether a watched storage object shows an assumed choice: the volume refers to the same
/// claim; the claim selects the same node, or is bound.
fn shows_assumption(watched: &TrackedObject, assumed: &TrackedObject) -> bool {
    match (watched, assumed) {
        (TrackedObject::Volume(w), TrackedObject::Volume(a)) => match (&w.claim_ref, &a.claim_ref) {
            (Some(w), Some(a)) => w.namespace == a.namespace && w.name == a.name,
            _ => false,
        },
        (TrackedObject::Claim(w), TrackedObject::Claim(a)) => {
            w.selected_node == a.selected_node || !w.volume_name.is_empty()
        }
        // Allocated (by this PreBind, or by whoever won a race: the watched object decides).
        (TrackedObject::ResourceClaim(w), TrackedObject::ResourceClaim(_)) => w.allocation.is_some(),
        _ => false,
    }
}
