//! Nodes: allocatable, taints, images and declared features; the taint effects tolerations name
//! and the feature lists pods require are checked here too.

use std::sync::Arc;

use super::fields::{at_most, field_error, labels_within, shown, FieldError, MAX_FEATURES, MAX_NAME_BYTES};
use super::resources::resource_list;
use crate::engine::model::{NodeSpec, Taint, TaintEffect};
use crate::proto;

pub(super) fn effect(path: &str, s: &str) -> Result<TaintEffect, FieldError> {
    TaintEffect::parse(s).ok_or_else(|| {
        field_error(
            path,
            format!(
                "unsupported effect {}: must be one of NoSchedule, PreferNoSchedule, NoExecute",
                shown(s)
            ),
        )
    })
}

/// The node features a pod needs (`required_features`) or a node declares: Kubernetes feature
/// names (gate names, CamelCase), sorted without duplicates.
pub(super) fn features(path: &str, names: &[String]) -> Result<Vec<Arc<str>>, FieldError> {
    if names.len() > MAX_FEATURES {
        return Err(field_error(
            path.to_string(),
            format!("must have at most {MAX_FEATURES} entries, got {}", names.len()),
        ));
    }
    let mut out: Vec<Arc<str>> = Vec::with_capacity(names.len());
    for (i, n) in names.iter().enumerate() {
        at_most(format_args!("{path}[{i}]"), n, MAX_NAME_BYTES)?;
        if n.is_empty() {
            return Err(field_error(format!("{path}[{i}]"), "must not be empty"));
        }
        out.push(Arc::from(n.as_str()));
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Validates and converts a node; `path` prefixes every field name.
pub fn node(path: &str, n: &proto::Node) -> Result<NodeSpec, FieldError> {
    if n.name.is_empty() {
        return Err(field_error(format!("{path}.name"), "must not be empty"));
    }
    at_most(format!("{path}.name"), &n.name, MAX_NAME_BYTES)?;
    labels_within(format_args!("{path}.labels"), &n.labels)?;
    let (allocatable, pods, _, _) = resource_list(&format!("{path}.allocatable"), &n.allocatable, true)?;
    let mut taints = Vec::with_capacity(n.taints.len());
    for (i, t) in n.taints.iter().enumerate() {
        if t.key.is_empty() {
            return Err(field_error(format!("{path}.taints[{i}].key"), "must not be empty"));
        }
        taints.push(Taint {
            key: t.key.clone(),
            value: t.value.clone(),
            effect: effect(&format!("{path}.taints[{i}].effect"), &t.effect)?,
        });
    }
    let mut images = std::collections::HashMap::new();
    for (i, img) in n.images.iter().enumerate() {
        if img.size_bytes < 0 {
            return Err(field_error(
                format!("{path}.images[{i}].size_bytes"),
                "must not be negative",
            ));
        }
        for name in &img.names {
            images.insert(name.clone(), img.size_bytes);
        }
    }
    Ok(NodeSpec {
        name: n.name.clone(),
        labels: n.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        taints,
        unschedulable: n.unschedulable,
        allocatable,
        allowed_pods: pods.unwrap_or(0),
        images,
        declared_features: features(&format!("{path}.declared_features"), &n.declared_features)?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::pod::tests::req;
    use super::*;

    #[test]
    fn node_allocatable_takes_pods() {
        let n = proto::Node {
            name: "n".into(),
            allocatable: req(&[("cpu", "4"), ("memory", "16Gi"), ("pods", "110")]),
            ..Default::default()
        };
        let spec = node("node", &n).unwrap();
        assert_eq!((spec.allocatable.milli_cpu, spec.allowed_pods), (4000, 110));
    }
}
