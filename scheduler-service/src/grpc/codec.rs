//! The codec of `placement.v1`: prost's encoding, with decoding bounded and checked.
//!
//! Served calls (those [`super::budget::BudgetLayer`] wraps) decode in three steps: the bytes are
//! scanned with the API's wire schema ([`super::wire::scan`]), which bounds what decoding will
//! allocate and counts the request's elements; limits that can be judged from those counts are
//! applied (a Schedule batch over `--max-batch-size` is refused before a pod is decoded); the
//! bound, times what the call's later work adds, is charged to the replica's request budget,
//! and only then does prost decode. A unary call carrying a second message is refused as gRPC's
//! own implementations refuse it (grpc-go: INTERNAL, "cardinality violation").
//!
//! Clients (the binder, the tools, the tests) decode with prost alone.

use std::marker::PhantomData;

use prost::Message;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic::{Code, Status};

use super::budget;
use super::service::invalid_field;
use super::wire::{self, WireSchema};
use crate::proto;

/// Messages at least this large are scanned and decoded with the worker thread's other tasks handed
/// to another thread ([`tokio::task::block_in_place`]), so a large decode does not hold up other
/// calls.
const BLOCKING_DECODE_BYTES: usize = 1 << 20;

/// A SyncSnapshotRequest delta upserting at least this many pods decodes them on two threads.
const PARALLEL_DECODE_PODS: usize = 4096;

/// Decodes a `U` from `buf`, as prost does. A SyncSnapshotRequest delta carrying many pods (a
/// full sync's chunk) has its pods decoded on two threads: on a replica idle but for the sync,
/// decoding them took a third of the chunk's time on one core.
fn decode_message<U: Message + Default + WireSchema + 'static>(
    buf: &mut DecodeBuf<'_>,
) -> Result<U, prost::DecodeError> {
    use bytes::Buf;
    if U::INDEX == <proto::SyncSnapshotRequest as WireSchema>::INDEX {
        let bytes = buf.chunk();
        let two_cores = || std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
        if bytes.len() == buf.remaining() && bytes.len() >= BLOCKING_DECODE_BYTES && two_cores() {
            if let Some(request) = sync_request_in_parallel(bytes) {
                buf.advance(bytes.len());
                let request: Box<dyn std::any::Any> = Box::new(request);
                if let Ok(request) = request.downcast::<U>() {
                    return Ok(*request);
                }
            }
        }
    }
    U::decode(buf)
}

/// `SyncSnapshotRequest.delta`, `SnapshotDelta.upsert_pods`.
const REQUEST_DELTA: u32 = 2;
const DELTA_UPSERT_PODS: u32 = 4;

/// Decodes a request that is one delta with at least [`PARALLEL_DECODE_PODS`] pods: the delta's
/// other fields with prost, its pods in two halves on two threads, in order (so the message is
/// the one prost decodes, repeated fields appending in order). `None` for any other request, and
/// for one that does not decode: prost then decodes it again and says what is wrong, as always.
fn sync_request_in_parallel(bytes: &[u8]) -> Option<proto::SyncSnapshotRequest> {
    parallel_delta(bytes).ok().flatten()
}

fn parallel_delta(bytes: &[u8]) -> Result<Option<proto::SyncSnapshotRequest>, prost::DecodeError> {
    use prost::encoding::{decode_key, decode_varint, WireType};
    let mut top = bytes;
    let (tag, wire_type) = decode_key(&mut top)?;
    if tag != REQUEST_DELTA || wire_type != WireType::LengthDelimited {
        return Ok(None);
    }
    let len = usize::try_from(decode_varint(&mut top)?).unwrap_or(usize::MAX);
    if len != top.len() {
        // Not exactly one delta: prost decodes it (and reports what is wrong with it).
        return Ok(None);
    }
    let mut rest = top;
    let mut pods: Vec<&[u8]> = Vec::new();
    let mut others: Vec<u8> = Vec::new();
    while !rest.is_empty() {
        let field_start = rest;
        let (tag, wire_type) = decode_key(&mut rest)?;
        let body_start = rest;
        prost::encoding::skip_field(wire_type, tag, &mut rest, prost::encoding::DecodeContext::default())?;
        let field_len = field_start.len() - rest.len();
        if tag == DELTA_UPSERT_PODS && wire_type == WireType::LengthDelimited {
            let mut body = &body_start[..body_start.len() - rest.len()];
            let pod_len = usize::try_from(decode_varint(&mut body)?).unwrap_or(usize::MAX);
            if pod_len != body.len() {
                return Ok(None);
            }
            pods.push(body);
        } else {
            others.extend_from_slice(&field_start[..field_len]);
        }
    }
    if pods.len() < PARALLEL_DECODE_PODS {
        return Ok(None);
    }
    let mut delta = proto::SnapshotDelta::decode(others.as_slice())?;
    let decode_all = |slices: &[&[u8]]| -> Result<Vec<proto::Pod>, prost::DecodeError> {
        slices.iter().map(|b| proto::Pod::decode(*b)).collect()
    };
    let (front, back) = pods.split_at(pods.len() / 2);
    let (first, second) = crate::engine::cancel::join(|| decode_all(front), || decode_all(back));
    let mut upsert = first?;
    upsert.extend(second?);
    delta.upsert_pods = upsert;
    Ok(Some(proto::SyncSnapshotRequest {
        kind: Some(proto::sync_snapshot_request::Kind::Delta(delta)),
    }))
}

/// A [`Codec`] encoding `T` and decoding `U` with prost, decoding bounded by the call's budget.
#[derive(Debug, Clone)]
pub struct BoundedCodec<T, U> {
    _types: PhantomData<(T, U)>,
}

impl<T, U> Default for BoundedCodec<T, U> {
    fn default() -> Self {
        Self { _types: PhantomData }
    }
}

impl<T, U> Codec for BoundedCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + WireSchema + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = tonic_prost::ProstEncoder<T>;
    type Decoder = BoundedDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        tonic_prost::ProstEncoder::new(BufferSettings::default())
    }

    fn decoder(&mut self) -> Self::Decoder {
        BoundedDecoder {
            decoded: 0,
            _type: PhantomData,
        }
    }
}

/// Decodes `U` (see the module docs).
#[derive(Debug)]
pub struct BoundedDecoder<U> {
    /// Messages decoded so far in this call.
    decoded: usize,
    _type: PhantomData<U>,
}

/// Where the scan of a `U` stops: past what the call may be granted, and past the batch limit.
fn scan_limits<U: WireSchema>(call: &budget::CallContext) -> wire::ScanLimits {
    wire::ScanLimits {
        max_work: Some(call.reservation.most_grantable()),
        // ScheduleRequest.pods is field 2.
        root_max: if U::INDEX == <proto::ScheduleRequest as WireSchema>::INDEX {
            vec![(2, call.limits.max_batch_size)]
        } else {
            Vec::new()
        },
    }
}

/// The status of a request the scan refused.
fn refused<U: WireSchema>(e: wire::WireError, call: &budget::CallContext) -> Status {
    use wire::WireError;
    match e {
        WireError::Malformed { .. } => Status::internal(e.to_string()),
        WireError::TooLarge { path, len, max } => invalid_field(
            path,
            format!(
                "{len} bytes, more than the {max} bytes one object may take (etcd's default request limit: the \
                 Kubernetes API server stores no larger object)"
            ),
        ),
        WireError::TooMany {
            field,
            count,
            exact,
            max,
        } => invalid_field(
            field,
            format!(
                "batch of {}{count} {field} exceeds the maximum of {max}",
                if exact { "" } else { "more than " }
            ),
        ),
        WireError::OverWork { max } => Status::resource_exhausted(format!(
            "decoding and serving this {} would take more than the {} MiB this replica's request budget of {} MiB \
             (--request-memory-bytes) allows one call; send less per request",
            U::NAME,
            (max + call.reservation.held()) >> 20,
            call.reservation.capacity() >> 20
        )),
    }
}

impl<U> Decoder for BoundedDecoder<U>
where
    U: Message + Default + WireSchema + 'static,
{
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        use bytes::Buf;
        let call = budget::current();
        if self.decoded > 0 {
            return Err(Status::new(
                Code::Internal,
                if call.is_some() {
                    "cardinality violation: received multiple request messages for non-client-streaming RPC"
                } else {
                    "cardinality violation: expected <EOF> for non server-streaming RPCs, but received another message"
                },
            ));
        }
        let len = buf.remaining();
        let work = |buf: &mut DecodeBuf<'_>| -> Result<U, Status> {
            if let Some(call) = &call {
                let cost =
                    wire::scan_limited::<U>(buf.chunk(), budget::weights(), &scan_limits::<U>(call)).map_err(|e| {
                        if matches!(e, wire::WireError::OverWork { .. }) {
                            call.reservation.refused();
                        }
                        refused::<U>(e, call)
                    })?;
                call.reservation
                    .charge(cost.work_bytes, &format!("decoding and serving this {}", U::NAME))?;
            }
            decode_message::<U>(buf).map_err(|e| Status::internal(e.to_string()))
        };
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        let message = if len >= BLOCKING_DECODE_BYTES && multi_thread {
            tokio::task::block_in_place(|| work(buf))?
        } else {
            work(buf)?
        };
        self.decoded += 1;
        Ok(Some(message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta_request(pods: usize) -> proto::SyncSnapshotRequest {
        let mut upsert_pods = crate::synth::distinct_pods(pods, 7);
        for (i, p) in upsert_pods.iter_mut().enumerate() {
            p.node_name = format!("node-{}", i % 13);
        }
        proto::SyncSnapshotRequest {
            kind: Some(proto::sync_snapshot_request::Kind::Delta(proto::SnapshotDelta {
                base_snapshot_id: "base".into(),
                remove_pod_uids: vec!["gone-1".into(), "gone-2".into()],
                remove_nodes: vec!["node-x".into()],
                upsert_pods,
                ..Default::default()
            })),
        }
    }

    #[test]
    fn a_long_delta_decodes_on_two_threads_to_what_prost_decodes() {
        let request = delta_request(PARALLEL_DECODE_PODS + 11);
        let bytes = request.encode_to_vec();
        let parallel = sync_request_in_parallel(&bytes).expect("takes the parallel path");
        assert_eq!(
            parallel,
            proto::SyncSnapshotRequest::decode(bytes.as_slice()).expect("prost decodes")
        );
        assert_eq!(parallel, request);
    }

    #[test]
    fn other_requests_are_left_to_prost() {
        // No kind, too few pods, a full snapshot, a truncated message and a broken pod: prost
        // decodes them (or says what is wrong), as before.
        assert_eq!(sync_request_in_parallel(&[]), None);
        let short = delta_request(10).encode_to_vec();
        assert_eq!(sync_request_in_parallel(&short), None);
        let full = proto::SyncSnapshotRequest {
            kind: Some(proto::sync_snapshot_request::Kind::Full(proto::Snapshot::default())),
        }
        .encode_to_vec();
        assert_eq!(sync_request_in_parallel(&full), None);
        let long = delta_request(PARALLEL_DECODE_PODS).encode_to_vec();
        let truncated = &long[..long.len() - 3];
        assert_eq!(sync_request_in_parallel(truncated), None);
        assert!(proto::SyncSnapshotRequest::decode(truncated).is_err());
        // A delta whose last pod's uid (field 1) claims 5 bytes and has 1.
        let mut pods: Vec<Vec<u8>> = (0..PARALLEL_DECODE_PODS)
            .map(|i| {
                proto::Pod {
                    uid: format!("p{i}"),
                    ..Default::default()
                }
                .encode_to_vec()
            })
            .collect();
        pods.push(vec![0x0a, 0x05, b'a']);
        let bytes = {
            use prost::encoding::{encode_key, encode_varint, WireType};
            let mut delta = Vec::new();
            for p in &pods {
                encode_key(DELTA_UPSERT_PODS, WireType::LengthDelimited, &mut delta);
                encode_varint(p.len() as u64, &mut delta);
                delta.extend_from_slice(p);
            }
            let mut request = Vec::new();
            encode_key(REQUEST_DELTA, WireType::LengthDelimited, &mut request);
            encode_varint(delta.len() as u64, &mut request);
            request.extend(delta);
            request
        };
        assert_eq!(sync_request_in_parallel(&bytes), None);
        assert!(proto::SyncSnapshotRequest::decode(bytes.as_slice()).is_err());
    }
}
