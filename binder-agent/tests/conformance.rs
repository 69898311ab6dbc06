//! The conversion contract (`tests/conformance/README.md`): the binder's conversion of the corpus
//! of Kubernetes objects in `tests/conformance/corpus/` must give, byte for byte, the messages in
//! `tests/conformance/expected/`, which the Python (`clients/python`) and Go (`clients/go/convert`)
//! conversions are held to as well.
//!
//! The expected files are in the canonical encoding: fields in number order, map entries sorted
//! by key and written with both their key and their value. That is what Go's deterministic
//! `proto.Marshal` and Python's `SerializeToString(deterministic=True)` write; prost writes the
//! same except that it leaves a map entry's key or value out when it is empty (valid protobuf,
//! decoded as the same message), so this test re-encodes prost's map entries in full before it
//! compares. Everything else (field order, sorted maps: the stubs use `BTreeMap`) is prost's own.
//!
//! `PLACEMENT_UPDATE_GOLDEN=1 cargo test -p binder-agent --test conformance` rewrites the expected
//! files from the corpus; without it, a stale, missing or extra expected file fails the test.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice};
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass};
use placement_binder::projection::{
    claim_info, csi_driver_info, csi_node_info, device_class_info, device_taint_rule_info, namespace_info, node_info,
    pdb_info, pdb_key, pod_group_info, pod_info, resource_claim_info, resource_slice_info, storage_capacity_info,
    storage_class_info, volume_info, TrackedObject,
};
use placement_binder::state::ClusterState;
use placement_scheduler::proto;
use prost::Message;
use prost_types::field_descriptor_proto::Type;
use prost_types::{DescriptorProto, FileDescriptorSet};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance")
}

/// One object of the corpus.
enum Object {
    Pod(Box<Pod>),
    Node(Box<Node>),
    Namespace(Namespace),
    Pdb(PodDisruptionBudget),
    Storage(TrackedObject),
}

/// The corpus: (file stem, object), in file name order.
fn corpus() -> Vec<(String, Object)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir().join("corpus"))
        .expect("tests/conformance/corpus")
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "the corpus is empty");
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("corpus file");
            let value: serde_json::Value = serde_json::from_str(&text).expect("corpus file is JSON");
            let kind = value["kind"].as_str().unwrap_or_default().to_string();
            let parse_err = |e: serde_json::Error| format!("{}: {e}", path.display());
            let object = match kind.as_str() {
                "Pod" => Object::Pod(Box::new(serde_json::from_value(value).map_err(parse_err).unwrap())),
                "Node" => Object::Node(Box::new(serde_json::from_value(value).map_err(parse_err).unwrap())),
                "Namespace" => Object::Namespace(serde_json::from_value(value).map_err(parse_err).unwrap()),
                "PodDisruptionBudget" => Object::Pdb(serde_json::from_value(value).map_err(parse_err).unwrap()),
                "PersistentVolumeClaim" => {
                    let c: PersistentVolumeClaim = serde_json::from_value(value).map_err(parse_err).unwrap();
                    Object::Storage(TrackedObject::Claim(claim_info(&c)))
                }
                "PersistentVolume" => {
                    let v: PersistentVolume = serde_json::from_value(value).map_err(parse_err).unwrap();
                    Object::Storage(TrackedObject::Volume(volume_info(&v)))
                }
                "StorageClass" => {
                    let c: StorageClass = serde_json::from_value(value).map_err(parse_err).unwrap();
                    Object::Storage(TrackedObject::Class(storage_class_info(&c)))
                }
                "CSINode" => {
                    let n: CSINode = serde_json::from_value(value).map_err(parse_err).unwrap();
                    Object::Storage(TrackedObject::CsiNode(csi_node_info(&n)))
                }
                "CSIDriver" => {
                    let d: CSIDriver = serde_json::from_value(value).map_err(parse_err).unwrap();
                    Object::Storage(TrackedObject::CsiDriver(csi_driver_info(&d)))
                }
                "CSIStorageCapacity" => {
                    let c: CSIStorageCapacity = serde_json::from_value(value).map_err(parse_err).unwrap();
                    Object::Storage(TrackedObject::Capacity(storage_capacity_info(&c)))
                }
                "DeviceClass" => {
                    let c: DeviceClass = serde_json::from_value(value).map_err(parse_err).unwrap();
                    Object::Storage(TrackedObject::DeviceClass(device_class_info(&c)))
                }
                "CompositePodGroup" => {
                    let g: k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup =
                        serde_json::from_value(value).map_err(parse_err).unwrap();
                    Object::Storage(TrackedObject::CompositePodGroup(
                        placement_binder::projection::composite_pod_group_info(&g),
                    ))
                }
                "ResourceClaim" => {
                    let c: ResourceClaim = serde_json::from_value(value).map_err(parse_err).unwrap();
                    Object::Storage(TrackedObject::ResourceClaim(resource_claim_info(&c)))
                }
                "ResourceSlice" => {
                    let s: ResourceSlice = serde_json::from_value(value).map_err(parse_err).unwrap();
                    Object::Storage(TrackedObject::ResourceSlice(resource_slice_info(&s)))
                }
                "DeviceTaintRule" => {
                    let r: DeviceTaintRule = serde_json::from_value(value).map_err(parse_err).unwrap();
                    Object::Storage(TrackedObject::DeviceTaintRule(device_taint_rule_info(&r)))
                }
                "PodGroup" => {
                    let g: PodGroup = serde_json::from_value(value).map_err(parse_err).unwrap();
                    Object::Storage(TrackedObject::PodGroup(pod_group_info(&g)))
                }
                other => panic!("{}: kind {other:?} is not part of the contract", path.display()),
            };
            let stem = path.file_stem().unwrap_or_default().to_string_lossy().into_owned();
            (stem, object)
        })
        .collect()
}

/// One converted object: (file stem, message type name, prost bytes).
type Converted = (String, &'static str, Vec<u8>);

/// What the binder makes of the corpus: each object's message and the prost bytes of the snapshot
/// its state sends, fed the objects as the watches would.
fn convert(corpus: &[(String, Object)]) -> (Vec<Converted>, Vec<u8>) {
    let mut state = ClusterState::new();
    for (_, object) in corpus {
        match object {
            Object::Pod(p) => {
                // As the binder's PodApplied: finished pods leave, bound ones count.
                let info = pod_info(p);
                if !info.terminal && info.node_name().is_some() {
                    state.apply_bound_pod(info.spec);
                }
            }
            Object::Node(n) => state.apply_node(node_info(n)),
            Object::Namespace(ns) => state.apply_namespace(namespace_info(ns)),
            Object::Pdb(p) => state.apply_pdb(pdb_info(p)),
            Object::Storage(s) => {
                state.apply_storage(s.clone());
            }
        }
    }
    let snapshot = state.full();
    let messages = corpus
        .iter()
        .map(|(stem, object)| {
            let (type_name, bytes) = match object {
                Object::Pod(p) => ("placement.v1.Pod", pod_info(p).spec.encode_to_vec()),
                Object::Node(n) => ("placement.v1.Node", node_info(n).encode_to_vec()),
                Object::Namespace(ns) => ("placement.v1.Namespace", namespace_info(ns).encode_to_vec()),
                Object::Pdb(p) => {
                    // As the snapshot carries it: disruptedPods resolved against the bound pods.
                    let key = pdb_info(p).key();
                    let pdb = snapshot
                        .pod_disruption_budgets
                        .iter()
                        .find(|b| pdb_key(&b.namespace, &b.name) == key)
                        .expect("every budget is in the snapshot");
                    ("placement.v1.PodDisruptionBudget", pdb.encode_to_vec())
                }
                Object::Storage(TrackedObject::Claim(c)) => ("placement.v1.PersistentVolumeClaim", c.encode_to_vec()),
                Object::Storage(TrackedObject::Volume(v)) => ("placement.v1.PersistentVolume", v.encode_to_vec()),
                Object::Storage(TrackedObject::Class(c)) => ("placement.v1.StorageClass", c.encode_to_vec()),
                Object::Storage(TrackedObject::CsiNode(n)) => ("placement.v1.CsiNode", n.encode_to_vec()),
                Object::Storage(TrackedObject::CsiDriver(d)) => ("placement.v1.CsiDriver", d.encode_to_vec()),
                Object::Storage(TrackedObject::Capacity(c)) => ("placement.v1.CsiStorageCapacity", c.encode_to_vec()),
                Object::Storage(TrackedObject::DeviceClass(c)) => ("placement.v1.DeviceClass", c.encode_to_vec()),
                Object::Storage(TrackedObject::ResourceClaim(c)) => ("placement.v1.ResourceClaim", c.encode_to_vec()),
                Object::Storage(TrackedObject::ResourceSlice(s)) => ("placement.v1.ResourceSlice", s.encode_to_vec()),
                Object::Storage(TrackedObject::DeviceTaintRule(r)) => {
                    ("placement.v1.DeviceTaintRule", r.encode_to_vec())
                }
                Object::Storage(TrackedObject::PodGroup(g)) => ("placement.v1.PodGroup", g.encode_to_vec()),
                Object::Storage(TrackedObject::CompositePodGroup(g)) => {
                    ("placement.v1.CompositePodGroup", g.encode_to_vec())
                }
            };
            (stem.clone(), type_name, bytes)
        })
        .collect();
    (messages, snapshot.encode_to_vec())
}

/// Message descriptors by full name (without the leading dot).
struct Descriptors(HashMap<String, DescriptorProto>);

impl Descriptors {
    fn load() -> Self {
        let set = FileDescriptorSet::decode(proto::FILE_DESCRIPTOR_SET).expect("the compiled descriptor set");
        let mut map = HashMap::new();
        fn add(map: &mut HashMap<String, DescriptorProto>, prefix: &str, d: &DescriptorProto) {
            let name = format!("{prefix}.{}", d.name());
            for nested in &d.nested_type {
                add(map, &name, nested);
            }
            map.insert(name, d.clone());
        }
        for file in &set.file {
            for d in &file.message_type {
                add(&mut map, file.package(), d);
            }
        }
        Self(map)
    }

    fn get(&self, name: &str) -> &DescriptorProto {
        self.0
            .get(name.trim_start_matches('.'))
            .unwrap_or_else(|| panic!("no descriptor for {name}"))
    }

    /// The map entry type of a message-typed field, when the field is a map.
    fn map_entry(&self, field: &prost_types::FieldDescriptorProto) -> Option<&DescriptorProto> {
        if field.r#type() != Type::Message {
            return None;
        }
        let d = self.get(field.type_name());
        d.options.as_ref().is_some_and(|o| o.map_entry()).then_some(d)
    }
}

fn read_varint(b: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = b[*at];
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            break;
        }
    }
    v
}

fn write_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// One field of an encoded message: number, wire type and its bytes (the payload of a
/// length-delimited field, the raw bytes of the others).
fn fields(b: &[u8]) -> Vec<(u32, u8, &[u8])> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < b.len() {
        let key = read_varint(b, &mut at);
        let (number, wire) = ((key >> 3) as u32, (key & 7) as u8);
        let start = at;
        let payload = match wire {
            0 => {
                read_varint(b, &mut at);
                &b[start..at]
            }
            1 => {
                at += 8;
                &b[start..at]
            }
            2 => {
                let len = read_varint(b, &mut at) as usize;
                let p = &b[at..at + len];
                at += len;
                p
            }
            5 => {
                at += 4;
                &b[start..at]
            }
            w => panic!("unexpected wire type {w}"),
        };
        out.push((number, wire, payload));
    }
    out
}

fn push_field(out: &mut Vec<u8>, number: u32, wire: u8, payload: &[u8]) {
    write_varint(out, (u64::from(number) << 3) | u64::from(wire));
    if wire == 2 {
        write_varint(out, payload.len() as u64);
    }
    out.extend_from_slice(payload);
}

fn wire_type(t: Type) -> u8 {
    match t {
        Type::String | Type::Bytes | Type::Message => 2,
        Type::Fixed64 | Type::Sfixed64 | Type::Double => 1,
        Type::Fixed32 | Type::Sfixed32 | Type::Float => 5,
        _ => 0,
    }
}

/// The canonical encoding of a message of type `type_name` encoded as `b`: every map entry
/// written with its key and its value, nested messages likewise. Also records in `seen` every
/// (message type, field number) present.
fn canonical(d: &Descriptors, type_name: &str, b: &[u8], seen: &mut BTreeSet<(String, i32)>) -> Vec<u8> {
    let desc = d.get(type_name);
    let full = type_name.trim_start_matches('.').to_string();
    let mut out = Vec::with_capacity(b.len() + 16);
    for (number, wire, payload) in fields(b) {
        let field = desc
            .field
            .iter()
            .find(|f| f.number() == number as i32)
            .unwrap_or_else(|| panic!("{full} has no field {number}"));
        seen.insert((full.clone(), field.number()));
        if let Some(entry) = d.map_entry(field) {
            let kv = fields(payload);
            let mut e = Vec::new();
            for (i, f) in entry.field.iter().enumerate() {
                let n = (i + 1) as u32;
                let w = wire_type(f.r#type());
                let value: Vec<u8> = match kv.iter().rev().find(|(num, _, _)| *num == n) {
                    Some((_, _, p)) if f.r#type() == Type::Message => canonical(d, f.type_name(), p, seen),
                    Some((_, _, p)) => p.to_vec(),
                    None if w == 0 => vec![0],
                    None if w == 2 => vec![],
                    None => panic!("{full}.{}: unsupported map value type", field.name()),
                };
                push_field(&mut e, n, w, &value);
            }
            push_field(&mut out, number, 2, &e);
        } else if field.r#type() == Type::Message {
            push_field(&mut out, number, wire, &canonical(d, field.type_name(), payload, seen));
        } else {
            push_field(&mut out, number, wire, payload);
        }
    }
    out
}

/// Every (message type, field) reachable from `root`.
fn reachable(d: &Descriptors, root: &str) -> BTreeSet<(String, i32)> {
    let mut out = BTreeSet::new();
    let mut todo = vec![root.to_string()];
    let mut done = BTreeSet::new();
    while let Some(t) = todo.pop() {
        if !done.insert(t.clone()) {
            continue;
        }
        for f in &d.get(&t).field {
            out.insert((t.clone(), f.number()));
            if f.r#type() == Type::Message {
                match d.map_entry(f) {
                    // A map's entries: the map field is what a corpus object sets; a
                    // message-valued map's values are messages to cover too.
                    Some(entry) => {
                        for ef in entry.field.iter().filter(|ef| ef.r#type() == Type::Message) {
                            todo.push(ef.type_name().trim_start_matches('.').to_string());
                        }
                    }
                    None => todo.push(f.type_name().trim_start_matches('.').to_string()),
                }
            }
        }
    }
    out
}

fn field_name(d: &Descriptors, (t, n): &(String, i32)) -> String {
    let f = d
        .get(t)
        .field
        .iter()
        .find(|f| f.number() == *n)
        .map(|f| f.name().to_string());
    format!("{t}.{} ({n})", f.unwrap_or_default())
}

/// The canonical bytes of every object and of the snapshot, by expected file name.
fn expected_files(d: &Descriptors, seen: &mut BTreeSet<(String, i32)>) -> BTreeMap<String, Vec<u8>> {
    let corpus = corpus();
    let (messages, snapshot) = convert(&corpus);
    let mut files = BTreeMap::new();
    for (stem, type_name, bytes) in messages {
        assert_ne!(stem, "snapshot", "a corpus file may not be called snapshot.json");
        files.insert(format!("{stem}.binpb"), canonical(d, type_name, &bytes, seen));
    }
    files.insert(
        "snapshot.binpb".to_string(),
        canonical(d, "placement.v1.Snapshot", &snapshot, seen),
    );
    files
}

#[test]
fn the_expected_messages_are_the_binders_conversion_of_the_corpus() {
    let d = Descriptors::load();
    let mut seen = BTreeSet::new();
    let files = expected_files(&d, &mut seen);
    let out_dir = dir().join("expected");
    if std::env::var_os("PLACEMENT_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(&out_dir).unwrap();
        for entry in std::fs::read_dir(&out_dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "binpb") {
                std::fs::remove_file(path).unwrap();
            }
        }
        for (name, bytes) in &files {
            std::fs::write(out_dir.join(name), bytes).unwrap();
        }
        eprintln!("rewrote {} files in {}", files.len(), out_dir.display());
        return;
    }
    let mut problems = Vec::new();
    let mut on_disk: BTreeSet<String> = std::fs::read_dir(&out_dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".binpb"))
                .collect()
        })
        .unwrap_or_default();
    for (name, bytes) in &files {
        on_disk.remove(name);
        match std::fs::read(out_dir.join(name)) {
            Ok(have) if have == *bytes => {}
            Ok(_) => problems.push(format!("{name}: stale")),
            Err(_) => problems.push(format!("{name}: missing")),
        }
    }
    for extra in on_disk {
        problems.push(format!("{extra}: no corpus object gives it"));
    }
    assert!(
        problems.is_empty(),
        "tests/conformance/expected does not match the corpus: {problems:?}\n\
         Rewrite it with PLACEMENT_UPDATE_GOLDEN=1 cargo test -p binder-agent --test conformance, \
         then make the Python and Go conversions give the same bytes"
    );
}

#[test]
fn canonical_bytes_decode_to_the_binders_messages() {
    // The re-encoding changes bytes only, never the message.
    let d = Descriptors::load();
    let corpus = corpus();
    let (messages, snapshot) = convert(&corpus);
    let mut seen = BTreeSet::new();
    for (stem, type_name, bytes) in &messages {
        let canon = canonical(&d, type_name, bytes, &mut seen);
        let same = match *type_name {
            "placement.v1.Pod" => proto::Pod::decode(&canon[..]).ok() == proto::Pod::decode(&bytes[..]).ok(),
            "placement.v1.Node" => proto::Node::decode(&canon[..]).ok() == proto::Node::decode(&bytes[..]).ok(),
            "placement.v1.Namespace" => {
                proto::Namespace::decode(&canon[..]).ok() == proto::Namespace::decode(&bytes[..]).ok()
            }
            _ => {
                proto::PodDisruptionBudget::decode(&canon[..]).ok()
                    == proto::PodDisruptionBudget::decode(&bytes[..]).ok()
            }
        };
        assert!(same, "{stem}: the canonical bytes decode to another message");
    }
    let canon = canonical(&d, "placement.v1.Snapshot", &snapshot, &mut seen);
    assert_eq!(
        proto::Snapshot::decode(&canon[..]).unwrap(),
        proto::Snapshot::decode(&snapshot[..]).unwrap()
    );
    // Some corpus label has an empty value, so the re-encoding is exercised.
    assert!(
        canon.len() > snapshot.len(),
        "no map entry with an empty key or value in the corpus"
    );
}

#[test]
fn every_field_of_the_converted_messages_is_set_by_some_corpus_object() {
    // A field added to the API fails here until the binder converts it and the corpus has an
    // object that sets it; the expected files then change, and the Python and Go tests fail
    // until those conversions set it too.
    let d = Descriptors::load();
    let mut seen = BTreeSet::new();
    expected_files(&d, &mut seen);
    let missing: Vec<String> = reachable(&d, "placement.v1.Snapshot")
        .difference(&seen)
        .map(|f| field_name(&d, f))
        .collect();
    assert!(
        missing.is_empty(),
        "fields no corpus object sets (add an object to tests/conformance/corpus that does): {missing:?}"
    );
}

#[test]
fn the_snapshot_holds_what_the_binder_would_send() {
    let corpus = corpus();
    let (_, snapshot) = convert(&corpus);
    let s = proto::Snapshot::decode(&snapshot[..]).unwrap();
    let names: Vec<&str> = s.pods.iter().map(|p| p.name.as_str()).collect();
    assert!(
        !names.contains(&"report-28411520-q7x2n"),
        "a finished pod holds nothing"
    );
    assert!(!names.contains(&"bare"), "pending pods are not in a snapshot");
    assert!(
        s.pods.iter().any(|p| p.terminating),
        "the terminating pod is kept, marked"
    );
    let web = s.pod_disruption_budgets.iter().find(|b| b.name == "web").unwrap();
    assert_eq!(web.disrupted_pod_uids, ["0b7f4e1a-9c2d-4e5f-8a6b-7c8d9e0f1a2b"]);
    // PodGroups by namespace/name; only a True PodGroupInitiallyScheduled condition counts.
    let groups: Vec<&str> = s.pod_groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(
        groups,
        [
            "allreduce",
            "checkpoint",
            "eval",
            "loader",
            "trainer",
            "trainer-workers-0",
            "trainer-workers-1",
            "urgent"
        ]
    );
    let scheduled: Vec<&str> = s
        .pod_groups
        .iter()
        .filter(|g| g.initially_scheduled)
        .map(|g| g.name.as_str())
        .collect();
    assert_eq!(scheduled, ["eval"], "allreduce's condition is False");
}
