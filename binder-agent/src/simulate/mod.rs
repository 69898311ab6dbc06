//! `binder-agent simulate`: the real binder loop against an in-memory cluster and in-process
//! decision replicas, with no API server needed.
//!
//! [`SimCluster`] stands in for the API server: it keeps pods and nodes, applies Bindings (409 when
//! a pod is already bound, 404 when it is gone), and shows each binding to the binder through an
//! asynchronous watch, so the binder's assume-until-seen path runs as it does on a cluster. It
//! counts every binding attempt per pod (to prove none is bound twice) and records the Scheduled
//! events and unschedulable conditions the binder writes, and the PodGroupInitiallyScheduled
//! condition of each PodGroup. Faults can be injected: a fraction of
//! binds failing like a 500, replies lost after the binding was applied, slow binds.
//!
//! [`simulate`] builds a synthetic cluster (from `placement_scheduler::synth`) or loads the output
//! of `kubectl get nodes,pods -A -o json` (PodDisruptionBudgets, storage and device objects and
//! PodGroups too), starts decision replicas in-process (or uses given ones),
//! feeds the nodes and bound pods, marks the binder synced, submits the pending pods (all at once
//! or at an arrival rate) and runs the binder until every pending pod is bound or parked
//! unschedulable. The [`Summary`] has throughput, latencies, batching, snapshot syncs, node
//! utilization and the consistency checks.

mod cli;
mod cluster;
mod compare;
mod config;
mod latency;
mod local_replicas;
mod run;
mod summary;
mod workload;

pub use cli::*;
pub use cluster::*;
pub use compare::*;
pub use config::*;
pub use latency::*;
pub use run::*;
pub use summary::*;
pub use workload::{label_domains, synthetic_pod_groups, HeldGroups, POD_GROUP_NAMESPACE};
