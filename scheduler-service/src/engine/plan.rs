//! What a pod needs of every node, resolved once per pod ([`PodPlan`]): kube-scheduler's
//! PreFilter and PreScore states in its `CycleState`. The scoring requests, the static
//! predicates per node class, the host ports, the tie-break seed, the volume plugins' PreFilter
//! states ([`PodVolumes`]) and the topology plugins' ([`TopoState`]).

use std::sync::Arc;

use super::accel::class_cache::{StaticEval, StaticFilters, StaticKey};
use super::accel::class_labels::{affinity_by_class, ClassLabels};
use super::model::{NodeSpec, PodSpec, Toleration};
use super::plugins::dynamicresources::extended_resources::ExtendedResources;
use super::plugins::dynamicresources::{selectors, PodDevices};
use super::plugins::interpodaffinity::filtering::InterPodFilter;
use super::plugins::interpodaffinity::scoring as interpod_scoring;
use super::plugins::podtopologyspread::filtering::SpreadFilter;
use super::plugins::podtopologyspread::scoring::SpreadScore;
use super::plugins::volumebinding::{self, binder as volume_binder};
use super::plugins::{
    node_affinity, node_unschedulable, nodevolumelimits, taint_toleration, volumerestrictions, volumezone,
};
use super::policy::{FilterPlugin, ScorePlugin};
use super::resources::ResourceName;
use super::rules::{self as cel_rules, ClassOutcomes, CompiledRules, NodeStatic, RuleOutcome};
use super::snapshot::{image_hash, port_key, port_mask, BoundPod, NodeUsage, PortKeys, Snapshot, NODE_UNIQUE_LABELS};
use super::topology::{DomainCounts, Existing, Placed};

use super::profile::{Profile, MAX_SCORES};

/// The volume plugins' PreFilter states for one pod (kube-scheduler's `CycleState` entries of
/// VolumeRestrictions, NodeVolumeLimits, VolumeBinding and VolumeZone), each `None` when its
/// plugin is not in the profile.
#[derive(Debug, Clone, Default)]
pub struct PodVolumes {
    /// The snapshot's storage objects (shared, copy-on-write).
    pub(super) storage: super::volumes::StorageObjects,
    /// VolumeRestrictions'.
    pub(super) restrictions: Option<volumerestrictions::PreFilterState>,
    /// NodeVolumeLimits'.
    pub(super) limits: Option<nodevolumelimits::PreFilterState>,
    /// VolumeBinding's.
    pub(super) binding: Option<volumebinding::PreFilterState>,
    /// VolumeZone's.
    pub(super) zone: Option<volumezone::PreFilterState>,
}

impl PodVolumes {
    /// The PreFilter of the enabled volume plugins, in kube-scheduler's order
    /// (VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone): `Ok(None)` when no
    /// plugin has work for the pod, `Err` with the first rejecting plugin's message (every node
    /// is then rejected, unresolvably).
    pub fn pre_filter(
        storage: &super::volumes::StorageObjects,
        filters: super::volumes::VolumeFilters,
        pod: &PodSpec,
        claim_users: &super::volumes::ClaimUsers<'_>,
        batch: &super::volumes::BatchVolumes,
    ) -> Result<Option<Self>, String> {
        let (namespace, volumes) = (pod.namespace.as_str(), &pod.volumes);
        if volumes.is_empty() || !filters.any() {
            return Ok(None);
        }
        let mut out = Self {
            storage: storage.clone(),
            ..Default::default()
        };
        if filters.restrictions {
            out.restrictions = Some(volumerestrictions::PreFilterState::pre_filter(
                storage,
                namespace,
                volumes,
                claim_users,
                batch,
            )?);
        }
        if filters.limits {
            out.limits = Some(nodevolumelimits::PreFilterState::pre_filter(
                storage, namespace, volumes,
            ));
        }
        if filters.binding {
            out.binding = Some(volumebinding::PreFilterState::pre_filter(
                storage, &pod.uid, namespace, &pod.name, volumes, batch,
            )?);
        }
        if filters.zone {
            out.zone = Some(volumezone::PreFilterState::pre_filter(storage, namespace, volumes)?);
        }
        Ok(Some(out))
    }

    /// VolumeBinding's Filter on the node (no choices when the plugin is not in the profile).
    pub fn binding(
        &self,
        node: &NodeSpec,
    ) -> Result<Vec<(String, super::volumes::VolumeChoice)>, Vec<volume_binder::Conflict>> {
        match &self.binding {
            Some(b) => b.filter(&self.storage, node),
            None => Ok(Vec::new()),
        }
    }
}

/// What a pod needs, computed once per pod instead of once per node.
pub(super) struct PodPlan<'a> {
    pub(super) pod: &'a PodSpec,
    /// NodeResourcesFit scoring request per fit resource (scoring defaults for cpu and memory).
    pub(crate) fit_requests: Vec<i64>,
    /// BalancedAllocation request per resource; `None` for a best-effort pod (plugin skipped).
    pub(crate) balanced_requests: Option<Vec<i64>>,
    /// Tolerations with effect PreferNoSchedule or empty, for TaintToleration's score.
    pub(super) prefer_tolerations: Vec<Toleration>,
    /// The pod's images present on some node: (hash of the name, count of nodes having it).
    pub(crate) images: Vec<(u64, i64)>,
    pub(super) tolerates_unschedulable: bool,
    /// [`port_mask`] of each of the pod's host ports.
    pub(crate) port_masks: Vec<u64>,
    /// [`port_key`] of each of the pod's host ports; `None` when one has none.
    pub(super) port_keys: Option<Vec<u64>>,
    pub(super) tie_seed: u64,
    /// The pod selects on a per-node label or field, so static predicates run node by node.
    pub(super) per_node: bool,
    /// Static predicates per node class (empty when `per_node`), shared by pods that select and
    /// tolerate alike.
    pub(crate) class_evals: Arc<[StaticEval]>,
    /// The plain pass applies when, besides, the pod has no topology state: see
    /// [`Evaluator::evaluate_plain`].
    pub(super) plain: bool,
    /// The volume plugins' PreFilter state; `None` when the pod has no volume they read.
    pub(super) volumes: Option<Box<PodVolumes>>,
    /// A volume plugin's PreFilter rejected the pod: its message.
    pub(super) volume_error: Option<Arc<str>>,
    /// DynamicResources' PreFilter state; `None` when the pod uses no claim (or the profile
    /// does not run the plugin).
    pub(super) devices: Option<Box<PodDevices>>,
    /// DynamicResources' PreFilter rejected the pod: its message.
    pub(super) device_error: Option<Arc<str>>,
    /// The pod's extended resources a DeviceClass backs: NodeResourcesFit leaves them to
    /// DynamicResources on nodes whose allocatable has none (kube's DRAExtendedResource).
    pub(super) dra_extended: Box<[Arc<str>]>,
    /// The profile's [`Profile::static_filters`].
    pub(super) static_filters: StaticFilters,
    /// InterPodAffinity's and PodTopologySpread's state; `None` when neither has work.
    pub(super) topo: Option<Box<TopoState>>,
    /// The pod as the policy's CEL rules read it; `None` when the policy has none.
    pub(crate) rule_pod: Option<cel::Value>,
    /// Per rule (filters first, then scores), for those that read only what a node class
    /// shares: their outcomes per class (a filter's passing outcome is 0), evaluated on first
    /// use and shared with the pods that read alike (see [`CompiledRules::pod_key`]).
    pub(super) rule_classes: Vec<Option<Arc<ClassOutcomes>>>,
    /// For the plain pass under a policy with rules read per class: `class_evals` with the
    /// classes those rules reject (or fail on) marked rejected.
    pub(crate) plain_evals: Option<Arc<[StaticEval]>>,
}

impl<'a> PodPlan<'a> {
    /// What `pod` needs of every node; with `cached`, per-class static predicates are reused
    /// from (and added to) the snapshot lineage's [`super::accel::class_cache::StaticCache`].
    pub(super) fn new(
        profile: &Profile,
        snapshot: &Snapshot,
        pod: &'a PodSpec,
        seed: u64,
        placed: &Placed<'_>,
        cached: bool,
    ) -> Self {
        let fit_requests = profile
            .fit_resources
            .iter()
            .map(|(r, _)| match r {
                ResourceName::Cpu | ResourceName::Memory => pod.score_requests().get(r),
                _ => pod.requests.get(r),
            })
            .collect();
        let balanced: Vec<i64> = profile.balanced_resources.iter().map(|r| pod.requests.get(r)).collect();
        let balanced_requests = (!balanced.iter().all(|r| *r == 0)).then_some(balanced);
        let images = pod
            .images
            .iter()
            .filter_map(|name| {
                let n = snapshot.image_node_count(name);
                (n > 0).then_some((image_hash(name), i64::from(n)))
            })
            .collect();
        let seed = seed ^ profile.policy.seed;
        // The volume plugins' PreFilter; a pod with volumes they read is evaluated node by node.
        let (volumes, volume_error) = if pod.volumes.is_empty() || !profile.volume_filters.any() {
            (None, None)
        } else {
            // The references to a claim by the bound pods, per node.
            let claim_users = |key: &str| -> Vec<(Arc<str>, usize)> {
                snapshot
                    .nodes()
                    .iter()
                    .filter_map(|n| {
                        let refs = n
                            .usage
                            .volumes
                            .iter()
                            .filter(|(ns, v)| v.claim_name().is_some_and(|c| super::volumes::claim_key(ns, c) == key))
                            .count();
                        (refs > 0).then(|| (Arc::from(n.spec.name.as_str()), refs))
                    })
                    .collect()
            };
            match PodVolumes::pre_filter(
                snapshot.storage(),
                profile.volume_filters,
                pod,
                &claim_users,
                &placed.volumes,
            ) {
                Ok(v) => (v.map(Box::new), None),
                Err(message) => (None, Some(Arc::from(message))),
            }
        };
        // DynamicResources' PreFilter (kube's order: after the volume plugins'); a pod with
        // claims is evaluated node by node.
        let dra_extended: Box<[Arc<str>]> = ExtendedResources::of(snapshot.devices(), pod)
            .map(|e| e.backed().cloned().collect())
            .unwrap_or_default();
        let (devices, device_error) =
            if (pod.resource_claims.is_empty() && dra_extended.is_empty()) || !profile.dynamic_resources {
                (None, None)
            } else {
                let index = snapshot.device_index();
                match PodDevices::pre_filter(snapshot.devices(), index, selectors(), pod, &placed.devices) {
                    Ok(d) => (
                        d.map(|d| {
                            Box::new(
                                d.with_filter_timeout(profile.dra_filter_timeout)
                                    .with_binding_timeout(profile.dra_binding_timeout)
                                    .with_packing(profile.device_packing.clone()),
                            )
                        }),
                        None,
                    ),
                    Err(message) => (None, Some(Arc::from(message))),
                }
            };
        // DynamicResources reads each node's devices in its own filter: the static predicates
        // may still be evaluated per node class.
        let per_node = needs_per_node(pod) || volumes.is_some() || volume_error.is_some();
        let mut plan = Self {
            pod,
            fit_requests,
            balanced_requests,
            prefer_tolerations: taint_toleration::prefer_no_schedule_tolerations(&pod.tolerations),
            images,
            tolerates_unschedulable: node_unschedulable::tolerates_unschedulable(&pod.tolerations),
            port_masks: pod.host_ports.iter().map(port_mask).collect(),
            port_keys: pod.host_ports.iter().map(port_key).collect(),
            tie_seed: Self::tie_seed_for(seed, pod),
            per_node,
            class_evals: Arc::from(Vec::new()),
            plain: false,
            volumes,
            volume_error,
            devices,
            device_error,
            dra_extended,
            static_filters: profile.static_filters,
            topo: None,
            rule_pod: match &profile.rules {
                Some(Ok(rules)) => Some(rules.pod_value(pod)),
                Some(Err(_)) => Some(cel_rules::pod_value(pod)),
                None => None,
            },
            rule_classes: Vec::new(),
            plain_evals: None,
        };
        if let (Some(Ok(rules)), Some(value)) = (&profile.rules, &plan.rule_pod) {
            let kept = cel_rules::snapshot_rules(snapshot, rules);
            plan.rule_classes = (0..rules.width())
                .map(|k| {
                    rules.class_level(k).then(|| match rules.pod_key(k, value) {
                        Some(key) => {
                            let (outcomes, added, freed) = kept.class_outcomes(k, key);
                            snapshot.add_derived(added);
                            snapshot.sub_derived(freed);
                            outcomes
                        }
                        None => Arc::new(ClassOutcomes::new(snapshot.classes().len())),
                    })
                })
                .collect();
        }
        if !per_node {
            let classes = snapshot.classes();
            plan.class_evals = if cached {
                let filters = profile.static_filters;
                let hash = StaticKey::hash_of(pod, filters);
                let lock = || snapshot.static_cache().lock().unwrap_or_else(|e| e.into_inner());
                // A usable entry, or else the label columns to evaluate with (an entry from
                // before new classes appeared is redone).
                let found = {
                    let mut cache = lock();
                    match cache.by_hash.get(&hash) {
                        Some((key, evals)) if key.is_of(pod, filters) && evals.len() >= classes.len() => {
                            Ok(Arc::clone(evals))
                        }
                        _ => Err(cache.labels_of(classes)),
                    }
                };
                match found {
                    Ok(evals) => evals,
                    Err(labels) => {
                        // Evaluated outside the lock; an evaluation cut short by the call's end is
                        // incomplete and never cached.
                        let evals = plan.class_statics(classes, &labels);
                        if !super::cancel::requested() {
                            lock().insert(hash, StaticKey::of(pod, filters), Arc::clone(&evals));
                        }
                        evals
                    }
                }
            } else {
                classes
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        if super::cancel::requested_at(i) {
                            StaticEval::default()
                        } else {
                            plan.static_eval(c)
                        }
                    })
                    .collect()
            };
        }
        let has = |f: FilterPlugin| profile.policy.filters.contains(&f);
        let slots = profile.slot_of;
        plan.plain = !per_node
            && plan.devices.is_none()
            && plan.dra_extended.is_empty()
            && plan.device_error.is_none()
            && profile
                .rules
                .as_ref()
                .is_none_or(|r| r.as_ref().is_ok_and(|r| r.plain()))
            && (pod.node_name.as_deref().is_none_or(str::is_empty) || !has(FilterPlugin::NodeName))
            && (pod.required_features.is_empty() || !has(FilterPlugin::NodeDeclaredFeatures))
            && (slots.fit.is_none() || profile.fit_cpu_memory.is_some())
            && (slots.balanced.is_none() || profile.balanced_cpu_memory || plan.balanced_requests.is_none())
            && profile.score_plugins.iter().take(MAX_SCORES).all(|(p, _)| {
                matches!(
                    p,
                    ScorePlugin::NodeResourcesFit
                        | ScorePlugin::NodeResourcesBalancedAllocation
                        | ScorePlugin::VolumeBinding
                        | ScorePlugin::ImageLocality
                        | ScorePlugin::NodeAffinity
                        | ScorePlugin::TaintToleration
                        | ScorePlugin::InterPodAffinity
                        | ScorePlugin::PodTopologySpread
                        | ScorePlugin::DynamicResources
                )
            });
        if plan.plain {
            if let Some(Ok(rules)) = &profile.rules {
                if (0..rules.width()).any(|k| rules.class_level(k)) {
                    plan.plain_evals = Some(plan.fold_class_rules(rules, snapshot));
                }
            }
        }
        plan.topo = TopoState::build(profile, snapshot, placed, &plan);
        plan
    }

    /// `class_evals` with the classes the policy's class-level rules reject (or fail on) marked
    /// rejected: the plain pass, which gathers no reasons, then skips their nodes as the general
    /// pass rejects them (the reasons pass runs the rules again, node by node).
    fn fold_class_rules(&self, rules: &CompiledRules, snapshot: &Snapshot) -> Arc<[StaticEval]> {
        let mut evals = self.class_evals.to_vec();
        for (class, se) in evals.iter_mut().enumerate() {
            if se.rejected {
                continue;
            }
            // Each class's evaluations may spend their budgets: a call that has ended stops here
            // (its plan is discarded; the outcomes kept are whole evaluations).
            if super::cancel::requested() {
                break;
            }
            self.class_rule_outcomes(rules, snapshot, class);
            se.rejected = (0..rules.width()).any(|k| self.class_outcome(k, class).is_err());
        }
        Arc::from(evals)
    }

    /// Evaluates, for the pod, the policy's class-level rules on node class `class` (its shared
    /// labels, taints and cordon) where not done yet (by this pod or one reading alike).
    pub(super) fn class_rule_outcomes(&self, rules: &CompiledRules, snapshot: &Snapshot, class: usize) {
        let Some(pod) = &self.rule_pod else {
            return;
        };
        let mut context = None;
        for (k, outcomes) in self.rule_classes.iter().enumerate() {
            let Some(outcomes) = outcomes else {
                continue;
            };
            if outcomes.get(class).is_some() {
                continue;
            }
            let _ = outcomes.get_or_eval(class, || {
                let context = context.get_or_insert_with(|| {
                    let spec = snapshot.classes().get(class).map(|c| NodeStatic::of(c));
                    let spec = spec.unwrap_or_else(|| NodeStatic::of(&NodeSpec::default()));
                    rules.context(pod, cel_rules::node_value(&spec, &NodeUsage::default()))
                });
                rules.run(k, context)
            });
        }
    }

    /// Class-level rule `k`'s outcome on class `class`, once [`PodPlan::class_rule_outcomes`]
    /// evaluated it (`Ok(0)` for another rule).
    pub(crate) fn class_outcome(&self, k: usize, class: usize) -> RuleOutcome {
        self.rule_classes
            .get(k)
            .and_then(Option::as_ref)
            .and_then(|o| o.get(class))
            .cloned()
            .unwrap_or(Ok(0))
    }

    /// The static predicates on the node at index `i` of the snapshot.
    pub(super) fn static_at(&self, snapshot: &Snapshot, i: usize) -> StaticEval {
        if i >= snapshot.nodes().len() {
            // A node of the cluster outside a view (Snapshot::restrict), which only the topology
            // plugins see: evaluated on its own.
            return match snapshot.topology_node(i) {
                Some(n) => self.static_eval(&n.spec),
                None => StaticEval::default(),
            };
        }
        if self.per_node {
            self.static_eval(&snapshot.nodes()[i].spec)
        } else {
            self.class_evals[snapshot.hot()[i].class as usize]
        }
    }

    /// The static predicates on one node (or a node class's view of its nodes).
    pub(super) fn static_eval(&self, node: &NodeSpec) -> StaticEval {
        let pod = self.pod;
        let mismatched = !pod.matches_node_selector_and_affinity(node);
        self.static_eval_with(node, mismatched, node_affinity::score(pod, node))
    }

    /// [`PodPlan::static_eval`] given NodeAffinity's verdict and raw score on the node.
    fn static_eval_with(&self, node: &NodeSpec, mismatched: bool, affinity_weight: i64) -> StaticEval {
        let cordoned = node_unschedulable::rejects(node, self.tolerates_unschedulable);
        let untolerated = taint_toleration::untolerated(&self.pod.tolerations, &node.taints);
        let StaticFilters {
            node_unschedulable: f_cordon,
            taint_toleration: f_taints,
            node_affinity: f_affinity,
        } = self.static_filters;
        StaticEval {
            cordoned,
            untolerated,
            mismatched,
            affinity_weight,
            prefer_taints: taint_toleration::score(&self.prefer_tolerations, node),
            rejected: (cordoned && f_cordon) || (untolerated && f_taints) || (mismatched && f_affinity),
        }
    }

    /// [`PodPlan::static_eval`] of every class, with each label requirement of the pod matched
    /// once per distinct value of its key (`labels`: the columns of these classes) rather than
    /// looked up class by class.
    fn class_statics(&self, classes: &imbl::Vector<Arc<NodeSpec>>, labels: &ClassLabels) -> Arc<[StaticEval]> {
        let (selected, weights) = affinity_by_class(self.pod, classes.len(), labels);
        classes
            .iter()
            .zip(selected.iter().zip(&weights))
            .map(|(c, (s, w))| self.static_eval_with(c, !s, *w))
            .collect()
    }

    /// Whether one of the pod's host ports may conflict with the ports in use on a node whose
    /// [`super::snapshot::port_bits`] are `bits` (if so, the port lists are compared).
    #[inline]
    pub(crate) fn may_conflict(&self, bits: u64) -> bool {
        self.port_masks.iter().any(|m| bits & m == *m)
    }

    /// Whether one of the pod's host ports conflicts with the ports in use on a node whose
    /// [`PortKeys`] are `keys`: `None` when the keys do not say (the port lists are compared).
    #[inline(always)]
    pub(crate) fn keyed_conflict(&self, keys: PortKeys) -> Option<bool> {
        keys.conflict(self.port_keys.as_deref()?)
    }

    /// The tie-break seed of a pod (`seed` already mixed with the policy's).
    pub(super) fn tie_seed_for(seed: u64, pod: &PodSpec) -> u64 {
        mix(seed ^ xxhash_rust::xxh3::xxh3_64(pod.uid.as_bytes()))
    }

    /// The pod's tie-break seed (the policy's and the request's seed mixed with the pod's uid).
    pub(super) fn tie_seed(&self) -> u64 {
        self.tie_seed
    }

    pub(super) fn tie_break(&self, name_hash: u64) -> u64 {
        mix(self.tie_seed ^ name_hash)
    }
}

/// Whether a pod's node selection names a label unique to each node (or a node field), so node
/// classes cannot stand for their nodes.
fn needs_per_node(pod: &PodSpec) -> bool {
    let unique = |k: &str| NODE_UNIQUE_LABELS.contains(&k);
    let term_unique = |t: &super::model::SelectorTerm| {
        !t.match_fields.is_empty() || t.match_expressions.iter().any(|r| unique(&r.key))
    };
    pod.node_selector.iter().any(|(k, _)| unique(k))
        || pod.required_affinity.iter().flatten().any(term_unique)
        || pod.preferred_affinity.iter().any(|p| term_unique(&p.term))
}

/// splitmix64's finalizer: a fast, well-mixed 64-bit hash step.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
    z ^ (z >> 31)
}

/// Whether two pods ask the same of nodes: equal requests, node name, selectors, affinity,
/// tolerations, host ports and images (identity and labels aside), so they filter and score alike.
pub(super) fn same_constraints(a: &PodSpec, b: &PodSpec) -> bool {
    a.requests == b.requests
        && a.non_zero_requests == b.non_zero_requests
        && a.score_requests == b.score_requests
        && a.required_features == b.required_features
        && a.node_name == b.node_name
        && a.node_selector == b.node_selector
        && a.required_affinity == b.required_affinity
        && a.preferred_affinity == b.preferred_affinity
        && a.tolerations == b.tolerations
        && a.host_ports == b.host_ports
        && a.images == b.images
        // Each pod's claims are its own, and every placement changes what the next one finds.
        && a.volumes.is_empty()
        && b.volumes.is_empty()
        && a.resource_claims.is_empty()
        && b.resource_claims.is_empty()
        && a.extended_containers.is_empty()
        && b.extended_containers.is_empty()
}

/// The topology plugins' PreFilter and PreScore state for one pod.
#[derive(Debug, Default)]
pub(super) struct TopoState {
    pub(super) spread_filter: Option<SpreadFilter>,
    pub(super) interpod_filter: Option<InterPodFilter>,
    pub(super) interpod_score: Option<DomainCounts>,
    pub(super) spread_score: Option<SpreadScore>,
}

/// Whether the pod itself has inter-pod affinity or spreading (explicit or default) to evaluate.
fn has_topology_terms(pod: &PodSpec) -> bool {
    pod.has_pod_affinity()
        || !pod.spread_constraints.is_empty()
        || pod
            .default_spread_selector
            .as_ref()
            .is_some_and(|s| !s.requirements.is_empty())
}

impl TopoState {
    /// A copy of the filters' state alone, for a preemption dry run to update.
    pub(super) fn filters(&self) -> Self {
        Self {
            spread_filter: self.spread_filter.clone(),
            interpod_filter: self.interpod_filter.clone(),
            interpod_score: None,
            spread_score: None,
        }
    }

    /// kube-scheduler's PreFilterExtensions AddPod (`delta` 1) / RemovePod (−1) for both topology
    /// filters: counts the bound pod `other`, on node `node`, in or out for the incoming `pod`.
    pub(super) fn update_filters(
        &mut self,
        snapshot: &Snapshot,
        pod: &PodSpec,
        other: &BoundPod,
        node: usize,
        delta: i64,
    ) {
        if let Some(f) = self.spread_filter.as_mut() {
            f.update(&pod.namespace, &other.namespace, &other.labels, node, delta);
        }
        if let Some(f) = self.interpod_filter.as_mut() {
            let terms = other.affinity.as_deref();
            let other = super::topology::PodRef {
                node,
                namespace: &other.namespace,
                labels: &other.labels,
                affinity: terms.map(|t| &t.0).filter(|t| !t.is_empty()),
                anti_affinity: terms.map(|t| &t.1).filter(|t| !t.is_empty()),
                terminating: other.terminating,
            };
            let placed = Placed::default();
            f.update(
                &Existing {
                    snapshot,
                    placed: &placed,
                },
                pod,
                &other,
                delta,
            );
        }
    }

    /// PreFilter and PreScore of both plugins for `plan`'s pod, with `placed` already on their
    /// nodes; `None` (at no cost) when neither the pod nor any existing pod has such terms.
    pub(super) fn build(
        profile: &Profile,
        snapshot: &Snapshot,
        placed: &Placed<'_>,
        plan: &PodPlan<'_>,
    ) -> Option<Box<Self>> {
        let pod = plan.pod;
        let existing = Existing { snapshot, placed };
        if !has_topology_terms(pod) && !existing.any_affinity() {
            return None;
        }
        let policy = &profile.policy;
        let statics = |i: usize| {
            let se = plan.static_at(snapshot, i);
            (se.mismatched, se.untolerated)
        };
        let scored = |p: ScorePlugin| profile.score_plugins.iter().any(|(x, _)| *x == p);
        let state = TopoState {
            spread_filter: if policy.filters.contains(&FilterPlugin::PodTopologySpread) {
                SpreadFilter::new(&existing, pod, &policy.pod_topology_spread, &statics)
            } else {
                None
            },
            interpod_filter: if policy.filters.contains(&FilterPlugin::InterPodAffinity) {
                InterPodFilter::new(&existing, pod)
            } else {
                None
            },
            interpod_score: if scored(ScorePlugin::InterPodAffinity) {
                interpod_scoring::score_state(&existing, pod, &policy.inter_pod_affinity)
            } else {
                None
            },
            spread_score: if scored(ScorePlugin::PodTopologySpread) {
                SpreadScore::new(pod, &policy.pod_topology_spread)
            } else {
                None
            },
        };
        let idle = state.spread_filter.is_none()
            && state.interpod_filter.is_none()
            && state.interpod_score.is_none()
            && state.spread_score.is_none();
        (!idle).then(|| Box::new(state))
    }
}
