//! The allocation's node selector (kube's `createNodeSelector` and
//! `addNewNodeSelectorRequirements`).

use super::*;

impl<'s, 'a> Search<'s, 'a> {
    /// kube's `createNodeSelector`: the node alone when a device is local to it, the slices'
    /// (or devices') selectors merged into one term, or `None` for devices on every node.
    pub(super) fn node_selector(
        &self,
        picked: &[Picked<'a>],
        claim_name: &str,
    ) -> Result<Option<Vec<SelectorTerm>>, AllocateError> {
        let mut term = SelectorTerm::default();
        for p in picked {
            let Some((slice, device)) = self.device(p.loc) else {
                continue;
            };
            let selection = if slice.node_selection == NodeSelection::FromSlice {
                &device.node_selection
            } else {
                &slice.node_selection
            };
            // kube: a device local to one node, or one that binds to the node it is allocated for.
            let local = matches!(selection, NodeSelection::NodeName(_)) || device.binds_to_node;
            match selection {
                _ if local => {
                    return Ok(Some(vec![SelectorTerm {
                        match_expressions: Vec::new(),
                        match_fields: vec![Requirement {
                            key: "metadata.name".into(),
                            op: SelectorOp::In(vec![self.node.name.clone()]),
                        }],
                    }]))
                }
                NodeSelection::NodeSelector(terms) => match terms.as_slice() {
                    [] => {}
                    [only] => {
                        add_requirements(&only.match_fields, &mut term.match_fields);
                        add_requirements(&only.match_expressions, &mut term.match_expressions);
                    }
                    more => {
                        return Err(AllocateError::NodeSelector {
                            claim: claim_name.to_string(),
                            terms: more.len(),
                        })
                    }
                },
                NodeSelection::AllNodes | NodeSelection::FromSlice | NodeSelection::NodeName(_) => {}
            }
        }
        if term.match_fields.is_empty() && term.match_expressions.is_empty() {
            Ok(None)
        } else {
            Ok(Some(vec![term]))
        }
    }
}

/// kube's `addNewNodeSelectorRequirements`: each requirement not already present (same key,
/// operator and set of values).
fn add_requirements(from: &[Requirement], to: &mut Vec<Requirement>) {
    for r in from {
        if !to.iter().any(|e| same_requirement(e, r)) {
            to.push(r.clone());
        }
    }
}

fn same_requirement(a: &Requirement, b: &Requirement) -> bool {
    if a.key != b.key {
        return false;
    }
    match (&a.op, &b.op) {
        (SelectorOp::In(x), SelectorOp::In(y)) | (SelectorOp::NotIn(x), SelectorOp::NotIn(y)) => {
            value_set(x) == value_set(y)
        }
        (SelectorOp::Exists, SelectorOp::Exists) | (SelectorOp::DoesNotExist, SelectorOp::DoesNotExist) => true,
        (SelectorOp::Gt(x), SelectorOp::Gt(y)) | (SelectorOp::Lt(x), SelectorOp::Lt(y)) => x == y,
        _ => false,
    }
}

fn value_set(v: &[String]) -> HashSet<&str> {
    v.iter().map(String::as_str).collect()
}
