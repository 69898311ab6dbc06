//! Field paths and the errors that name them, with the checks every object family shares: the
//! lengths Kubernetes allows, label keys and values, and lists converted with an indexed path for
//! each element.

use std::collections::BTreeMap;
use std::fmt;

use crate::engine::resources::is_qualified_name;

/// An invalid field: its path and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// Path of the field, e.g. `pods[3].containers[0].requests["cpu"]`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// Characters of a caller's value an error message repeats at most: a status must stay small (gRPC
/// implementations refuse metadata over 8 KiB, and C-core clients then see RESOURCE_EXHAUSTED
/// instead of the error).
pub const ECHO_CHARS: usize = 64;

/// A caller's value as an error quotes it: Debug-quoted, and past [`ECHO_CHARS`] characters cut to
/// that prefix with its length in bytes, e.g. `"aaaa…" (5000 bytes)`.
pub fn shown(value: &str) -> String {
    if value.len() <= ECHO_CHARS {
        return format!("{value:?}");
    }
    match value.char_indices().nth(ECHO_CHARS) {
        None => format!("{value:?}"),
        Some((cut, _)) => format!("{:?}… ({} bytes)", &value[..cut], value.len()),
    }
}

/// Kubernetes' `ValidateLabelName`: a label key (or topology key) must be a qualified name.
pub(super) fn label_key(path: impl fmt::Display, key: &str) -> Result<(), FieldError> {
    if is_qualified_name(key) {
        Ok(())
    } else {
        Err(field_error(
            path,
            format!(
                "invalid label key {}: must be a qualified name: an optional DNS subdomain prefix and '/', then 1 to \
                 63 characters, alphanumeric, '-', '_' or '.', starting and ending with an alphanumeric character",
                shown(key)
            ),
        ))
    }
}

/// Kubernetes' `ValidateLabelValue`: at most 63 characters, empty or alphanumeric at both ends with
/// '-', '_' and '.' between.
pub(super) fn label_value(path: impl fmt::Display, value: &str) -> Result<(), FieldError> {
    let b = value.as_bytes();
    let ok = b.len() <= 63
        && (b.is_empty()
            || (b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))));
    if ok {
        Ok(())
    } else {
        Err(field_error(
            path,
            format!(
                "invalid label value {}: must be at most 63 characters, empty or alphanumeric at both ends with \
                 '-', '_' or '.' between",
                shown(value)
            ),
        ))
    }
}

/// Longest object name Kubernetes accepts (a DNS subdomain); uids are held to it too.
pub const MAX_NAME_BYTES: usize = 253;
/// Longest namespace name (a DNS label).
pub const MAX_NAMESPACE_BYTES: usize = 63;
/// Longest label key: a 253-character prefix, '/', a 63-character name.
pub const MAX_LABEL_KEY_BYTES: usize = 317;
/// Longest label value.
pub const MAX_LABEL_VALUE_BYTES: usize = 63;
/// Most bytes of an object's annotations, keys and values together (Kubernetes'
/// `TotalAnnotationSizeLimitB`).
pub const MAX_ANNOTATIONS_BYTES: usize = 256 << 10;
/// Most entries of a pod's `required_features` or a node's `declared_features` (Kubernetes
/// registers nine node features in 1.37).
pub const MAX_FEATURES: usize = 256;

/// Refuses a value longer than Kubernetes allows for the field.
pub(super) fn at_most(path: impl fmt::Display, value: &str, max: usize) -> Result<(), FieldError> {
    if value.len() <= max {
        Ok(())
    } else {
        Err(field_error(
            path,
            format!("must be at most {max} bytes, got {}: {}", value.len(), shown(value)),
        ))
    }
}

/// Checks an object's labels have keys and values no longer than Kubernetes allows (lengths
/// only: the API server checked their form when it stored the object).
pub(super) fn labels_within(path: impl fmt::Display, labels: &BTreeMap<String, String>) -> Result<(), FieldError> {
    for (k, v) in labels {
        if k.len() > MAX_LABEL_KEY_BYTES || v.len() > MAX_LABEL_VALUE_BYTES {
            let kp = format!("{path}[{}]", shown(k));
            at_most(&kp, k, MAX_LABEL_KEY_BYTES)?;
            at_most(&kp, v, MAX_LABEL_VALUE_BYTES)?;
        }
    }
    Ok(())
}

/// Builds a [`FieldError`] for a path.
pub fn field_error(field: impl fmt::Display, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.to_string(),
        message: message.into(),
    }
}

/// Converts a list with an indexed path for each element; stops once the call has ended
/// ([`crate::engine::cancel`]; the caller discards the result).
pub fn list<T, U>(
    path: &str,
    items: &[T],
    f: impl Fn(&str, &T) -> Result<U, FieldError>,
) -> Result<Vec<U>, FieldError> {
    list_from(path, items, 0, |p, x| f(&p.to_string(), x))
}

/// [`list`] of `items` that sit at `offset` in the request's list (their paths count from there),
/// each element's path given to `f` unformatted, for `f` to format only for an error.
pub(super) fn list_from<T, U>(
    path: &str,
    items: &[T],
    offset: usize,
    f: impl Fn(&dyn fmt::Display, &T) -> Result<U, FieldError>,
) -> Result<Vec<U>, FieldError> {
    items
        .iter()
        .enumerate()
        .map(|(i, x)| {
            if crate::engine::cancel::requested_at(i) {
                return Err(field_error(path, "the call ended before it was validated"));
            }
            f(&format_args!("{path}[{}]", offset + i), x)
        })
        .collect()
}
