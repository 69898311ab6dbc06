//! The part of kube-controller-manager's PV controller the scheduler's volume binding relies on,
//! played by tests on demand: it completes the bindings a scheduler started (a volume's
//! `spec.claimRef`) and provisions the claims a scheduler selected a node for.

use serde_json::{json, Value};

use super::{meta_str, FakeApiServer, Kind};

/// The annotation kube's volume binder sets on a claim it provisions for.
const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

/// A storage class whose volumes are created by hand.
const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

fn set_annotation(obj: &mut Value, key: &str, value: &str) {
    let meta = super::meta_mut(obj);
    let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
    if !annotations.is_object() {
        *annotations = json!({});
    }
    annotations[key] = json!(value);
}

impl FakeApiServer {
    /// Replaces an object with `f` applied to its stored JSON (a test-side update); returns the
    /// result, or `None` when it does not exist.
    pub fn modify_raw(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        name: &str,
        f: impl FnOnce(&mut Value),
    ) -> Option<Value> {
        let mut obj = self.get_raw(kind, namespace, name)?;
        f(&mut obj);
        Some(self.replace_raw(kind, obj))
    }

    /// One pass of the PV controller: every volume whose `claimRef` names an unbound claim (with
    /// its uid) is bound to it — the volume's phase `Bound`, the claim's `volumeName`, its
    /// annotations `pv.kubernetes.io/bind-completed` and `pv.kubernetes.io/bound-by-controller`,
    /// its phase `Bound` and capacity; every unbound claim with a selected node whose class has
    /// a provisioner gets a new volume `pvc-<claim uid>` on that node (node affinity on
    /// `kubernetes.io/hostname`) and is bound to it. Returns how many claims it bound.
    pub fn play_pv_controller(&self) -> usize {
        let mut bound = 0;
        for claim in self.list_raw(Kind::PersistentVolumeClaim) {
            let (Some(ns), Some(name), Some(uid)) = (
                meta_str(&claim, "namespace"),
                meta_str(&claim, "name"),
                meta_str(&claim, "uid"),
            ) else {
                continue;
            };
            if claim
                .pointer("/spec/volumeName")
                .and_then(Value::as_str)
                .is_some_and(|v| !v.is_empty())
            {
                continue;
            }
            let referring = self.list_raw(Kind::PersistentVolume).into_iter().find(|pv| {
                pv.pointer("/spec/claimRef/namespace").and_then(Value::as_str) == Some(ns)
                    && pv.pointer("/spec/claimRef/name").and_then(Value::as_str) == Some(name)
                    && pv.pointer("/spec/claimRef/uid").and_then(Value::as_str) == Some(uid)
            });
            let pv = match referring {
                Some(pv) => pv,
                None => {
                    let Some(node) = annotation(&claim, SELECTED_NODE) else {
                        continue;
                    };
                    let class = claim.pointer("/spec/storageClassName").and_then(Value::as_str);
                    let provisioner = class
                        .and_then(|c| self.get_raw(Kind::StorageClass, None, c))
                        .and_then(|c| c.get("provisioner").and_then(Value::as_str).map(str::to_string));
                    let Some(provisioner) = provisioner.filter(|p| p != NO_PROVISIONER) else {
                        continue;
                    };
                    self.create_raw(
                        Kind::PersistentVolume,
                        json!({
                            "apiVersion": "v1", "kind": "PersistentVolume",
                            "metadata": {"name": format!("pvc-{uid}"),
                                         "annotations": {"pv.kubernetes.io/provisioned-by": provisioner}},
                            "spec": {
                                "capacity": {"storage": claim.pointer("/spec/resources/requests/storage").cloned().unwrap_or(json!("1Gi"))},
                                "accessModes": claim.pointer("/spec/accessModes").cloned().unwrap_or(json!(["ReadWriteOnce"])),
                                "storageClassName": class,
                                "persistentVolumeReclaimPolicy": "Delete",
                                "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                             "namespace": ns, "name": name, "uid": uid},
                                "csi": {"driver": provisioner, "volumeHandle": format!("handle-{uid}")},
                                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}
                            }
                        }),
                    )
                }
            };
            let Some(pv_name) = meta_str(&pv, "name").map(str::to_string) else {
                continue;
            };
            let capacity = pv.pointer("/spec/capacity").cloned().unwrap_or(json!({}));
            let modes = pv.pointer("/spec/accessModes").cloned().unwrap_or(json!([]));
            self.modify_raw(Kind::PersistentVolume, None, &pv_name, |pv| {
                pv["status"] = json!({"phase": "Bound"});
            });
            self.modify_raw(Kind::PersistentVolumeClaim, Some(ns), name, |c| {
                c["spec"]["volumeName"] = json!(pv_name);
                set_annotation(c, "pv.kubernetes.io/bind-completed", "yes");
                set_annotation(c, "pv.kubernetes.io/bound-by-controller", "yes");
                c["status"] = json!({"phase": "Bound", "capacity": capacity, "accessModes": modes});
            });
            bound += 1;
        }
        bound
    }
}
