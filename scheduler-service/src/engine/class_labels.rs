//! Label columns over a lineage's node classes, so that a pod's node selector and affinity are
//! matched once per distinct label value instead of once per class (a hash lookup each).

use std::collections::HashMap;

use super::model::{NodeSpec, Requirement};

/// For each label key, which value each node class has: the classes' labels by column.
#[derive(Debug, Clone, Default)]
pub struct ClassLabels {
    /// Column of each label key.
    keys: HashMap<String, usize>,
    columns: Vec<Column>,
    /// Classes indexed (a prefix of the lineage's class list).
    classes: usize,
}

/// One label key's values over the classes.
#[derive(Debug, Clone, Default)]
struct Column {
    /// Distinct values, in order of first appearance.
    values: Vec<String>,
    ids: HashMap<String, u32>,
    /// Per class: 0 when the class lacks the label, else 1 + the index of its value.
    of_class: Vec<u32>,
}

impl ClassLabels {
    /// Classes indexed so far.
    pub fn len(&self) -> usize {
        self.classes
    }

    /// Whether no class is indexed.
    pub fn is_empty(&self) -> bool {
        self.classes == 0
    }

    /// Indexes the next classes of the lineage (those after the [`ClassLabels::len`] first).
    pub fn extend<'a>(&mut self, classes: impl IntoIterator<Item = &'a NodeSpec>) {
        for class in classes {
            for (key, value) in &class.labels {
                let columns = &mut self.columns;
                let at = *self.keys.entry(key.clone()).or_insert_with(|| {
                    columns.push(Column::default());
                    columns.len() - 1
                });
                let column = &mut self.columns[at];
                let next = column.values.len() as u32;
                let id = *column.ids.entry(value.clone()).or_insert(next);
                if id == next {
                    column.values.push(value.clone());
                }
                column.of_class.resize(self.classes, 0);
                column.of_class.push(id + 1);
            }
            self.classes += 1;
        }
        for column in &mut self.columns {
            column.of_class.resize(self.classes, 0);
        }
    }

    /// Clears `keep[c]` for every class `c` whose label value (or its absence) fails the
    /// requirement, as [`Requirement::matches`] on the class's labels would.
    pub fn retain_requirement(&self, requirement: &Requirement, keep: &mut [bool]) {
        let Some(column) = self.keys.get(&requirement.key).map(|&at| &self.columns[at]) else {
            if !requirement.matches(None) {
                keep.fill(false);
            }
            return;
        };
        let mut verdict = Vec::with_capacity(column.values.len() + 1);
        verdict.push(requirement.matches(None));
        verdict.extend(column.values.iter().map(|v| requirement.matches(Some(v))));
        for (k, id) in keep.iter_mut().zip(&column.of_class) {
            *k &= verdict[*id as usize];
        }
    }

    /// Clears `keep[c]` for every class `c` whose label `key` is not `value` (a nodeSelector pair).
    pub fn retain_label(&self, key: &str, value: &str, keep: &mut [bool]) {
        let id = self
            .keys
            .get(key)
            .map(|&at| &self.columns[at])
            .and_then(|column| Some((column, *column.ids.get(value)? + 1)));
        match id {
            Some((column, id)) => {
                for (k, of) in keep.iter_mut().zip(&column.of_class) {
                    *k &= *of == id;
                }
            }
            None => keep.fill(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::engine::model::SelectorOp;

    const KEYS: &[&str] = &["zone", "type", "cores", "team"];
    const VALUES: &[&str] = &["a", "b", "c", "8", "16", "32", ""];

    fn arb_class() -> impl Strategy<Value = NodeSpec> {
        proptest::collection::hash_map(
            proptest::sample::select(KEYS).prop_map(String::from),
            proptest::sample::select(VALUES).prop_map(String::from),
            0..4,
        )
        .prop_map(|labels| NodeSpec {
            labels,
            ..NodeSpec::default()
        })
    }

    fn arb_requirement() -> impl Strategy<Value = Requirement> {
        let values = || proptest::collection::vec(proptest::sample::select(VALUES).prop_map(String::from), 0..3);
        let op = prop_oneof![
            values().prop_map(SelectorOp::In),
            values().prop_map(SelectorOp::NotIn),
            Just(SelectorOp::Exists),
            Just(SelectorOp::DoesNotExist),
            (0i64..40).prop_map(SelectorOp::Gt),
            (0i64..40).prop_map(SelectorOp::Lt),
        ];
        (proptest::sample::select(KEYS).prop_map(String::from), op).prop_map(|(key, op)| Requirement { key, op })
    }

    proptest! {
        /// Columns built in two steps (a lineage whose later delta adds classes) answer every
        /// requirement and nodeSelector pair as matching each class's labels one by one.
        #[test]
        fn columns_match_as_the_labels_do(
            classes in proptest::collection::vec(arb_class(), 0..30),
            split in 0usize..30,
            requirement in arb_requirement(),
            key in proptest::sample::select(KEYS),
            value in proptest::sample::select(VALUES),
        ) {
            let split = split.min(classes.len());
            let mut labels = ClassLabels::default();
            labels.extend(&classes[..split]);
            labels.extend(&classes[split..]);
            prop_assert_eq!(labels.len(), classes.len());
            let mut keep = vec![true; classes.len()];
            labels.retain_requirement(&requirement, &mut keep);
            let expected: Vec<bool> = classes
                .iter()
                .map(|c| requirement.matches(c.labels.get(&requirement.key).map(String::as_str)))
                .collect();
            prop_assert_eq!(&keep, &expected);
            let mut keep = vec![true; classes.len()];
            labels.retain_label(key, value, &mut keep);
            let expected: Vec<bool> = classes.iter().map(|c| c.labels.get(key).is_some_and(|v| v == value)).collect();
            prop_assert_eq!(keep, expected);
        }
    }
}
