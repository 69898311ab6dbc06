//! PodGroups (`scheduling.k8s.io/v1beta1`, Kubernetes 1.37's Workload API behind the
//! `GenericWorkload` gate) as the decision API carries them: the groups pods name in
//! `spec.schedulingGroup.podGroupName`.

use k8s_openapi::api::scheduling::v1beta1 as scheduling;
use placement_scheduler::proto;

/// The status condition kube-scheduler sets once a group's scheduling requirement was met.
pub const POD_GROUP_INITIALLY_SCHEDULED: &str = "PodGroupInitiallyScheduled";

/// `spec.disruptionMode` as a name: "Single" when `single` is set, "All" when `all` is, else
/// empty (unset, or a mode this version does not know).
fn disruption_mode(m: Option<&scheduling::DisruptionMode>) -> String {
    match m {
        Some(m) if m.single.is_some() => "Single".into(),
        Some(m) if m.all.is_some() => "All".into(),
        _ => String::new(),
    }
}

/// Projects a PodGroup.
pub fn pod_group_info(g: &scheduling::PodGroup) -> proto::PodGroup {
    let spec = &g.spec;
    proto::PodGroup {
        namespace: g.metadata.namespace.clone().unwrap_or_default(),
        name: g.metadata.name.clone().unwrap_or_default(),
        uid: g.metadata.uid.clone().unwrap_or_default(),
        generation: g.metadata.generation.unwrap_or_default(),
        gang: spec
            .scheduling_policy
            .gang
            .as_ref()
            .map(|gang| proto::GangSchedulingPolicy {
                min_count: gang.min_count,
            }),
        topology_keys: spec
            .scheduling_constraints
            .as_ref()
            .and_then(|c| c.topology.as_ref())
            .into_iter()
            .flatten()
            .map(|t| t.key.clone())
            .collect(),
        priority_class_name: spec.priority_class_name.clone().unwrap_or_default(),
        priority: spec.priority,
        preemption_policy: spec.preemption_policy.clone().unwrap_or_default(),
        disruption_mode: disruption_mode(spec.disruption_mode.as_ref()),
        workload_ref: spec.workload_ref.as_ref().map(|w| proto::WorkloadReference {
            workload_name: w.workload_name.clone(),
            template_name: w.template_name.clone(),
        }),
        parent_composite_pod_group_name: spec.parent_composite_pod_group_name.clone().unwrap_or_default(),
        initially_scheduled: g
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == POD_GROUP_INITIALLY_SCHEDULED && c.status == "True"),
    }
}

/// The PodGroup's `PodGroupInitiallyScheduled` condition, if it has one.
pub fn initially_scheduled_condition(g: &scheduling::PodGroup) -> Option<crate::api::ObservedCondition> {
    let c = g
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())?
        .iter()
        .find(|c| c.type_ == POD_GROUP_INITIALLY_SCHEDULED)?;
    Some(crate::api::ObservedCondition {
        status: c.status.clone(),
        reason: c.reason.clone(),
        message: c.message.clone(),
        observed_generation: c.observed_generation.unwrap_or_default(),
        last_transition_time: c.last_transition_time.0.to_string(),
    })
}

/// Projects a CompositePodGroup (`scheduling.k8s.io/v1alpha3`, kube 1.37's `CompositePodGroup`
/// gate).
pub fn composite_pod_group_info(
    g: &k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup,
) -> proto::CompositePodGroup {
    let spec = &g.spec;
    proto::CompositePodGroup {
        namespace: g.metadata.namespace.clone().unwrap_or_default(),
        name: g.metadata.name.clone().unwrap_or_default(),
        uid: g.metadata.uid.clone().unwrap_or_default(),
        parent_composite_pod_group_name: spec.parent_composite_pod_group_name.clone().unwrap_or_default(),
        min_group_count: spec.scheduling_policy.gang.as_ref().map(|g| g.min_group_count),
        topology_keys: spec
            .scheduling_constraints
            .as_ref()
            .and_then(|c| c.topology.as_ref())
            .into_iter()
            .flatten()
            .map(|t| t.key.clone())
            .collect(),
        priority: spec.priority,
        preemption_policy: spec.preemption_policy.clone().unwrap_or_default(),
    }
}

/// The key a PodGroup is stored and removed by: `namespace/name`.
pub fn pod_group_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn group(v: serde_json::Value) -> scheduling::PodGroup {
        serde_json::from_value(v).expect("a PodGroup")
    }

    #[test]
    fn a_composite_group_carries_its_parent_policy_and_key() {
        let g: k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup = serde_json::from_value(json!({
            "apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"namespace": "ml", "name": "block", "uid": "u-2"},
            "spec": {
                "parentCompositePodGroupName": "job",
                "workloadRef": {"workloadName": "w", "templateName": "t"},
                "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                "schedulingConstraints": {"topology": [{"key": "example.com/block"}]},
                "priority": 5
            }
        }))
        .expect("a CompositePodGroup");
        assert_eq!(
            composite_pod_group_info(&g),
            proto::CompositePodGroup {
                namespace: "ml".into(),
                name: "block".into(),
                uid: "u-2".into(),
                parent_composite_pod_group_name: "job".into(),
                min_group_count: Some(2),
                topology_keys: vec!["example.com/block".into()],
                priority: Some(5),
                preemption_policy: String::new(),
            }
        );
        let basic: k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup = serde_json::from_value(json!({
            "metadata": {"namespace": "ml", "name": "root"},
            "spec": {"schedulingPolicy": {"basic": {}}}
        }))
        .expect("a CompositePodGroup");
        let p = composite_pod_group_info(&basic);
        assert_eq!(
            (p.min_group_count, p.parent_composite_pod_group_name.as_str()),
            (None, "")
        );
    }

    #[test]
    fn a_gang_group_carries_every_field() {
        let g = group(json!({
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"namespace": "ml", "name": "trainer-0", "uid": "u-1", "generation": 3},
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": 8}},
                "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]},
                "priorityClassName": "high", "priority": 1000, "preemptionPolicy": "Never",
                "disruptionMode": {"all": {}},
                "workloadRef": {"workloadName": "trainer", "templateName": "workers"},
                "parentCompositePodGroupName": "trainer-root"
            },
            "status": {"conditions": [{
                "type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled",
                "message": "", "lastTransitionTime": "2026-11-29T00:00:00Z", "observedGeneration": 3
            }]}
        }));
        assert_eq!(
            pod_group_info(&g),
            proto::PodGroup {
                namespace: "ml".into(),
                name: "trainer-0".into(),
                uid: "u-1".into(),
                generation: 3,
                gang: Some(proto::GangSchedulingPolicy { min_count: 8 }),
                topology_keys: vec!["topology.kubernetes.io/rack".into()],
                priority_class_name: "high".into(),
                priority: Some(1000),
                preemption_policy: "Never".into(),
                disruption_mode: "All".into(),
                workload_ref: Some(proto::WorkloadReference {
                    workload_name: "trainer".into(),
                    template_name: "workers".into(),
                }),
                parent_composite_pod_group_name: "trainer-root".into(),
                initially_scheduled: true,
            }
        );
    }

    #[test]
    fn a_basic_group_without_status_leaves_the_rest_unset() {
        let g = group(json!({
            "metadata": {"namespace": "ml", "name": "b"},
            "spec": {"schedulingPolicy": {"basic": {}}}
        }));
        assert_eq!(
            pod_group_info(&g),
            proto::PodGroup {
                namespace: "ml".into(),
                name: "b".into(),
                ..Default::default()
            },
            "no gang, no priority, no disruption mode, not initially scheduled"
        );
    }

    #[test]
    fn the_disruption_mode_names_the_member_that_is_set() {
        let mode = |m: serde_json::Value| {
            pod_group_info(&group(json!({
                "metadata": {"name": "g"},
                "spec": {"schedulingPolicy": {"basic": {}}, "disruptionMode": m}
            })))
            .disruption_mode
        };
        assert_eq!(mode(json!({"single": {}})), "Single");
        assert_eq!(mode(json!({"all": {}})), "All");
        assert_eq!(mode(json!({})), "", "a mode this version does not know");
    }

    #[test]
    fn only_a_true_initially_scheduled_condition_counts() {
        let scheduled = |conditions: serde_json::Value| {
            pod_group_info(&group(json!({
                "metadata": {"name": "g"},
                "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
                "status": {"conditions": conditions}
            })))
            .initially_scheduled
        };
        let condition = |type_: &str, status: &str| {
            json!({"type": type_, "status": status, "reason": "R", "message": "",
                   "lastTransitionTime": "2026-11-29T00:00:00Z"})
        };
        assert!(!scheduled(json!([condition("PodGroupInitiallyScheduled", "False")])));
        assert!(!scheduled(json!([condition("PodGroupInitiallyScheduled", "Unknown")])));
        assert!(!scheduled(json!([condition("DisruptionTarget", "True")])));
        assert!(scheduled(json!([
            condition("DisruptionTarget", "False"),
            condition("PodGroupInitiallyScheduled", "True")
        ])));
    }

    #[test]
    fn every_topology_key_is_kept_in_order() {
        let g = group(json!({
            "metadata": {"name": "g"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 1}},
                     "schedulingConstraints": {"topology": [{"key": "rack"}, {"key": "zone"}]}}
        }));
        assert_eq!(pod_group_info(&g).topology_keys, ["rack", "zone"]);
        assert_eq!(pod_group_key("ml", "g"), "ml/g");
    }
}
