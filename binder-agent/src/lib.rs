//! The placement binder: watches the cluster, batches pending pods that name our scheduler, asks a
//! decision replica where they go, and writes Bindings, never losing or double-binding a pod.
//!
//! - [`projection`]: Kubernetes objects projected onto what the decision API carries.
//! - [`state`]: nodes, bound and assumed pods, versioned for snapshot deltas.
//! - [`queue`]: active, backoff and unschedulable queues, as kube-scheduler's; [`nominations`]: preemptions in
//!   progress (nominated pods waiting for their victims).
//! - [`replicas`]: decision replicas, balancing and ejection.
//! - [`binder`]: the scheduling loop over a [`api::ClusterApi`]; [`partitions`]: several batches
//!   in flight on node partitions.
//! - [`experiments`]: A/B arms and shadow policies: the file, routing each pod to a policy and
//!   backend, and the per-arm record; [`replica_pools`]: the binder's replica pools by backend.
//! - [`explain`]: `kubectl placement explain`, why a pod is pending or where it landed.
//! - [`kube_api`], [`watch`], [`leader`], [`http`]: the Kubernetes side (writes, watches, leader
//!   election, health and metrics endpoints), wired together by [`run`].

pub mod api;
pub mod binder;
pub mod claim_cache;
pub mod experiments;
pub mod explain;
pub mod http;
pub mod kube_api;
pub mod leader;
pub mod lean;
pub mod metrics;
pub mod nominations;
pub mod output;
pub mod partitions;
pub mod projection;
pub mod queue;
pub mod replica_pools;
pub mod replicas;
pub mod state;
pub mod watch;

pub use api::{ApiError, ClusterApi, PodRef};
pub use binder::{Binder, BinderConfig, ClusterEvent};
pub mod run;
pub mod simulate;
