//! The scheduling engine: plain Rust with no I/O, so it can be tested and benchmarked alone
//! (`docs/engine.md` maps its files to kube-scheduler's).
//!
//! - [`quantity`] and [`resources`]: Kubernetes quantities and effective requests.
//! - [`model`]: validated pods and nodes, and the matching rules on them.
//! - [`snapshot`]: the cluster with per-node usage, copy-on-write deltas; [`hot`]: the fields of
//!   a node every evaluation reads.
//! - [`registry`]: every plugin, one row each (name, filter or score, defaults, preemption,
//!   the kube file it mirrors).
//! - [`policy`]: which plugins run with which weights; [`policy_config`]: policy files (ours and
//!   kube-scheduler's `KubeSchedulerConfiguration`) mapped to policies.
//! - [`rules`]: CEL filter and score rules in policies; [`rule_cost`]: the run-time budget of
//!   their evaluations.
//! - [`topology`]: the domains and pod counts InterPodAffinity and PodTopologySpread
//!   (`plugins::interpodaffinity`, `plugins::podtopologyspread`) read.
//! - `cycle`: the scheduling cycle, Rank one pod or Schedule a batch (kube-scheduler's
//!   `schedule_one.go`); [`framework`]: the evaluator, the filters run on a node, scores weighed
//!   and normalized; [`profile`]: a policy prepared for evaluation; [`plan`]: what a pod's
//!   PreFilter and PreScore resolve once per pod; `batch_usage`: the nodes' usage as a batch
//!   goes; `select`: the best nodes picked; [`diagnosis`]: reasons and the message of a pod that
//!   fits nowhere; [`plugins`]: one module per kube-scheduler plugin (filter, reasons, score,
//!   normalization).
//! - [`accel`]: the fast paths (class cache, label columns, the vector kernel, image sums, rule
//!   columns), each giving the same answers as the plugin functions it names, their state in
//!   the evaluator's `accel::state::FastPathState`.
//! - `plugins::defaultpreemption`: kube-scheduler's DefaultPreemption (PostFilter): victims,
//!   PodDisruptionBudgets ([`pdb`]), the node; its `podgroup` part, a whole PodGroup's.
//! - `entry`: the engine's one entry for a batch, [`schedule`], choosing between [`podgroup`]
//!   (PodGroup cycles), [`label_gang`] (label gangs placed all together or not at all within a
//!   batch) and plain pods; `evaluate`: the general path's entries for one pod's pass, which
//!   choose the fast path ([`accel`]) when it applies; [`gates`]: the kube feature gates that
//!   change a decision.
//! - [`volumes`]: claims, volumes, storage classes, CSI nodes, drivers and capacities the volume
//!   plugins (`plugins::{volumerestrictions, nodevolumelimits, volumebinding, volumezone}`) read.
//! - [`cancel`]: stopping the work of a call that has ended; [`parallel`]: a pod's pass over a
//!   large cluster's nodes split over two cores.

pub mod accel;
mod batch_usage;
pub mod cancel;
mod cycle;
pub mod device_taint_rules;
pub mod devices;
pub mod diagnosis;
mod entry;
mod evaluate;
pub mod extender;
pub mod framework;
pub mod gates;
pub mod hot;
pub mod label_gang;
pub mod model;
pub mod parallel;
pub mod pdb;
pub mod plan;
pub mod plugins;
pub mod podgroup;
pub mod policy;
pub mod policy_config;
mod pool;
pub mod profile;
pub mod quantity;
pub mod registry;
pub mod resources;
pub mod rule_cost;
pub mod rules;
mod select;
pub mod snapshot;
pub mod topology;
pub mod volumes;

pub use entry::{schedule, BatchKind};
pub use framework::{Deadline, Decision, Diagnosis, EvalError, Evaluator, Ranking, Reason};
pub use policy::Policy;
pub use profile::Profile;
pub use snapshot::{Delta, Snapshot, SnapshotError};
