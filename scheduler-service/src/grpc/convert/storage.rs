//! Storage objects: PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes,
//! CSIDrivers and CSIStorageCapacities, and a full snapshot's lists of them.

use super::fields::{
    at_most, field_error, label_key, label_value, labels_within, list, shown, FieldError, MAX_NAMESPACE_BYTES,
    MAX_NAME_BYTES,
};
use super::selectors::{label_selector, pdb_selector, term};
use crate::engine::quantity::Quantity;
use crate::engine::volumes::{
    AccessMode, BindingMode, Claim, ClaimRef, CsiDriver, CsiNode, PersistentVolume, StorageCapacity, StorageClass,
    StorageParts, VolumePhase,
};
use crate::proto;

/// Validates a list of access modes.
fn access_modes(path: &str, modes: &[String]) -> Result<Vec<AccessMode>, FieldError> {
    modes
        .iter()
        .enumerate()
        .map(|(i, m)| {
            AccessMode::parse(m).ok_or_else(|| {
                field_error(
                    format!("{path}[{i}]"),
                    format!(
                        "unsupported access mode {}: must be ReadWriteOnce, ReadOnlyMany, ReadWriteMany or ReadWriteOncePod",
                        shown(m)
                    ),
                )
            })
        })
        .collect()
}

/// Validates spec.volumeMode: whether it is `Block`.
fn block_mode(path: String, mode: &str) -> Result<bool, FieldError> {
    match mode {
        "" | "Filesystem" => Ok(false),
        "Block" => Ok(true),
        other => Err(field_error(
            path,
            format!("unsupported volume mode {}: must be Filesystem or Block", shown(other)),
        )),
    }
}

/// Parses a storage quantity (non-negative; empty is zero).
fn storage_quantity(path: String, value: &str) -> Result<Quantity, FieldError> {
    if value.is_empty() {
        return Ok(Quantity::ZERO);
    }
    let q =
        Quantity::parse(value).map_err(|e| field_error(&path, format!("invalid quantity {}: {e}", shown(value))))?;
    if q.is_negative() {
        return Err(field_error(path, format!("must not be negative, got {}", shown(value))));
    }
    Ok(q)
}

/// An object name: non-empty and no longer than Kubernetes allows.
fn object_name(path: String, name: &str, max: usize) -> Result<(), FieldError> {
    if name.is_empty() {
        return Err(field_error(path, "must not be empty"));
    }
    at_most(path, name, max)
}

/// Validates and converts a PersistentVolumeClaim.
pub fn claim(path: &str, c: &proto::PersistentVolumeClaim) -> Result<Claim, FieldError> {
    object_name(format!("{path}.namespace"), &c.namespace, MAX_NAMESPACE_BYTES)?;
    object_name(format!("{path}.name"), &c.name, MAX_NAME_BYTES)?;
    for (field, value) in [
        ("uid", &c.uid),
        ("storage_class_name", &c.storage_class_name),
        ("volume_name", &c.volume_name),
        ("selected_node", &c.selected_node),
        ("volume_attributes_class_name", &c.volume_attributes_class_name),
        ("controller_uid", &c.controller_uid),
    ] {
        at_most(format!("{path}.{field}"), value, MAX_NAME_BYTES)?;
    }
    let lost = match c.phase.as_str() {
        "" | "Pending" | "Bound" => false,
        "Lost" => true,
        other => {
            return Err(field_error(
                format!("{path}.phase"),
                format!(
                    "unsupported claim phase {}: must be Pending, Bound or Lost",
                    shown(other)
                ),
            ))
        }
    };
    Ok(Claim {
        namespace: c.namespace.clone(),
        name: c.name.clone(),
        uid: c.uid.clone(),
        class: c.storage_class_name.clone(),
        volume_name: c.volume_name.clone(),
        bind_completed: c.bind_completed,
        access_modes: access_modes(&format!("{path}.access_modes"), &c.access_modes)?,
        request: storage_quantity(format!("{path}.storage_request"), &c.storage_request)?,
        request_set: !c.storage_request.is_empty(),
        selector: c
            .selector
            .as_ref()
            .map(|s| label_selector(&format!("{path}.selector"), s))
            .transpose()?,
        block: block_mode(format!("{path}.volume_mode"), &c.volume_mode)?,
        lost,
        deleting: c.deleting,
        selected_node: c.selected_node.clone(),
        selected_node_set: c.selected_node_set || !c.selected_node.is_empty(),
        volume_attributes_class: c.volume_attributes_class_name.clone(),
        controller_uid: c.controller_uid.clone(),
    })
}

/// Validates and converts a PersistentVolume.
pub fn persistent_volume(path: &str, v: &proto::PersistentVolume) -> Result<PersistentVolume, FieldError> {
    object_name(format!("{path}.name"), &v.name, MAX_NAME_BYTES)?;
    labels_within(format_args!("{path}.labels"), &v.labels)?;
    for (field, value) in [
        ("storage_class_name", &v.storage_class_name),
        ("volume_attributes_class_name", &v.volume_attributes_class_name),
        ("csi_driver", &v.csi_driver),
    ] {
        at_most(format!("{path}.{field}"), value, MAX_NAME_BYTES)?;
    }
    let phase = match v.phase.as_str() {
        "" => VolumePhase::Unknown,
        "Pending" => VolumePhase::Pending,
        "Available" => VolumePhase::Available,
        "Bound" => VolumePhase::Bound,
        "Released" => VolumePhase::Released,
        "Failed" => VolumePhase::Failed,
        other => {
            return Err(field_error(
                format!("{path}.phase"),
                format!(
                    "unsupported volume phase {}: must be Pending, Available, Bound, Released or Failed",
                    shown(other)
                ),
            ))
        }
    };
    let node_affinity = v
        .node_affinity
        .as_ref()
        .map(|sel| {
            sel.terms
                .iter()
                .enumerate()
                .map(|(i, t)| term(&format!("{path}.node_affinity.terms[{i}]"), t))
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    let claim_ref = match &v.claim_ref {
        None => None,
        Some(r) => {
            object_name(format!("{path}.claim_ref.namespace"), &r.namespace, MAX_NAMESPACE_BYTES)?;
            object_name(format!("{path}.claim_ref.name"), &r.name, MAX_NAME_BYTES)?;
            at_most(format!("{path}.claim_ref.uid"), &r.uid, MAX_NAME_BYTES)?;
            Some(ClaimRef {
                namespace: r.namespace.clone(),
                name: r.name.clone(),
                uid: r.uid.clone(),
            })
        }
    };
    if v.csi_driver.is_empty() && !v.csi_volume_handle.is_empty() {
        return Err(field_error(
            format!("{path}.csi_driver"),
            "must be set when csi_volume_handle is",
        ));
    }
    Ok(PersistentVolume {
        name: v.name.clone(),
        labels: v.labels.clone(),
        class: v.storage_class_name.clone(),
        capacity: storage_quantity(format!("{path}.capacity"), &v.capacity)?,
        access_modes: access_modes(&format!("{path}.access_modes"), &v.access_modes)?,
        block: block_mode(format!("{path}.volume_mode"), &v.volume_mode)?,
        node_affinity,
        claim_ref,
        phase,
        deleting: v.deleting,
        csi: (!v.csi_driver.is_empty()).then(|| (v.csi_driver.clone(), v.csi_volume_handle.clone())),
        volume_attributes_class: v.volume_attributes_class_name.clone(),
    })
}

/// Validates and converts a StorageClass.
pub fn storage_class(path: &str, c: &proto::StorageClass) -> Result<StorageClass, FieldError> {
    object_name(format!("{path}.name"), &c.name, MAX_NAME_BYTES)?;
    at_most(format!("{path}.provisioner"), &c.provisioner, MAX_NAME_BYTES)?;
    let binding_mode = match c.volume_binding_mode.as_str() {
        "" => None,
        "Immediate" => Some(BindingMode::Immediate),
        "WaitForFirstConsumer" => Some(BindingMode::WaitForFirstConsumer),
        other => {
            return Err(field_error(
                format!("{path}.volume_binding_mode"),
                format!(
                    "unsupported binding mode {}: must be Immediate or WaitForFirstConsumer",
                    shown(other)
                ),
            ))
        }
    };
    let mut allowed_topologies = Vec::with_capacity(c.allowed_topologies.len());
    for (i, t) in c.allowed_topologies.iter().enumerate() {
        let mut term = Vec::with_capacity(t.match_label_expressions.len());
        for (j, r) in t.match_label_expressions.iter().enumerate() {
            let rp = format!("{path}.allowed_topologies[{i}].match_label_expressions[{j}]");
            if r.key.is_empty() {
                return Err(field_error(format!("{rp}.key"), "must not be empty"));
            }
            label_key(format!("{rp}.key"), &r.key)?;
            if r.values.is_empty() {
                return Err(field_error(format!("{rp}.values"), "must not be empty"));
            }
            for (k, v) in r.values.iter().enumerate() {
                label_value(format!("{rp}.values[{k}]"), v)?;
            }
            term.push((r.key.clone(), r.values.clone()));
        }
        allowed_topologies.push(term);
    }
    Ok(StorageClass {
        name: c.name.clone(),
        provisioner: c.provisioner.clone(),
        binding_mode,
        allowed_topologies,
    })
}

/// Validates and converts a CSINode.
pub fn csi_node(path: &str, n: &proto::CsiNode) -> Result<CsiNode, FieldError> {
    object_name(format!("{path}.name"), &n.name, MAX_NAME_BYTES)?;
    let mut drivers = Vec::with_capacity(n.drivers.len());
    for (i, d) in n.drivers.iter().enumerate() {
        object_name(format!("{path}.drivers[{i}].name"), &d.name, MAX_NAME_BYTES)?;
        if drivers.iter().any(|(name, _)| name == &d.name) {
            return Err(field_error(
                format!("{path}.drivers[{i}].name"),
                format!("duplicate driver {}", shown(&d.name)),
            ));
        }
        if let Some(c) = d.allocatable_count.filter(|c| *c < 0) {
            return Err(field_error(
                format!("{path}.drivers[{i}].allocatable_count"),
                format!("must not be negative, got {c}"),
            ));
        }
        drivers.push((d.name.clone(), d.allocatable_count));
    }
    Ok(CsiNode {
        name: n.name.clone(),
        drivers,
    })
}

/// Validates and converts a CSIDriver.
pub fn csi_driver(path: &str, d: &proto::CsiDriver) -> Result<CsiDriver, FieldError> {
    object_name(format!("{path}.name"), &d.name, MAX_NAME_BYTES)?;
    Ok(CsiDriver {
        name: d.name.clone(),
        storage_capacity: d.storage_capacity,
        prevent_pod_scheduling_if_missing: d.prevent_pod_scheduling_if_missing,
    })
}

/// Validates and converts a CSIStorageCapacity.
pub fn storage_capacity(path: &str, c: &proto::CsiStorageCapacity) -> Result<StorageCapacity, FieldError> {
    object_name(format!("{path}.namespace"), &c.namespace, MAX_NAMESPACE_BYTES)?;
    object_name(format!("{path}.name"), &c.name, MAX_NAME_BYTES)?;
    object_name(
        format!("{path}.storage_class_name"),
        &c.storage_class_name,
        MAX_NAME_BYTES,
    )?;
    let node_topology = c
        .node_topology
        .as_ref()
        .map(|t| {
            labels_within(format_args!("{path}.node_topology.match_labels"), &t.match_labels)?;
            pdb_selector(&format!("{path}.node_topology"), t)
        })
        .transpose()?;
    let quantity = |field: &str, value: &str| {
        (!value.is_empty())
            .then(|| storage_quantity(format!("{path}.{field}"), value))
            .transpose()
    };
    Ok(StorageCapacity {
        namespace: c.namespace.clone(),
        name: c.name.clone(),
        class: c.storage_class_name.clone(),
        node_topology,
        capacity: quantity("capacity", &c.capacity)?,
        maximum_volume_size: quantity("maximum_volume_size", &c.maximum_volume_size)?,
    })
}

/// Validates a full snapshot's claims, volumes, storage classes, CSINodes, CSIDrivers and
/// CSIStorageCapacities; `path` prefixes field names.
pub fn storage(path: &str, s: &proto::Snapshot) -> Result<StorageParts, FieldError> {
    Ok(StorageParts {
        claims: list(
            &format!("{path}.persistent_volume_claims"),
            &s.persistent_volume_claims,
            claim,
        )?,
        volumes: list(
            &format!("{path}.persistent_volumes"),
            &s.persistent_volumes,
            persistent_volume,
        )?,
        classes: list(&format!("{path}.storage_classes"), &s.storage_classes, storage_class)?,
        csi_nodes: list(&format!("{path}.csi_nodes"), &s.csi_nodes, csi_node)?,
        csi_drivers: list(&format!("{path}.csi_drivers"), &s.csi_drivers, csi_driver)?,
        capacities: list(
            &format!("{path}.csi_storage_capacities"),
            &s.csi_storage_capacities,
            storage_capacity,
        )?,
    })
}
