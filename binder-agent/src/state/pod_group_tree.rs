//! A CompositePodGroup hierarchy and when it is ready (kube's GangScheduling `isCPGTreeReady`).

/// A CompositePodGroup hierarchy as the binder knows it ([`ClusterState::pod_group_tree`](crate::state::ClusterState::pod_group_tree)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodGroupTree {
    /// The root CompositePodGroup, `namespace/name`.
    pub root: String,
    /// Its PodGroups: `namespace/name`, the parent's name, minCount (1 for basic).
    pub groups: Vec<(String, String, u32)>,
    /// Its CompositePodGroups: name, the parent's name (empty for the root), minGroupCount (1
    /// for basic).
    pub composites: Vec<(String, String, u32)>,
}

impl PodGroupTree {
    /// kube's GangScheduling `isCPGTreeReady` from the root: each PodGroup is ready when
    /// `present` (its pods pending and scheduled) reaches its minCount, each composite when
    /// minGroupCount of its children are.
    pub fn ready(&self, present: &dyn Fn(&str) -> usize) -> bool {
        let root = self.root.split_once('/').map_or(self.root.as_str(), |(_, n)| n);
        self.composite_ready(root, present, 0)
    }

    fn composite_ready(&self, name: &str, present: &dyn Fn(&str) -> usize, depth: usize) -> bool {
        if depth > 8 {
            return false;
        }
        let Some((_, _, min)) = self.composites.iter().find(|(n, ..)| n == name) else {
            return false;
        };
        let groups = self
            .groups
            .iter()
            .filter(|(_, parent, _)| parent == name)
            .filter(|(key, _, min)| present(key) >= *min as usize)
            .count();
        let composites = self
            .composites
            .iter()
            .filter(|(_, parent, _)| parent == name)
            .filter(|(n, ..)| self.composite_ready(n, present, depth + 1))
            .count();
        groups + composites >= *min as usize
    }
}
