//! Node and label selectors as the decision API carries them, for the projections of pods, volumes and
//! devices.

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use placement_scheduler::proto;

fn requirement(r: &NodeSelectorRequirement) -> proto::NodeSelectorRequirement {
    proto::NodeSelectorRequirement {
        key: r.key.clone(),
        operator: r.operator.clone(),
        values: r.values.clone().unwrap_or_default(),
    }
}

/// A node selector term.
pub(super) fn term(t: &NodeSelectorTerm) -> proto::NodeSelectorTerm {
    proto::NodeSelectorTerm {
        match_expressions: t.match_expressions.iter().flatten().map(requirement).collect(),
        match_fields: t.match_fields.iter().flatten().map(requirement).collect(),
    }
}

/// A label selector.
pub(super) fn label_selector(s: &LabelSelector) -> proto::LabelSelector {
    proto::LabelSelector {
        match_labels: s.match_labels.clone().unwrap_or_default(),
        match_expressions: s
            .match_expressions
            .iter()
            .flatten()
            .map(|r| proto::LabelSelectorRequirement {
                key: r.key.clone(),
                operator: r.operator.clone(),
                values: r.values.clone().unwrap_or_default(),
            })
            .collect(),
    }
}
