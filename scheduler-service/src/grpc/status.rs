//! The service's error statuses (a field's `INVALID_ARGUMENT` with its `BadRequest`, an unknown
//! snapshot's `NOT_FOUND` with its `ErrorInfo`, a snapshot's build errors by field, a deadline
//! passed, a call ended) and the small helpers its calls share (the caller's deadline, content
//! ids, dropping off the runtime).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tonic::{Code, Request, Status};
use tonic_types::{ErrorDetails, StatusExt};

use super::convert::{self, shown, FieldError};
use super::service::{ERROR_DOMAIN, SNAPSHOT_NOT_FOUND};
use crate::engine::{Deadline, EvalError, SnapshotError};

/// `INVALID_ARGUMENT` for an invalid field, with a `google.rpc.BadRequest` naming it.
pub(crate) fn invalid(e: FieldError) -> Status {
    let details = ErrorDetails::with_bad_request_violation(e.field.clone(), e.message.clone());
    Status::with_error_details(Code::InvalidArgument, e.to_string(), details)
}

/// [`invalid`] of a field and what is wrong with it.
pub(crate) fn invalid_field(field: impl std::fmt::Display, message: impl Into<String>) -> Status {
    invalid(convert::field_error(field, message))
}

pub(super) fn snapshot_not_found(field: &str, id: &str) -> Status {
    let details = ErrorDetails::with_error_info(
        SNAPSHOT_NOT_FOUND,
        ERROR_DOMAIN,
        HashMap::from([(
            "snapshot_id".to_string(),
            id.chars().take(convert::ECHO_CHARS).collect::<String>(),
        )]),
    );
    Status::with_error_details(
        Code::NotFound,
        format!(
            "{field}: snapshot {} is not in this replica's cache; send a full snapshot",
            shown(id)
        ),
        details,
    )
}

/// Maps a snapshot build error to the field path of the request that caused it.
pub(super) fn snapshot_error(prefix_nodes: &str, prefix_pods: &str, prefix_pdbs: &str, e: SnapshotError) -> Status {
    match e {
        SnapshotError::DuplicatePdb { index, key } => invalid_field(
            format!("{prefix_pdbs}[{index}].name"),
            format!("duplicate PodDisruptionBudget {}", shown(&key)),
        ),
        SnapshotError::DuplicateNode { index, name } => invalid_field(
            format!("{prefix_nodes}[{index}].name"),
            format!("duplicate node name {}", shown(&name)),
        ),
        SnapshotError::DuplicatePod { index, uid } => invalid_field(
            format!("{prefix_pods}[{index}].uid"),
            format!("duplicate pod uid {}", shown(&uid)),
        ),
        SnapshotError::UnboundPod { index } => invalid_field(
            format!("{prefix_pods}[{index}].node_name"),
            "a snapshot holds bound pods only; node_name must be set",
        ),
        SnapshotError::DuplicatePodGroup { index, key } => {
            let root = prefix_nodes.rsplit_once('.').map_or("", |(root, _)| root);
            let list = if prefix_nodes.ends_with("upsert_nodes") {
                "upsert_pod_groups"
            } else {
                "pod_groups"
            };
            invalid_field(
                format!("{root}.{list}[{index}].name"),
                format!("duplicate PodGroup {}", shown(&key)),
            )
        }
        SnapshotError::DuplicateCompositePodGroup { index, key } => {
            let root = prefix_nodes.rsplit_once('.').map_or("", |(root, _)| root);
            let list = if prefix_nodes.ends_with("upsert_nodes") {
                "upsert_composite_pod_groups"
            } else {
                "composite_pod_groups"
            };
            invalid_field(
                format!("{root}.{list}[{index}].name"),
                format!("duplicate CompositePodGroup {}", shown(&key)),
            )
        }
        SnapshotError::DuplicateStorage(d) => {
            let root = prefix_nodes.rsplit_once('.').map_or("", |(root, _)| root);
            invalid_field(
                format!("{root}.{}[{}].name", d.list, d.index),
                format!("duplicate {} {}", d.kind, shown(&d.key)),
            )
        }
        SnapshotError::Cancelled => ended(),
    }
}

/// The caller's deadline from the `grpc-timeout` header, if any.
pub(super) fn request_deadline<T>(req: &Request<T>) -> Deadline {
    let Some(value) = req.metadata().get("grpc-timeout").and_then(|v| v.to_str().ok()) else {
        return Deadline::none();
    };
    if value.len() < 2 {
        return Deadline::none();
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    let Ok(n) = digits.parse::<u64>() else {
        return Deadline::none();
    };
    let d = match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return Deadline::none(),
    };
    Instant::now().checked_add(d).map_or(Deadline::none(), Deadline::at)
}

pub(super) fn deadline_status(e: EvalError) -> Status {
    match e {
        EvalError::DeadlineExceeded { .. } => Status::deadline_exceeded(e.to_string()),
        EvalError::Snapshot(_) => Status::cancelled(e.to_string()),
    }
}

/// Hex id of content: the 128-bit xxh3 of the bytes.
pub(super) fn content_id(parts: &[&[u8]]) -> String {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for p in parts {
        h.update(&(p.len() as u64).to_le_bytes());
        h.update(p);
    }
    format!("{:032x}", h.digest128())
}

/// Drops `value` on the blocking pool, or here outside a runtime.
pub(super) fn drop_in_background<T: Send + 'static>(value: T) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn_blocking(move || drop(value))),
        Err(_) => drop(value),
    }
}

/// The status of a call whose work stopped because the call had ended (no one reads it).
pub(super) fn ended() -> Status {
    Status::cancelled("the call ended (cancelled, past its deadline or disconnected) before its work was done")
}
