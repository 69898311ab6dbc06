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
    U: Message + Default + WireSchema,
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
            U::decode(buf).map_err(|e| Status::internal(e.to_string()))
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
