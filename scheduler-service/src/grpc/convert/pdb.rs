//! PodDisruptionBudgets.

use super::fields::{at_most, field_error, FieldError, MAX_NAMESPACE_BYTES, MAX_NAME_BYTES};
use super::selectors::pdb_selector;
use crate::engine::plugins::defaultpreemption::Pdb;
use crate::proto;

/// Validates and converts a PodDisruptionBudget; `path` prefixes every field name.
pub fn pdb(path: &str, p: &proto::PodDisruptionBudget) -> Result<Pdb, FieldError> {
    if p.namespace.is_empty() {
        return Err(field_error(format!("{path}.namespace"), "must not be empty"));
    }
    if p.name.is_empty() {
        return Err(field_error(format!("{path}.name"), "must not be empty"));
    }
    at_most(format!("{path}.namespace"), &p.namespace, MAX_NAMESPACE_BYTES)?;
    at_most(format!("{path}.name"), &p.name, MAX_NAME_BYTES)?;
    Ok(Pdb {
        namespace: p.namespace.clone(),
        name: p.name.clone(),
        selector: p
            .selector
            .as_ref()
            .map(|s| pdb_selector(&format!("{path}.selector"), s))
            .transpose()?,
        disruptions_allowed: p.disruptions_allowed,
        disrupted_pod_uids: p.disrupted_pod_uids.clone(),
    })
}
