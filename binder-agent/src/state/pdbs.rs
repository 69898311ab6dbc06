//! PodDisruptionBudgets, their disruptedPods names resolved to the uids of the pods of those names.

use std::collections::HashSet;

use placement_scheduler::proto;
use prost::Message;

use super::encoding::PodIdentity;
use super::{ClusterState, Key, PdbEntry};
use crate::projection::PdbInfo;

impl ClusterState {
    /// Adds or replaces a PodDisruptionBudget, resolving its disruptedPods names to uids.
    pub fn apply_pdb(&mut self, info: PdbInfo) {
        let key = info.key();
        let mut entry = PdbEntry {
            pdb: info.pdb,
            names: info.disrupted_pods,
            resolved: Vec::new(),
        };
        entry.names.sort();
        entry.names.dedup();
        if let Some(old) = self.pdbs.get(&key) {
            // Names resolved before keep their uid (the pod may be gone by now).
            entry.resolved = old
                .resolved
                .iter()
                .filter(|(n, _)| entry.names.binary_search(n).is_ok())
                .cloned()
                .collect();
        }
        let wanted: HashSet<String> = entry.unresolved().cloned().collect();
        if !wanted.is_empty() {
            let namespace = entry.pdb.namespace.clone();
            entry.resolved.extend(self.find_pods(&namespace, &wanted));
        }
        entry.set_uids();
        let before = self.pdbs.get(&key);
        if before == Some(&entry) {
            return;
        }
        let was_unresolved = before.is_some_and(|e| e.unresolved().next().is_some());
        let is_unresolved = entry.unresolved().next().is_some();
        self.unresolved_pdbs = self.unresolved_pdbs + usize::from(is_unresolved) - usize::from(was_unresolved);
        self.pdbs.insert(key.clone(), entry);
        self.record(Key::Pdb(key));
    }

    /// Removes a PodDisruptionBudget by `namespace/name`.
    pub fn delete_pdb(&mut self, key: &str) {
        let key = key.to_string();
        if let Some(old) = self.pdbs.remove(&key) {
            if old.unresolved().next().is_some() {
                self.unresolved_pdbs -= 1;
            }
            self.record(Key::Pdb(key));
        }
    }

    /// The (name, uid) of the stored pods of `namespace` named in `names`: one pass that decodes
    /// only the identity of each bound pod.
    fn find_pods(&self, namespace: &str, names: &HashSet<String>) -> Vec<(String, String)> {
        let bound = self.bound.values().filter_map(|b| PodIdentity::decode(&b[..]).ok());
        let assumed = self.assumed.values().map(|p| PodIdentity {
            uid: p.uid.clone(),
            namespace: p.namespace.clone(),
            name: p.name.clone(),
        });
        bound
            .chain(assumed)
            .filter(|p| p.namespace == namespace && names.contains(&p.name))
            .map(|p| (p.name, p.uid))
            .collect()
    }

    /// A pod arrived: it resolves the disruptedPods names that name it.
    pub(super) fn resolve_disrupted(&mut self, pod: &proto::Pod) {
        if self.unresolved_pdbs == 0 {
            return;
        }
        let mut changed = Vec::new();
        for (key, entry) in self.pdbs.iter_mut() {
            if entry.pdb.namespace != pod.namespace || !entry.unresolved().any(|n| *n == pod.name) {
                continue;
            }
            entry.resolved.push((pod.name.clone(), pod.uid.clone()));
            entry.set_uids();
            if entry.unresolved().next().is_none() {
                self.unresolved_pdbs -= 1;
            }
            changed.push(key.clone());
        }
        for key in changed {
            self.record(Key::Pdb(key));
        }
    }

    /// The PodDisruptionBudgets, by namespace and name.
    pub fn pod_disruption_budgets(&self) -> Vec<proto::PodDisruptionBudget> {
        let mut pdbs: Vec<(&String, &PdbEntry)> = self.pdbs.iter().collect();
        pdbs.sort_by(|a, b| a.0.cmp(b.0));
        pdbs.into_iter().map(|(_, e)| e.pdb.clone()).collect()
    }
}
