//! The nodes' usage as a batch goes ([`BatchUsage`]): the snapshot's, with the batch's
//! placements on top (kube-scheduler's assumed pods in its cache), copied on the first
//! placement into per-thread spare buffers.

use super::accel::columns::HotColumns;
use super::model::PodSpec;
use super::snapshot::{BoundPod, NodeHot, NodeUsage, Snapshot};

/// A batch's copies of the hot fields and columns and its slot list, kept per thread when the
/// batch ends so the next batch copies into the same memory (fresh copies are ~1.3 MB of newly
/// mapped pages per batch at 5,000 nodes).
#[derive(Default)]
struct UsageCopies {
    hot: Vec<NodeHot>,
    cols: Option<HotColumns>,
    slot: Vec<u32>,
}

thread_local! {
    /// This thread's spare [`UsageCopies`].
    static SPARE_COPIES: std::cell::RefCell<UsageCopies> = std::cell::RefCell::new(UsageCopies::default());
}

/// Usage of the nodes as a batch goes: the snapshot's, with the batch's placements on top.
pub(super) struct BatchUsage<'s> {
    snapshot: &'s Snapshot,
    /// Hot fields, copied from the snapshot on the first placement of the batch.
    pub(super) hot: std::borrow::Cow<'s, [NodeHot]>,
    /// The same by column, copied with them.
    pub(crate) cols: std::borrow::Cow<'s, HotColumns>,
    /// For each node, the slot in `changed` or `u32::MAX` when unchanged.
    slot: Vec<u32>,
    changed: Vec<NodeUsage>,
    /// For each entry of `changed`, a number no other usage of the process had (see
    /// [`BatchUsage::stamp`]).
    stamps: Vec<u64>,
    /// For each entry of `changed`, its node.
    nodes: Vec<u32>,
}

/// The last number [`BatchUsage::assume`] stamped a changed usage with.
static USAGE_STAMP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl<'s> BatchUsage<'s> {
    pub(super) fn new(snapshot: &'s Snapshot) -> Self {
        Self {
            snapshot,
            hot: std::borrow::Cow::Borrowed(snapshot.hot()),
            cols: std::borrow::Cow::Borrowed(snapshot.columns()),
            slot: Vec::new(),
            changed: Vec::new(),
            stamps: Vec::new(),
            nodes: Vec::new(),
        }
    }

    /// The nodes whose usage the batch changed.
    pub(crate) fn changed_nodes(&self) -> &[u32] {
        &self.nodes
    }

    /// 0 while node `i`'s usage is the snapshot's; after the batch changed it, a number that
    /// changes with each change and that no other usage had: what the outcomes of the rules
    /// reading the usage are kept under.
    #[inline]
    pub(crate) fn stamp(&self, i: usize) -> u64 {
        match self.slot.get(i) {
            Some(&s) if s != u32::MAX => self.stamps[s as usize],
            _ => 0,
        }
    }

    /// Copies the hot fields and columns, and starts the slot list, into this thread's spare
    /// buffers (see [`UsageCopies`]).
    fn copy_on_first_placement(&mut self) {
        use std::borrow::Cow;
        let spare = SPARE_COPIES
            .try_with(|s| std::mem::take(&mut *s.borrow_mut()))
            .unwrap_or_default();
        let mut slot = spare.slot;
        slot.clear();
        slot.resize(self.snapshot.nodes().len(), u32::MAX);
        self.slot = slot;
        if let Cow::Borrowed(hot) = self.hot {
            let mut copy = spare.hot;
            copy.clear();
            copy.extend_from_slice(hot);
            self.hot = Cow::Owned(copy);
        }
        if let Cow::Borrowed(cols) = self.cols {
            let mut copy = spare.cols.unwrap_or_default();
            copy.clone_from(cols);
            self.cols = Cow::Owned(copy);
        }
    }

    #[inline]
    pub(super) fn get(&self, i: usize) -> &NodeUsage {
        match self.slot.get(i) {
            Some(&s) if s != u32::MAX => &self.changed[s as usize],
            _ => &self.snapshot.nodes()[i].usage,
        }
    }

    pub(super) fn assume(&mut self, i: usize, pod: &PodSpec) {
        if self.slot.is_empty() {
            self.copy_on_first_placement();
        }
        if self.slot[i] == u32::MAX {
            self.slot[i] = self.changed.len() as u32;
            self.changed.push(self.snapshot.nodes()[i].usage.clone());
            self.stamps.push(0);
            self.nodes.push(i as u32);
        }
        self.stamps[self.slot[i] as usize] = USAGE_STAMP.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let bound = BoundPod {
            node_name: std::sync::Arc::from(""),
            requests: pod.requests.clone(),
            non_zero_cpu: pod.non_zero_requests.milli_cpu,
            non_zero_memory: pod.non_zero_requests.memory,
            host_ports: pod.host_ports.clone(),
            // The volume filters count a placed pod's volumes on its node (attach limits, disk
            // conflicts), by namespace.
            namespace: if pod.volumes.is_empty() {
                std::sync::Arc::from("")
            } else {
                std::sync::Arc::from(pod.namespace.as_str())
            },
            labels: Default::default(),
            affinity: None,
            meta: None,
            terminating: pod.terminating,
            volumes: (!pod.volumes.is_empty()).then(|| std::sync::Arc::from(pod.volumes.as_slice())),
        };
        let usage = &mut self.changed[self.slot[i] as usize];
        usage.add(&bound);
        let hot = NodeHot::of(&self.snapshot.nodes()[i], usage);
        self.cols.to_mut().set(i, &hot);
        self.hot.to_mut()[i] = hot;
    }
}

impl Drop for BatchUsage<'_> {
    /// Gives the batch's copies back to the thread's spares (not after a panic: they may be half
    /// written, and a spare is overwritten whole anyway, but nothing is kept that a panic touched).
    fn drop(&mut self) {
        use std::borrow::Cow;
        if std::thread::panicking() || self.slot.capacity() == 0 {
            return;
        }
        let copies = UsageCopies {
            hot: match std::mem::take(&mut self.hot) {
                Cow::Owned(hot) => hot,
                Cow::Borrowed(_) => Vec::new(),
            },
            cols: match std::mem::replace(&mut self.cols, Cow::Owned(HotColumns::default())) {
                Cow::Owned(cols) => Some(cols),
                Cow::Borrowed(_) => None,
            },
            slot: std::mem::take(&mut self.slot),
        };
        let _ = SPARE_COPIES.try_with(|s| *s.borrow_mut() = copies);
    }
}
