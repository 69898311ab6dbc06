//! What the bench's pods ask for (`cluster-bench run --workload`): plain pods (the default), pods
//! that each claim devices through DRA, or gang PodGroups confined to a rack. For each: what it
//! puts on the cluster and in each contender's namespace, the raw contender's plan (the same
//! writes as a scheduler, decided by a trivial rule), and the checks of what was bound.
//!
//! - `dra`: every node gets an admin-written `resource.k8s.io/v1` ResourceSlice of
//!   `--devices-per-node` GPU-like devices of a made-up driver `<prefix>.gpu.example.com`
//!   (attributes `model`, `numa`; capacity `memory` 80Gi; `model` h100 on every fourth node, a100
//!   elsewhere) and a DeviceClass `<prefix>-gpu` selects the driver with CEL. Pod `i` takes one
//!   claim made by kube-controller-manager's resourceclaim controller from one of eight
//!   ResourceClaimTemplates: `(i / 4) % 4 + 1` devices of model h100 when `i % 4 == 3`, a100
//!   otherwise, with a CEL selector on the model and the memory. The contender starts once every
//!   claim exists, so the controller's pace is setup time, not the contender's.
//! - `podgroups`: nodes labelled `rack` (`--rack-nodes` nodes per rack) and `--groups` PodGroups
//!   (`scheduling.k8s.io/v1beta1`) of 8 to 64 pods (`8 + (g * 37) % 57`, as the engine bench), each
//!   a gang with `minCount` its size and `schedulingConstraints.topology: [{key: rack}]`, its pods
//!   naming it in `spec.schedulingGroup.podGroupName`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use clap::ValueEnum;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The finalizer kube-scheduler's DynamicResources PreBind puts on a claim it allocates.
const CLAIM_FINALIZER: &str = "resource.kubernetes.io/delete-protection";
/// The pod's claim entry (and each claim's request) name.
const CLAIM: &str = "gpu";
/// Node label of the `podgroups` workload's racks, the PodGroups' topology key.
pub const RACK_LABEL: &str = "rack";
/// Device models: every fourth node has h100s, the others a100s.
const MODELS: [&str; 2] = ["a100", "h100"];

/// What each bench pod asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// One container requesting 100m CPU and 128Mi.
    Plain,
    /// The same plus one ResourceClaim (from a ResourceClaimTemplate) of 1 to 4 devices.
    Dra,
    /// The same pods in gang PodGroups of 8 to 64 pods, each group confined to one rack.
    Podgroups,
}

/// The size of the run, as `cluster-bench run`'s flags give it.
#[derive(Debug, Clone)]
pub struct Shape {
    pub workload: Workload,
    pub prefix: String,
    pub nodes: usize,
    /// Pods per contender (`podgroups`: the groups' members).
    pub pods: usize,
    pub devices_per_node: usize,
    pub groups: usize,
    pub rack_nodes: usize,
}

/// One pod of a contender's backlog.
#[derive(Debug, Clone)]
pub struct BenchPod {
    pub name: String,
    /// `podgroups`: the index of its group.
    pub group: Option<usize>,
    /// `dra`: the model and count its claim asks for.
    pub claim: Option<(&'static str, usize)>,
}

/// The members of PodGroup `g`: 8 to 64.
pub fn group_size(g: usize) -> usize {
    8 + (g * 37) % 57
}

fn group_name(g: usize) -> String {
    format!("g-{g:04}")
}

/// The model of node `n`'s devices.
fn node_model(n: usize) -> &'static str {
    MODELS[usize::from(n % 4 == 3)]
}

/// The model and device count of pod `i`'s claim.
fn pod_claim(i: usize) -> (&'static str, usize) {
    (MODELS[usize::from(i % 4 == 3)], (i / 4) % 4 + 1)
}

fn template_name(model: &str, count: usize) -> String {
    format!("gpu-{model}-{count}")
}

impl Shape {
    /// The made-up DRA driver of this run's devices.
    pub fn driver(&self) -> String {
        format!("{}.gpu.example.com", self.prefix)
    }

    /// The DeviceClass selecting the driver.
    pub fn device_class(&self) -> String {
        format!("{}-gpu", self.prefix)
    }

    pub fn racks(&self) -> usize {
        self.nodes.div_ceil(self.rack_nodes.max(1))
    }

    /// The rack of node `n`.
    pub fn rack(&self, n: usize) -> String {
        format!("rack-{:03}", n / self.rack_nodes.max(1))
    }

    /// Labels node `n` gets beyond the bench's own.
    pub fn node_labels(&self, n: usize) -> Vec<(&'static str, String)> {
        match self.workload {
            Workload::Podgroups => vec![(RACK_LABEL, self.rack(n))],
            Workload::Plain | Workload::Dra => Vec::new(),
        }
    }

    /// A contender's pods, in creation order (`plain` and `dra`: `p-00000`…; `podgroups`:
    /// `g-0000-00`…, group by group).
    pub fn pods(&self) -> Vec<BenchPod> {
        match self.workload {
            Workload::Plain | Workload::Dra => (0..self.pods)
                .map(|i| BenchPod {
                    name: format!("p-{i:05}"),
                    group: None,
                    claim: (self.workload == Workload::Dra).then(|| pod_claim(i)),
                })
                .collect(),
            Workload::Podgroups => (0..self.groups)
                .flat_map(|g| {
                    (0..group_size(g)).map(move |i| BenchPod {
                        name: format!("{}-{i:02}", group_name(g)),
                        group: Some(g),
                        claim: None,
                    })
                })
                .collect(),
        }
    }

    /// Checks that the run can hold its pods; `pods` per contender.
    pub fn validate(&self) -> anyhow::Result<()> {
        match self.workload {
            Workload::Plain => {}
            Workload::Dra => {
                ensure!(
                    self.devices_per_node >= 4,
                    "--devices-per-node: at least 4 (claims ask up to 4)"
                );
                ensure!(
                    self.driver().len() <= 63,
                    "--prefix: too long for the driver name {}",
                    self.driver()
                );
                // Per model, what the pods ask against what the nodes have: the raw contender's
                // plan (first fit) must find room, with margin for the schedulers' choices.
                for model in MODELS {
                    let have = (0..self.nodes).filter(|&n| node_model(n) == model).count() * self.devices_per_node;
                    let want: usize = (0..self.pods)
                        .map(pod_claim)
                        .filter(|(pm, _)| *pm == model)
                        .map(|(_, c)| c)
                        .sum();
                    ensure!(
                        want * 10 <= have * 8,
                        "--workload dra: {} pods ask {want} {model} devices; the {} nodes have {have} \
                         (at most 80% may be asked: fewer --pods or more --nodes)",
                        self.pods,
                        self.nodes
                    );
                }
            }
            Workload::Podgroups => {
                ensure!(self.groups > 0, "--groups: at least 1");
                ensure!(self.rack_nodes > 0, "--rack-nodes: at least 1");
                ensure!(
                    self.nodes >= self.rack_nodes,
                    "--workload podgroups: fewer --nodes than one rack of --rack-nodes"
                );
                // Each rack must hold the largest group (110 pods per node).
                ensure!(
                    self.rack_nodes * 110 >= 64,
                    "--rack-nodes: a rack must hold a group of 64 pods"
                );
            }
        }
        Ok(())
    }

    /// `None` when the API server serves what the workload needs, else what is missing.
    pub async fn unserved(&self, client: &Client) -> anyhow::Result<Option<String>> {
        let (path, resource, hint) = match self.workload {
            Workload::Plain => return Ok(None),
            Workload::Dra => ("/apis/resource.k8s.io/v1", "resourceclaims", "Kubernetes 1.34 or later"),
            Workload::Podgroups => (
                "/apis/scheduling.k8s.io/v1beta1",
                "podgroups",
                "the Workload API: ../shared/k8s/cluster.sh up --workload-api",
            ),
        };
        let req = http::Request::get(path).body(Vec::new())?;
        let served = match client.request_text(req).await {
            Ok(text) => text.contains(&format!("\"name\":\"{resource}\"")),
            Err(kube::Error::Api(s)) if s.code == 404 => false,
            Err(e) => return Err(anyhow::Error::new(e).context(format!("reading {path}"))),
        };
        Ok((!served).then(|| format!("the API server serves no {path} {resource} ({hint})")))
    }

    /// Cluster-wide objects of the workload (`dra`: the DeviceClass and a ResourceSlice per
    /// node); existing ones are kept.
    pub async fn set_up_cluster(
        &self,
        client: &Client,
        node_name: impl Fn(usize) -> String,
        concurrency: usize,
    ) -> anyhow::Result<()> {
        if self.workload != Workload::Dra {
            return Ok(());
        }
        let driver = self.driver();
        let class: DeviceClass = serde_json::from_value(json!({
            "metadata": {"name": self.device_class(), "labels": {crate::NODE_LABEL: self.prefix}},
            "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{driver}\"")}}]}
        }))?;
        create_or_keep(&Api::all(client.clone()), &class, "DeviceClass").await?;
        let slices: Api<ResourceSlice> = Api::all(client.clone());
        futures::stream::iter(0..self.nodes)
            .map(|n| {
                let (slices, driver, node) = (slices.clone(), &driver, node_name(n));
                async move {
                    let devices: Vec<Value> = (0..self.devices_per_node)
                        .map(|d| {
                            json!({
                                "name": format!("gpu-{d}"),
                                "attributes": {
                                    "model": {"string": node_model(n)},
                                    "numa": {"int": d / 4}
                                },
                                "capacity": {"memory": {"value": "80Gi"}}
                            })
                        })
                        .collect();
                    let slice: ResourceSlice = serde_json::from_value(json!({
                        "metadata": {"name": format!("{node}-gpus"), "labels": {crate::NODE_LABEL: self.prefix}},
                        "spec": {
                            "driver": driver,
                            "nodeName": node,
                            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                            "devices": devices
                        }
                    }))?;
                    create_or_keep(&slices, &slice, "ResourceSlice").await
                }
            })
            .buffer_unordered(concurrency.max(1))
            .try_collect::<()>()
            .await
    }

    /// Deletes what [`Shape::set_up_cluster`] made.
    pub async fn tear_down_cluster(&self, client: &Client) -> anyhow::Result<()> {
        if self.workload != Workload::Dra {
            return Ok(());
        }
        let by_label = ListParams::default().labels(&format!("{}={}", crate::NODE_LABEL, self.prefix));
        let slices: Api<ResourceSlice> = Api::all(client.clone());
        slices.delete_collection(&DeleteParams::default(), &by_label).await?;
        let classes: Api<DeviceClass> = Api::all(client.clone());
        classes.delete_collection(&DeleteParams::default(), &by_label).await?;
        Ok(())
    }

    /// Objects a contender's namespace needs before its pods (`dra`: the ResourceClaimTemplates;
    /// `podgroups`: the PodGroups).
    pub async fn set_up_namespace(&self, client: &Client, ns: &str, concurrency: usize) -> anyhow::Result<()> {
        match self.workload {
            Workload::Plain => Ok(()),
            Workload::Dra => {
                let templates: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), ns);
                let driver = self.driver();
                for model in MODELS {
                    for count in 1..=4 {
                        let template: ResourceClaimTemplate = serde_json::from_value(json!({
                            "metadata": {"name": template_name(model, count)},
                            "spec": {
                                "metadata": {"labels": {"bench-model": model, "bench-count": count.to_string()}},
                                "spec": {"devices": {"requests": [{
                                    "name": CLAIM,
                                    "exactly": {
                                        "deviceClassName": self.device_class(),
                                        "selectors": [{"cel": {"expression": format!(
                                            "device.attributes[\"{driver}\"].model == \"{model}\" && \
                                             device.capacity[\"{driver}\"].memory.compareTo(quantity(\"40Gi\")) >= 0"
                                        )}}],
                                        "count": count
                                    }
                                }]}}
                            }
                        }))?;
                        create_or_keep(&templates, &template, "ResourceClaimTemplate").await?;
                    }
                }
                Ok(())
            }
            Workload::Podgroups => {
                let groups: Api<PodGroup> = Api::namespaced(client.clone(), ns);
                futures::stream::iter(0..self.groups)
                    .map(|g| {
                        let groups = groups.clone();
                        async move {
                            let group: PodGroup = serde_json::from_value(json!({
                                "metadata": {"name": group_name(g)},
                                "spec": {
                                    "schedulingPolicy": {"gang": {"minCount": group_size(g)}},
                                    "schedulingConstraints": {"topology": [{"key": RACK_LABEL}]}
                                }
                            }))?;
                            groups
                                .create(&PostParams::default(), &group)
                                .await
                                .with_context(|| format!("creating PodGroup {ns}/{}", group_name(g)))?;
                            Ok::<_, anyhow::Error>(())
                        }
                    })
                    .buffer_unordered(concurrency.max(1))
                    .try_collect::<()>()
                    .await
            }
        }
    }

    /// Adds what the workload asks for to a plain bench pod.
    pub fn decorate(&self, p: &BenchPod, pod: &mut Value) {
        if let Some((model, count)) = p.claim {
            pod["spec"]["resourceClaims"] =
                json!([{"name": CLAIM, "resourceClaimTemplateName": template_name(model, count)}]);
            pod["spec"]["containers"][0]["resources"]["claims"] = json!([{"name": CLAIM}]);
        }
        if let Some(g) = p.group {
            pod["spec"]["schedulingGroup"] = json!({"podGroupName": group_name(g)});
        }
    }

    /// `dra`: waits until kube-controller-manager's resourceclaim controller has made every pod's
    /// claim and recorded it in the pod's `status.resourceClaimStatuses` (kube-scheduler's and the
    /// binder's PreEnqueue wait for that); answers each pod's claim name.
    pub async fn await_claims(&self, client: &Client, ns: &str) -> anyhow::Result<HashMap<String, String>> {
        if self.workload != Workload::Dra {
            return Ok(HashMap::new());
        }
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), ns);
        let mut progress = (Instant::now(), 0);
        loop {
            let existing: HashSet<String> = claims
                .list_metadata(&ListParams::default())
                .await?
                .items
                .into_iter()
                .filter_map(|c| c.metadata.name)
                .collect();
            let named: HashMap<String, String> = list_all(&pods)
                .await?
                .into_iter()
                .filter_map(|p| {
                    let claim = p
                        .status?
                        .resource_claim_statuses?
                        .into_iter()
                        .find(|s| s.name == CLAIM)?
                        .resource_claim_name?;
                    Some((p.metadata.name?, claim))
                })
                .filter(|(_, c)| existing.contains(c))
                .collect();
            if named.len() >= self.pods {
                return Ok(named);
            }
            if named.len() > progress.1 {
                progress = (Instant::now(), named.len());
            }
            ensure!(
                progress.0.elapsed() < Duration::from_secs(60),
                "{ns}: {} of {} pods have their ResourceClaim, none more for 60 s: is kube-controller-manager's \
                 resourceclaim controller running (../shared/k8s/cluster.sh up --controller-manager)?",
                named.len(),
                self.pods
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// The raw contenders' plan: each pod's node and (`dra`) devices, by a trivial rule that
    /// breaks none of the checks: `dra`: first fit from a per-model cursor that moves on after
    /// each pod (so pods spread as pod i → node i mod N does); `podgroups`: group g in rack
    /// g mod racks, its members round-robin over the rack's nodes. `None` for `plain` (pod i →
    /// node i mod N).
    pub fn raw_plan(
        &self,
        node_name: impl Fn(usize) -> String,
        claims: &HashMap<String, String>,
    ) -> anyhow::Result<Option<Vec<PlanEntry>>> {
        let pods = self.pods();
        match self.workload {
            Workload::Plain => Ok(None),
            Workload::Dra => {
                let mut used = vec![0usize; self.nodes];
                let mut cursor: HashMap<&str, usize> = HashMap::new();
                let driver = self.driver();
                let mut plan = Vec::with_capacity(pods.len());
                for p in &pods {
                    let (model, count) = p.claim.context("a dra pod without a claim")?;
                    let start = cursor.get(model).copied().unwrap_or(0);
                    let node = (0..self.nodes)
                        .map(|k| (start + k) % self.nodes)
                        .find(|&n| node_model(n) == model && used[n] + count <= self.devices_per_node)
                        .with_context(|| {
                            format!("raw plan: no node has {count} free {model} devices for {}", p.name)
                        })?;
                    cursor.insert(model, node + 1);
                    let devices = (used[node]..used[node] + count).map(|d| format!("gpu-{d}")).collect();
                    used[node] += count;
                    let name = node_name(node);
                    plan.push(PlanEntry {
                        pod: p.name.clone(),
                        node: name.clone(),
                        claim: Some(PlannedClaim {
                            name: claims
                                .get(&p.name)
                                .with_context(|| format!("raw plan: no claim for pod {}", p.name))?
                                .clone(),
                            driver: driver.clone(),
                            pool: name,
                            devices,
                        }),
                    });
                }
                Ok(Some(plan))
            }
            Workload::Podgroups => {
                let racks = self.racks();
                let mut cursor = vec![0usize; racks];
                let mut on_node = vec![0usize; self.nodes];
                let mut plan = Vec::with_capacity(pods.len());
                for p in &pods {
                    let rack = p.group.context("a podgroups pod without a group")? % racks;
                    let first = rack * self.rack_nodes;
                    let len = self.rack_nodes.min(self.nodes - first);
                    let node = first + cursor[rack] % len;
                    cursor[rack] += 1;
                    on_node[node] += 1;
                    ensure!(
                        on_node[node] <= 110,
                        "raw plan: node {node} would hold more than 110 pods"
                    );
                    plan.push(PlanEntry {
                        pod: p.name.clone(),
                        node: node_name(node),
                        claim: None,
                    });
                }
                Ok(Some(plan))
            }
        }
    }

    /// Deletes the workload's namespaced objects (claims, PodGroups) once the pods are gone and
    /// waits until they are; a finalizer nobody removes within 10 s (no controller) is removed.
    pub async fn clean_namespace(&self, client: &Client, ns: &str) -> anyhow::Result<()> {
        match self.workload {
            Workload::Plain => Ok(()),
            Workload::Dra => {
                delete_all(
                    &Api::<ResourceClaim>::namespaced(client.clone(), ns),
                    ns,
                    "ResourceClaims",
                )
                .await?;
                delete_all(
                    &Api::<ResourceClaimTemplate>::namespaced(client.clone(), ns),
                    ns,
                    "ResourceClaimTemplates",
                )
                .await
            }
            Workload::Podgroups => delete_all(&Api::<PodGroup>::namespaced(client.clone(), ns), ns, "PodGroups").await,
        }
    }

    /// Reads back what a contender bound in `ns` and checks it (see [`Checks`]).
    pub async fn check(
        &self,
        client: &Client,
        ns: &str,
        node_name: impl Fn(usize) -> String,
    ) -> anyhow::Result<Checks> {
        let pods = list_all(&Api::<Pod>::namespaced(client.clone(), ns)).await?;
        let mut c = Checks {
            pods: pods.len(),
            bound: pods
                .iter()
                .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
                .count(),
            ..Default::default()
        };
        let node_index: HashMap<String, usize> = (0..self.nodes).map(|n| (node_name(n), n)).collect();
        match self.workload {
            Workload::Plain => {}
            Workload::Dra => {
                let claims: HashMap<String, ResourceClaim> =
                    list_all(&Api::<ResourceClaim>::namespaced(client.clone(), ns))
                        .await?
                        .into_iter()
                        .filter_map(|c| Some((c.metadata.name.clone()?, c)))
                        .collect();
                let mut taken: HashMap<(String, String, String), usize> = HashMap::new();
                for claim in claims.values() {
                    let results = claim
                        .status
                        .as_ref()
                        .and_then(|s| s.allocation.as_ref())
                        .and_then(|a| a.devices.as_ref())
                        .and_then(|d| d.results.as_ref());
                    for r in results.into_iter().flatten() {
                        *taken
                            .entry((r.driver.clone(), r.pool.clone(), r.device.clone()))
                            .or_default() += 1;
                    }
                }
                c.devices_allocated = taken.len();
                c.devices_twice = taken.values().filter(|&&n| n > 1).count();
                for pod in &pods {
                    match self.claim_problem(pod, &claims, &node_index) {
                        None => c.claims_allocated += 1,
                        Some(problem) => {
                            c.claims_wrong += 1;
                            c.first_problem.get_or_insert(problem);
                        }
                    }
                }
            }
            Workload::Podgroups => {
                // Each group's bound members, by rack.
                let mut groups: BTreeMap<String, (usize, usize, HashSet<usize>)> = BTreeMap::new();
                for pod in &pods {
                    let spec = pod.spec.as_ref();
                    let Some(group) = spec
                        .and_then(|s| s.scheduling_group.as_ref())
                        .and_then(|g| g.pod_group_name.clone())
                    else {
                        continue;
                    };
                    let entry = groups.entry(group).or_default();
                    entry.0 += 1;
                    if let Some(node) = spec.and_then(|s| s.node_name.as_ref()) {
                        entry.1 += 1;
                        match node_index.get(node) {
                            Some(&n) => {
                                entry.2.insert(n / self.rack_nodes.max(1));
                            }
                            None => {
                                c.first_problem
                                    .get_or_insert(format!("pod {} bound to {node}, not a bench node", pod_key(pod)));
                            }
                        }
                    }
                }
                c.groups = groups.len();
                for (name, (members, bound, racks)) in &groups {
                    match *bound {
                        0 => {}
                        b if b == *members => c.groups_whole += 1,
                        b => {
                            c.groups_partial += 1;
                            c.first_problem
                                .get_or_insert(format!("PodGroup {ns}/{name}: {b} of {members} pods bound"));
                        }
                    }
                    if racks.len() > 1 {
                        c.groups_spanning += 1;
                        c.first_problem
                            .get_or_insert(format!("PodGroup {ns}/{name} spans {} racks", racks.len()));
                    }
                }
            }
        }
        Ok(c)
    }

    /// What is wrong with a bound `dra` pod's claim, if anything: it must exist, be allocated
    /// its count of devices of its model on the pod's node (the node selector naming that node,
    /// the devices in the node's pool), and be reserved for the pod.
    fn claim_problem(
        &self,
        pod: &Pod,
        claims: &HashMap<String, ResourceClaim>,
        node_index: &HashMap<String, usize>,
    ) -> Option<String> {
        let key = pod_key(pod);
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            return Some(format!("pod {key} not bound"));
        };
        let Some(claim_name) = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .and_then(|s| s.iter().find(|s| s.name == CLAIM))
            .and_then(|s| s.resource_claim_name.clone())
        else {
            return Some(format!("pod {key}: no claim in status.resourceClaimStatuses"));
        };
        let Some(claim) = claims.get(&claim_name) else {
            return Some(format!("pod {key}: claim {claim_name} not found"));
        };
        let labels = claim.metadata.labels.clone().unwrap_or_default();
        let model = labels.get("bench-model").cloned().unwrap_or_default();
        let count: usize = labels.get("bench-count").and_then(|c| c.parse().ok()).unwrap_or(0);
        let status = claim.status.as_ref();
        let Some(allocation) = status.and_then(|s| s.allocation.as_ref()) else {
            return Some(format!("claim {claim_name} of pod {key} not allocated"));
        };
        let on_node = allocation.node_selector.as_ref().is_some_and(|s| {
            s.node_selector_terms.iter().any(|t| {
                t.match_expressions.as_ref().is_none_or(Vec::is_empty)
                    && t.match_fields.as_ref().is_some_and(|f| {
                        !f.is_empty()
                            && f.iter().all(|r| {
                                r.key == "metadata.name"
                                    && r.operator == "In"
                                    && r.values.as_ref().is_some_and(|v| v.contains(&node))
                            })
                    })
            })
        });
        if !on_node {
            return Some(format!(
                "claim {claim_name} of pod {key}: allocation's node selector {:?} does not name {node}",
                allocation.node_selector
            ));
        }
        let results = allocation
            .devices
            .as_ref()
            .and_then(|d| d.results.clone())
            .unwrap_or_default();
        if results.len() != count {
            return Some(format!(
                "claim {claim_name} of pod {key}: {} devices allocated, {count} asked",
                results.len()
            ));
        }
        let driver = self.driver();
        let node_model = node_index.get(&node).map(|&n| node_model(n));
        for r in &results {
            if r.driver != driver || r.pool != node || r.request != CLAIM || node_model != Some(model.as_str()) {
                return Some(format!(
                    "claim {claim_name} of pod {key} on {node}: device {}/{}/{} (request {}) is not a {model} of the node",
                    r.driver, r.pool, r.device, r.request
                ));
            }
        }
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let reserved = status
            .and_then(|s| s.reserved_for.as_ref())
            .is_some_and(|r| r.iter().any(|c| c.resource == "pods" && c.uid == uid));
        if !reserved {
            return Some(format!("claim {claim_name} of pod {key} not reserved for it"));
        }
        None
    }
}

/// What a contender's bound pods look like afterwards.
#[derive(Debug, Default, Serialize)]
pub struct Checks {
    pub pods: usize,
    pub bound: usize,
    /// `dra`: pods whose claim is allocated on their node, of their model and count, and reserved
    /// for them; pods whose claim is not; devices in some allocation; devices in two.
    pub claims_allocated: usize,
    pub claims_wrong: usize,
    pub devices_allocated: usize,
    pub devices_twice: usize,
    /// `podgroups`: groups, and those with every member bound, some but not all, or bound
    /// pods in two racks or more.
    pub groups: usize,
    pub groups_whole: usize,
    pub groups_partial: usize,
    pub groups_spanning: usize,
    pub first_problem: Option<String>,
}

impl Checks {
    pub fn ok(&self) -> bool {
        self.bound == self.pods
            && self.claims_wrong == 0
            && self.devices_twice == 0
            && self.groups_partial == 0
            && self.groups_spanning == 0
            && self.first_problem.is_none()
    }

    pub fn summary(&self, workload: Workload) -> String {
        let mut s = format!("{} of {} pods bound", self.bound, self.pods);
        match workload {
            Workload::Plain => {}
            Workload::Dra => {
                s += &format!(
                "; claims allocated on the pod's node and reserved for it: {}, not: {}; {} devices allocated, {} twice",
                self.claims_allocated, self.claims_wrong, self.devices_allocated, self.devices_twice
            )
            }
            Workload::Podgroups => {
                s += &format!(
                    "; {} groups: {} whole, {} not bound, {} partly bound, {} over two racks or more",
                    self.groups,
                    self.groups_whole,
                    self.groups - self.groups_whole - self.groups_partial,
                    self.groups_partial,
                    self.groups_spanning
                )
            }
        }
        if let Some(p) = &self.first_problem {
            s += &format!("; first problem: {p}");
        }
        s
    }
}

/// One pod of the raw contenders' plan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlanEntry {
    pub pod: String,
    pub node: String,
    pub claim: Option<PlannedClaim>,
}

/// The allocation the raw contenders write for a pod's claim.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlannedClaim {
    pub name: String,
    pub driver: String,
    pub pool: String,
    pub devices: Vec<String>,
}

/// The raw contenders' writes before a pod's Binding when it has a claim, as both schedulers
/// make them: the pod's `status.nominatedNodeName` (kube-scheduler 1.35+ sets it before a PreBind
/// with work), then DynamicResources' PreBind: the claim's finalizer (an update of the claim), then
/// its `status.allocation` and `reservedFor` (an update of its status); here merge patches, from no
/// read.
pub async fn raw_claim_writes(
    pods: &Api<Pod>,
    claims: &Api<ResourceClaim>,
    entry: &PlanEntry,
    pod_uid: &str,
) -> anyhow::Result<()> {
    let Some(claim) = &entry.claim else {
        return Ok(());
    };
    pods.patch_status(
        &entry.pod,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"nominatedNodeName": entry.node}})),
    )
    .await
    .with_context(|| format!("nominating {} for pod {}", entry.node, entry.pod))?;
    claims
        .patch(
            &claim.name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": [CLAIM_FINALIZER]}})),
        )
        .await
        .with_context(|| format!("adding the finalizer to claim {}", claim.name))?;
    let results: Vec<Value> = claim
        .devices
        .iter()
        .map(|d| json!({"request": CLAIM, "driver": claim.driver, "pool": claim.pool, "device": d}))
        .collect();
    let status = json!({"status": {
        "allocation": {
            "devices": {"results": results},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [entry.node]}
            ]}]},
            "allocationTimestamp": k8s_openapi::jiff::Timestamp::now().to_string()
        },
        "reservedFor": [{"resource": "pods", "name": entry.pod, "uid": pod_uid}]
    }});
    claims
        .patch_status(&claim.name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .with_context(|| format!("allocating claim {}", claim.name))?;
    Ok(())
}

fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

/// Creates `obj`; one that exists already is kept.
async fn create_or_keep<K>(api: &Api<K>, obj: &K, what: &str) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + Serialize + DeserializeOwned,
{
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => {
            Err(anyhow::Error::new(e).context(format!("creating {what} {}", obj.meta().name.as_deref().unwrap_or(""))))
        }
    }
}

/// Every object of `api`, read in pages of 500.
pub async fn list_all<K>(api: &Api<K>) -> anyhow::Result<Vec<K>>
where
    K: Clone + std::fmt::Debug + DeserializeOwned,
{
    let mut out = Vec::new();
    let mut params = ListParams::default().limit(500);
    loop {
        let page = api.list(&params).await?;
        let next = page.metadata.continue_.clone();
        out.extend(page.items);
        match next {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(out),
        }
    }
}

/// `delete_collection` of every object of `api`, again while the request fails on the way (up to
/// 20 times): the API server ends a request after 60 s, and deleting tens of thousands of pods
/// takes longer; each attempt deletes what it reached.
pub async fn delete_collection<K>(api: &Api<K>, params: &DeleteParams, what: &str) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + DeserializeOwned,
{
    let mut attempt = 0;
    loop {
        attempt += 1;
        match api.delete_collection(params, &ListParams::default()).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code < 500 && s.code != 429 => {
                bail!("deleting {what}: {s}")
            }
            Err(e) if attempt < 20 => {
                eprintln!("cluster-bench: deleting {what} (attempt {attempt}): {e}; trying again");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => return Err(anyhow::Error::new(e).context(format!("deleting {what}"))),
        }
    }
}

/// Deletes every object of `api` and waits until none is left; finalizers still there after
/// 10 s are removed (a claim's or a PodGroup's, when no controller runs to remove them).
async fn delete_all<K>(api: &Api<K>, ns: &str, what: &str) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + DeserializeOwned,
{
    delete_collection(api, &DeleteParams::default(), &format!("the {what} of {ns}")).await?;
    let start = Instant::now();
    let mut stripped = false;
    loop {
        let left = api.list_metadata(&ListParams::default()).await?.items;
        if left.is_empty() {
            return Ok(());
        }
        if !stripped && start.elapsed() > Duration::from_secs(10) {
            for o in &left {
                let Some(name) = o.metadata.name.as_deref() else {
                    continue;
                };
                match api
                    .patch_metadata(
                        name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
                    )
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => bail!("removing the finalizers of {what} {ns}/{name}: {e}"),
                }
            }
            stripped = true;
        }
        ensure!(
            start.elapsed() < Duration::from_secs(120),
            "{} {what} of {ns} still there after 120 s",
            left.len()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(workload: Workload, nodes: usize, pods: usize) -> Shape {
        Shape {
            workload,
            prefix: "t".into(),
            nodes,
            pods,
            devices_per_node: 8,
            groups: 40,
            rack_nodes: 20,
        }
    }

    #[test]
    fn groups_hold_8_to_64_pods() {
        let sizes: Vec<usize> = (0..1000).map(group_size).collect();
        assert_eq!(sizes.iter().min(), Some(&8));
        assert_eq!(sizes.iter().max(), Some(&64));
    }

    #[test]
    fn the_raw_dra_plan_gives_no_device_twice_and_keeps_models() {
        let s = shape(Workload::Dra, 500, 1000);
        s.validate().unwrap();
        let claims = s
            .pods()
            .iter()
            .map(|p| (p.name.clone(), format!("{}-gpu", p.name)))
            .collect();
        let plan = s.raw_plan(|n| format!("n{n}"), &claims).unwrap().unwrap();
        assert_eq!(plan.len(), 1000);
        let mut seen = HashSet::new();
        for (e, p) in plan.iter().zip(s.pods()) {
            let c = e.claim.as_ref().unwrap();
            let (model, count) = p.claim.unwrap();
            assert_eq!(c.devices.len(), count);
            let n: usize = e.node[1..].parse().unwrap();
            assert_eq!(node_model(n), model);
            for d in &c.devices {
                assert!(seen.insert((c.pool.clone(), d.clone())), "{d} of {} twice", c.pool);
            }
        }
    }

    #[test]
    fn the_raw_podgroup_plan_keeps_each_group_in_one_rack() {
        let s = shape(Workload::Podgroups, 100, 0);
        s.validate().unwrap();
        let plan = s.raw_plan(|n| format!("n{n}"), &HashMap::new()).unwrap().unwrap();
        let mut racks: HashMap<usize, HashSet<usize>> = HashMap::new();
        for (e, p) in plan.iter().zip(s.pods()) {
            let n: usize = e.node[1..].parse().unwrap();
            racks.entry(p.group.unwrap()).or_default().insert(n / 20);
        }
        assert_eq!(racks.len(), 40);
        assert!(racks.values().all(|r| r.len() == 1));
    }

    #[test]
    fn too_many_dra_pods_are_refused() {
        assert!(shape(Workload::Dra, 20, 60).validate().is_err());
        shape(Workload::Dra, 20, 30).validate().unwrap();
    }
}
