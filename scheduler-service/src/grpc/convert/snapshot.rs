//! Full snapshots and deltas: their nodes, pods, namespaces, PodDisruptionBudgets and storage
//! objects, converted by the files of each family; namespaces are converted here.

use super::fields::{at_most, field_error, labels_within, list, shown, FieldError, MAX_NAMESPACE_BYTES};
use super::node::node;
use super::pdb::pdb;
use super::pod::pods;
use super::storage::{claim, csi_driver, csi_node, persistent_volume, storage_capacity, storage_class};
use crate::engine::model::{Labels, NodeSpec, PodSpec};
use crate::engine::plugins::defaultpreemption::Pdb;
use crate::engine::snapshot::Delta;
use crate::engine::volumes::StorageDelta;
use crate::proto;

/// A validated snapshot: nodes, bound pods, namespaces (name, labels) and PodDisruptionBudgets.
pub type SnapshotParts = (Vec<NodeSpec>, Vec<PodSpec>, Vec<(String, Labels)>, Vec<Pdb>);

fn namespace(path: &str, n: &proto::Namespace) -> Result<(String, Labels), FieldError> {
    if n.name.is_empty() {
        return Err(field_error(format!("{path}.name"), "must not be empty"));
    }
    at_most(format!("{path}.name"), &n.name, MAX_NAMESPACE_BYTES)?;
    labels_within(format_args!("{path}.labels"), &n.labels)?;
    Ok((n.name.clone(), n.labels.clone()))
}

fn namespaces(path: &str, items: &[proto::Namespace]) -> Result<Vec<(String, Labels)>, FieldError> {
    let out = list(path, items, namespace)?;
    let mut seen = std::collections::HashSet::with_capacity(out.len());
    for (i, (name, _)) in out.iter().enumerate() {
        if !seen.insert(name.as_str()) {
            return Err(field_error(
                format!("{path}[{i}].name"),
                format!("duplicate namespace {}", shown(name)),
            ));
        }
    }
    Ok(out)
}

/// Validates a full snapshot; `path` prefixes field names.
pub fn snapshot(path: &str, s: &proto::Snapshot) -> Result<SnapshotParts, FieldError> {
    let nodes = list(&format!("{path}.nodes"), &s.nodes, node)?;
    let pods = pods(&format!("{path}.pods"), &s.pods)?;
    let namespaces = namespaces(&format!("{path}.namespaces"), &s.namespaces)?;
    let pdbs = list(
        &format!("{path}.pod_disruption_budgets"),
        &s.pod_disruption_budgets,
        pdb,
    )?;
    Ok((nodes, pods, namespaces, pdbs))
}

/// Validates a delta (its base id is checked by the caller).
pub fn delta(path: &str, d: &proto::SnapshotDelta) -> Result<Delta, FieldError> {
    Ok(Delta {
        upsert_nodes: list(&format!("{path}.upsert_nodes"), &d.upsert_nodes, node)?,
        remove_nodes: d.remove_nodes.clone(),
        upsert_pods: pods(&format!("{path}.upsert_pods"), &d.upsert_pods)?,
        remove_pod_uids: d.remove_pod_uids.clone(),
        upsert_namespaces: namespaces(&format!("{path}.upsert_namespaces"), &d.upsert_namespaces)?,
        remove_namespaces: d.remove_namespaces.clone(),
        upsert_pdbs: list(
            &format!("{path}.upsert_pod_disruption_budgets"),
            &d.upsert_pod_disruption_budgets,
            pdb,
        )?,
        remove_pdbs: d.remove_pod_disruption_budgets.clone(),
        upsert_pod_groups: list(
            &format!("{path}.upsert_pod_groups"),
            &d.upsert_pod_groups,
            super::podgroups::pod_group,
        )?,
        remove_pod_groups: d.remove_pod_groups.clone(),
        upsert_composite_pod_groups: list(
            &format!("{path}.upsert_composite_pod_groups"),
            &d.upsert_composite_pod_groups,
            super::podgroups::composite_pod_group,
        )?,
        remove_composite_pod_groups: d.remove_composite_pod_groups.clone(),
        storage: StorageDelta {
            upsert_claims: list(
                &format!("{path}.upsert_persistent_volume_claims"),
                &d.upsert_persistent_volume_claims,
                claim,
            )?,
            remove_claims: d.remove_persistent_volume_claims.clone(),
            upsert_volumes: list(
                &format!("{path}.upsert_persistent_volumes"),
                &d.upsert_persistent_volumes,
                persistent_volume,
            )?,
            remove_volumes: d.remove_persistent_volumes.clone(),
            upsert_classes: list(
                &format!("{path}.upsert_storage_classes"),
                &d.upsert_storage_classes,
                storage_class,
            )?,
            remove_classes: d.remove_storage_classes.clone(),
            upsert_csi_nodes: list(&format!("{path}.upsert_csi_nodes"), &d.upsert_csi_nodes, csi_node)?,
            remove_csi_nodes: d.remove_csi_nodes.clone(),
            upsert_csi_drivers: list(&format!("{path}.upsert_csi_drivers"), &d.upsert_csi_drivers, csi_driver)?,
            remove_csi_drivers: d.remove_csi_drivers.clone(),
            upsert_capacities: list(
                &format!("{path}.upsert_csi_storage_capacities"),
                &d.upsert_csi_storage_capacities,
                storage_capacity,
            )?,
            remove_capacities: d.remove_csi_storage_capacities.clone(),
        },
        devices: super::devices::device_delta(path, d)?,
    })
}
