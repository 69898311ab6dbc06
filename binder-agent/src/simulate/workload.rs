//! The workload of a run: a synthetic cluster or a recorded one read from `kubectl get -o json`.

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use placement_scheduler::grpc::convert;
use placement_scheduler::proto;
use placement_scheduler::synth::{self};

use crate::experiments::Owner;
use crate::projection::{self, PodInfo, TrackedObject};

use super::config::*;

/// First creation timestamp given to synthetic pending pods (ms since the epoch).
pub(super) const SYNTHETIC_EPOCH_MS: i64 = 1_767_225_600_000;

pub(super) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A synthetic workload replica (`{app}-{hash}-{suffix}` with a `pod-template-hash` label) is
/// owned by the ReplicaSet `{app}-{hash}`, as a Deployment's pods are.
pub(super) fn synthetic_owner(pod: &proto::Pod) -> Option<Owner> {
    let hash = pod.labels.get("pod-template-hash")?;
    let end = pod.name.find(&format!("-{hash}-"))? + hash.len() + 1;
    Some(Owner {
        kind: "ReplicaSet".into(),
        name: pod.name[..end].to_string(),
    })
}

impl Workload {
    /// Builds a synthetic cluster; pending pods name `scheduler_name` and arrive interleaved.
    pub fn synthetic(config: &SyntheticCluster, scheduler_name: &str) -> Self {
        let mut snapshot = synth::cluster(&config.shape, config.seed);
        let groups = config.pod_groups.as_ref().filter(|g| g.groups > 0);
        if let Some(key) = groups.and_then(|g| g.topology_key.as_deref().map(|k| (k, g.nodes_per_domain))) {
            label_domains(&mut snapshot.nodes, key.0, key.1);
        }
        let bound = snapshot
            .pods
            .into_iter()
            .map(|spec| PodInfo {
                spec,
                scheduler_name: scheduler_name.to_string(),
                created_ms: SYNTHETIC_EPOCH_MS,
                terminal: false,
                deleting: false,
                ..PodInfo::default()
            })
            .collect();
        let n = config.pending;
        let replicas = config.replicas_per_workload.max(1);
        let from_workloads = if replicas > 1 {
            ((n as f64 * config.workload_share.clamp(0.0, 1.0)).round() as usize).min(n)
        } else {
            0
        };
        let from_topology =
            ((n as f64 * config.topology_share.clamp(0.0, 1.0)).round() as usize).min(n - from_workloads);
        let mut specs = synth::distinct_pods(n - from_workloads - from_topology, config.seed);
        specs.extend(synth::topology_pods(from_topology, 8, mix(config.seed ^ 0x70_b0)));
        let mut workload = 0u64;
        let mut left = from_workloads;
        while left > 0 {
            let count = left.min(replicas);
            let template_seed = mix(config.seed ^ 0x51_7e_a1).wrapping_add(workload);
            specs.extend(synth::replica_pods(count, template_seed));
            left -= count;
            workload += 1;
        }
        // Interleave distinct pods and replicas deterministically, as arrivals would.
        specs.sort_by_key(|p| xxhash_rust::xxh3::xxh3_64_with_seed(p.uid.as_bytes(), config.seed));
        let mut seen = HashSet::new();
        specs.retain(|p| seen.insert(p.uid.clone()));
        // Each group's pods arrive together (as a Job's), the groups spread evenly over the rest.
        let mut storage = Vec::new();
        if let Some(g) = groups {
            let (objects, members) = synthetic_pod_groups(g, config.seed);
            storage.extend(objects.into_iter().map(TrackedObject::PodGroup));
            let others = std::mem::take(&mut specs);
            let n = others.len();
            let mut others = others.into_iter();
            let mut taken = 0;
            for (i, group) in members.into_iter().enumerate() {
                let upto = n * (i + 1) / (g.groups + 1);
                specs.extend(others.by_ref().take(upto - taken));
                taken = upto;
                specs.extend(group);
            }
            specs.extend(others);
        }
        let pending = specs
            .into_iter()
            .enumerate()
            .map(|(i, spec)| PodInfo {
                owner: synthetic_owner(&spec),
                spec,
                scheduler_name: scheduler_name.to_string(),
                created_ms: SYNTHETIC_EPOCH_MS + i as i64,
                terminal: false,
                deleting: false,
                ..PodInfo::default()
            })
            .collect();
        Self {
            nodes: snapshot.nodes,
            bound,
            pending,
            ignored: 0,
            pdbs: Vec::new(),
            storage,
        }
    }

    /// Reads `kubectl get nodes,pods -A -o json` (or `-o yaml`) output (a `v1 List` of Nodes and
    /// Pods; nested lists and `NodeList`/`PodList` are accepted too, and PodDisruptionBudgets,
    /// PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes, CSIDrivers,
    /// CSIStorageCapacities, DeviceClasses, ResourceClaims, ResourceClaimTemplates,
    /// ResourceSlices, DeviceTaintRules and PodGroups, as `kubectl get
    /// nodes,pods,pdb,pvc,pv,storageclass,csinode,csidriver,csistoragecapacity,deviceclass,resourceclaim,resourceclaimtemplate,resourceslice,devicetaintrule,podgroups
    /// -A -o json` lists them). Bound pods count against their nodes; unbound pods naming one of
    /// `scheduler_names` (or every unbound pod with `all_pending`) are pending, in creation order.
    /// A pending pod whose claim entry names a ResourceClaimTemplate and whose
    /// `status.resourceClaimStatuses` names no claim for it gets one generated from the template,
    /// as kube-controller-manager's resourceclaim controller makes it ([`template_claim`]).
    pub fn from_kubectl_json(text: &str, scheduler_names: &[String], all_pending: bool) -> Result<Self, SimError> {
        let value: serde_json::Value = match serde_json::from_str(text) {
            Ok(v) => v,
            // Not JSON: `kubectl get -o yaml` output.
            Err(json) => serde_saphyr::from_str(text)
                .map_err(|yaml| SimError::Json(format!("neither JSON ({json}) nor YAML ({yaml})")))?,
        };
        if !value.is_object() {
            return Err(SimError::Json(
                "expected a Kubernetes object or List (kubectl get -o json or -o yaml)".into(),
            ));
        }
        let ours = scheduler_names.first().cloned().unwrap_or_default();
        let mut w = Self::default();
        let mut templates = HashMap::new();
        w.collect(value, scheduler_names, &ours, all_pending, &mut templates)?;
        w.generate_template_claims(&templates)?;
        w.pending.sort_by_key(|p| p.created_ms);
        Ok(w)
    }

    /// kube's resourceclaim controller for the pending pods: each claim entry naming a template,
    /// without a claim in the pod's `status.resourceClaimStatuses`, gets its claim made from the
    /// template and recorded there.
    fn generate_template_claims(
        &mut self,
        templates: &HashMap<(String, String), ResourceClaimTemplate>,
    ) -> Result<(), SimError> {
        let mut generated = Vec::new();
        for pod in &mut self.pending {
            let (namespace, pod_name, pod_uid) =
                (pod.spec.namespace.clone(), pod.spec.name.clone(), pod.spec.uid.clone());
            for entry in &mut pod.spec.resource_claims {
                if entry.resource_claim_template_name.is_empty() || entry.generated_claim_name.is_some() {
                    continue;
                }
                let key = (namespace.clone(), entry.resource_claim_template_name.clone());
                let template = templates.get(&key).ok_or_else(|| {
                    SimError::Invalid(format!(
                        "pod {namespace}/{pod_name}: claim {:?} names ResourceClaimTemplate {namespace}/{}, which the file does \
                         not hold (add resourceclaimtemplates to the kubectl get)",
                        entry.name, entry.resource_claim_template_name
                    ))
                })?;
                let claim = template_claim(template, &namespace, &pod_name, &pod_uid, &entry.name);
                entry.generated_claim_name = claim.metadata.name.clone();
                generated.push(TrackedObject::ResourceClaim(projection::resource_claim_info(&claim)));
            }
        }
        self.storage.extend(generated);
        Ok(())
    }

    fn collect(
        &mut self,
        value: serde_json::Value,
        names: &[String],
        ours: &str,
        all_pending: bool,
        templates: &mut HashMap<(String, String), ResourceClaimTemplate>,
    ) -> Result<(), SimError> {
        let kind = value
            .get("kind")
            .and_then(|k| k.as_str())
            .unwrap_or_default()
            .to_string();
        match kind.as_str() {
            "Node" => {
                let node: k8s_openapi::api::core::v1::Node =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a Node: {e}")))?;
                self.nodes.push(projection::node_info(&node));
            }
            "PodDisruptionBudget" => {
                let pdb: k8s_openapi::api::policy::v1::PodDisruptionBudget =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a PodDisruptionBudget: {e}")))?;
                self.pdbs.push(projection::pdb_info(&pdb));
            }
            "PersistentVolumeClaim" => {
                let pvc: k8s_openapi::api::core::v1::PersistentVolumeClaim = serde_json::from_value(value)
                    .map_err(|e| SimError::Json(format!("a PersistentVolumeClaim: {e}")))?;
                self.storage.push(TrackedObject::Claim(projection::claim_info(&pvc)));
            }
            "PersistentVolume" => {
                let pv: k8s_openapi::api::core::v1::PersistentVolume =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a PersistentVolume: {e}")))?;
                self.storage.push(TrackedObject::Volume(projection::volume_info(&pv)));
            }
            "StorageClass" => {
                let sc: k8s_openapi::api::storage::v1::StorageClass =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a StorageClass: {e}")))?;
                self.storage
                    .push(TrackedObject::Class(projection::storage_class_info(&sc)));
            }
            "CSINode" => {
                let n: k8s_openapi::api::storage::v1::CSINode =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a CSINode: {e}")))?;
                self.storage.push(TrackedObject::CsiNode(projection::csi_node_info(&n)));
            }
            "CSIDriver" => {
                let d: k8s_openapi::api::storage::v1::CSIDriver =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a CSIDriver: {e}")))?;
                self.storage
                    .push(TrackedObject::CsiDriver(projection::csi_driver_info(&d)));
            }
            "CSIStorageCapacity" => {
                let c: k8s_openapi::api::storage::v1::CSIStorageCapacity =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a CSIStorageCapacity: {e}")))?;
                self.storage
                    .push(TrackedObject::Capacity(projection::storage_capacity_info(&c)));
            }
            "DeviceClass" => {
                let c: k8s_openapi::api::resource::v1::DeviceClass =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a DeviceClass: {e}")))?;
                self.storage
                    .push(TrackedObject::DeviceClass(projection::device_class_info(&c)));
            }
            "ResourceClaim" => {
                let c: k8s_openapi::api::resource::v1::ResourceClaim =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a ResourceClaim: {e}")))?;
                self.storage
                    .push(TrackedObject::ResourceClaim(projection::resource_claim_info(&c)));
            }
            "ResourceSlice" => {
                let s: k8s_openapi::api::resource::v1::ResourceSlice =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a ResourceSlice: {e}")))?;
                self.storage
                    .push(TrackedObject::ResourceSlice(projection::resource_slice_info(&s)));
            }
            "DeviceTaintRule" => {
                let r: k8s_openapi::api::resource::v1::DeviceTaintRule =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a DeviceTaintRule: {e}")))?;
                self.storage
                    .push(TrackedObject::DeviceTaintRule(projection::device_taint_rule_info(&r)));
            }
            "PodGroup" => {
                let g: k8s_openapi::api::scheduling::v1beta1::PodGroup =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a PodGroup: {e}")))?;
                self.storage
                    .push(TrackedObject::PodGroup(projection::pod_group_info(&g)));
            }
            "ResourceClaimTemplate" => {
                let t: ResourceClaimTemplate = serde_json::from_value(value)
                    .map_err(|e| SimError::Json(format!("a ResourceClaimTemplate: {e}")))?;
                let key = (
                    t.metadata.namespace.clone().unwrap_or_default(),
                    t.metadata.name.clone().unwrap_or_default(),
                );
                templates.insert(key, t);
            }
            "Pod" => {
                let pod: k8s_openapi::api::core::v1::Pod =
                    serde_json::from_value(value).map_err(|e| SimError::Json(format!("a Pod: {e}")))?;
                let mut info = projection::pod_info(&pod);
                if info.spec.uid.is_empty() {
                    info.spec.uid = info.key();
                }
                if info.terminal {
                    self.ignored += 1;
                } else if info.node_name().is_some() {
                    self.bound.push(info);
                } else if info.deleting || !(all_pending || names.contains(&info.scheduler_name)) {
                    self.ignored += 1;
                } else {
                    info.scheduler_name = ours.to_string();
                    self.pending.push(info);
                }
            }
            _ => match value.get("items").and_then(|i| i.as_array()) {
                Some(items) => {
                    let list_kind = kind.strip_suffix("List").filter(|k| !k.is_empty()).map(str::to_string);
                    for mut item in items.clone() {
                        if let (Some(k), Some(obj)) = (&list_kind, item.as_object_mut()) {
                            obj.entry("kind")
                                .or_insert_with(|| serde_json::Value::String(k.clone()));
                        }
                        self.collect(item, names, ours, all_pending, templates)?;
                    }
                }
                None => self.ignored += 1,
            },
        }
        Ok(())
    }

    /// Checks what the decision service would refuse in a snapshot: invalid nodes or bound pods,
    /// duplicate node names or pod uids.
    pub fn validate(&self) -> Result<(), SimError> {
        let mut names = HashSet::new();
        for (i, n) in self.nodes.iter().enumerate() {
            convert::node(&format!("nodes[{i}]"), n).map_err(|e| SimError::Invalid(e.to_string()))?;
            if !names.insert(n.name.as_str()) {
                return Err(SimError::Invalid(format!("duplicate node name {:?}", n.name)));
            }
        }
        let mut uids = HashSet::new();
        for (i, p) in self.bound.iter().enumerate() {
            convert::pod(&format!("bound[{i}]"), &p.spec).map_err(|e| SimError::Invalid(e.to_string()))?;
            if !uids.insert(p.spec.uid.as_str()) {
                return Err(SimError::Invalid(format!("duplicate pod uid {:?}", p.spec.uid)));
            }
        }
        for p in &self.pending {
            if !uids.insert(p.spec.uid.as_str()) {
                return Err(SimError::Invalid(format!("duplicate pod uid {:?}", p.spec.uid)));
            }
        }
        // As a full snapshot carries them: each valid, none twice.
        let mut snapshot = proto::Snapshot::default();
        for o in &self.storage {
            o.clone().push_into(&mut snapshot);
        }
        let parts = convert::storage("storage", &snapshot).map_err(|e| SimError::Invalid(e.to_string()))?;
        placement_scheduler::engine::volumes::StorageObjects::from_parts(parts)
            .map_err(|e| SimError::Invalid(format!("{} {:?} appears twice", e.kind, e.key)))?;
        let devices = convert::devices("storage", &snapshot).map_err(|e| SimError::Invalid(e.to_string()))?;
        placement_scheduler::engine::devices::DeviceObjects::from_parts(devices)
            .map_err(|e| SimError::Invalid(format!("{} {:?} appears twice", e.kind, e.key)))?;
        let groups = convert::pod_groups("storage", &snapshot).map_err(|e| SimError::Invalid(e.to_string()))?;
        let mut keys = HashSet::new();
        for g in &groups {
            if !keys.insert(g.key()) {
                return Err(SimError::Invalid(format!("PodGroup {:?} appears twice", g.key())));
            }
        }
        // A pending pod whose claim is missing would wait for it (kube's PreEnqueue) until the
        // run times out: say so now.
        let claims: HashSet<(&str, &str)> = snapshot
            .resource_claims
            .iter()
            .map(|c| (c.namespace.as_str(), c.name.as_str()))
            .collect();
        for p in &self.pending {
            for c in &p.spec.resource_claims {
                let name = match (c.resource_claim_name.as_str(), c.generated_claim_name.as_deref()) {
                    ("", Some("")) => continue,
                    ("", Some(generated)) => generated,
                    ("", None) => c.resource_claim_template_name.as_str(),
                    (named, _) => named,
                };
                if !claims.contains(&(p.spec.namespace.as_str(), name)) {
                    return Err(SimError::Invalid(format!(
                        "pod {}: its claim {:?} needs ResourceClaim {}/{name}, which the file does not hold (add \
                         resourceclaims to the kubectl get)",
                        p.key(),
                        c.name,
                        p.spec.namespace
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Namespace of the synthetic PodGroups and their pods.
pub const POD_GROUP_NAMESPACE: &str = "training";

/// Priority of the synthetic PodGroups and their pods: the synthetic workload's highest, so that
/// no other pending pod preempts a group's member (a PodGroup's pods share its priority).
const POD_GROUP_PRIORITY: i32 = 1000;

/// Labels the nodes that lack `key` with domains of `per_domain` nodes each, in node order:
/// `<last segment of the key>-<n>` (`rack-0003` for `rack` or `example.com/rack`).
pub fn label_domains(nodes: &mut [proto::Node], key: &str, per_domain: usize) {
    let prefix = key.rsplit('/').next().filter(|p| !p.is_empty()).unwrap_or("domain");
    let per_domain = per_domain.max(1);
    let mut i = 0usize;
    for n in nodes.iter_mut() {
        if n.labels.contains_key(key) {
            continue;
        }
        n.labels
            .insert(key.to_string(), format!("{prefix}-{:04}", i / per_domain));
        i += 1;
    }
}

/// The size of group `g` in `min..=max`, spread deterministically.
fn group_size(size: (usize, usize), seed: u64, g: usize) -> usize {
    let (lo, hi) = (size.0.max(1), size.1.max(size.0.max(1)));
    lo + (mix(seed ^ 0x9_0d_9a ^ (g as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)) % (hi - lo + 1) as u64) as usize
}

/// The PodGroups of `config` and each one's pods: group `g` is `job-<g>` in
/// [`POD_GROUP_NAMESPACE`], a gang of minCount its size (with the topology key when given), its
/// pods `job-<g>-<i>` asking the same cpu and memory (one of a few sizes per group) and naming it
/// in `spec.schedulingGroup`, all of priority 1000.
pub fn synthetic_pod_groups(config: &SyntheticPodGroups, seed: u64) -> (Vec<proto::PodGroup>, Vec<Vec<proto::Pod>>) {
    const CPU: [&str; 4] = ["500m", "1", "2", "4"];
    const MEMORY: [&str; 4] = ["1Gi", "2Gi", "4Gi", "8Gi"];
    let (mut groups, mut members) = (Vec::new(), Vec::new());
    for g in 0..config.groups {
        let size = group_size(config.size, seed, g);
        let name = format!("job-{g:04}");
        let h = mix(seed ^ 0x51_2e ^ g as u64);
        let (cpu, memory) = (CPU[(h % 4) as usize], MEMORY[((h >> 8) % 4) as usize]);
        groups.push(proto::PodGroup {
            namespace: POD_GROUP_NAMESPACE.into(),
            name: name.clone(),
            uid: format!("pg-{:016x}-{g}", mix(seed)),
            generation: 1,
            gang: Some(proto::GangSchedulingPolicy {
                min_count: size.min(i32::MAX as usize) as i32,
            }),
            topology_keys: config.topology_key.iter().cloned().collect(),
            priority: Some(POD_GROUP_PRIORITY),
            ..Default::default()
        });
        members.push(
            (0..size)
                .map(|i| proto::Pod {
                    uid: format!("pg-{:016x}-{g}-{i}", mix(seed)),
                    namespace: POD_GROUP_NAMESPACE.into(),
                    name: format!("{name}-{i}"),
                    labels: [("job".to_string(), name.clone())].into(),
                    priority: POD_GROUP_PRIORITY,
                    scheduling_group: name.clone(),
                    containers: vec![proto::Container {
                        name: "worker".into(),
                        requests: [
                            ("cpu".to_string(), cpu.to_string()),
                            ("memory".to_string(), memory.to_string()),
                        ]
                        .into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                })
                .collect(),
        );
    }
    (groups, members)
}

/// PodGroups whose pods the binder would hold for ever, as kube-scheduler's GangScheduling
/// PreEnqueue holds them: the PodGroup does not exist, or fewer of its pods exist than minCount.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeldGroups {
    /// `namespace/name` of each such group and why it is held, in name order.
    pub groups: Vec<(String, String)>,
    /// Their pending pods (left out of the run).
    pub pods: usize,
}

impl Workload {
    /// Takes the pending pods of PodGroups the binder would hold for ever out of `pending` (they
    /// would wait, writing nothing, until the run times out): the PodGroup is not in `storage`,
    /// or its pending and bound pods number fewer than its minCount. A pod with placement's gang
    /// label is a gang member, whatever group it names (as the binder reads it).
    pub fn take_held_groups(&mut self) -> HeldGroups {
        let mut min_counts: HashMap<String, u32> = HashMap::new();
        for o in &self.storage {
            if let TrackedObject::PodGroup(g) = o {
                let min = g.gang.as_ref().map_or(1, |gang| gang.min_count.max(1) as u32);
                min_counts.insert(format!("{}/{}", g.namespace, g.name), min);
            }
        }
        let key = |p: &proto::Pod| {
            (p.gang.is_none() && !p.scheduling_group.is_empty())
                .then(|| format!("{}/{}", p.namespace, p.scheduling_group))
        };
        // Pods per group with a pending pod: (pending, bound).
        let mut pods: HashMap<String, (usize, usize)> = HashMap::new();
        for p in &self.pending {
            if let Some(k) = key(&p.spec) {
                pods.entry(k).or_default().0 += 1;
            }
        }
        for p in &self.bound {
            if let Some(n) = key(&p.spec).and_then(|k| pods.get_mut(&k)) {
                n.1 += 1;
            }
        }
        let mut held: Vec<(String, String)> = pods
            .iter()
            .map(|(k, (pending, bound))| (k, pending + bound))
            .filter_map(|(k, n)| match min_counts.get(k) {
                None => Some((k.clone(), "no such PodGroup".to_string())),
                Some(&min) if n < min as usize => Some((k.clone(), format!("{n} of minCount {min} pods exist"))),
                Some(_) => None,
            })
            .collect();
        held.sort();
        let held_keys: HashSet<&str> = held.iter().map(|(k, _)| k.as_str()).collect();
        let before = self.pending.len();
        self.pending
            .retain(|p| key(&p.spec).is_none_or(|k| !held_keys.contains(k.as_str())));
        HeldGroups {
            pods: before - self.pending.len(),
            groups: held,
        }
    }
}

/// The characters of the API server's generated name suffixes (`utilrand.String`).
pub(super) const NAME_SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The ResourceClaim kube's resourceclaim controller (`pkg/controller/resourceclaim`,
/// `handleClaim`) makes for the claim entry `claim_name` of pod `namespace/pod_name` from
/// `template`: the template's labels, annotations and spec, the annotation
/// `resource.kubernetes.io/pod-claim-name`, the pod as controlling owner, and the name the API
/// server generates from `<pod>-<claim name>-` (both parts shortened in proportion past 57
/// characters, as the controller shortens them), with a suffix of five of the API server's name
/// characters derived from the pod and the entry (deterministic, where the API server's is random).
pub fn template_claim(
    template: &ResourceClaimTemplate,
    namespace: &str,
    pod_name: &str,
    pod_uid: &str,
    claim_name: &str,
) -> ResourceClaim {
    let mut base = format!("{pod_name}-{claim_name}-");
    const MAX_BASE_LEN: usize = 57;
    if base.len() > MAX_BASE_LEN {
        let total = base.len();
        let cut = |s: &str| -> String {
            let keep = s.len() * MAX_BASE_LEN / total;
            s.char_indices()
                .take_while(|(i, c)| i + c.len_utf8() <= keep)
                .map(|(_, c)| c)
                .collect()
        };
        base = format!("{}-{}", cut(pod_name), cut(claim_name));
    }
    let mut h = xxhash_rust::xxh3::xxh3_64(format!("{namespace}/{pod_name}/{pod_uid}/{claim_name}").as_bytes());
    let suffix: String = (0..5)
        .map(|_| {
            let c = NAME_SUFFIX_ALPHABET[(h % NAME_SUFFIX_ALPHABET.len() as u64) as usize];
            h /= NAME_SUFFIX_ALPHABET.len() as u64;
            c as char
        })
        .collect();
    let name = format!("{base}{suffix}");
    let spec = template.spec.as_ref();
    let meta = spec.and_then(|s| s.metadata.clone()).unwrap_or_default();
    let mut annotations = meta.annotations.unwrap_or_default();
    annotations.insert("resource.kubernetes.io/pod-claim-name".into(), claim_name.into());
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.into()),
            uid: Some(format!("simulated-{namespace}-{name}")),
            labels: meta.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: pod_name.into(),
                uid: pod_uid.into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        spec: spec.and_then(|s| s.spec.clone()),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template() -> ResourceClaimTemplate {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpus", "namespace": "shop"},
            "spec": {"metadata": {"labels": {"team": "ml"}, "annotations": {"note": "x"}},
                     "spec": {"devices": {"requests": [{"name": "gpu",
                        "exactly": {"deviceClassName": "gpu.example.com", "count": 2}}]}}}
        }))
        .unwrap()
    }

    /// As kube's resourceclaim controller makes it: `<pod>-<claim>-` and five name characters,
    /// the template's metadata and spec, the pod-claim-name annotation, the pod as controller.
    #[test]
    fn a_template_claim_is_named_and_made_as_the_resourceclaim_controller_makes_it() {
        let c = template_claim(&template(), "shop", "trainer", "uid-trainer", "gpu");
        let name = c.metadata.name.clone().unwrap();
        let suffix = name.strip_prefix("trainer-gpu-").unwrap_or_else(|| panic!("{name}"));
        assert_eq!(suffix.len(), 5);
        assert!(suffix.bytes().all(|b| NAME_SUFFIX_ALPHABET.contains(&b)), "{name}");
        assert_eq!(c.metadata.namespace.as_deref(), Some("shop"));
        assert_eq!(c.metadata.labels.as_ref().unwrap()["team"], "ml");
        let annotations = c.metadata.annotations.as_ref().unwrap();
        assert_eq!(annotations["note"], "x");
        assert_eq!(annotations["resource.kubernetes.io/pod-claim-name"], "gpu");
        let owner = &c.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.name.as_str(),
                owner.uid.as_str(),
                owner.controller
            ),
            ("Pod", "trainer", "uid-trainer", Some(true))
        );
        assert_eq!(c.spec, template().spec.unwrap().spec);
        // Another pod or entry, another suffix; the same, the same.
        let again = template_claim(&template(), "shop", "trainer", "uid-trainer", "gpu");
        assert_eq!(again.metadata.name, c.metadata.name);
        let other = template_claim(&template(), "shop", "trainer-2", "uid-trainer-2", "gpu");
        assert_ne!(other.metadata.name.unwrap()[10..], name[10..]);
    }

    #[test]
    fn domains_label_the_nodes_without_the_key_in_runs_of_n() {
        let node = |name: &str, labels: &[(&str, &str)]| proto::Node {
            name: name.into(),
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..Default::default()
        };
        let mut nodes = vec![
            node("a", &[]),
            node("b", &[("example.com/rack", "mine")]),
            node("c", &[]),
            node("d", &[]),
        ];
        label_domains(&mut nodes, "example.com/rack", 2);
        let racks: Vec<&str> = nodes.iter().map(|n| n.labels["example.com/rack"].as_str()).collect();
        assert_eq!(racks, ["rack-0000", "mine", "rack-0000", "rack-0001"]);
    }

    #[test]
    fn synthetic_groups_are_gangs_of_their_size_whose_pods_name_them() {
        let config = SyntheticPodGroups {
            groups: 30,
            size: (4, 9),
            topology_key: Some("rack".into()),
            nodes_per_domain: 20,
        };
        let (groups, members) = synthetic_pod_groups(&config, 3);
        assert_eq!((groups.len(), members.len()), (30, 30));
        let mut sizes = std::collections::BTreeSet::new();
        for (g, pods) in groups.iter().zip(&members) {
            assert!((4..=9).contains(&pods.len()), "{}", pods.len());
            sizes.insert(pods.len());
            assert_eq!(g.gang.as_ref().map(|g| g.min_count as usize), Some(pods.len()));
            assert_eq!(g.topology_keys, ["rack"]);
            assert!(pods
                .iter()
                .all(|p| p.scheduling_group == g.name && p.namespace == g.namespace && Some(p.priority) == g.priority));
        }
        assert!(sizes.len() > 3, "sizes spread over the range: {sizes:?}");
        assert_eq!(synthetic_pod_groups(&config, 3), (groups, members), "deterministic");
    }

    fn group_pod(name: &str, group: &str, node: Option<&str>) -> PodInfo {
        PodInfo {
            spec: proto::Pod {
                uid: name.into(),
                name: name.into(),
                namespace: "ml".into(),
                scheduling_group: group.into(),
                node_name: node.unwrap_or_default().into(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// A group short of minCount (bound pods counted) or without its PodGroup is held; a complete
    /// one and pods of no group are not.
    #[test]
    fn groups_the_binder_would_hold_for_ever_are_taken_out() {
        let group = |name: &str, min_count: i32| {
            TrackedObject::PodGroup(proto::PodGroup {
                namespace: "ml".into(),
                name: name.into(),
                gang: Some(proto::GangSchedulingPolicy { min_count }),
                ..Default::default()
            })
        };
        let mut w = Workload {
            bound: vec![group_pod("done-0", "done", Some("n1"))],
            pending: vec![
                group_pod("done-1", "done", None),
                group_pod("short-0", "short", None),
                group_pod("orphan-0", "orphan", None),
                group_pod("plain", "", None),
            ],
            storage: vec![group("done", 2), group("short", 2)],
            ..Workload::default()
        };
        let held = w.take_held_groups();
        assert_eq!(
            held.groups,
            [
                ("ml/orphan".to_string(), "no such PodGroup".to_string()),
                ("ml/short".to_string(), "1 of minCount 2 pods exist".to_string()),
            ]
        );
        assert_eq!(held.pods, 2);
        let left: Vec<&str> = w.pending.iter().map(|p| p.spec.name.as_str()).collect();
        assert_eq!(left, ["done-1", "plain"]);
    }

    /// Past 57 characters both names are shortened in proportion, without the trailing hyphen
    /// (kube's controller code), and the API server's suffix follows.
    #[test]
    fn long_names_are_shortened_in_proportion() {
        let pod = "p".repeat(40);
        let claim = "c".repeat(30);
        let c = template_claim(&template(), "shop", &pod, "uid", &claim);
        let name = c.metadata.name.unwrap();
        // "<pod>-<claim>-" is 72 characters: 40 * 57 / 72 = 31 and 30 * 57 / 72 = 23 are kept.
        assert!(
            name.starts_with(&format!("{}-{}", "p".repeat(31), "c".repeat(23))),
            "{name}"
        );
        assert_eq!(name.len(), 31 + 1 + 23 + 5, "{name}");
    }
}
