//! Quantities and resource lists (a container's requests, a node's allocatable), each amount in
//! its resource's unit.

use std::collections::BTreeMap;
use std::fmt;

use super::fields::{field_error, shown, FieldError};
use crate::engine::quantity::Quantity;
use crate::engine::resources::{ResourceList, ResourceName, Resources};

/// Parses one quantity for one resource in the resource's unit (millicores for cpu).
/// The path is built only for an error: resource lists are parsed for every pod of a snapshot.
fn quantity(path: impl Fn() -> String, name: &ResourceName, value: &str) -> Result<i64, FieldError> {
    let q =
        Quantity::parse(value).map_err(|e| field_error(path(), format!("invalid quantity {}: {e}", shown(value))))?;
    if q.is_negative() {
        return Err(field_error(
            path(),
            format!("must be greater than or equal to 0, got {}", shown(value)),
        ));
    }
    Ok(if name.is_milli() { q.milli_value() } else { q.value() })
}

/// Parses a resource list; `pods` is allowed only when `allow_pods` (node allocatable).
/// Returns the resources, the `pods` amount, and whether cpu and memory were present.
pub(super) fn resource_list(
    path: impl fmt::Display + Copy,
    list: &BTreeMap<String, String>,
    allow_pods: bool,
) -> Result<(Resources, Option<i64>, bool, bool), FieldError> {
    let mut out = Resources::default();
    let mut pods = None;
    let (mut has_cpu, mut has_memory) = (false, false);
    for (key, value) in list {
        let p = || format!("{path}[{}]", shown(key));
        let name = ResourceName::parse(key)
            .map_err(|e| field_error(p(), format!("invalid resource name {}: {e}", shown(key))))?;
        let amount = quantity(p, &name, value)?;
        match name {
            ResourceName::Pods if allow_pods => pods = Some(amount),
            ResourceName::Pods => return Err(field_error(p(), "pods is not a resource a pod can request")),
            ResourceName::Cpu => has_cpu = true,
            ResourceName::Memory => has_memory = true,
            _ => {}
        }
        out.set(&name, amount);
    }
    Ok((out, pods, has_cpu, has_memory))
}

/// A resource list with the names it has ([`ResourceList`]), or `None` when empty (unset).
pub(super) fn named_list(
    path: impl fmt::Display + Copy,
    list: &BTreeMap<String, String>,
) -> Result<Option<ResourceList>, FieldError> {
    if list.is_empty() {
        return Ok(None);
    }
    let mut out = ResourceList::default();
    for (key, value) in list {
        let p = || format!("{path}[{}]", shown(key));
        let name = ResourceName::parse(key)
            .map_err(|e| field_error(p(), format!("invalid resource name {}: {e}", shown(key))))?;
        if name == ResourceName::Pods {
            return Err(field_error(p(), "pods is not a resource a pod can request"));
        }
        let amount = quantity(p, &name, value)?;
        out.set(&name, amount);
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::super::pod::pod;
    use super::super::pod::tests::{pod_with, req};
    use crate::proto;

    #[test]
    fn bad_quantity_names_the_field() {
        let p = pod_with(vec![proto::Container {
            requests: req(&[("cpu", "1.2.3")]),
            ..Default::default()
        }]);
        let err = pod("pods[3]", &p).unwrap_err();
        assert_eq!(err.field, "pods[3].containers[0].requests[\"cpu\"]");
        assert!(
            err.to_string()
                .starts_with("pods[3].containers[0].requests[\"cpu\"]: invalid quantity \"1.2.3\""),
            "{err}"
        );
    }

    #[test]
    fn quantities_convert_in_kube_scheduler_units() {
        let p = pod_with(vec![proto::Container {
            requests: req(&[
                ("cpu", "250m"),
                ("memory", "1Gi"),
                ("nvidia.com/gpu", "1e0"),
                ("ephemeral-storage", "1e3"),
            ]),
            ..Default::default()
        }]);
        let spec = pod("pod", &p).unwrap();
        assert_eq!(spec.requests.milli_cpu, 250);
        assert_eq!(spec.requests.memory, 1 << 30);
        assert_eq!(spec.requests.ephemeral_storage, 1000);
        assert_eq!(spec.requests.scalar("nvidia.com/gpu"), 1);
    }

    #[test]
    fn negative_and_unknown_resources_are_refused() {
        let p = pod_with(vec![proto::Container {
            requests: req(&[("memory", "-1Gi")]),
            ..Default::default()
        }]);
        assert!(pod("pod", &p)
            .unwrap_err()
            .message
            .contains("greater than or equal to 0"));
        let p = pod_with(vec![proto::Container {
            requests: req(&[("gpu", "1")]),
            ..Default::default()
        }]);
        assert_eq!(pod("pod", &p).unwrap_err().field, "pod.containers[0].requests[\"gpu\"]");
    }
}
