//! Node selectors as the decision API carries them, for the projections of pods, volumes and
//! devices.

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm};
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
