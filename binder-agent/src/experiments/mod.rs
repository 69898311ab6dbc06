//! Experiments and shadow policies behind one binder: A/B arms that decide the pods they select
//! with their own policy (and, optionally, their own decision replicas), and shadow policies
//! evaluated on the same batches without acting on their verdicts.
//!
//! The scheduling cycle does not branch on experiments. It asks the live [`Routing`] who decides
//! a batch ([`Routing::split`]: a [`Route`] per group, its policy and backend), decides each group
//! on that backend's replicas (the binder's [`ReplicaPools`](crate::replica_pools::ReplicaPools)), and
//! tells [`Experiments`], an observer, what happened (decided, failed, unschedulable, bound,
//! shadow verdicts). With no experiment and no shadow configured every route is the binder's own
//! policy and replicas, and the observer records nothing.
//!
//! ```text
//!  experiments file --config.rs--> ExperimentSet --routing.rs--> Routing (live, swapped on reload)
//!                                                                  |
//!  cycle:  batch --Routing::split--> (Route, pods)... --> decide on the Route's backend
//!                                                                  |
//!          outcomes ----------------------------------------> record.rs  Experiments (observer)
//!                                                                  |
//!  /experiments, `binder-agent experiments` <--report.rs-- Report <+
//! ```
//!
//! - `config.rs`: the file, which pods an experiment selects, the arm each pod lands in.
//! - `routing.rs`: a file made live: a pod's [`Route`], the Binding's annotations.
//! - `record.rs`: the per-arm record and the metrics.
//! - `report.rs`: the comparison served at `/experiments`.
//! - `cli.rs`: `binder-agent experiments`.

pub mod cli;
mod config;
mod record;
mod report;
mod routing;

pub use config::*;
pub use record::*;
pub use report::*;
pub use routing::*;
