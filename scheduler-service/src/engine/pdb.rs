//! PodDisruptionBudgets as preemption reads them, and the metav1.LabelSelector they (and
//! CSIStorageCapacity's node topology) select with.

use super::model::{Labels, Requirement};

/// A metav1.LabelSelector: every label pair and every requirement must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    /// matchLabels.
    pub match_labels: Vec<(String, String)>,
    /// matchExpressions (In, NotIn, Exists, DoesNotExist).
    pub match_expressions: Vec<Requirement>,
}

impl LabelSelector {
    /// True when the selector has no requirement (kube-scheduler's PDB check then matches nothing).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    /// Whether the labels satisfy every requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self
                .match_expressions
                .iter()
                .all(|r| r.matches(labels.get(&r.key).map(String::as_str)))
    }
}

/// A PodDisruptionBudget as preemption reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pdb {
    /// metadata.namespace.
    pub namespace: String,
    /// metadata.name.
    pub name: String,
    /// spec.selector; `None` (or empty) matches no pod.
    pub selector: Option<LabelSelector>,
    /// status.disruptionsAllowed.
    pub disruptions_allowed: i32,
    /// Uids of the pods in status.disruptedPods: already counted in `disruptions_allowed`, so
    /// neither counted again nor a violation.
    pub disrupted_pod_uids: Vec<String>,
}

impl Pdb {
    /// "namespace/name".
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Approximate size, for the snapshot cache's memory budget.
    pub fn approx_bytes(&self) -> usize {
        let sel = self.selector.as_ref().map_or(0, |s| {
            s.match_labels
                .iter()
                .map(|(k, v)| k.len() + v.len() + 48)
                .sum::<usize>()
                + s.match_expressions.len() * 96
        });
        let disrupted = self.disrupted_pod_uids.iter().map(|u| u.len() + 24).sum::<usize>();
        std::mem::size_of::<Self>() + self.namespace.len() + self.name.len() + sel + disrupted + 32
    }

    /// Whether the pod is listed in status.disruptedPods (its eviction is already counted).
    pub(super) fn already_disrupted(&self, uid: &str) -> bool {
        self.disrupted_pod_uids.iter().any(|u| u == uid)
    }

    /// kube-scheduler's match in `filterPodsWithPDBViolation`: same namespace, a non-empty
    /// selector matching the pod's labels.
    pub(super) fn covers(&self, namespace: &str, labels: &Labels) -> bool {
        !labels.is_empty()
            && self.namespace == namespace
            && self
                .selector
                .as_ref()
                .is_some_and(|s| !s.is_empty() && s.matches(labels))
    }
}
