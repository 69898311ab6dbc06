//! PodGroups (`scheduling.k8s.io/v1beta1`), validated as the API server validates the fields
//! kube-scheduler reads.

use std::sync::Arc;

use super::fields::{at_most, field_error, label_key, list, shown, FieldError, MAX_NAMESPACE_BYTES, MAX_NAME_BYTES};
use crate::engine::model::{CompositePodGroup, PodGroup, PreemptionPolicy};
use crate::proto;

/// Validates and converts a PodGroup; `path` prefixes every field name.
pub fn pod_group(path: &str, g: &proto::PodGroup) -> Result<PodGroup, FieldError> {
    if g.namespace.is_empty() {
        return Err(field_error(format!("{path}.namespace"), "must not be empty"));
    }
    if g.name.is_empty() {
        return Err(field_error(format!("{path}.name"), "must not be empty"));
    }
    at_most(format!("{path}.namespace"), &g.namespace, MAX_NAMESPACE_BYTES)?;
    at_most(format!("{path}.name"), &g.name, MAX_NAME_BYTES)?;
    let min_count = match &g.gang {
        None => None,
        Some(gang) if gang.min_count < 1 => {
            return Err(field_error(
                format!("{path}.gang.min_count"),
                format!("must be greater than or equal to 1, got {}", gang.min_count),
            ))
        }
        Some(gang) => Some(gang.min_count as u32),
    };
    // The API allows one topology constraint (`schedulingConstraints.topology`, maxItems 1).
    if g.topology_keys.len() > 1 {
        return Err(field_error(
            format!("{path}.topology_keys"),
            format!("must have at most 1 item, got {}", g.topology_keys.len()),
        ));
    }
    for (i, key) in g.topology_keys.iter().enumerate() {
        if key.is_empty() {
            return Err(field_error(format!("{path}.topology_keys[{i}]"), "must not be empty"));
        }
        label_key(format_args!("{path}.topology_keys[{i}]"), key)?;
    }
    let preemption_policy = match g.preemption_policy.as_str() {
        "" | "PreemptLowerPriority" => PreemptionPolicy::PreemptLowerPriority,
        "Never" => PreemptionPolicy::Never,
        other => {
            return Err(field_error(
                format!("{path}.preemption_policy"),
                format!(
                    "unsupported preemption policy {}: must be PreemptLowerPriority or Never",
                    shown(other)
                ),
            ))
        }
    };
    match g.disruption_mode.as_str() {
        "" | "Single" | "All" => {}
        other => {
            return Err(field_error(
                format!("{path}.disruption_mode"),
                format!("unsupported disruption mode {}: must be Single or All", shown(other)),
            ))
        }
    }
    Ok(PodGroup {
        namespace: Arc::from(g.namespace.as_str()),
        name: Arc::from(g.name.as_str()),
        uid: Arc::from(g.uid.as_str()),
        generation: g.generation,
        min_count,
        topology_key: g.topology_keys.first().map(|k| Arc::from(k.as_str())),
        priority: g.priority.unwrap_or(0),
        preemption_policy,
        disruption_all: g.disruption_mode == "All",
        initially_scheduled: g.initially_scheduled,
        parent: (!g.parent_composite_pod_group_name.is_empty())
            .then(|| Arc::from(g.parent_composite_pod_group_name.as_str())),
    })
}

/// Validates and converts a CompositePodGroup; `path` prefixes every field name.
pub fn composite_pod_group(path: &str, g: &proto::CompositePodGroup) -> Result<CompositePodGroup, FieldError> {
    if g.namespace.is_empty() {
        return Err(field_error(format!("{path}.namespace"), "must not be empty"));
    }
    if g.name.is_empty() {
        return Err(field_error(format!("{path}.name"), "must not be empty"));
    }
    at_most(format!("{path}.namespace"), &g.namespace, MAX_NAMESPACE_BYTES)?;
    at_most(format!("{path}.name"), &g.name, MAX_NAME_BYTES)?;
    at_most(
        format!("{path}.parent_composite_pod_group_name"),
        &g.parent_composite_pod_group_name,
        MAX_NAME_BYTES,
    )?;
    let min_group_count = match g.min_group_count {
        None => None,
        Some(n) if n < 1 => {
            return Err(field_error(
                format!("{path}.min_group_count"),
                format!("must be greater than or equal to 1, got {n}"),
            ))
        }
        Some(n) => Some(n as u32),
    };
    if g.topology_keys.len() > 1 {
        return Err(field_error(
            format!("{path}.topology_keys"),
            format!("must have at most 1 item, got {}", g.topology_keys.len()),
        ));
    }
    for (i, key) in g.topology_keys.iter().enumerate() {
        if key.is_empty() {
            return Err(field_error(format!("{path}.topology_keys[{i}]"), "must not be empty"));
        }
        label_key(format_args!("{path}.topology_keys[{i}]"), key)?;
    }
    let preemption_policy = match g.preemption_policy.as_str() {
        "" | "PreemptLowerPriority" => PreemptionPolicy::PreemptLowerPriority,
        "Never" => PreemptionPolicy::Never,
        other => {
            return Err(field_error(
                format!("{path}.preemption_policy"),
                format!(
                    "unsupported preemption policy {}: must be PreemptLowerPriority or Never",
                    shown(other)
                ),
            ))
        }
    };
    Ok(CompositePodGroup {
        namespace: Arc::from(g.namespace.as_str()),
        name: Arc::from(g.name.as_str()),
        uid: Arc::from(g.uid.as_str()),
        parent: (!g.parent_composite_pod_group_name.is_empty())
            .then(|| Arc::from(g.parent_composite_pod_group_name.as_str())),
        min_group_count,
        topology_key: g.topology_keys.first().map(|k| Arc::from(k.as_str())),
        priority: g.priority.unwrap_or(0),
        preemption_policy,
    })
}

/// The CompositePodGroups of a full snapshot; `path` names the snapshot.
pub fn composite_pod_groups(path: &str, s: &proto::Snapshot) -> Result<Vec<CompositePodGroup>, FieldError> {
    list(
        &format!("{path}.composite_pod_groups"),
        &s.composite_pod_groups,
        composite_pod_group,
    )
}

/// The PodGroups of a full snapshot; `path` names the snapshot.
pub fn pod_groups(path: &str, s: &proto::Snapshot) -> Result<Vec<PodGroup>, FieldError> {
    list(&format!("{path}.pod_groups"), &s.pod_groups, pod_group)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group() -> proto::PodGroup {
        proto::PodGroup {
            namespace: "ml".into(),
            name: "trainer".into(),
            uid: "u1".into(),
            generation: 3,
            gang: Some(proto::GangSchedulingPolicy { min_count: 8 }),
            topology_keys: vec!["topology.kubernetes.io/rack".into()],
            priority: Some(100),
            ..Default::default()
        }
    }

    #[test]
    fn a_gang_group_converts_with_its_topology_key_and_priority() {
        let g = pod_group("g", &group()).expect("valid");
        assert_eq!(g.key(), "ml/trainer");
        assert_eq!(g.min_count(), 8);
        assert_eq!(g.topology_key.as_deref(), Some("topology.kubernetes.io/rack"));
        assert_eq!(g.priority, 100);
        assert_eq!(g.generation, 3);
    }

    #[test]
    fn a_basic_group_needs_one_pod() {
        let g = pod_group("g", &proto::PodGroup { gang: None, ..group() }).expect("valid");
        assert_eq!(g.min_count, None);
        assert_eq!(g.min_count(), 1);
    }

    #[test]
    fn invalid_groups_name_the_field() {
        let cases: Vec<(proto::PodGroup, &str)> = vec![
            (
                proto::PodGroup {
                    gang: Some(proto::GangSchedulingPolicy { min_count: 0 }),
                    ..group()
                },
                "g.gang.min_count",
            ),
            (
                proto::PodGroup {
                    topology_keys: vec!["a".into(), "b".into()],
                    ..group()
                },
                "g.topology_keys",
            ),
            (
                proto::PodGroup {
                    topology_keys: vec!["not a key".into()],
                    ..group()
                },
                "g.topology_keys[0]",
            ),
            (
                proto::PodGroup {
                    preemption_policy: "Sometimes".into(),
                    ..group()
                },
                "g.preemption_policy",
            ),
            (
                proto::PodGroup {
                    disruption_mode: "Some".into(),
                    ..group()
                },
                "g.disruption_mode",
            ),
            (
                proto::PodGroup {
                    name: String::new(),
                    ..group()
                },
                "g.name",
            ),
        ];
        for (g, field) in cases {
            let e = pod_group("g", &g).expect_err(field);
            assert_eq!(e.field, field, "{e}");
        }
    }
}
