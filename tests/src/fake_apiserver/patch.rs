//! JSON merge patch (RFC 7386), strategic merge patch, JSON patch (RFC 6902) and a small model
//! of server-side apply field ownership.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::Kind;

/// How a list at a given path merges in a strategic merge patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListStrategy {
    /// Items are objects merged by the value of this key.
    MergeKey(&'static str),
    /// A list of scalars merged as a set union.
    Primitive,
}

/// The `patchStrategy:"merge"` lists of the kinds we serve (path with `[]` for list items).
fn list_strategy(kind: Kind, path: &str) -> Option<ListStrategy> {
    use ListStrategy::{MergeKey, Primitive};
    match path {
        "metadata.ownerReferences" => return Some(MergeKey("uid")),
        "metadata.finalizers" => return Some(Primitive),
        _ => {}
    }
    match kind {
        Kind::Pod => match path {
            "spec.containers" | "spec.initContainers" | "spec.ephemeralContainers" => Some(MergeKey("name")),
            "spec.volumes" | "spec.imagePullSecrets" | "spec.schedulingGates" | "spec.resourceClaims" => {
                Some(MergeKey("name"))
            }
            "spec.hostAliases" => Some(MergeKey("ip")),
            "status.conditions" => Some(MergeKey("type")),
            "status.podIPs" | "status.hostIPs" => Some(MergeKey("ip")),
            "status.resourceClaimStatuses" => Some(MergeKey("name")),
            _ => {
                let container = [
                    "spec.containers[].",
                    "spec.initContainers[].",
                    "spec.ephemeralContainers[].",
                ]
                .iter()
                .find_map(|p| path.strip_prefix(p))?;
                match container {
                    "env" => Some(MergeKey("name")),
                    "ports" => Some(MergeKey("containerPort")),
                    "volumeMounts" => Some(MergeKey("mountPath")),
                    "volumeDevices" => Some(MergeKey("devicePath")),
                    _ => None,
                }
            }
        },
        Kind::Node => match path {
            "status.conditions" | "status.addresses" => Some(MergeKey("type")),
            "spec.podCIDRs" => Some(Primitive),
            _ => None,
        },
        Kind::PodDisruptionBudget => match path {
            "status.conditions" => Some(MergeKey("type")),
            _ => None,
        },
        Kind::PersistentVolumeClaim | Kind::PersistentVolume => match path {
            "status.conditions" => Some(MergeKey("type")),
            _ => None,
        },
        Kind::CsiNode => match path {
            "spec.drivers" => Some(MergeKey("name")),
            _ => None,
        },
        Kind::ResourceClaim => match path {
            "status.reservedFor" => Some(MergeKey("uid")),
            _ => None,
        },
        Kind::PodGroup | Kind::CompositePodGroup => match path {
            "status.conditions" => Some(MergeKey("type")),
            "spec.resourceClaims" => Some(MergeKey("name")),
            _ => None,
        },
        Kind::Lease
        | Kind::DeviceClass
        | Kind::ResourceSlice
        | Kind::DeviceTaintRule
        | Kind::CoreEvent
        | Kind::Event
        | Kind::Namespace
        | Kind::StorageClass
        | Kind::CsiDriver
        | Kind::CsiStorageCapacity => None,
    }
}

/// Applies an RFC 7386 JSON merge patch.
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(pm) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            let tm = target.as_object_mut().expect("just made an object");
            for (k, v) in pm {
                if v.is_null() {
                    tm.remove(k);
                } else {
                    merge_patch(tm.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Applies a strategic merge patch for `kind` (lists merge by their Kubernetes merge keys).
pub(crate) fn strategic_merge(kind: Kind, target: &mut Value, patch: &Value) -> Result<(), String> {
    let Value::Object(pm) = patch else {
        return Err("strategic merge patch must be a JSON object".into());
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    smp_map(kind, target.as_object_mut().expect("object"), pm, "")
}

fn smp_map(kind: Kind, target: &mut Map<String, Value>, patch: &Map<String, Value>, path: &str) -> Result<(), String> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            target.clear();
            for (k, v) in patch {
                if !k.starts_with('$') {
                    target.insert(k.clone(), strip_directives(v));
                }
            }
            return Ok(());
        }
        Some("delete") => {
            target.clear();
            return Ok(());
        }
        Some("merge") | None => {}
        Some(other) => return Err(format!("unknown patch type: {other}")),
    }
    if let Some(Value::Array(keep)) = patch.get("$retainKeys") {
        target.retain(|k, _| keep.iter().any(|x| x.as_str() == Some(k)));
    }
    for (k, v) in patch {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(del)) = (target.get_mut(field), v) {
                list.retain(|x| !del.contains(x));
            }
            continue;
        }
        if k.starts_with('$') {
            // `$patch`, `$retainKeys` handled above; `$setElementOrder/…` only orders.
            continue;
        }
        let child = join(path, k);
        match v {
            Value::Null => {
                target.remove(k);
            }
            Value::Object(pm) => {
                let slot = target.entry(k.clone()).or_insert(Value::Null);
                if !slot.is_object() {
                    *slot = Value::Object(Map::new());
                }
                smp_map(kind, slot.as_object_mut().expect("object"), pm, &child)?;
                if pm.get("$patch").and_then(Value::as_str) == Some("delete") {
                    target.remove(k);
                }
            }
            Value::Array(items) => match list_strategy(kind, &child) {
                Some(ListStrategy::MergeKey(key)) => {
                    let slot = target.entry(k.clone()).or_insert(Value::Null);
                    if !slot.is_array() {
                        *slot = Value::Array(Vec::new());
                    }
                    smp_list(kind, slot.as_array_mut().expect("array"), items, key, &child)?;
                }
                Some(ListStrategy::Primitive) => {
                    let slot = target.entry(k.clone()).or_insert(Value::Null);
                    if !slot.is_array() {
                        *slot = Value::Array(Vec::new());
                    }
                    let list = slot.as_array_mut().expect("array");
                    for item in items {
                        if !list.contains(item) {
                            list.push(item.clone());
                        }
                    }
                }
                None => {
                    target.insert(k.clone(), strip_directives(v));
                }
            },
            scalar => {
                target.insert(k.clone(), scalar.clone());
            }
        }
    }
    Ok(())
}

fn smp_list(kind: Kind, target: &mut Vec<Value>, patch: &[Value], key: &str, path: &str) -> Result<(), String> {
    let item_path = format!("{path}[]");
    if patch
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace") && i.get(key).is_none())
    {
        *target = patch
            .iter()
            .filter(|i| i.get("$patch").is_none())
            .map(strip_directives)
            .collect();
        return Ok(());
    }
    for item in patch {
        let Value::Object(im) = item else {
            return Err(format!("{path}: list items must be objects with merge key {key:?}"));
        };
        let kv = im.get(key);
        if im.get("$patch").and_then(Value::as_str) == Some("delete") {
            target.retain(|t| t.get(key) != kv);
            continue;
        }
        let existing = kv.and_then(|kv| target.iter().position(|t| t.get(key) == Some(kv)));
        match existing {
            Some(pos) => {
                let slot = &mut target[pos];
                if !slot.is_object() {
                    *slot = Value::Object(Map::new());
                }
                smp_map(kind, slot.as_object_mut().expect("object"), im, &item_path)?;
            }
            None => {
                let mut m = Map::new();
                smp_map(kind, &mut m, im, &item_path)?;
                target.push(Value::Object(m));
            }
        }
    }
    Ok(())
}

/// Removes `$`-directives and nulls from a value copied verbatim into the target.
fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, v)| !k.starts_with('$') && !v.is_null())
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

fn unescape_pointer_token(t: &str) -> String {
    t.replace("~1", "/").replace("~0", "~")
}

fn split_pointer(p: &str) -> Result<(String, String), String> {
    if p.is_empty() {
        return Err("JSON patch path must not be empty".into());
    }
    let (parent, last) = p
        .rsplit_once('/')
        .ok_or_else(|| format!("invalid JSON pointer {p:?}"))?;
    Ok((parent.to_string(), unescape_pointer_token(last)))
}

fn json_add(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let (parent, last) = split_pointer(path)?;
    match doc.pointer_mut(&parent) {
        Some(Value::Object(m)) => {
            m.insert(last, value);
            Ok(())
        }
        Some(Value::Array(a)) => {
            if last == "-" {
                a.push(value);
                return Ok(());
            }
            let i: usize = last.parse().map_err(|_| format!("invalid array index {last:?}"))?;
            if i > a.len() {
                return Err(format!("array index {i} out of bounds"));
            }
            a.insert(i, value);
            Ok(())
        }
        _ => Err(format!("doc is missing path: {path:?}")),
    }
}

fn json_remove(doc: &mut Value, path: &str) -> Result<Value, String> {
    let (parent, last) = split_pointer(path)?;
    match doc.pointer_mut(&parent) {
        Some(Value::Object(m)) => m.remove(&last).ok_or_else(|| format!("doc is missing path: {path:?}")),
        Some(Value::Array(a)) => {
            let i: usize = last.parse().map_err(|_| format!("invalid array index {last:?}"))?;
            if i >= a.len() {
                return Err(format!("array index {i} out of bounds"));
            }
            Ok(a.remove(i))
        }
        _ => Err(format!("doc is missing path: {path:?}")),
    }
}

/// Applies an RFC 6902 JSON patch.
pub(crate) fn json_patch(doc: &mut Value, ops: &Value) -> Result<(), String> {
    let Value::Array(ops) = ops else {
        return Err("JSON patch must be an array of operations".into());
    };
    for op in ops {
        let name = op.get("op").and_then(Value::as_str).unwrap_or_default();
        let path = op
            .get("path")
            .and_then(Value::as_str)
            .ok_or("JSON patch operation without path")?;
        let value = || op.get("value").cloned().ok_or_else(|| format!("{name}: missing value"));
        let from = || {
            op.get("from")
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("{name}: missing from"))
        };
        match name {
            "add" => json_add(doc, path, value()?)?,
            "remove" => {
                json_remove(doc, path)?;
            }
            "replace" => {
                let v = value()?;
                let slot = doc
                    .pointer_mut(path)
                    .ok_or_else(|| format!("doc is missing key: {path:?}"))?;
                *slot = v;
            }
            "test" => {
                if doc.pointer(path) != Some(&value()?) {
                    return Err(format!("testing value {path} failed"));
                }
            }
            "move" => {
                let v = json_remove(doc, &from()?)?;
                json_add(doc, path, v)?;
            }
            "copy" => {
                let v = doc
                    .pointer(&from()?)
                    .cloned()
                    .ok_or_else(|| format!("doc is missing from path for copy at {path}"))?;
                json_add(doc, path, v)?;
            }
            other => return Err(format!("unexpected JSON patch operation {other:?}")),
        }
    }
    Ok(())
}

/// Whether a field manager wrote through server-side apply or through an ordinary update.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Operation {
    /// Server-side apply (`application/apply-patch+yaml`).
    Apply,
    /// Create, update (PUT) or a non-apply patch.
    Update,
}

/// A field manager entry: name and operation.
pub(crate) type Manager = (String, Operation);

/// Leaf field path → managers owning it (lists are atomic leaves).
#[derive(Debug, Clone, Default)]
pub(crate) struct Ownership(BTreeMap<String, BTreeSet<Manager>>);

/// Fields never tracked for ownership (server-managed or identifying).
fn untracked(path: &str) -> bool {
    matches!(
        path,
        "apiVersion"
            | "kind"
            | "metadata.name"
            | "metadata.namespace"
            | "metadata.uid"
            | "metadata.resourceVersion"
            | "metadata.generation"
            | "metadata.creationTimestamp"
            | "metadata.deletionTimestamp"
            | "metadata.deletionGracePeriodSeconds"
            | "metadata.selfLink"
    ) || path.starts_with("metadata.managedFields")
}

/// Flattens an object into leaf paths (objects recurse; scalars, lists and `{}` are leaves).
pub(crate) fn leaves(v: &Value) -> BTreeMap<String, Value> {
    fn walk(v: &Value, prefix: &str, out: &mut BTreeMap<String, Value>) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, child) in m {
                    walk(child, &join(prefix, k), out);
                }
            }
            other => {
                if !prefix.is_empty() && !untracked(prefix) {
                    out.insert(prefix.to_string(), other.clone());
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(v, "", &mut out);
    out
}

fn lookup<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |cur, seg| cur.get(seg))
}

fn remove_path(v: &mut Value, path: &str) {
    let mut segs: Vec<&str> = path.split('.').collect();
    let Some(last) = segs.pop() else { return };
    let mut cur = v;
    for s in segs {
        match cur.get_mut(s) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Some(m) = cur.as_object_mut() {
        m.remove(last);
    }
}

impl Ownership {
    /// Records an ordinary update by `manager`: it takes every changed or added leaf.
    pub(crate) fn record_update(&mut self, manager: &str, old: Option<&Value>, new: &Value) {
        let before = old.map(leaves).unwrap_or_default();
        let after = leaves(new);
        self.0.retain(|p, _| after.contains_key(p));
        for (p, v) in &after {
            if before.get(p) != Some(v) {
                let owners = self.0.entry(p.clone()).or_default();
                owners.clear();
                owners.insert((manager.to_string(), Operation::Update));
            }
        }
    }

    /// Server-side apply of `config` by `manager` onto `obj` (`obj` is `Null` when creating).
    ///
    /// Returns the conflicting `(manager, path)` pairs instead of applying when `force` is false.
    pub(crate) fn apply(
        &mut self,
        kind: Kind,
        manager: &str,
        obj: &mut Value,
        config: &Value,
        force: bool,
    ) -> Result<(), ApplyError> {
        let me: Manager = (manager.to_string(), Operation::Apply);
        let applied = leaves(config);
        let mut conflicts = Vec::new();
        for (p, v) in &applied {
            if lookup(obj, p) == Some(v) {
                continue;
            }
            if let Some(owners) = self.0.get(p) {
                for o in owners {
                    if *o != me {
                        conflicts.push((o.0.clone(), p.clone()));
                    }
                }
            }
        }
        if !conflicts.is_empty() && !force {
            return Err(ApplyError::Conflicts(conflicts));
        }
        strategic_merge(kind, obj, config).map_err(ApplyError::Invalid)?;
        // Fields this manager applied before but no longer does are dropped unless shared.
        let previously: Vec<String> = self
            .0
            .iter()
            .filter(|(p, o)| o.contains(&me) && !applied.contains_key(*p))
            .map(|(p, _)| p.clone())
            .collect();
        for p in previously {
            let owners = self.0.get_mut(&p).expect("listed above");
            owners.remove(&me);
            if owners.is_empty() {
                self.0.remove(&p);
                remove_path(obj, &p);
            }
        }
        for p in applied.keys() {
            let owners = self.0.entry(p.clone()).or_default();
            if force {
                owners.clear();
            }
            owners.insert(me.clone());
        }
        let present = leaves(obj);
        self.0.retain(|p, _| present.contains_key(p));
        Ok(())
    }

    /// The managers and the fields they own, for tests.
    pub(crate) fn managers(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (p, owners) in &self.0 {
            for (m, op) in owners {
                out.entry(format!("{m}/{op:?}")).or_default().push(p.clone());
            }
        }
        out
    }

    /// The ownership packed for storage: the paths of each distinct set of managers, in one
    /// buffer (most objects have one or two such sets, and a million stored objects would
    /// otherwise hold a map node per field).
    pub(crate) fn pack(&self) -> PackedOwnership {
        let mut groups: Vec<(Box<[Manager]>, Vec<u8>)> = Vec::new();
        for (path, owners) in &self.0 {
            let i = match groups.iter().position(|(m, _)| m.iter().eq(owners.iter())) {
                Some(i) => i,
                None => {
                    groups.push((owners.iter().cloned().collect(), Vec::new()));
                    groups.len() - 1
                }
            };
            let buf = &mut groups[i].1;
            buf.extend_from_slice(&(path.len() as u32).to_le_bytes());
            buf.extend_from_slice(path.as_bytes());
        }
        PackedOwnership(
            groups
                .into_iter()
                .map(|(m, paths)| (m, paths.into_boxed_slice()))
                .collect(),
        )
    }
}

/// One distinct set of managers and the paths it owns, each prefixed by its length (u32 LE).
type OwnedPaths = (Box<[Manager]>, Box<[u8]>);

/// An [`Ownership`] as stored: per distinct set of managers, its paths in one buffer.
#[derive(Debug, Clone, Default)]
pub(crate) struct PackedOwnership(Box<[OwnedPaths]>);

impl PackedOwnership {
    /// The ownership again.
    pub(crate) fn unpack(&self) -> Ownership {
        let mut out = BTreeMap::new();
        for (managers, mut paths) in self.0.iter().map(|(m, p)| (m, &p[..])) {
            while let Some((len, rest)) = paths.split_first_chunk::<4>() {
                let len = u32::from_le_bytes(*len) as usize;
                let (path, rest) = rest.split_at(len);
                out.insert(
                    String::from_utf8_lossy(path).into_owned(),
                    managers.iter().cloned().collect::<BTreeSet<Manager>>(),
                );
                paths = rest;
            }
        }
        Ownership(out)
    }
}

/// Why a server-side apply was refused.
#[derive(Debug)]
pub(crate) enum ApplyError {
    /// Fields owned by other managers would change: `(manager, path)`.
    Conflicts(Vec<(String, String)>),
    /// The configuration could not be merged.
    Invalid(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn packed_ownership_unpacks_to_the_same_owners() {
        let mut own = Ownership::default();
        own.record_update(
            "kubectl",
            None,
            &json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"x": 1}}),
        );
        own.apply(
            Kind::Pod,
            "ssa",
            &mut json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"x": 1}}),
            &json!({"metadata": {"labels": {"c": "3"}}, "spec": {"x": 1}}),
            true,
        )
        .unwrap();
        let packed = own.pack();
        assert!(packed.0.len() < own.0.len(), "paths are grouped by their managers");
        assert_eq!(packed.unpack().0, own.0);
        assert!(Ownership::default().pack().unpack().0.is_empty());
    }

    #[test]
    fn merge_patch_rfc7386() {
        let mut t = json!({"a": "b", "c": {"d": "e", "f": "g"}});
        merge_patch(&mut t, &json!({"a": "z", "c": {"f": null}}));
        assert_eq!(t, json!({"a": "z", "c": {"d": "e"}}));
    }

    #[test]
    fn smp_conditions_merge_by_type() {
        let mut pod = json!({"status": {"phase": "Pending", "conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        ]}});
        let patch = json!({"status": {
            "$setElementOrder/conditions": [{"type": "Ready"}, {"type": "PodScheduled"}],
            "conditions": [{"type": "PodScheduled", "status": "True", "reason": null}],
            "nominatedNodeName": "n1"
        }});
        strategic_merge(Kind::Pod, &mut pod, &patch).unwrap();
        assert_eq!(
            pod,
            json!({"status": {"phase": "Pending", "nominatedNodeName": "n1", "conditions": [
                {"type": "Ready", "status": "False"},
                {"type": "PodScheduled", "status": "True"}
            ]}})
        );
        let del = json!({"status": {"conditions": [{"type": "Ready", "$patch": "delete"}]}});
        strategic_merge(Kind::Pod, &mut pod, &del).unwrap();
        assert_eq!(pod["status"]["conditions"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn smp_atomic_and_primitive_lists() {
        let mut pod = json!({"metadata": {"finalizers": ["a"]}, "spec": {"tolerations": [{"key": "x"}]}});
        let patch = json!({"metadata": {"finalizers": ["b"]}, "spec": {"tolerations": [{"key": "y"}]}});
        strategic_merge(Kind::Pod, &mut pod, &patch).unwrap();
        assert_eq!(pod["metadata"]["finalizers"], json!(["a", "b"]));
        assert_eq!(pod["spec"]["tolerations"], json!([{"key": "y"}]));
        let del = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}});
        strategic_merge(Kind::Pod, &mut pod, &del).unwrap();
        assert_eq!(pod["metadata"]["finalizers"], json!(["b"]));
    }

    #[test]
    fn json_patch_ops() {
        let mut d = json!({"a": [1, 2], "b": {"c": 1}});
        json_patch(
            &mut d,
            &json!([
                {"op": "add", "path": "/a/-", "value": 3},
                {"op": "replace", "path": "/b/c", "value": 2},
                {"op": "test", "path": "/b/c", "value": 2},
                {"op": "remove", "path": "/a/0"},
                {"op": "copy", "from": "/b", "path": "/e"}
            ]),
        )
        .unwrap();
        assert_eq!(d, json!({"a": [2, 3], "b": {"c": 2}, "e": {"c": 2}}));
        assert!(json_patch(&mut d, &json!([{"op": "test", "path": "/b/c", "value": 9}])).is_err());
    }

    #[test]
    fn apply_conflicts_with_other_manager() {
        let mut own = Ownership::default();
        let mut lease = Value::Null;
        own.apply(
            Kind::Lease,
            "a",
            &mut lease,
            &json!({"spec": {"holderIdentity": "a"}}),
            false,
        )
        .unwrap();
        // Same value: shared ownership, no conflict.
        own.apply(
            Kind::Lease,
            "b",
            &mut lease,
            &json!({"spec": {"holderIdentity": "a"}}),
            false,
        )
        .unwrap();
        let err = own
            .apply(
                Kind::Lease,
                "c",
                &mut lease,
                &json!({"spec": {"holderIdentity": "c"}}),
                false,
            )
            .unwrap_err();
        assert!(matches!(err, ApplyError::Conflicts(ref c) if c.len() == 2));
        own.apply(
            Kind::Lease,
            "c",
            &mut lease,
            &json!({"spec": {"holderIdentity": "c"}}),
            true,
        )
        .unwrap();
        assert_eq!(lease["spec"]["holderIdentity"], "c");
        // An update takes ownership away from the applier.
        let before = lease.clone();
        lease["spec"]["holderIdentity"] = json!(null);
        lease["spec"].as_object_mut().unwrap().remove("holderIdentity");
        own.record_update("u", Some(&before), &lease);
        own.apply(
            Kind::Lease,
            "d",
            &mut lease,
            &json!({"spec": {"holderIdentity": "d"}}),
            false,
        )
        .unwrap();
    }
}
