//! Selectors: node selector terms (a pod's node affinity, a volume's), the label selectors of pod
//! affinity, topology spread and claims, and the label selectors of PodDisruptionBudgets and
//! CSIStorageCapacities.

use super::fields::{field_error, label_key, label_value, shown, FieldError};
use crate::engine::model::{LabelSelector, Requirement, SelectorOp, SelectorTerm};
use crate::engine::plugins::defaultpreemption::LabelSelector as PdbSelector;
use crate::proto;

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

pub(super) fn term(path: &str, t: &proto::NodeSelectorTerm) -> Result<SelectorTerm, FieldError> {
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
pub(super) fn label_selector(path: &str, s: &proto::LabelSelector) -> Result<LabelSelector, FieldError> {
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

/// Validates and converts a metav1.LabelSelector.
pub(super) fn pdb_selector(path: &str, s: &proto::LabelSelector) -> Result<PdbSelector, FieldError> {
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

#[cfg(test)]
mod tests {
    use super::super::pod::pod;
    use super::super::pod::tests::pod_with;
    use crate::proto;

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
}
