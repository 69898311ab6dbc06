//! ResourceClaims and DeviceClasses as the binder's watch shows them, and the claims its own
//! PreBind wrote since: kube-scheduler's informer cache and assume cache
//! (`pkg/scheduler/util/assumecache`) for DynamicResources' PreBind.
//!
//! kube-scheduler writes a claim's finalizer, allocation and reservation from its informer cache
//! and reads the claim from the API server only after a conflict (`bindClaim`, with
//! `retry.RetryOnConflict`); the binder does the same from here. A claim written is kept as
//! *assumed* until the watch shows a resourceVersion at least as new, so that the next pod writing
//! the same claim (a claim shared by two pods of one batch) writes from what was written, not from
//! an older copy the watch has not replaced yet.
//!
//! Pods sharing a claim take *turns* on it in the order they were placed
//! ([`ClaimCache::take_turns`], called when the binding cycle is spawned): a pod's PreBind writes
//! a claim only after every pod placed before it has written it or given up, so the pod that
//! allocates a shared claim writes before the pods that only reserve it, and no two write it at
//! once.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim};
use parking_lot::Mutex;
use tokio::sync::oneshot;

/// A DRA object as the watch delivers it (its `managedFields` dropped), for the claim cache.
#[derive(Debug, Clone)]
pub enum DeviceObject {
    /// A ResourceClaim added or changed.
    Claim(Arc<ResourceClaim>),
    /// A DeviceClass added or changed.
    Class(Arc<DeviceClass>),
}

impl DeviceObject {
    /// The claim as the cache keeps it.
    pub fn claim(mut claim: ResourceClaim) -> Self {
        claim.metadata.managed_fields = None;
        Self::Claim(Arc::new(claim))
    }

    /// The class as the cache keeps it.
    pub fn class(mut class: DeviceClass) -> Self {
        class.metadata.managed_fields = None;
        Self::Class(Arc::new(class))
    }
}

/// `namespace/name` of a claim.
pub fn claim_key(claim: &ResourceClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default()
    )
}

fn version(claim: &ResourceClaim) -> Option<u64> {
    claim.metadata.resource_version.as_deref()?.parse().ok()
}

/// Whether `newer` is at least as new as `older`: the same object (uid) with a resourceVersion at
/// least as large, compared as numbers as kube's assume cache compares them. Another object (the
/// claim recreated) or a version that is no number counts as newer.
fn at_least_as_new(newer: &ResourceClaim, older: &ResourceClaim) -> bool {
    if newer.metadata.uid != older.metadata.uid {
        return true;
    }
    match (version(newer), version(older)) {
        (Some(n), Some(o)) => n >= o,
        _ => true,
    }
}

#[derive(Debug, Default)]
struct Entry {
    /// As the watch shows it.
    watched: Option<Arc<ResourceClaim>>,
    /// As this binder wrote it, until the watch shows it (or something newer).
    assumed: Option<Arc<ResourceClaim>>,
}

impl Entry {
    fn current(&self) -> Option<&Arc<ResourceClaim>> {
        self.assumed.as_ref().or(self.watched.as_ref())
    }
}

#[derive(Debug, Default)]
struct Objects {
    claims: HashMap<String, Entry>,
    classes: HashMap<String, Arc<DeviceClass>>,
}

/// The last turn taken on each claim (its sequence number, and what resolves when it ends).
#[derive(Debug, Default)]
struct TurnQueue {
    next: u64,
    last: HashMap<String, (u64, oneshot::Receiver<()>)>,
}

/// The binder's ResourceClaims and DeviceClasses, and the turns pods take on claims.
#[derive(Debug, Default)]
pub struct ClaimCache {
    objects: Mutex<Objects>,
    turns: Arc<Mutex<TurnQueue>>,
}

impl ClaimCache {
    /// A watched object added or changed. A claim assumed by this binder stays what
    /// [`ClaimCache::claim`] answers until the watch shows a version at least as new.
    pub fn apply(&self, object: DeviceObject) {
        let mut o = self.objects.lock();
        match object {
            DeviceObject::Claim(claim) => {
                let entry = o.claims.entry(claim_key(&claim)).or_default();
                if entry.assumed.as_ref().is_some_and(|a| at_least_as_new(&claim, a)) {
                    entry.assumed = None;
                }
                entry.watched = Some(claim);
            }
            DeviceObject::Class(class) => {
                let name = class.metadata.name.clone().unwrap_or_default();
                o.classes.insert(name, class);
            }
        }
    }

    /// A watched claim (`namespace/name`) was deleted: forgotten, assumed or not.
    pub fn delete_claim(&self, key: &str) {
        self.objects.lock().claims.remove(key);
    }

    /// A watched DeviceClass was deleted.
    pub fn delete_class(&self, name: &str) {
        self.objects.lock().classes.remove(name);
    }

    /// The claim `namespace/name` as this binder last wrote it, else as the watch shows it.
    pub fn claim(&self, key: &str) -> Option<Arc<ResourceClaim>> {
        self.objects.lock().claims.get(key).and_then(Entry::current).cloned()
    }

    /// Every DeviceClass the watch shows, by name (an allocation copies the configuration of
    /// the classes its requests name).
    pub fn classes(&self) -> HashMap<String, Arc<DeviceClass>> {
        self.objects.lock().classes.clone()
    }

    /// Keeps `claim`, as the API server answered a write of it, as the claim's current state
    /// until the watch shows it (kube's `AssumeClaimAfterAPICall`). Refused (false) when the cache
    /// holds a newer version of the same claim already.
    pub fn assume(&self, claim: ResourceClaim) -> bool {
        let mut claim = claim;
        claim.metadata.managed_fields = None;
        let mut o = self.objects.lock();
        let entry = o.claims.entry(claim_key(&claim)).or_default();
        if entry.current().is_some_and(|c| !at_least_as_new(&claim, c)) {
            return false;
        }
        // The watch may have shown this very version before the write's answer came back: then
        // there is nothing to wait for (kept assumed, it would wait for a newer event forever).
        if entry
            .watched
            .as_ref()
            .is_some_and(|w| w.metadata.uid == claim.metadata.uid && at_least_as_new(w, &claim))
        {
            entry.assumed = None;
            return true;
        }
        entry.assumed = Some(Arc::new(claim));
        true
    }

    /// Drops what this binder assumed of the claim: the watch's copy is its state again (kube's
    /// `AssumedClaimRestore`, in Unreserve).
    pub fn restore(&self, key: &str) {
        let mut o = self.objects.lock();
        if let Some(entry) = o.claims.get_mut(key) {
            entry.assumed = None;
            if entry.watched.is_none() {
                o.claims.remove(key);
            }
        }
    }

    /// Claims assumed and not yet shown by the watch.
    pub fn assumed_count(&self) -> usize {
        self.objects
            .lock()
            .claims
            .values()
            .filter(|e| e.assumed.is_some())
            .count()
    }

    /// A turn on each of the claims `keys` (`namespace/name`; repeats count once), behind every
    /// turn taken on them before. Called in placement order, before the binding cycle starts.
    pub fn take_turns<'a>(&self, keys: impl IntoIterator<Item = &'a str>) -> ClaimTurns {
        let mut q = self.turns.lock();
        let mut turns: Vec<Turn> = Vec::new();
        for key in keys {
            if turns.iter().any(|t| t.key == key) {
                continue;
            }
            let (done, ended) = oneshot::channel();
            let seq = q.next;
            q.next += 1;
            let after = q.last.insert(key.to_string(), (seq, ended)).map(|(_, r)| r);
            turns.push(Turn {
                key: key.to_string(),
                seq,
                after,
                _done: done,
            });
        }
        ClaimTurns {
            queue: Arc::clone(&self.turns),
            turns,
        }
    }
}

#[derive(Debug)]
struct Turn {
    key: String,
    seq: u64,
    /// Resolves when the turn before this one ends.
    after: Option<oneshot::Receiver<()>>,
    /// Dropped when this turn ends.
    _done: oneshot::Sender<()>,
}

/// A pod's turns on its claims; each ends when released or dropped.
#[derive(Debug)]
pub struct ClaimTurns {
    queue: Arc<Mutex<TurnQueue>>,
    turns: Vec<Turn>,
}

impl ClaimTurns {
    /// Waits until every turn taken before these on the same claims has ended.
    pub async fn wait(&mut self) {
        for turn in &mut self.turns {
            if let Some(before) = turn.after.take() {
                // Sent or dropped: either way the turn before has ended.
                let _ = before.await;
            }
        }
    }

    /// Ends the turn on the claim `key`: the next pod may write it.
    pub fn release(&mut self, key: &str) {
        let (ended, kept): (Vec<Turn>, Vec<Turn>) =
            std::mem::take(&mut self.turns).into_iter().partition(|t| t.key == key);
        self.turns = kept;
        self.end(ended);
    }

    fn end(&self, turns: Vec<Turn>) {
        let mut q = self.queue.lock();
        for t in &turns {
            // The last turn on the claim: nobody waits behind it.
            if q.last.get(&t.key).is_some_and(|(seq, _)| *seq == t.seq) {
                q.last.remove(&t.key);
            }
        }
        drop(q);
        drop(turns);
    }
}

impl Drop for ClaimTurns {
    fn drop(&mut self) {
        let turns = std::mem::take(&mut self.turns);
        self.end(turns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn claim(uid: &str, rv: &str, reserved: &[&str]) -> ResourceClaim {
        use k8s_openapi::api::resource::v1::{ResourceClaimConsumerReference, ResourceClaimStatus};
        ResourceClaim {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some("c".into()),
                uid: Some(uid.into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            status: Some(ResourceClaimStatus {
                reserved_for: Some(
                    reserved
                        .iter()
                        .map(|u| ResourceClaimConsumerReference {
                            resource: "pods".into(),
                            name: (*u).into(),
                            uid: (*u).into(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn reserved(c: &ResourceClaim) -> Vec<String> {
        c.status
            .as_ref()
            .and_then(|s| s.reserved_for.as_ref())
            .into_iter()
            .flatten()
            .map(|r| r.uid.clone())
            .collect()
    }

    #[test]
    fn a_write_the_watch_showed_before_its_answer_is_not_kept_assumed() {
        let cache = ClaimCache::default();
        cache.apply(DeviceObject::claim(claim("u1", "10", &[])));
        // The watch delivers the written version before the write's answer is assumed.
        cache.apply(DeviceObject::claim(claim("u1", "12", &["p1"])));
        assert!(cache.assume(claim("u1", "12", &["p1"])));
        assert_eq!(cache.assumed_count(), 0);
        assert_eq!(reserved(&cache.claim("ns/c").unwrap()), ["p1"]);
    }

    #[test]
    fn an_assumed_claim_wins_until_the_watch_shows_a_version_as_new() {
        let cache = ClaimCache::default();
        cache.apply(DeviceObject::claim(claim("u1", "10", &[])));
        assert!(cache.assume(claim("u1", "12", &["p1"])));
        // An older event (the write's predecessor) arrives late: the written claim stays.
        cache.apply(DeviceObject::claim(claim("u1", "11", &[])));
        assert_eq!(reserved(&cache.claim("ns/c").unwrap()), ["p1"]);
        assert_eq!(cache.assumed_count(), 1);
        // The watch shows the write: the watch's copy is current again.
        cache.apply(DeviceObject::claim(claim("u1", "12", &["p1"])));
        assert_eq!(cache.assumed_count(), 0);
        // An assumption older than what the cache holds is refused.
        assert!(!cache.assume(claim("u1", "11", &[])));
        assert_eq!(
            cache.claim("ns/c").unwrap().metadata.resource_version.as_deref(),
            Some("12")
        );
        // A claim recreated under the same name replaces an assumption of its predecessor.
        assert!(cache.assume(claim("u1", "13", &["p2"])));
        cache.apply(DeviceObject::claim(claim("u2", "5", &[])));
        assert_eq!(cache.claim("ns/c").unwrap().metadata.uid.as_deref(), Some("u2"));
        // Restored: the watch's copy; deleted: nothing.
        assert!(cache.assume(claim("u2", "6", &["p3"])));
        cache.restore("ns/c");
        assert_eq!(reserved(&cache.claim("ns/c").unwrap()), Vec::<String>::new());
        cache.delete_claim("ns/c");
        assert!(cache.claim("ns/c").is_none());
    }

    #[tokio::test]
    async fn turns_on_a_claim_follow_the_order_they_were_taken() {
        let cache = Arc::new(ClaimCache::default());
        let mut first = cache.take_turns(["ns/a", "ns/b", "ns/a"]);
        let mut second = cache.take_turns(["ns/b"]);
        let mut third = cache.take_turns(["ns/c"]);
        // Turns with nobody before them need no wait; nor does a claim repeated.
        tokio::time::timeout(std::time::Duration::from_secs(1), first.wait())
            .await
            .expect("the first pod's turns are free");
        tokio::time::timeout(std::time::Duration::from_secs(1), third.wait())
            .await
            .expect("another claim's turn is free");
        let waiting = tokio::spawn(async move {
            second.wait().await;
            second
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "the second pod waits for the first on ns/b");
        first.release("ns/a");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(
            !waiting.is_finished(),
            "releasing another claim does not end the turn on ns/b"
        );
        first.release("ns/b");
        let second = tokio::time::timeout(std::time::Duration::from_secs(1), waiting)
            .await
            .expect("the second pod's turn comes")
            .unwrap();
        drop((first, second, third));
        assert!(cache.turns.lock().last.is_empty(), "no turn is left behind");
        // A turn given up (dropped) lets the next one go too.
        let given_up = cache.take_turns(["ns/a"]);
        let mut next = cache.take_turns(["ns/a"]);
        drop(given_up);
        tokio::time::timeout(std::time::Duration::from_secs(1), next.wait())
            .await
            .expect("a dropped turn ends");
    }
}
