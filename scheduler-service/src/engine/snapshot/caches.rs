//! What a snapshot builds on first use and keeps: the parts derived from its nodes and pods
//! (node order dependent, so a delta that moves nodes leaves them behind), and the values the
//! layers above keep with it.

use std::sync::Arc;

use super::indexes::{ImagePostings, PodIndex, Topology};
use super::nodes::NodeEntry;
use crate::engine::hot::NodeHot;
use crate::engine::model::LabelGangKey;

/// The lazily built parts of a [`super::Snapshot`]: each is built on first use, and none is part of
/// what the snapshot stands for (a delta or a view starts with them empty, but for what
/// [`super::Snapshot::apply`] says it keeps).
#[derive(Debug, Default)]
pub(super) struct Caches {
    /// Image hash to (node index, image size) for every node having it; built on first use,
    /// because node indices change with deltas that add or remove nodes (a delta that changes no
    /// node shares its base's).
    pub(super) image_postings: std::sync::OnceLock<Arc<ImagePostings>>,
    /// The hot fields of every node, in node order; built on first use.
    pub(super) hot: std::sync::OnceLock<Vec<NodeHot>>,
    /// The same by column, for the plain pass's vector kernel; built on first use.
    pub(super) columns: std::sync::OnceLock<crate::engine::accel::columns::HotColumns>,
    /// Bound pods by node with a label index; built on first use.
    pub(super) pod_index: std::sync::OnceLock<PodIndex>,
    /// Topologies by key; built on first use of each key.
    pub(super) topologies: std::sync::Mutex<std::collections::HashMap<String, Arc<Topology>>>,
    /// [`Snapshot::nodes`] as a shared slice, for the views cut from this snapshot; built on
    /// first use.
    pub(super) shared_nodes: std::sync::OnceLock<Arc<[Arc<NodeEntry>]>>,
    /// What DynamicResources' PreFilter reads of them for every pod; built on first use.
    pub(super) device_index: std::sync::OnceLock<Arc<crate::engine::devices::DeviceIndex>>,
    /// Bound members per gang key; built on first use.
    pub(super) gang_members: std::sync::OnceLock<std::collections::HashMap<LabelGangKey, u32>>,
    /// Values derived from this snapshot for objects of the layers above (the node outcomes of a
    /// policy's rules), found by the object's address: the most recent [`MAX_KEPT`].
    pub(super) kept: std::sync::Mutex<Vec<KeptEntry>>,
    /// Bytes of the parts built on first use (hot fields, columns, indexes, topologies).
    pub(super) derived: std::sync::atomic::AtomicUsize,
}

/// A value kept with a snapshot: the object it is for (kept, so the entry is found by address),
/// the value, and its bytes.
pub(super) type KeptEntry = (
    Arc<dyn std::any::Any + Send + Sync>,
    Arc<dyn std::any::Any + Send + Sync>,
    usize,
);

/// Values a snapshot keeps (see [`Snapshot::kept`]).
pub(super) const MAX_KEPT: usize = 8;

/// Topology keys a snapshot keeps the [`Topology`] of.
pub(super) const MAX_CACHED_TOPOLOGIES: usize = 64;
