//! Validation and conversion of API messages into engine types.
//!
//! Every check names the offending field with its full path, the way a caller wrote it, for example
//! `pods[3].containers[0].requests["cpu"]: invalid quantity "1.2.3"`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::engine::gang::Gang;
use crate::engine::model::{
    normalized_image_name, Container, HostPort, LabelSelector, Labels, NodeInclusionPolicy, NodeSpec, PodAffinityTerm,
    PodAffinityTerms, PodSpec, PreferredTerm, Protocol, RequestedNames, Requirement, SelectorOp, SelectorTerm,
    SpreadConstraint, Taint, TaintEffect, Toleration, TolerationOperator, WeightedPodAffinityTerm, WhenUnsatisfiable,
};
use crate::engine::preemption::{LabelSelector as PdbSelector, Pdb, PreemptionPolicy};
use crate::engine::quantity::Quantity;
use crate::engine::resources::{
    is_qualified_name, pod_requests, ContainerRequests, PodResourceInputs, ResourceList, ResourceName, Resources,
};
use crate::engine::snapshot::Delta;
use crate::engine::volumes::{
    AccessMode, BindingMode, Claim, ClaimRef, CsiDriver, CsiNode, PersistentVolume, PodVolume, StorageCapacity,
    StorageClass, StorageDelta, StorageParts, VolumePhase, VolumeSource,
};
use crate::proto;

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
fn label_key(path: impl fmt::Display, key: &str) -> Result<(), FieldError> {
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
fn label_value(path: impl fmt::Display, value: &str) -> Result<(), FieldError> {
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
fn at_most(path: impl fmt::Display, value: &str, max: usize) -> Result<(), FieldError> {
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
fn labels_within(path: impl fmt::Display, labels: &BTreeMap<String, String>) -> Result<(), FieldError> {
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
fn resource_list(
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
fn named_list(
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

fn requirement(path: &str, r: &proto::NodeSelectorRequirement, field: bool) -> Result<Requirement, FieldError> {
    if r.key.is_empty() {
        return Err(field_error(format!("{path}.key"), "must not be empty"));
    }
    if !field {
        label_key(format!("{path}.key"), &r.key)?;
    }
    if field && r.key != "metadata.name" {
        return Err(field_error(
            format!("{path}.key"),
            format!(
                "unsupported field {}: only \"metadata.name\" is supported",
                shown(&r.key)
            ),
        ));
    }
    let values = || {
        if r.values.is_empty() {
            Err(field_error(
                format!("{path}.values"),
                format!("must be non-empty for operator {}", shown(&r.operator)),
            ))
        } else {
            Ok(r.values.clone())
        }
    };
    let no_values = |op: SelectorOp| {
        if r.values.is_empty() {
            Ok(op)
        } else {
            Err(field_error(
                format!("{path}.values"),
                format!("must be empty for operator {}", shown(&r.operator)),
            ))
        }
    };
    let integer = || {
        if r.values.len() != 1 {
            return Err(field_error(
                format!("{path}.values"),
                format!("must have exactly one value for operator {}", shown(&r.operator)),
            ));
        }
        r.values[0].parse::<i64>().map_err(|_| {
            field_error(
                format!("{path}.values[0]"),
                format!(
                    "must be an integer for operator {}, got {}",
                    shown(&r.operator),
                    shown(&r.values[0])
                ),
            )
        })
    };
    let op = match r.operator.as_str() {
        "In" => SelectorOp::In(values()?),
        "NotIn" => SelectorOp::NotIn(values()?),
        "Exists" if !field => no_values(SelectorOp::Exists)?,
        "DoesNotExist" if !field => no_values(SelectorOp::DoesNotExist)?,
        "Gt" if !field => SelectorOp::Gt(integer()?),
        "Lt" if !field => SelectorOp::Lt(integer()?),
        other => {
            let allowed = if field {
                "In, NotIn"
            } else {
                "In, NotIn, Exists, DoesNotExist, Gt, Lt"
            };
            return Err(field_error(
                format!("{path}.operator"),
                format!("unsupported operator {}: must be one of {allowed}", shown(other)),
            ));
        }
    };
    Ok(Requirement { key: r.key.clone(), op })
}

fn term(path: &str, t: &proto::NodeSelectorTerm) -> Result<SelectorTerm, FieldError> {
    Ok(SelectorTerm {
        match_expressions: t
            .match_expressions
            .iter()
            .enumerate()
            .map(|(i, r)| requirement(&format!("{path}.match_expressions[{i}]"), r, false))
            .collect::<Result<_, _>>()?,
        match_fields: t
            .match_fields
            .iter()
            .enumerate()
            .map(|(i, r)| requirement(&format!("{path}.match_fields[{i}]"), r, true))
            .collect::<Result<_, _>>()?,
    })
}

/// Validates and converts a `metav1.LabelSelector`.
fn label_selector(path: &str, s: &proto::LabelSelector) -> Result<LabelSelector, FieldError> {
    let mut requirements = Vec::with_capacity(s.match_labels.len() + s.match_expressions.len());
    for (k, v) in &s.match_labels {
        if k.is_empty() {
            return Err(field_error(format!("{path}.match_labels"), "keys must not be empty"));
        }
        let kp = format!("{path}.match_labels[{}]", shown(k));
        label_key(&kp, k)?;
        label_value(&kp, v)?;
        requirements.push(Requirement {
            key: k.clone(),
            op: SelectorOp::In(vec![v.clone()]),
        });
    }
    for (i, r) in s.match_expressions.iter().enumerate() {
        let rp = format!("{path}.match_expressions[{i}]");
        if r.key.is_empty() {
            return Err(field_error(format!("{rp}.key"), "must not be empty"));
        }
        label_key(format!("{rp}.key"), &r.key)?;
        for (j, v) in r.values.iter().enumerate() {
            label_value(format!("{rp}.values[{j}]"), v)?;
        }
        let op = match r.operator.as_str() {
            "In" | "NotIn" if r.values.is_empty() => {
                return Err(field_error(
                    format!("{rp}.values"),
                    format!("must be non-empty for operator {}", shown(&r.operator)),
                ))
            }
            "In" => SelectorOp::In(r.values.clone()),
            "NotIn" => SelectorOp::NotIn(r.values.clone()),
            "Exists" | "DoesNotExist" if !r.values.is_empty() => {
                return Err(field_error(
                    format!("{rp}.values"),
                    format!("must be empty for operator {}", shown(&r.operator)),
                ))
            }
            "Exists" => SelectorOp::Exists,
            "DoesNotExist" => SelectorOp::DoesNotExist,
            other => {
                return Err(field_error(
                    format!("{rp}.operator"),
                    format!(
                        "unsupported operator {}: must be one of In, NotIn, Exists, DoesNotExist",
                        shown(other)
                    ),
                ))
            }
        };
        requirements.push(Requirement { key: r.key.clone(), op });
    }
    Ok(LabelSelector { requirements })
}

fn affinity_term(path: &str, t: &proto::PodAffinityTerm) -> Result<PodAffinityTerm, FieldError> {
    if t.topology_key.is_empty() {
        return Err(field_error(format!("{path}.topology_key"), "must not be empty"));
    }
    label_key(format!("{path}.topology_key"), &t.topology_key)?;
    Ok(PodAffinityTerm {
        selector: t
            .label_selector
            .as_ref()
            .map(|s| label_selector(&format!("{path}.label_selector"), s))
            .transpose()?,
        namespaces: t.namespaces.clone(),
        namespace_selector: t
            .namespace_selector
            .as_ref()
            .map(|s| label_selector(&format!("{path}.namespace_selector"), s))
            .transpose()?,
        topology_key: t.topology_key.clone(),
    })
}

fn pod_affinity(path: &str, a: Option<&proto::PodAffinity>) -> Result<PodAffinityTerms, FieldError> {
    let Some(a) = a else {
        return Ok(PodAffinityTerms::default());
    };
    let required = list(&format!("{path}.required"), &a.required, affinity_term)?;
    let mut preferred = Vec::with_capacity(a.preferred.len());
    for (i, w) in a.preferred.iter().enumerate() {
        let wp = format!("{path}.preferred[{i}]");
        if !(1..=100).contains(&w.weight) {
            return Err(field_error(
                format!("{wp}.weight"),
                format!("must be between 1 and 100, got {}", w.weight),
            ));
        }
        let term = w
            .term
            .as_ref()
            .ok_or_else(|| field_error(format!("{wp}.term"), "must be set"))?;
        preferred.push(WeightedPodAffinityTerm {
            weight: i64::from(w.weight),
            term: affinity_term(&format!("{wp}.term"), term)?,
        });
    }
    Ok(PodAffinityTerms { required, preferred })
}

fn inclusion_policy(path: &str, s: &str, default: NodeInclusionPolicy) -> Result<NodeInclusionPolicy, FieldError> {
    match s {
        "" => Ok(default),
        "Honor" => Ok(NodeInclusionPolicy::Honor),
        "Ignore" => Ok(NodeInclusionPolicy::Ignore),
        other => Err(field_error(
            path,
            format!("unsupported policy {}: must be Honor or Ignore", shown(other)),
        )),
    }
}

fn spread_constraint(path: &str, c: &proto::TopologySpreadConstraint) -> Result<SpreadConstraint, FieldError> {
    if c.max_skew < 1 {
        return Err(field_error(
            format!("{path}.max_skew"),
            format!("must be greater than zero, got {}", c.max_skew),
        ));
    }
    if c.topology_key.is_empty() {
        return Err(field_error(format!("{path}.topology_key"), "must not be empty"));
    }
    label_key(format!("{path}.topology_key"), &c.topology_key)?;
    let when_unsatisfiable = match c.when_unsatisfiable.as_str() {
        "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
        "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
        other => {
            return Err(field_error(
                format!("{path}.when_unsatisfiable"),
                format!(
                    "unsupported value {}: must be DoNotSchedule or ScheduleAnyway",
                    shown(other)
                ),
            ))
        }
    };
    if let Some(m) = c.min_domains {
        if m < 1 {
            return Err(field_error(
                format!("{path}.min_domains"),
                format!("must be greater than zero, got {m}"),
            ));
        }
        if when_unsatisfiable != WhenUnsatisfiable::DoNotSchedule {
            return Err(field_error(
                format!("{path}.min_domains"),
                "can only be set when when_unsatisfiable is DoNotSchedule",
            ));
        }
    }
    for (i, k) in c.match_label_keys.iter().enumerate() {
        if k.is_empty() {
            return Err(field_error(
                format!("{path}.match_label_keys[{i}]"),
                "must not be empty",
            ));
        }
        label_key(format!("{path}.match_label_keys[{i}]"), k)?;
    }
    Ok(SpreadConstraint {
        max_skew: c.max_skew,
        topology_key: c.topology_key.clone(),
        when_unsatisfiable,
        selector: c
            .label_selector
            .as_ref()
            .map(|s| label_selector(&format!("{path}.label_selector"), s))
            .transpose()?,
        min_domains: c.min_domains.unwrap_or(1),
        node_affinity_policy: inclusion_policy(
            &format!("{path}.node_affinity_policy"),
            &c.node_affinity_policy,
            NodeInclusionPolicy::Honor,
        )?,
        node_taints_policy: inclusion_policy(
            &format!("{path}.node_taints_policy"),
            &c.node_taints_policy,
            NodeInclusionPolicy::Ignore,
        )?,
        match_label_keys: c.match_label_keys.clone(),
    })
}

fn effect(path: &str, s: &str) -> Result<TaintEffect, FieldError> {
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

fn toleration(path: &str, t: &proto::Toleration) -> Result<Toleration, FieldError> {
    let operator = match t.operator.as_str() {
        "" | "Equal" => TolerationOperator::Equal,
        "Exists" => TolerationOperator::Exists,
        other => {
            return Err(field_error(
                format!("{path}.operator"),
                format!("unsupported operator {}: must be Equal or Exists", shown(other)),
            ))
        }
    };
    if operator == TolerationOperator::Exists && !t.value.is_empty() {
        return Err(field_error(
            format!("{path}.value"),
            "must be empty when operator is Exists",
        ));
    }
    if t.key.is_empty() && operator != TolerationOperator::Exists {
        return Err(field_error(
            format!("{path}.operator"),
            "must be Exists when key is empty",
        ));
    }
    let effect = match t.effect.as_str() {
        "" => None,
        s => Some(effect(&format!("{path}.effect"), s)?),
    };
    Ok(Toleration {
        key: t.key.clone(),
        operator,
        value: t.value.clone(),
        effect,
    })
}

/// The host ports a pod's containers use so far, as Kubernetes keys them to refuse one used twice:
/// `protocol/hostIP/port`.
type PortKeys<'a> = std::collections::HashSet<(Protocol, &'a str, i32)>;

fn container<'a>(
    path: &dyn fmt::Display,
    c: &'a proto::Container,
    init: bool,
    ports: &mut Vec<HostPort>,
    seen: &mut PortKeys<'a>,
) -> Result<ContainerRequests, FieldError> {
    let (requests, _, has_cpu, has_memory) = resource_list(format_args!("{path}.requests"), &c.requests, false)?;
    let restartable = match c.restart_policy.as_str() {
        "" => false,
        "Always" => true,
        "Never" | "OnFailure" if !init => false,
        other => {
            return Err(field_error(
                format!("{path}.restart_policy"),
                format!(
                    "unsupported restart policy {}: {}",
                    shown(other),
                    if init {
                        "an init container allows only \"Always\" (a sidecar) or none"
                    } else {
                        "must be Always, OnFailure or Never"
                    }
                ),
            ))
        }
    };
    for (i, p) in c.ports.iter().enumerate() {
        let pp = format!("{path}.ports[{i}]");
        if !(0..=65535).contains(&p.container_port) {
            return Err(field_error(
                format!("{pp}.container_port"),
                format!("must be between 0 and 65535, got {}", p.container_port),
            ));
        }
        if !(0..=65535).contains(&p.host_port) {
            return Err(field_error(
                format!("{pp}.host_port"),
                format!("must be between 0 and 65535, got {}", p.host_port),
            ));
        }
        let protocol = match p.protocol.as_str() {
            "" | "TCP" => Protocol::Tcp,
            "UDP" => Protocol::Udp,
            "SCTP" => Protocol::Sctp,
            other => {
                return Err(field_error(
                    format!("{pp}.protocol"),
                    format!("unsupported protocol {}: must be TCP, UDP or SCTP", shown(other)),
                ))
            }
        };
        if !p.host_ip.is_empty() && p.host_ip.parse::<std::net::IpAddr>().is_err() {
            return Err(field_error(
                format!("{pp}.host_ip"),
                format!(
                    "must be a valid IP address (e.g. 10.9.8.7 or 2001:db8::ffff), got {}",
                    shown(&p.host_ip)
                ),
            ));
        }
        if p.host_port > 0 && !seen.insert((protocol, p.host_ip.as_str(), p.host_port)) {
            // Kubernetes' checkHostPortConflicts: across the regular containers, and within each init
            // container (they run one at a time).
            return Err(field_error(
                format!("{pp}.host_port"),
                format!(
                    "duplicate value {}: the pod uses this protocol, host IP and host port twice",
                    shown(&format!("{}/{}/{}", protocol.name(), p.host_ip, p.host_port))
                ),
            ));
        }
        if p.host_port > 0 {
            let ip = if p.host_ip.is_empty() {
                "0.0.0.0"
            } else {
                p.host_ip.as_str()
            };
            ports.push(HostPort {
                ip: Arc::from(ip),
                protocol,
                port: p.host_port as u16,
            });
        }
    }
    Ok(ContainerRequests {
        requests,
        has_cpu,
        has_memory,
        restartable: init && restartable,
        allocated: named_list(format_args!("{path}.allocated_requests"), &c.allocated_requests)?,
        actuated: named_list(format_args!("{path}.actuated_requests"), &c.actuated_requests)?,
    })
}

/// Validates and converts a pod; `path` prefixes every field name.
pub fn pod(path: &str, p: &proto::Pod) -> Result<PodSpec, FieldError> {
    pod_at(&path, p)
}

/// [`pod`], with the path formatted only if an error names a field: a full sync converts a
/// million pods, and building their paths was a quarter of the conversion.
fn pod_at(path: &dyn fmt::Display, p: &proto::Pod) -> Result<PodSpec, FieldError> {
    if p.uid.is_empty() {
        return Err(field_error(format!("{path}.uid"), "must not be empty"));
    }
    at_most(format_args!("{path}.uid"), &p.uid, MAX_NAME_BYTES)?;
    at_most(format_args!("{path}.name"), &p.name, MAX_NAME_BYTES)?;
    at_most(format_args!("{path}.namespace"), &p.namespace, MAX_NAMESPACE_BYTES)?;
    at_most(format_args!("{path}.node_name"), &p.node_name, MAX_NAME_BYTES)?;
    labels_within(format_args!("{path}.labels"), &p.labels)?;
    let annotations: usize = p.annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if annotations > MAX_ANNOTATIONS_BYTES {
        return Err(field_error(
            format!("{path}.annotations"),
            format!("must total at most {MAX_ANNOTATIONS_BYTES} bytes (Kubernetes' limit), got {annotations}"),
        ));
    }
    let mut host_ports = Vec::new();
    let mut images = Vec::with_capacity(p.init_containers.len() + p.containers.len());
    let mut init = Vec::with_capacity(p.init_containers.len());
    for (i, c) in p.init_containers.iter().enumerate() {
        init.push(container(
            &format_args!("{path}.init_containers[{i}]"),
            c,
            true,
            &mut host_ports,
            &mut PortKeys::new(),
        )?);
        images.push(normalized_image_name(&c.image));
    }
    let mut containers = Vec::with_capacity(p.containers.len());
    let mut seen = PortKeys::new();
    let mut seen_containers = Vec::with_capacity(p.containers.len());
    for (i, c) in p.containers.iter().enumerate() {
        let parsed = container(
            &format_args!("{path}.containers[{i}]"),
            c,
            false,
            &mut host_ports,
            &mut seen,
        )?;
        seen_containers.push(Container {
            name: c.name.clone(),
            image: c.image.clone(),
            requests: parsed.requests.clone(),
        });
        containers.push(parsed);
        images.push(normalized_image_name(&c.image));
    }
    let volumes = if p.volumes.is_empty() {
        Vec::new()
    } else {
        volumes(path, p, &mut images)?
    };
    let resources = PodResourceInputs {
        pod_requests: named_list(format_args!("{path}.pod_requests"), &p.pod_requests)?.unwrap_or_default(),
        allocated: named_list(format_args!("{path}.allocated_requests"), &p.allocated_requests)?,
        actuated: named_list(format_args!("{path}.actuated_requests"), &p.actuated_requests)?,
        resize_infeasible: p.resize_infeasible,
        overhead: named_list(format_args!("{path}.overhead"), &p.overhead)?.unwrap_or_default(),
    };
    let requests = pod_requests(&containers, &init, &resources);
    let (required_affinity, preferred_affinity) = match &p.node_affinity {
        None => (None, Vec::new()),
        Some(a) => {
            let required = match &a.required {
                None => None,
                Some(sel) => Some(
                    sel.terms
                        .iter()
                        .enumerate()
                        .map(|(i, t)| term(&format!("{path}.node_affinity.required.terms[{i}]"), t))
                        .collect::<Result<Vec<_>, _>>()?,
                ),
            };
            let mut preferred = Vec::with_capacity(a.preferred.len());
            for (i, pt) in a.preferred.iter().enumerate() {
                let pp = format!("{path}.node_affinity.preferred[{i}]");
                if !(1..=100).contains(&pt.weight) {
                    return Err(field_error(
                        format!("{pp}.weight"),
                        format!("must be between 1 and 100, got {}", pt.weight),
                    ));
                }
                let t = pt
                    .preference
                    .as_ref()
                    .ok_or_else(|| field_error(format!("{pp}.preference"), "must be set"))?;
                preferred.push(PreferredTerm {
                    weight: i64::from(pt.weight),
                    term: term(&format!("{pp}.preference"), t)?,
                });
            }
            (required, preferred)
        }
    };
    let tolerations = p
        .tolerations
        .iter()
        .enumerate()
        .map(|(i, t)| toleration(&format!("{path}.tolerations[{i}]"), t))
        .collect::<Result<Vec<_>, _>>()?;
    let spread_constraints = if p.topology_spread_constraints.is_empty() {
        Vec::new()
    } else {
        list(
            &format!("{path}.topology_spread_constraints"),
            &p.topology_spread_constraints,
            spread_constraint,
        )?
    };
    for (i, c) in spread_constraints.iter().enumerate() {
        if spread_constraints[..i]
            .iter()
            .any(|o| o.topology_key == c.topology_key && o.when_unsatisfiable == c.when_unsatisfiable)
        {
            return Err(field_error(
                format!("{path}.topology_spread_constraints[{i}]"),
                format!(
                    "duplicate constraint for topology_key {} and when_unsatisfiable {}",
                    shown(&c.topology_key),
                    shown(&p.topology_spread_constraints[i].when_unsatisfiable)
                ),
            ));
        }
    }
    for (k, v) in &p.node_selector {
        label_key(format_args!("{path}.node_selector[{}]", shown(k)), k)?;
        label_value(format_args!("{path}.node_selector[{}]", shown(k)), v)?;
    }
    let node_selector = p.node_selector.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let preemption_policy = match p.preemption_policy.as_str() {
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
    if p.start_time_seconds < 0 {
        return Err(field_error(
            format!("{path}.start_time_seconds"),
            format!("must not be negative, got {}", p.start_time_seconds),
        ));
    }
    let gang = match &p.gang {
        None => None,
        Some(g) => {
            if g.name.is_empty() {
                return Err(field_error(format!("{path}.gang.name"), "must not be empty"));
            }
            if g.min_members == 0 {
                return Err(field_error(format!("{path}.gang.min_members"), "must be at least 1"));
            }
            Some(Gang {
                key: Arc::from(format!("{}/{}", p.namespace, g.name)),
                min_members: g.min_members,
            })
        }
    };
    let mut requested_names = RequestedNames::default();
    for c in p.init_containers.iter().chain(&p.containers) {
        for name in c.requests.keys() {
            requested_names.insert(name);
        }
    }
    Ok(PodSpec {
        requested_names,
        uid: Arc::from(p.uid.as_str()),
        namespace: p.namespace.clone(),
        name: p.name.clone(),
        labels: p.labels.clone(),
        annotations: p.annotations.clone(),
        containers: seen_containers,
        priority: p.priority,
        requests: requests.requests,
        non_zero_requests: requests.non_zero,
        score_requests: requests.score,
        required_features: features(&format!("{path}.required_features"), &p.required_features)?.into(),
        node_name: (!p.node_name.is_empty()).then(|| p.node_name.clone()),
        node_selector,
        required_affinity,
        preferred_affinity,
        tolerations,
        host_ports,
        images,
        pod_affinity: match &p.pod_affinity {
            None => PodAffinityTerms::default(),
            Some(a) => pod_affinity(&format!("{path}.pod_affinity"), Some(a))?,
        },
        pod_anti_affinity: match &p.pod_anti_affinity {
            None => PodAffinityTerms::default(),
            Some(a) => pod_affinity(&format!("{path}.pod_anti_affinity"), Some(a))?,
        },
        spread_constraints,
        default_spread_selector: p
            .default_spread_selector
            .as_ref()
            .map(|s| label_selector(&format!("{path}.default_spread_selector"), s))
            .transpose()?,
        preemption_policy,
        start_time: p.start_time_seconds,
        gang,
        terminating: p.terminating,
        volumes,
    })
}

/// A pod's volumes the volume filters read; the images of its image volumes go to `images`
/// (ImageLocality counts them after the containers', in spec order).
fn volumes(path: &dyn fmt::Display, p: &proto::Pod, images: &mut Vec<String>) -> Result<Vec<PodVolume>, FieldError> {
    let mut out = Vec::new();
    for (i, v) in p.volumes.iter().enumerate() {
        if v.image_reference.is_empty() {
            out.push(volume(&format!("{path}.volumes[{i}]"), v)?);
            continue;
        }
        let other = !v.claim_name.is_empty()
            || !v.gce_pd_name.is_empty()
            || !v.aws_volume_id.is_empty()
            || !v.iscsi_iqn.is_empty()
            || !v.rbd_image.is_empty()
            || !v.rbd_monitors.is_empty();
        if other {
            return Err(field_error(
                format!("{path}.volumes[{i}]"),
                "may set only one source: an image volume (image_reference) has no other",
            ));
        }
        images.push(normalized_image_name(&v.image_reference));
    }
    Ok(out)
}

/// The node features a pod needs (`required_features`) or a node declares: Kubernetes feature
/// names (gate names, CamelCase), sorted without duplicates.
fn features(path: &str, names: &[String]) -> Result<Vec<Arc<str>>, FieldError> {
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

/// Validates and converts one of a pod's volumes: at most one source.
fn volume(path: &str, v: &proto::Volume) -> Result<PodVolume, FieldError> {
    at_most(format!("{path}.name"), &v.name, MAX_NAME_BYTES)?;
    let mut sources: Vec<(&str, VolumeSource)> = Vec::new();
    if !v.claim_name.is_empty() {
        at_most(format!("{path}.claim_name"), &v.claim_name, MAX_NAME_BYTES)?;
        sources.push((
            "claim_name",
            VolumeSource::Claim {
                claim_name: Arc::from(v.claim_name.as_str()),
                ephemeral: v.ephemeral,
            },
        ));
    } else if v.ephemeral {
        return Err(field_error(
            format!("{path}.claim_name"),
            "must name the claim of an ephemeral volume (\"<pod name>-<volume name>\")",
        ));
    }
    if !v.gce_pd_name.is_empty() {
        sources.push((
            "gce_pd_name",
            VolumeSource::GcePersistentDisk {
                pd_name: Arc::from(v.gce_pd_name.as_str()),
                read_only: v.read_only,
            },
        ));
    }
    if !v.aws_volume_id.is_empty() {
        sources.push((
            "aws_volume_id",
            VolumeSource::AwsElasticBlockStore {
                volume_id: Arc::from(v.aws_volume_id.as_str()),
            },
        ));
    }
    if !v.iscsi_iqn.is_empty() {
        sources.push((
            "iscsi_iqn",
            VolumeSource::Iscsi {
                iqn: Arc::from(v.iscsi_iqn.as_str()),
                read_only: v.read_only,
            },
        ));
    }
    if !v.rbd_image.is_empty() || !v.rbd_monitors.is_empty() || !v.rbd_pool.is_empty() {
        if v.rbd_image.is_empty() {
            return Err(field_error(
                format!("{path}.rbd_image"),
                "must not be empty for an rbd volume",
            ));
        }
        if v.rbd_monitors.is_empty() {
            return Err(field_error(
                format!("{path}.rbd_monitors"),
                "must not be empty for an rbd volume",
            ));
        }
        sources.push((
            "rbd_image",
            VolumeSource::Rbd {
                monitors: v.rbd_monitors.iter().map(|m| Arc::from(m.as_str())).collect(),
                pool: Arc::from(if v.rbd_pool.is_empty() {
                    "rbd"
                } else {
                    v.rbd_pool.as_str()
                }),
                image: Arc::from(v.rbd_image.as_str()),
                read_only: v.read_only,
            },
        ));
    }
    match sources.len() {
        0 => Err(field_error(
            path,
            "must set a source: claim_name, gce_pd_name, aws_volume_id, iscsi_iqn or rbd_image (leave other volumes out)",
        )),
        1 => Ok(PodVolume {
            name: Arc::from(v.name.as_str()),
            source: sources.remove(0).1,
        }),
        _ => Err(field_error(
            format!("{path}.{}", sources[1].0),
            format!("a volume has one source; {} is set too", sources[0].0),
        )),
    }
}

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

/// Validates and converts a metav1.LabelSelector.
fn pdb_selector(path: &str, s: &proto::LabelSelector) -> Result<PdbSelector, FieldError> {
    let mut match_expressions = Vec::with_capacity(s.match_expressions.len());
    for (i, r) in s.match_expressions.iter().enumerate() {
        let rp = format!("{path}.match_expressions[{i}]");
        if r.key.is_empty() {
            return Err(field_error(format!("{rp}.key"), "must not be empty"));
        }
        label_key(format!("{rp}.key"), &r.key)?;
        if !matches!(r.operator.as_str(), "In" | "NotIn" | "Exists" | "DoesNotExist") {
            return Err(field_error(
                format!("{rp}.operator"),
                format!(
                    "unsupported operator {}: must be one of In, NotIn, Exists, DoesNotExist",
                    shown(&r.operator)
                ),
            ));
        }
        let with_values = matches!(r.operator.as_str(), "In" | "NotIn");
        if with_values == r.values.is_empty() {
            let want = if with_values {
                "must be non-empty"
            } else {
                "must be empty"
            };
            return Err(field_error(
                format!("{rp}.values"),
                format!("{want} for operator {}", shown(&r.operator)),
            ));
        }
        let op = match r.operator.as_str() {
            "In" => SelectorOp::In(r.values.clone()),
            "NotIn" => SelectorOp::NotIn(r.values.clone()),
            "Exists" => SelectorOp::Exists,
            _ => SelectorOp::DoesNotExist,
        };
        match_expressions.push(Requirement { key: r.key.clone(), op });
    }
    Ok(PdbSelector {
        match_labels: s.match_labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        match_expressions,
    })
}

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
fn list_from<T, U>(
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

/// Pods at least this many are converted on two threads (a full sync's chunks carry 50,000).
pub const PARALLEL_PODS: usize = 4096;

/// [`list`] of pods: a long list is converted in two halves, the second on a helper thread that
/// enters the caller's cancellation scope, so a full sync's conversion uses a second core while
/// the sender waits. Same result as [`list`], the first error in index order included.
pub fn pods(path: &str, items: &[proto::Pod]) -> Result<Vec<PodSpec>, FieldError> {
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    if items.len() < PARALLEL_PODS || threads < 2 {
        return pods_from(path, items, 0);
    }
    let mid = items.len() / 2;
    let (front, back) = items.split_at(mid);
    let (first, second) = crate::engine::cancel::join(|| pods_from(path, front, 0), || pods_from(path, back, mid));
    let mut out = first?;
    out.extend(second?);
    Ok(out)
}

/// [`list_from`] of pods, each pod's path formatted only for an error.
fn pods_from(path: &str, items: &[proto::Pod], offset: usize) -> Result<Vec<PodSpec>, FieldError> {
    list_from(path, items, offset, pod_at)
}

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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn pod_with(containers: Vec<proto::Container>) -> proto::Pod {
        proto::Pod {
            uid: "u1".into(),
            containers,
            ..Default::default()
        }
    }

    fn many_pods(n: usize) -> Vec<proto::Pod> {
        (0..n)
            .map(|i| proto::Pod {
                uid: format!("u{i}"),
                name: format!("p{i}"),
                namespace: "default".into(),
                node_name: format!("node-{}", i % 7),
                containers: vec![proto::Container {
                    requests: req(&[("cpu", "100m"), ("memory", "64Mi")]),
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect()
    }

    fn bad_cpu(p: &mut proto::Pod) {
        p.containers[0].requests.insert("cpu".into(), "1.2.3".into());
    }

    #[test]
    fn a_long_pod_list_converts_on_two_threads_as_on_one() {
        let items = many_pods(3 * PARALLEL_PODS);
        let one = list("pods", &items, pod).unwrap();
        let two = pods("pods", &items).unwrap();
        assert_eq!(two.len(), items.len());
        assert_eq!(format!("{two:?}"), format!("{one:?}"), "same pods, same order");

        // The first error in index order, from either half.
        let mut late = items.clone();
        bad_cpu(&mut late[items.len() - 1]);
        let e = pods("pods", &late).unwrap_err();
        assert_eq!(
            e.field,
            format!("pods[{}].containers[0].requests[\"cpu\"]", items.len() - 1)
        );
        let mut both = late.clone();
        bad_cpu(&mut both[10]);
        assert_eq!(
            pods("pods", &both).unwrap_err().field,
            list("pods", &both, pod).unwrap_err().field
        );
        assert!(pods("pods", &both).unwrap_err().field.starts_with("pods[10]."));
    }

    #[test]
    fn a_long_pod_list_stops_when_the_call_ends() {
        use std::sync::atomic::AtomicBool;
        let items = many_pods(3 * PARALLEL_PODS);
        let _scope = crate::engine::cancel::Scope::enter(Arc::new(AtomicBool::new(true)));
        let e = pods("pods", &items).unwrap_err();
        assert!(e.to_string().contains("the call ended"), "{e}");
    }

    /// Pod-level requests and a resize's status reach the engine as kube's PodRequests counts
    /// them (the rule itself is tested in `engine::resources`).
    #[test]
    fn pod_level_requests_and_resize_status_are_counted() {
        let mut p = pod_with(vec![proto::Container {
            requests: req(&[("cpu", "500m"), ("memory", "1Gi")]),
            allocated_requests: req(&[("cpu", "2")]),
            actuated_requests: req(&[("cpu", "1500m")]),
            ..Default::default()
        }]);
        let spec = pod("pods[0]", &p).unwrap();
        assert_eq!((spec.requests.milli_cpu, spec.requests.memory), (2000, 1 << 30));
        p.resize_infeasible = true;
        p.containers[0].allocated_requests.clear();
        assert_eq!(pod("pods[0]", &p).unwrap().requests.milli_cpu, 1500);
        p.pod_requests = req(&[("cpu", "3"), ("example.com/foo", "1")]);
        p.overhead = req(&[("cpu", "100m")]);
        let spec = pod("pods[0]", &p).unwrap();
        assert_eq!(spec.requests.milli_cpu, 3100, "pod-level cpu, then the overhead");
        assert_eq!(spec.requests.scalar("example.com/foo"), 0, "not a pod-level resource");
        p.allocated_requests = req(&[("cpu", "4")]);
        p.actuated_requests = req(&[("memory", "2Gi")]);
        let spec = pod("pods[0]", &p).unwrap();
        assert_eq!((spec.requests.milli_cpu, spec.requests.memory), (4100, 2 << 30));
        p.pod_requests.insert("cpu".into(), "x".into());
        assert_eq!(pod("pods[0]", &p).unwrap_err().field, "pods[0].pod_requests[\"cpu\"]");
        p.pod_requests = req(&[("pods", "1")]);
        assert_eq!(pod("pods[0]", &p).unwrap_err().field, "pods[0].pod_requests[\"pods\"]");
    }

    /// An image volume's image counts in ImageLocality after the containers'; it has no other
    /// source; the features a pod needs are sorted and deduplicated, never empty.
    #[test]
    fn image_volumes_and_required_features_convert() {
        let mut p = pod_with(vec![proto::Container {
            image: "nginx".into(),
            ..Default::default()
        }]);
        p.volumes = vec![
            proto::Volume {
                name: "model".into(),
                image_reference: "ghcr.io/example/model:v1".into(),
                ..Default::default()
            },
            proto::Volume {
                name: "data".into(),
                claim_name: "data-0".into(),
                ..Default::default()
            },
        ];
        p.required_features = vec!["B".into(), "A".into(), "B".into()];
        let spec = pod("pods[0]", &p).unwrap();
        assert_eq!(spec.images, ["nginx:latest", "ghcr.io/example/model:v1"]);
        assert_eq!(
            spec.volumes.len(),
            1,
            "the claim; the image volume is no volume the filters read"
        );
        assert_eq!(&*spec.required_features, [Arc::from("A"), Arc::from("B")]);
        p.volumes[0].claim_name = "also".into();
        assert_eq!(pod("pods[0]", &p).unwrap_err().field, "pods[0].volumes[0]");
        p.volumes.clear();
        p.required_features = vec![String::new()];
        assert_eq!(pod("pods[0]", &p).unwrap_err().field, "pods[0].required_features[0]");
    }

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

    #[test]
    fn operators_are_checked() {
        let mut p = pod_with(vec![]);
        p.node_affinity = Some(proto::NodeAffinity {
            required: Some(proto::NodeSelector {
                terms: vec![proto::NodeSelectorTerm {
                    match_expressions: vec![proto::NodeSelectorRequirement {
                        key: "cores".into(),
                        operator: "Gt".into(),
                        values: vec!["many".into()],
                    }],
                    match_fields: vec![],
                }],
            }),
            preferred: vec![],
        });
        let err = pod("pods[0]", &p).unwrap_err();
        assert_eq!(
            err.field,
            "pods[0].node_affinity.required.terms[0].match_expressions[0].values[0]"
        );
    }

    #[test]
    fn toleration_and_taint_effects_are_checked() {
        let mut p = pod_with(vec![]);
        p.tolerations = vec![proto::Toleration {
            key: "k".into(),
            operator: "Exists".into(),
            value: "v".into(),
            ..Default::default()
        }];
        assert_eq!(pod("pod", &p).unwrap_err().field, "pod.tolerations[0].value");
        let n = proto::Node {
            name: "n".into(),
            taints: vec![proto::Taint {
                key: "k".into(),
                value: String::new(),
                effect: "Sometimes".into(),
            }],
            ..Default::default()
        };
        assert_eq!(node("nodes[0]", &n).unwrap_err().field, "nodes[0].taints[0].effect");
    }

    #[test]
    fn affinity_and_spread_convert_with_kubernetes_defaults() {
        let sel = || proto::LabelSelector {
            match_labels: req(&[("app", "web")]),
            match_expressions: vec![],
        };
        let mut p = pod_with(vec![]);
        p.pod_anti_affinity = Some(proto::PodAffinity {
            required: vec![proto::PodAffinityTerm {
                label_selector: Some(sel()),
                topology_key: "kubernetes.io/hostname".into(),
                ..Default::default()
            }],
            preferred: vec![],
        });
        p.topology_spread_constraints = vec![proto::TopologySpreadConstraint {
            max_skew: 2,
            topology_key: "zone".into(),
            when_unsatisfiable: "DoNotSchedule".into(),
            label_selector: Some(sel()),
            ..Default::default()
        }];
        let spec = pod("pod", &p).unwrap();
        let term = &spec.pod_anti_affinity.required[0];
        assert_eq!(
            term.selector.as_ref().unwrap().requirements[0].op,
            SelectorOp::In(vec!["web".into()])
        );
        assert!(term.namespace_selector.is_none() && term.namespaces.is_empty());
        let c = &spec.spread_constraints[0];
        assert_eq!((c.max_skew, c.min_domains), (2, 1));
        assert_eq!(c.node_affinity_policy, NodeInclusionPolicy::Honor);
        assert_eq!(c.node_taints_policy, NodeInclusionPolicy::Ignore);
    }

    #[test]
    fn invalid_affinity_and_spread_fields_are_named() {
        let mut p = pod_with(vec![]);
        p.pod_affinity = Some(proto::PodAffinity {
            required: vec![],
            preferred: vec![proto::WeightedPodAffinityTerm {
                weight: 101,
                term: Some(proto::PodAffinityTerm {
                    topology_key: "zone".into(),
                    ..Default::default()
                }),
            }],
        });
        assert_eq!(
            pod("pods[3]", &p).unwrap_err().field,
            "pods[3].pod_affinity.preferred[0].weight"
        );
        p.pod_affinity = None;
        let c = proto::TopologySpreadConstraint {
            max_skew: 1,
            topology_key: "zone".into(),
            when_unsatisfiable: "ScheduleAnyway".into(),
            min_domains: Some(2),
            ..Default::default()
        };
        p.topology_spread_constraints = vec![c.clone()];
        assert_eq!(
            pod("pod", &p).unwrap_err().field,
            "pod.topology_spread_constraints[0].min_domains",
            "minDomains only with DoNotSchedule"
        );
        let c = proto::TopologySpreadConstraint { min_domains: None, ..c };
        p.topology_spread_constraints = vec![c.clone(), c];
        assert_eq!(pod("pod", &p).unwrap_err().field, "pod.topology_spread_constraints[1]");
        p.topology_spread_constraints[1].node_taints_policy = "Maybe".into();
        p.topology_spread_constraints[1].when_unsatisfiable = "DoNotSchedule".into();
        assert_eq!(
            pod("pod", &p).unwrap_err().field,
            "pod.topology_spread_constraints[1].node_taints_policy"
        );
        let s = proto::Snapshot {
            namespaces: vec![
                proto::Namespace {
                    name: "a".into(),
                    ..Default::default()
                },
                proto::Namespace {
                    name: "a".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        assert_eq!(snapshot("full", &s).unwrap_err().field, "full.namespaces[1].name");
    }

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
