//! The snapshot cache: snapshots by id, bounded by a memory budget, least recently used evicted first.
//!
//! The cache is only an optimization: a caller whose id is gone gets `NOT_FOUND` and re-sends a full
//! snapshot, so eviction never changes an answer, only its cost.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use dashmap::DashMap;

use crate::engine::Snapshot;

struct Entry {
    snapshot: Arc<Snapshot>,
    bytes: usize,
    last_used: AtomicU64,
}

/// What happened to the cache on an insert.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct InsertOutcome {
    /// Entries evicted to stay within the budget.
    pub evicted: usize,
}

/// Snapshots by id under a memory budget.
pub struct SnapshotCache {
    entries: DashMap<String, Entry>,
    budget: usize,
    bytes: AtomicUsize,
    clock: AtomicU64,
    evict_lock: parking_lot::Mutex<()>,
}

impl SnapshotCache {
    /// An empty cache holding at most about `budget` bytes of snapshots (the newest is always kept).
    pub fn new(budget: usize) -> Self {
        Self {
            entries: DashMap::new(),
            budget,
            bytes: AtomicUsize::new(0),
            clock: AtomicU64::new(0),
            evict_lock: parking_lot::Mutex::new(()),
        }
    }

    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed)
    }

    /// The snapshot with this id, marking it used.
    pub fn get(&self, id: &str) -> Option<Arc<Snapshot>> {
        let e = self.entries.get(id)?;
        e.last_used.store(self.tick(), Ordering::Relaxed);
        Some(Arc::clone(&e.snapshot))
    }

    /// Stores a snapshot under an id, then evicts least recently used entries over the budget.
    pub fn insert(&self, id: String, snapshot: Arc<Snapshot>) -> InsertOutcome {
        let bytes = snapshot.approx_bytes();
        let entry = Entry {
            snapshot,
            bytes,
            last_used: AtomicU64::new(self.tick()),
        };
        if let Some(old) = self.entries.insert(id.clone(), entry) {
            self.bytes.fetch_sub(old.bytes, Ordering::Relaxed);
        }
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        InsertOutcome {
            evicted: self.evict(&id),
        }
    }

    /// Measures every snapshot again (evaluations build parts of a snapshot on first use: its
    /// hot fields, indexes, topologies, static predicates), then evicts least recently used
    /// entries over the budget, keeping the most recently used one.
    pub fn refresh(&self) -> InsertOutcome {
        let mut total = 0usize;
        let mut newest: Option<(u64, String)> = None;
        for mut e in self.entries.iter_mut() {
            let bytes = e.snapshot.approx_bytes();
            e.bytes = bytes;
            total += bytes;
            let used = e.last_used.load(Ordering::Relaxed);
            if newest.as_ref().is_none_or(|(at, _)| used > *at) {
                newest = Some((used, e.key().clone()));
            }
        }
        self.bytes.store(total, Ordering::Relaxed);
        let Some((_, keep)) = newest else {
            return InsertOutcome::default();
        };
        InsertOutcome {
            evicted: self.evict(&keep),
        }
    }

    fn evict(&self, keep: &str) -> usize {
        if self.bytes.load(Ordering::Relaxed) <= self.budget {
            return 0;
        }
        let _guard = self.evict_lock.lock();
        let mut by_age: Vec<(u64, String)> = self
            .entries
            .iter()
            .filter(|e| e.key() != keep)
            .map(|e| (e.last_used.load(Ordering::Relaxed), e.key().clone()))
            .collect();
        by_age.sort_unstable();
        let mut evicted = 0;
        for (_, id) in by_age {
            if self.bytes.load(Ordering::Relaxed) <= self.budget {
                break;
            }
            if let Some((_, e)) = self.entries.remove(&id) {
                self.bytes.fetch_sub(e.bytes, Ordering::Relaxed);
                evicted += 1;
            }
        }
        evicted
    }

    /// Approximate bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Number of snapshots held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no snapshot is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::model::NodeSpec;

    fn snap(nodes: usize) -> Arc<Snapshot> {
        let nodes = (0..nodes)
            .map(|i| NodeSpec {
                name: format!("node-{i}"),
                ..Default::default()
            })
            .collect();
        Arc::new(Snapshot::build(nodes, vec![]).unwrap())
    }

    #[test]
    fn least_recently_used_goes_first() {
        let one = snap(10).approx_bytes();
        let cache = SnapshotCache::new(one * 2 + one / 2);
        cache.insert("a".into(), snap(10));
        cache.insert("b".into(), snap(10));
        assert!(cache.get("a").is_some(), "touch a so b is the oldest");
        let out = cache.insert("c".into(), snap(10));
        assert_eq!(out.evicted, 1);
        assert!(cache.get("b").is_none());
        assert!(cache.get("a").is_some() && cache.get("c").is_some());
        assert!(cache.bytes() <= one * 2 + one / 2);
    }

    #[test]
    fn the_newest_is_kept_even_over_budget() {
        let cache = SnapshotCache::new(1);
        cache.insert("a".into(), snap(5));
        cache.insert("b".into(), snap(5));
        assert!(cache.get("a").is_none());
        assert!(cache.get("b").is_some());
        assert_eq!(cache.len(), 1);
    }
}
