//! Label columns over a lineage's node classes, so that a pod's node selector and affinity are
//! matched once per distinct label value instead of once per class (a hash lookup each).
//!
//! Mirrors NodeAffinity's filter and score evaluated class by class (`LabelSelector::matches` on
//! each class's labels); held to it by `columns_match_as_the_labels_do` (below) and
//! `class_statics_through_label_columns_equal_the_class_by_class_ones` (`accel/plain_tests.rs`).

use std::collections::HashMap;

use crate::engine::model::{NodeSpec, PodSpec, Requirement};

/// For each label key, which value each node class has: the classes' labels by column.
#[derive(Debug, Clone, Default)]
pub struct ClassLabels {
    /// Column of each label key.
    keys: HashMap<String, usize>,
    columns: Vec<Column>,
    /// Classes indexed (a prefix of the lineage's class list).
    classes: usize,
    /// Approximate heap bytes held.
    bytes: usize,
}

/// A column is kept per class (dense) while at least one class in this many has its key; a
/// rarer key keeps only the classes that have it (sparse), so classes with keys of their own do
/// not make the columns grow as keys × classes.
const DENSE_ONE_IN: usize = 16;

/// One label key's values over the classes.
#[derive(Debug, Clone, Default)]
struct Column {
    /// Distinct values, in order of first appearance.
    values: Vec<String>,
    ids: HashMap<String, u32>,
    /// The classes' values: 0 when a class lacks the label, else 1 + the index of its value.
    of_class: Values,
    /// Classes that have the label.
    count: usize,
}

/// A column's values by class.
#[derive(Debug, Clone)]
enum Values {
    /// One per class.
    Dense(Vec<u32>),
    /// `(class, value)` of the classes that have the label, by class.
    Sparse(Vec<(u32, u32)>),
}

impl Default for Values {
    fn default() -> Self {
        Self::Sparse(Vec::new())
    }
}

impl Column {
    /// Records `id` (1 + the value's index) for `class`, the newest class.
    fn push(&mut self, class: usize, id: u32) {
        self.count += 1;
        match &mut self.of_class {
            Values::Dense(v) => {
                v.resize(class, 0);
                v.push(id);
            }
            Values::Sparse(v) => v.push((class as u32, id)),
        }
    }

    /// Picks the representation for `classes` classes; returns the change in bytes held.
    fn settle(&mut self, classes: usize) -> isize {
        let before = self.heap_bytes();
        let dense = self.count * DENSE_ONE_IN >= classes;
        match (&mut self.of_class, dense) {
            (Values::Dense(v), true) => v.resize(classes, 0),
            (Values::Sparse(v), true) => {
                let mut d = vec![0; classes];
                for &(c, id) in v.iter() {
                    d[c as usize] = id;
                }
                self.of_class = Values::Dense(d);
            }
            (Values::Dense(v), false) => {
                let s = v
                    .iter()
                    .enumerate()
                    .filter(|(_, id)| **id != 0)
                    .map(|(c, id)| (c as u32, *id))
                    .collect();
                self.of_class = Values::Sparse(s);
            }
            (Values::Sparse(_), false) => {}
        }
        self.heap_bytes() as isize - before as isize
    }

    fn heap_bytes(&self) -> usize {
        match &self.of_class {
            Values::Dense(v) => v.capacity() * 4,
            Values::Sparse(v) => v.capacity() * 8,
        }
    }

    /// Clears `keep[c]` for every class whose value id `v` has `ok[v]` false (id 0: no label).
    fn retain(&self, ok: impl Fn(u32) -> bool, keep: &mut [bool]) {
        match &self.of_class {
            Values::Dense(v) => {
                for (k, id) in keep.iter_mut().zip(v) {
                    *k &= ok(*id);
                }
            }
            Values::Sparse(v) => {
                if !ok(0) {
                    let mut next = v.iter().peekable();
                    for (c, k) in keep.iter_mut().enumerate() {
                        match next.peek() {
                            Some(&&(at, id)) if at as usize == c => {
                                *k &= ok(id);
                                next.next();
                            }
                            _ => *k = false,
                        }
                    }
                } else {
                    for &(c, id) in v {
                        if let Some(k) = keep.get_mut(c as usize) {
                            *k &= ok(id);
                        }
                    }
                }
            }
        }
    }
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

    /// Approximate heap bytes held (for the snapshot cache's budget).
    pub fn approx_bytes(&self) -> usize {
        self.bytes
    }

    /// Indexes the next classes of the lineage (those after the [`ClassLabels::len`] first).
    pub fn extend<'a>(&mut self, classes: impl IntoIterator<Item = &'a NodeSpec>) {
        let mut added = 0isize;
        for class in classes {
            for (key, value) in &class.labels {
                let columns = &mut self.columns;
                let at = *self.keys.entry(key.clone()).or_insert_with(|| {
                    columns.push(Column::default());
                    added += (key.len() + 96) as isize;
                    columns.len() - 1
                });
                let column = &mut self.columns[at];
                let next = column.values.len() as u32;
                let id = *column.ids.entry(value.clone()).or_insert(next);
                if id == next {
                    column.values.push(value.clone());
                    added += (2 * value.len() + 64) as isize;
                }
                column.push(self.classes, id + 1);
            }
            self.classes += 1;
        }
        for column in &mut self.columns {
            added += column.settle(self.classes);
        }
        self.bytes = (self.bytes as isize + added).max(0) as usize;
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
        column.retain(|id| verdict[id as usize], keep);
    }

    /// Clears `keep[c]` for every class `c` whose label `key` is not `value` (a nodeSelector pair).
    pub fn retain_label(&self, key: &str, value: &str, keep: &mut [bool]) {
        let id = self
            .keys
            .get(key)
            .map(|&at| &self.columns[at])
            .and_then(|column| Some((column, *column.ids.get(value)? + 1)));
        match id {
            Some((column, id)) => column.retain(|of| of == id, keep),
            None => keep.fill(false),
        }
    }
}

/// NodeAffinity's filter and raw score on every one of `n` classes (`labels`: their columns):
/// per class, whether the pod's nodeSelector and required affinity select it, and the summed
/// weights of its preferred terms that match, each label requirement matched once per distinct
/// value of its key. The same answers as `matches_node_selector_and_affinity` and
/// `node_affinity::score` class by class (`class_statics_through_label_columns_equal_the_class_by_class_ones`).
/// The call's end is polled between selector parts (what is left then is incomplete, and the
/// caller does not cache it).
pub fn affinity_by_class(pod: &PodSpec, n: usize, labels: &ClassLabels) -> (Vec<bool>, Vec<i64>) {
    // A term over every class, as `SelectorTerm::matches` on each class (whose name is empty).
    let term = |t: &crate::engine::model::SelectorTerm, out: &mut Vec<bool>| {
        out.clear();
        let empty = t.match_expressions.is_empty() && t.match_fields.is_empty();
        let fields = t.match_fields.iter().all(|r| r.matches(Some("")));
        out.resize(n, !empty && fields);
        for r in &t.match_expressions {
            if crate::engine::cancel::requested() {
                break;
            }
            labels.retain_requirement(r, out);
        }
    };
    // Each selector part costs a pass over the classes: the call's end is polled between them
    // (what is left then is incomplete, and the caller does not cache it).
    let mut selected = vec![true; n];
    for (k, v) in &pod.node_selector {
        if crate::engine::cancel::requested() {
            break;
        }
        labels.retain_label(k, v, &mut selected);
    }
    let mut matched = Vec::with_capacity(n);
    if let Some(terms) = &pod.required_affinity {
        let mut any = vec![false; n];
        for t in terms {
            if crate::engine::cancel::requested() {
                break;
            }
            term(t, &mut matched);
            for (a, m) in any.iter_mut().zip(&matched) {
                *a |= *m;
            }
        }
        for (s, a) in selected.iter_mut().zip(&any) {
            *s &= *a;
        }
    }
    let mut weights = vec![0i64; n];
    for p in &pod.preferred_affinity {
        if crate::engine::cancel::requested() {
            break;
        }
        term(&p.term, &mut matched);
        for (w, m) in weights.iter_mut().zip(&matched) {
            *w += if *m { p.weight } else { 0 };
        }
    }
    (selected, weights)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::engine::model::SelectorOp;

    const KEYS: &[&str] = &["zone", "type", "cores", "team", "rare-a", "rare-b", "rare-c", "rare-d"];
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

    /// Classes with keys of their own keep columns that grow with the labels, not with keys ×
    /// classes (20,000 of them would take 1.6 GB dense), and still match as the labels do.
    #[test]
    fn rare_keys_stay_sparse() {
        let classes: Vec<NodeSpec> = (0..20_000)
            .map(|i| NodeSpec {
                labels: [
                    (format!("own-{i}"), "x".to_string()),
                    ("zone".to_string(), format!("z{}", i % 3)),
                ]
                .into_iter()
                .collect(),
                ..NodeSpec::default()
            })
            .collect();
        let mut labels = ClassLabels::default();
        labels.extend(&classes[..5]);
        labels.extend(&classes[5..]);
        assert!(labels.approx_bytes() < 20_000 * 400, "{} bytes", labels.approx_bytes());
        let mut keep = vec![true; classes.len()];
        labels.retain_requirement(
            &Requirement {
                key: "own-7".into(),
                op: SelectorOp::Exists,
            },
            &mut keep,
        );
        assert_eq!(keep.iter().filter(|k| **k).count(), 1);
        assert!(keep[7]);
        let mut keep = vec![true; classes.len()];
        labels.retain_label("zone", "z1", &mut keep);
        assert_eq!(keep.iter().filter(|k| **k).count(), 6667);
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
