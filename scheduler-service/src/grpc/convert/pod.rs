//! Pods: containers and their host ports, node and pod affinity, topology spread, tolerations,
//! volumes, and lists of pods (a long one converted on two threads).

use std::fmt;
use std::sync::Arc;

use super::fields::{
    at_most, field_error, label_key, label_value, labels_within, list, list_from, shown, FieldError,
    MAX_ANNOTATIONS_BYTES, MAX_NAMESPACE_BYTES, MAX_NAME_BYTES,
};
use super::node::{effect, features};
use super::resources::{named_list, resource_list};
use super::selectors::{label_selector, term};
use crate::engine::label_gang::Gang;
use crate::engine::model::{
    normalized_image_name, Container, ExtendedContainer, HostPort, NodeInclusionPolicy, PodAffinityTerm,
    PodAffinityTerms, PodSpec, PreferredTerm, Protocol, RequestedNames, SpreadConstraint, Toleration,
    TolerationOperator, WeightedPodAffinityTerm, WhenUnsatisfiable,
};
use crate::engine::model::{LabelGangKey, PodGroupKey};
use crate::engine::plugins::defaultpreemption::PreemptionPolicy;
use crate::engine::quantity::Quantity;
use crate::engine::resources::{is_dra_extended_resource_name, pod_requests, ContainerRequests, PodResourceInputs};
use crate::engine::volumes::{PodVolume, VolumeSource};
use crate::proto;

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

pub(super) fn toleration(path: &str, t: &proto::Toleration) -> Result<Toleration, FieldError> {
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

/// The containers (init containers first) that request a resource DRA may back (kube's
/// `IsDRAExtendedResourceName`), as DynamicResources names the requests of the special claim
/// for them (`dynamicresources/extendeddynamicresources.go`, `createResourceRequestAndMappings`);
/// the quantities were validated with the containers.
fn extended_containers(p: &proto::Pod) -> Vec<ExtendedContainer> {
    let init = p.init_containers.len();
    p.init_containers
        .iter()
        .chain(&p.containers)
        .enumerate()
        .filter(|(_, c)| c.requests.keys().any(|n| is_dra_extended_resource_name(n)))
        .map(|(index, c)| ExtendedContainer {
            index,
            name: c.name.clone(),
            short_lived: index < init && c.restart_policy != "Always",
            // A BTreeMap's keys come sorted, as kube sorts them.
            request_names: c.requests.keys().map(|n| Arc::from(n.as_str())).collect(),
            extended: c
                .requests
                .iter()
                .filter(|(n, _)| is_dra_extended_resource_name(n))
                .map(|(n, v)| {
                    // kube's `Quantity.AsInt64`: a whole number, else none.
                    let whole = Quantity::parse(v)
                        .ok()
                        .filter(|q| q.milli_value() % 1000 == 0)
                        .map(|q| q.milli_value() / 1000);
                    (Arc::from(n.as_str()), whole)
                })
                .collect(),
        })
        .collect()
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
                key: LabelGangKey::new(&p.namespace, &g.name),
                min_members: g.min_members,
            })
        }
    };
    at_most(format!("{path}.scheduling_group"), &p.scheduling_group, MAX_NAME_BYTES)?;
    let mut requested_names = RequestedNames::default();
    for c in p.init_containers.iter().chain(&p.containers) {
        for name in c.requests.keys() {
            requested_names.insert(name);
        }
    }
    let extended_containers = extended_containers(p);
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
        pod_group: (!p.scheduling_group.is_empty()).then(|| PodGroupKey::new(&p.namespace, &p.scheduling_group)),
        terminating: p.terminating,
        volumes,
        resource_claims: super::devices::pod_claims(&format!("{path}.resource_claims"), &p.resource_claims)?,
        extended_containers,
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use super::super::node::node;
    use super::super::snapshot::snapshot;
    use crate::engine::model::SelectorOp;

    pub(crate) fn req(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    pub(crate) fn pod_with(containers: Vec<proto::Container>) -> proto::Pod {
        proto::Pod {
            uid: "u1".into(),
            containers,
            ..Default::default()
        }
    }

    /// The containers requesting a resource DRA may back are kept with their sorted request
    /// names (init containers first, a non-sidecar init container short-lived), and a class's
    /// implicit name is a resource a pod may request.
    #[test]
    fn extended_containers_keep_what_dynamicresources_names_requests_by() {
        let mut p = pod_with(vec![
            proto::Container {
                name: "plain".into(),
                requests: req(&[("cpu", "1")]),
                ..Default::default()
            },
            proto::Container {
                name: "main".into(),
                requests: req(&[("memory", "1Gi"), ("example.com/gpu", "2"), ("cpu", "1")]),
                ..Default::default()
            },
        ]);
        p.init_containers = vec![proto::Container {
            name: "init".into(),
            requests: req(&[("deviceclass.resource.kubernetes.io/gpu", "1")]),
            ..Default::default()
        }];
        let spec = pod("pods[0]", &p).unwrap();
        let names = |c: &ExtendedContainer| c.request_names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(spec.extended_containers.len(), 2);
        let (init, main) = (&spec.extended_containers[0], &spec.extended_containers[1]);
        assert_eq!((init.index, init.name.as_str(), init.short_lived), (0, "init", true));
        assert_eq!(
            init.extended,
            vec![(Arc::from("deviceclass.resource.kubernetes.io/gpu"), Some(1))]
        );
        assert_eq!((main.index, main.name.as_str(), main.short_lived), (2, "main", false));
        assert_eq!(names(main), ["cpu", "example.com/gpu", "memory"]);
        assert_eq!(main.extended, vec![(Arc::from("example.com/gpu"), Some(2))]);
        assert_eq!(spec.requests.scalar("deviceclass.resource.kubernetes.io/gpu"), 1);
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
}
