//! PodGroups and CompositePodGroups: lookups, hierarchies, conditions, whether they are served.

use placement_scheduler::proto;

use super::{ClusterState, PodGroupTree};
use crate::projection::{TrackedKey, TrackedObject};

impl ClusterState {
    /// The PodGroup `namespace/name`, as the watch shows it.
    pub fn pod_group(&self, namespace: &str, name: &str) -> Option<&proto::PodGroup> {
        match self
            .storage
            .get(&TrackedKey::PodGroup(crate::projection::pod_group_key(namespace, name)))
        {
            Some(TrackedObject::PodGroup(g)) => Some(g),
            _ => None,
        }
    }

    /// The PodGroup `namespace/name`'s CompositePodGroup hierarchy, when it names a parent and
    /// every CompositePodGroup up to the root is known: the root's key and the hierarchy's
    /// PodGroups (`namespace/name`) with the CompositePodGroups (kube's workload forest).
    pub fn pod_group_tree(&self, namespace: &str, name: &str) -> Option<PodGroupTree> {
        let group = self.pod_group(namespace, name)?;
        if group.parent_composite_pod_group_name.is_empty() {
            return None;
        }
        let composite =
            |n: &str| match self
                .storage
                .get(&TrackedKey::CompositePodGroup(crate::projection::pod_group_key(
                    namespace, n,
                ))) {
                Some(TrackedObject::CompositePodGroup(g)) => Some(g),
                _ => None,
            };
        let mut root = composite(&group.parent_composite_pod_group_name)?;
        let mut seen = std::collections::HashSet::new();
        while !root.parent_composite_pod_group_name.is_empty() {
            if !seen.insert(root.name.clone()) {
                return None;
            }
            root = composite(&root.parent_composite_pod_group_name)?;
        }
        let mut tree = PodGroupTree {
            root: crate::projection::pod_group_key(namespace, &root.name),
            ..PodGroupTree::default()
        };
        for obj in self.storage.values() {
            match obj {
                TrackedObject::PodGroup(g)
                    if g.namespace == namespace && !g.parent_composite_pod_group_name.is_empty() =>
                {
                    tree.groups.push((
                        crate::projection::pod_group_key(namespace, &g.name),
                        g.parent_composite_pod_group_name.clone(),
                        g.gang.as_ref().map_or(1, |g| g.min_count.max(1) as u32),
                    ));
                }
                TrackedObject::CompositePodGroup(g) if g.namespace == namespace => {
                    tree.composites.push((
                        g.name.clone(),
                        g.parent_composite_pod_group_name.clone(),
                        g.min_group_count.map_or(1, |n| n.max(1) as u32),
                    ));
                }
                _ => {}
            }
        }
        // Keep the root's subtree only.
        let mut inside: std::collections::HashSet<String> = std::collections::HashSet::from([root.name.clone()]);
        loop {
            let before = inside.len();
            for (n, parent, _) in &tree.composites {
                if inside.contains(parent) {
                    inside.insert(n.clone());
                }
            }
            if inside.len() == before {
                break;
            }
        }
        tree.composites.retain(|(n, ..)| inside.contains(n));
        tree.groups.retain(|(_, parent, _)| inside.contains(parent));
        Some(tree)
    }

    /// Records the PodGroup `key`'s `PodGroupInitiallyScheduled` condition as the watch shows it
    /// (`None`: the group has none, or is gone).
    pub fn set_pod_group_condition(&mut self, key: &str, condition: Option<crate::api::ObservedCondition>) {
        match condition {
            Some(c) => {
                self.pod_group_conditions.insert(key.to_string(), c);
            }
            None => {
                self.pod_group_conditions.remove(key);
            }
        }
    }

    /// The PodGroup `namespace/name`'s `PodGroupInitiallyScheduled` condition as the watch shows it.
    pub fn pod_group_condition(&self, namespace: &str, name: &str) -> Option<&crate::api::ObservedCondition> {
        self.pod_group_conditions
            .get(&crate::projection::pod_group_key(namespace, name))
    }

    /// Records whether the API server serves scheduling.k8s.io/v1beta1 PodGroups.
    pub fn set_pod_groups_served(&mut self, served: bool) {
        self.pod_groups_served = served;
    }

    /// Whether the API server serves scheduling.k8s.io/v1beta1 PodGroups: false until the
    /// PodGroup watch found them served, which it does before the binder is synced. Without them
    /// no PodGroup is ever known, and a pod's `scheduling_group` names nothing the binder can see.
    pub fn pod_groups_served(&self) -> bool {
        self.pod_groups_served
    }
}
