//! Test support for the placement scheduler's cross-crate tests.
//!
//! Shared helpers for the cross-crate tests live in the test files themselves; this library holds
//! the heavier test infrastructure, such as the [`fake_apiserver`].

#![warn(missing_docs)]

pub mod e2e;
pub mod extender_process;
/// An in-memory fake Kubernetes API server that speaks the real HTTP/JSON wire protocol.
pub mod fake_apiserver;
pub mod fixtures;
