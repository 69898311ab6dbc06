//! The encoded form of bound pods: their uid read in place, their identity decoded alone, the
//! whole pod decoded for a snapshot.

use std::sync::Arc;

use placement_scheduler::proto;
use prost::Message;

/// The identity fields of an encoded `proto::Pod` (same tags), decoded without the rest.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct PodIdentity {
    #[prost(string, tag = "1")]
    pub(super) uid: String,
    #[prost(string, tag = "2")]
    pub(super) namespace: String,
    #[prost(string, tag = "3")]
    pub(super) name: String,
}

/// Sorts encoded pods by uid, read from their encoding: `uid` is field 1 of `proto::Pod`, so prost
/// writes it first (tag, length, bytes), and byte order is `str` order.
pub fn sort_by_uid(pods: &mut [Arc<[u8]>]) {
    pods.sort_unstable_by(|a, b| encoded_uid(a).cmp(encoded_uid(b)));
}

/// The uid at the start of an encoded `proto::Pod`; empty if it does not start with one.
pub(super) fn encoded_uid(pod: &[u8]) -> &[u8] {
    let mut rest = pod;
    if rest.first() != Some(&0x0a) {
        return &[];
    }
    rest = &rest[1..];
    match prost::encoding::decode_varint(&mut rest) {
        Ok(len) => usize::try_from(len).ok().and_then(|len| rest.get(..len)).unwrap_or(&[]),
        Err(_) => &[],
    }
}

/// A bound pod stored by [`ClusterState::apply_bound_pod`](crate::state::ClusterState::apply_bound_pod); it was encoded from a `proto::Pod`, so
/// decoding fails only on a bug, and such a pod is left out rather than taking the binder down.
pub(super) fn decode(bytes: &[u8]) -> Option<proto::Pod> {
    match proto::Pod::decode(bytes) {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::error!(error = %e, "a stored bound pod does not decode; left out of the snapshot");
            None
        }
    }
}
