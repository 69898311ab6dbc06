//! The values rules read: the pod and the node in Kubernetes' object shape as CEL sees them,
//! whole or built with only what the rules' paths lead into.

use std::collections::HashMap;
use std::sync::Arc;

use cel::Value;

use super::reads::project;
use crate::engine::model::{NodeSpec, PodSpec, TaintEffect};
use crate::engine::resources::Resources;
use crate::engine::snapshot::NodeUsage;

/// Resources as a CEL map: `cpu` in millicores, `memory` and `ephemeral-storage` in bytes
/// (always present, 0 when none), extended resources in their units (present when not 0).
fn resources_value(r: &Resources) -> Value {
    let mut map: HashMap<String, Value> = HashMap::new();
    for (name, v) in [
        ("cpu", r.milli_cpu),
        ("memory", r.memory),
        ("ephemeral-storage", r.ephemeral_storage),
    ] {
        map.insert(name.into(), Value::Int(v));
    }
    for (name, v) in &r.scalars {
        map.insert(name.to_string(), Value::Int(*v));
    }
    Value::from(map)
}

fn string_map<'s>(pairs: impl Iterator<Item = (&'s String, &'s String)>) -> Value {
    Value::from(
        pairs
            .map(|(k, v)| (k.clone(), Value::from(v.clone())))
            .collect::<HashMap<String, Value>>(),
    )
}

fn object(fields: Vec<(&str, Value)>) -> Value {
    Value::from(
        fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect::<HashMap<String, Value>>(),
    )
}

/// The pod as CEL sees it: `metadata` (`name`, `namespace`, `uid`, `labels`, `annotations`) and
/// `spec` (`priority`, `nodeName`, `nodeSelector`, `containers` with `name`, `image` and
/// `resources.requests`), plus `requests`: the effective requests the scheduler counts.
pub fn pod_value(pod: &PodSpec) -> Value {
    pod_value_reading(pod, None)
}

/// [`pod_value`] with only the fields `paths` (see [`pod_paths`](super::pod_paths)) lead into, down
/// to the second level (`metadata.labels` whole for `pod.metadata.labels['team']`); all of it for
/// `None`. An expression that reads the pod only through these paths reads the same from it, and
/// the pod of each Schedule under a policy with rules is built without what its rules never read.
pub fn pod_value_reading(pod: &PodSpec, paths: Option<&[Vec<String>]>) -> Value {
    let wants = |field: &str, sub: &str| {
        paths.is_none_or(|paths| {
            paths
                .iter()
                .any(|p| p.first().is_some_and(|f| f == field) && p.get(1).is_none_or(|s| s == sub))
        })
    };
    let section = |field: &str, subs: Vec<(&str, &dyn Fn() -> Value)>| -> Option<(String, Value)> {
        let fields: HashMap<String, Value> = subs
            .into_iter()
            .filter(|(sub, _)| wants(field, sub))
            .map(|(sub, value)| (sub.to_string(), value()))
            .collect();
        (!fields.is_empty()).then(|| (field.to_string(), Value::from(fields)))
    };
    let containers = || {
        let containers: Vec<Value> = pod
            .containers
            .iter()
            .map(|c| {
                object(vec![
                    ("name", Value::from(c.name.clone())),
                    ("image", Value::from(c.image.clone())),
                    ("resources", object(vec![("requests", resources_value(&c.requests))])),
                ])
            })
            .collect();
        Value::from(containers)
    };
    let mut fields: HashMap<String, Value> = [
        section(
            "metadata",
            vec![
                ("name", &|| Value::from(pod.name.clone())),
                ("namespace", &|| Value::from(pod.namespace.clone())),
                ("uid", &|| Value::from(pod.uid.to_string())),
                ("labels", &|| string_map(pod.labels.iter())),
                ("annotations", &|| string_map(pod.annotations.iter())),
            ],
        ),
        section(
            "spec",
            vec![
                ("priority", &|| Value::Int(i64::from(pod.priority))),
                ("nodeName", &|| Value::from(pod.node_name.clone().unwrap_or_default())),
                ("nodeSelector", &|| {
                    string_map(pod.node_selector.iter().map(|(k, v)| (k, v)))
                }),
                ("containers", &containers),
            ],
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    if paths.is_none_or(|ps| ps.iter().any(|p| p.first().is_some_and(|f| f == "requests"))) {
        fields.insert("requests".to_string(), resources_value(&pod.requests));
    }
    Value::from(fields)
}

/// The parts of a node's CEL value that do not change with its usage.
#[derive(Debug, Clone)]
pub struct NodeStatic {
    metadata: Value,
    spec: Value,
    allocatable: Value,
}

/// [`node_value`] cut down to `paths` (see [`node_paths`](super::node_paths) and [`project`]),
/// built without the parts no path leads into: what a rule that reads the node only through these
/// paths is evaluated on, without a [`NodeStatic`] kept for the node.
pub fn node_value_reading(node: &NodeSpec, usage: &NodeUsage, paths: &[Vec<String>]) -> Value {
    let reads = |section: &[&str]| paths.iter().any(|p| p.iter().zip(section).all(|(a, b)| a == b));
    let part = |wanted: bool, build: fn(&NodeSpec) -> Value| if wanted { build(node) } else { object(vec![]) };
    let built = NodeStatic {
        metadata: part(reads(&["metadata"]), NodeStatic::metadata_of),
        spec: part(reads(&["spec"]), NodeStatic::spec_of),
        allocatable: part(reads(&["status", "allocatable"]), NodeStatic::allocatable_of),
    };
    project(&node_value(&built, usage), paths)
}

impl NodeStatic {
    /// The node's `metadata` (`name`, `labels`), `spec` (`taints`, `unschedulable`) and
    /// `status.allocatable` (with `pods`).
    pub fn of(node: &NodeSpec) -> Self {
        Self {
            metadata: Self::metadata_of(node),
            spec: Self::spec_of(node),
            allocatable: Self::allocatable_of(node),
        }
    }

    /// The node's `metadata`: `name` and `labels`.
    fn metadata_of(node: &NodeSpec) -> Value {
        object(vec![
            ("name", Value::from(node.name.clone())),
            (
                "labels",
                Value::from(
                    node.labels
                        .iter()
                        .map(|(k, v)| (k.clone(), Value::from(v.clone())))
                        .collect::<HashMap<String, Value>>(),
                ),
            ),
        ])
    }

    /// The node's `status.allocatable`, with `pods`.
    fn allocatable_of(node: &NodeSpec) -> Value {
        let mut allocatable = resources_value(&node.allocatable);
        if let Value::Map(m) = &mut allocatable {
            Arc::make_mut(&mut m.map).insert("pods".to_string().into(), Value::Int(node.allowed_pods));
        }
        allocatable
    }

    /// The node's `spec`: `taints` and `unschedulable`.
    fn spec_of(node: &NodeSpec) -> Value {
        let taints: Vec<Value> = node
            .taints
            .iter()
            .map(|t| {
                let effect = match t.effect {
                    TaintEffect::NoSchedule => "NoSchedule",
                    TaintEffect::PreferNoSchedule => "PreferNoSchedule",
                    TaintEffect::NoExecute => "NoExecute",
                };
                object(vec![
                    ("key", Value::from(t.key.clone())),
                    ("value", Value::from(t.value.clone())),
                    ("effect", Value::from(effect)),
                ])
            })
            .collect();
        object(vec![
            ("taints", Value::from(taints)),
            ("unschedulable", Value::Bool(node.unschedulable)),
        ])
    }
}

/// The node as CEL sees it: [`NodeStatic`]'s fields and `status.requested` (what its pods,
/// those placed earlier in the batch included, request, with `pods`: their count).
pub fn node_value(node: &NodeStatic, usage: &NodeUsage) -> Value {
    let mut requested = resources_value(&usage.requested);
    if let Value::Map(m) = &mut requested {
        Arc::make_mut(&mut m.map).insert("pods".to_string().into(), Value::Int(usage.pod_count));
    }
    object(vec![
        ("metadata", node.metadata.clone()),
        ("spec", node.spec.clone()),
        (
            "status",
            object(vec![
                ("allocatable", node.allocatable.clone()),
                ("requested", requested),
            ]),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use cel::Program;

    use super::*;
    use crate::engine::rules::compile::tests::rules;
    use crate::engine::rules::reads::node_paths;

    #[test]
    fn rules_read_pod_and_node_in_kubernetes_shape() {
        let mut pod = PodSpec {
            name: "web-1".into(),
            namespace: "shop".into(),
            requests: Resources {
                milli_cpu: 250,
                ..Default::default()
            },
            ..Default::default()
        };
        pod.labels.insert("workload_name".into(), "nginx".into());
        pod.annotations.insert("team".into(), "a".into());
        pod.containers.push(crate::engine::model::Container {
            name: "c".into(),
            image: "nginx".into(),
            requests: Resources {
                milli_cpu: 250,
                ..Default::default()
            },
        });
        let mut node = NodeSpec {
            name: "n1".into(),
            allowed_pods: 110,
            allocatable: Resources {
                milli_cpu: 4000,
                ..Default::default()
            },
            ..Default::default()
        };
        node.labels.insert("test/test".into(), "".into());
        let usage = NodeUsage {
            pod_count: 3,
            requested: Resources {
                milli_cpu: 1000,
                ..Default::default()
            },
            ..Default::default()
        };
        let compiled = rules(
            &[
                (
                    "label",
                    "pod.metadata.labels['workload_name'] != 'nginx' || 'test/test' in node.metadata.labels",
                ),
                ("annotation", "pod.metadata.annotations.team == 'a'"),
                (
                    "containers",
                    "pod.spec.containers.all(c, c.resources.requests.cpu <= node.status.allocatable.cpu)",
                ),
            ],
            &[(
                "free",
                "node.status.allocatable.cpu - node.status.requested.cpu - pod.requests.cpu",
            )],
        )
        .compile()
        .unwrap();
        let mut scores = [0];
        let pv = pod_value(&pod);
        compiled
            .evaluate(&pv, node_value(&NodeStatic::of(&node), &usage), &mut scores)
            .unwrap();
        assert_eq!(scores, [4000 - 1000 - 250]);
        node.labels.clear();
        let e = compiled
            .evaluate(&pv, node_value(&NodeStatic::of(&node), &usage), &mut scores)
            .unwrap_err();
        assert_eq!(&*e.0, "node(s) didn't match rule label");
    }

    #[test]
    fn rules_read_the_same_from_the_values_cut_to_their_paths() {
        let mut pod = PodSpec {
            name: "p".into(),
            namespace: "team-a".into(),
            priority: 7,
            ..Default::default()
        };
        pod.labels.insert("team".into(), "ml".into());
        pod.labels.insert("tier".into(), "gold".into());
        pod.annotations.insert("note".into(), "x".repeat(100));
        pod.requests.milli_cpu = 1500;
        let mut node = NodeSpec {
            name: "n".into(),
            unschedulable: true,
            ..Default::default()
        };
        node.labels.insert("disktype".into(), "ssd".into());
        node.allocatable.milli_cpu = 4000;
        let usage = NodeUsage::default();
        let expressions = [
            "pod.metadata.labels['team'] == 'ml' && node.metadata.labels['disktype'] == 'ssd'",
            "has(pod.metadata.labels.tier) && !has(pod.metadata.labels.absent)",
            "'team' in pod.metadata.labels && size(pod.metadata.labels) == 2",
            "pod.spec.priority > 5 && pod.requests.cpu < node.status.allocatable.cpu",
            "node.spec.unschedulable && node.metadata.name == 'n'",
            "node.metadata.labels['absent'] == 'x'",
            "pod.metadata.namespace.startsWith('team-') && node.status.requested.cpu == 0",
        ];
        for e in expressions {
            let compiled = rules(&[("rule", e)], &[]).compile().unwrap();
            let full = compiled.run(
                0,
                &compiled.context(&pod_value(&pod), node_value(&NodeStatic::of(&node), &usage)),
            );
            let cut = compiled.run(
                0,
                &compiled.context(&compiled.pod_value(&pod), {
                    let paths = compiled.node_paths(0).unwrap();
                    node_value_reading(&node, &usage, paths)
                }),
            );
            assert_eq!(full, cut, "{e}");
        }
        // What is cut away: the annotations and the spec for a rule reading one label.
        let compiled = rules(&[("team", "pod.metadata.labels['team'] == 'ml'")], &[])
            .compile()
            .unwrap();
        let Value::Map(cut) = compiled.pod_value(&pod) else {
            panic!("a map");
        };
        let keys: Vec<String> = cut.map.keys().map(|k| format!("{k:?}")).collect();
        assert_eq!(keys.len(), 1, "{keys:?}");
        let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let projected = project(
            &node_value(&NodeStatic::of(&node), &usage),
            &[path(&["status", "allocatable", "cpu"])],
        );
        assert_eq!(
            format!("{projected:?}"),
            format!(
                "{:?}",
                object(vec![(
                    "status",
                    object(vec![("allocatable", object(vec![("cpu", Value::Int(4000))]))])
                )])
            )
        );
        assert_eq!(
            node_paths(Program::compile("[1].all(node, node > 0)").unwrap().expression()),
            None,
            "a variable named node"
        );
    }
}
