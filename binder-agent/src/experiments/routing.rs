//! Routing: which policy and decision backend decide each pending pod ([`Routing::route`],
//! [`Routing::split`]), and the annotations its Binding carries ([`Route::annotations`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use placement_scheduler::labels::{
    ARM_ANNOTATION, ASSIGNMENT_ANNOTATION, EXPERIMENT_ANNOTATION, PIN_ANNOTATION, POLICY_ANNOTATION,
};

use super::config::{client_tls, BackendSpec, ConfigError, ExperimentSet, PodFacts};
use crate::projection::PodInfo;
use crate::queue::QueuedPod;
use crate::replicas::ReplicaError;
/// The gang or PodGroup a pod belongs to (`gang/` or `podgroup/` and `namespace/name`), if any.
fn gang_of(info: &PodInfo) -> Option<String> {
    let spec = &info.spec;
    match &spec.gang {
        Some(g) => Some(format!("gang/{}/{}", spec.namespace, g.name)),
        None if !spec.scheduling_group.is_empty() => {
            Some(format!("podgroup/{}/{}", spec.namespace, spec.scheduling_group))
        }
        None => None,
    }
}

/// The experiment and arm label of pods no experiment selects (not a DNS label, so it never
/// collides with a configured name).
pub const NONE: &str = "-";

/// Why a routing could not be built.
#[derive(Debug, thiserror::Error)]
pub enum RoutingError {
    /// The file is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A backend's replicas could not be set up.
    #[error("{field}: {source}")]
    Backend {
        /// The field path of the backend.
        field: String,
        /// Why.
        source: ReplicaError,
    },
}

/// A backend of a [`Routing`]: the binder's own replicas (the main pool), or one an experiments
/// file names (an index in [`Routing::backends`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Backend(pub usize);

impl Backend {
    /// The binder's own replicas (`--decision-endpoints` or `--decision-dns`).
    pub const MAIN: Backend = Backend(0);

    /// Whether this is the binder's own pool (an experiment's or shadow's backend fails fast).
    pub fn is_main(self) -> bool {
        self == Self::MAIN
    }
}

/// Who decides a group of pods.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Route {
    /// Experiment name, or [`NONE`].
    pub experiment: String,
    /// Arm name, or [`NONE`].
    pub arm: String,
    /// Policy sent with the batch (empty: the backend's default).
    pub policy: String,
    /// Its backend ([`Backend::MAIN`]: the binder's replicas).
    pub backend: Backend,
    /// The backend for the report: `main` or its endpoints.
    pub backend_name: Arc<str>,
    /// Chosen by the pin annotation.
    pub pinned: bool,
}

impl Route {
    /// Whether an experiment selected the pods.
    pub fn in_experiment(&self) -> bool {
        self.experiment != NONE
    }

    /// The annotations the Binding carries: the policy the service applied, and the experiment,
    /// arm and how the arm was chosen when an experiment selected the pod.
    pub fn annotations(&self, applied_policy: &str) -> BTreeMap<String, String> {
        let mut a = BTreeMap::new();
        let policy = if applied_policy.is_empty() {
            self.policy_label()
        } else {
            applied_policy
        };
        a.insert(POLICY_ANNOTATION.to_string(), policy.to_string());
        if self.in_experiment() {
            a.insert(EXPERIMENT_ANNOTATION.to_string(), self.experiment.clone());
            a.insert(ARM_ANNOTATION.to_string(), self.arm.clone());
            let how = if self.pinned { "pin" } else { "hash" };
            a.insert(ASSIGNMENT_ANNOTATION.to_string(), how.to_string());
        }
        a
    }

    /// The span a group decided on this route runs in: `arm`, with the experiment and arm, when
    /// an experiment selected the group; none (the batch's own) otherwise.
    pub fn span(&self, pods: usize) -> tracing::Span {
        if self.in_experiment() {
            tracing::info_span!("arm", experiment = %self.experiment, arm = %self.arm, pods)
        } else {
            tracing::Span::none()
        }
    }

    /// The policy for labels: `default` when empty.
    pub fn policy_label(&self) -> &str {
        if self.policy.is_empty() {
            "default"
        } else {
            &self.policy
        }
    }

    pub(super) fn key(&self) -> (String, String) {
        (self.experiment.clone(), self.arm.clone())
    }
}

/// A shadow made live.
#[derive(Debug, Clone)]
pub struct ShadowRoute {
    /// Name.
    pub name: String,
    /// Policy evaluated.
    pub policy: String,
    /// Its backend.
    pub backend: Backend,
}

/// One version of the experiments file made live: who decides each pod. The replica pools of
/// its backends are the binder's ([`crate::replica_pools::ReplicaPools`]).
#[derive(Debug)]
pub struct Routing {
    /// The validated file.
    pub set: ExperimentSet,
    /// Backends: 0 (`None`) is the binder's own replicas, then one per distinct backend of the
    /// file.
    pub backends: Vec<Option<BackendSpec>>,
    /// The field path that first names each backend (for errors).
    pub fields: Vec<String>,
    /// Each backend for the table: `main` or its endpoints.
    names: Vec<Arc<str>>,
    /// `arm_backend[experiment][arm]`: the arm's backend.
    arm_backend: Vec<Vec<Backend>>,
    /// Shadows.
    pub shadows: Vec<ShadowRoute>,
}

impl Routing {
    /// Routing with no experiment and no shadow: every pod to the binder's replicas.
    pub fn none() -> Self {
        Self {
            set: ExperimentSet::default(),
            backends: vec![None],
            fields: vec![String::new()],
            names: vec![Arc::from("main")],
            arm_backend: Vec::new(),
            shadows: Vec::new(),
        }
    }

    /// Makes `set` a routing: one backend per distinct backend spec, its TLS files read.
    pub fn build(set: ExperimentSet) -> Result<Self, RoutingError> {
        let mut r = Self::none();
        let backend_of = |r: &mut Self, field: String, spec: &Option<BackendSpec>| -> Result<Backend, RoutingError> {
            let Some(spec) = spec else { return Ok(Backend::MAIN) };
            if let Some(i) = r.backends.iter().position(|s| s.as_ref() == Some(spec)) {
                return Ok(Backend(i));
            }
            client_tls(&field, spec)?;
            r.backends.push(Some(spec.clone()));
            r.fields.push(field);
            r.names.push(Arc::from(spec.endpoints.join(",")));
            Ok(Backend(r.backends.len() - 1))
        };
        for (i, e) in set.experiments.iter().enumerate() {
            let mut arms = Vec::new();
            for (j, a) in e.arms.iter().enumerate() {
                arms.push(backend_of(
                    &mut r,
                    format!("experiments[{i}].arms[{j}].backend"),
                    &a.backend,
                )?);
            }
            r.arm_backend.push(arms);
        }
        for (i, s) in set.shadows.iter().enumerate() {
            let backend = backend_of(&mut r, format!("shadows[{i}].backend"), &s.backend)?;
            r.shadows.push(ShadowRoute {
                name: s.name.clone(),
                policy: s.policy.clone(),
                backend,
            });
        }
        r.set = set;
        Ok(r)
    }

    /// Whether any experiment or shadow is configured.
    pub fn active(&self) -> bool {
        !self.set.is_empty()
    }

    /// Who decides a pod; `default_policy` for pods no experiment selects.
    pub fn route(&self, info: &PodInfo, default_policy: &str) -> Route {
        let facts = PodFacts {
            namespace: &info.spec.namespace,
            name: &info.spec.name,
            labels: &info.spec.labels,
            owner: info.owner.as_ref(),
            pin: info.annotations.get(PIN_ANNOTATION).map(String::as_str),
            pod_group: Some(info.spec.scheduling_group.as_str()).filter(|g| !g.is_empty()),
        };
        match self.set.assign(&facts) {
            Some(a) => {
                let e = &self.set.experiments[a.experiment];
                let arm = &e.arms[a.arm];
                let backend = self.arm_backend[a.experiment][a.arm];
                Route {
                    experiment: e.name.clone(),
                    arm: arm.name.clone(),
                    policy: arm.policy.clone(),
                    backend,
                    backend_name: self.backend_name(backend),
                    pinned: a.pinned,
                }
            }
            None => Route {
                experiment: NONE.into(),
                arm: NONE.into(),
                policy: default_policy.to_string(),
                backend: Backend::MAIN,
                backend_name: self.backend_name(Backend::MAIN),
                pinned: false,
            },
        }
    }

    /// Splits a batch by route, keeping the batch's order inside each group and ordering groups
    /// by their first pod (so the highest-priority pod's group is decided first). The members of
    /// a gang or a PodGroup all take the route of the first of them in the batch: their unit is
    /// the group's already, and this keeps them together where a selector or a pin would not.
    pub fn split(&self, batch: Vec<QueuedPod>, default_policy: &str) -> Vec<(Route, Vec<QueuedPod>)> {
        if !self.active() {
            // Every pod to the binder's own policy and replicas: one group, routed once.
            return match batch.first() {
                Some(p) => vec![(self.route(&p.info, default_policy), batch)],
                None => Vec::new(),
            };
        }
        let mut groups: Vec<(Route, Vec<QueuedPod>)> = Vec::new();
        let mut index: HashMap<Route, usize> = HashMap::new();
        let mut gangs: HashMap<String, Route> = HashMap::new();
        for p in batch {
            let route = match gang_of(&p.info) {
                Some(key) => gangs
                    .entry(key)
                    .or_insert_with(|| self.route(&p.info, default_policy))
                    .clone(),
                None => self.route(&p.info, default_policy),
            };
            match index.get(&route) {
                Some(&i) => groups[i].1.push(p),
                None => {
                    index.insert(route.clone(), groups.len());
                    groups.push((route, vec![p]));
                }
            }
        }
        groups
    }

    /// The backend of arm `arm` of experiment `experiment`.
    pub fn arm_backend(&self, experiment: usize, arm: usize) -> Backend {
        self.arm_backend[experiment][arm]
    }

    /// A description of a backend for the table: `main` or its endpoints.
    pub fn backend_name(&self, backend: Backend) -> Arc<str> {
        self.names.get(backend.0).cloned().unwrap_or_else(|| Arc::from("main"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use placement_scheduler::proto;

    #[tokio::test]
    async fn routes_split_a_batch_and_backends_are_shared() {
        let yaml = r#"
experiments:
  - name: e
    unit: pod
    arms:
      - {name: a, weight: 1, policy: default}
      - {name: b, weight: 1, policy: bin-packing, backend: {endpoints: ["http://127.0.0.1:2"]}}
shadows:
  - {name: s, policy: bin-packing, backend: {endpoints: ["http://127.0.0.1:2"]}}
"#;
        let r1 = Routing::build(ExperimentSet::parse(yaml).unwrap()).unwrap();
        assert_eq!(r1.backends.len(), 2, "the arm and the shadow share one backend");
        assert_eq!(r1.shadows[0].backend, Backend(1));

        let pods: Vec<QueuedPod> = (0..40)
            .map(|i| {
                let mut q = crate::queue::SchedulingQueue::new(Default::default());
                let info = PodInfo {
                    spec: proto::Pod {
                        uid: format!("u{i}"),
                        namespace: "ns".into(),
                        name: format!("p{i}"),
                        ..Default::default()
                    },
                    ..PodInfo::default()
                };
                q.add_or_update(info, tokio::time::Instant::now());
                q.pop_batch(1, tokio::time::Instant::now()).remove(0)
            })
            .collect();
        let groups = r1.split(pods, "");
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].1[0].info.spec.uid, "u0", "the first pod's group goes first");
        assert_eq!(groups.iter().map(|g| g.1.len()).sum::<usize>(), 40);
        for (route, pods) in &groups {
            assert_eq!(route.backend, Backend(usize::from(route.arm == "b")));
            for p in pods {
                assert_eq!(r1.route(&p.info, "").arm, route.arm);
            }
            let a = route.annotations("");
            assert_eq!(a[EXPERIMENT_ANNOTATION], "e");
            assert_eq!(a[ARM_ANNOTATION], route.arm);
            assert_eq!(a[ASSIGNMENT_ANNOTATION], "hash");
            assert_eq!(a[POLICY_ANNOTATION], route.policy_label());
        }
    }

    #[test]
    fn a_pod_groups_members_are_routed_to_one_arm_and_its_shadows_see_them_together() {
        let yaml = r#"
experiments:
  - name: e
    unit: pod
    arms:
      - {name: a, weight: 1, policy: default}
      - {name: b, weight: 1, policy: bin-packing}
shadows:
  - {name: s, policy: bin-packing}
"#;
        let r = Routing::build(ExperimentSet::parse(yaml).unwrap()).unwrap();
        let mut q = crate::queue::SchedulingQueue::new(Default::default());
        for (group, n) in [("g", 40), ("h", 40)] {
            for i in 0..n {
                q.add_or_update(
                    PodInfo {
                        spec: proto::Pod {
                            uid: format!("{group}-u{i}"),
                            namespace: "ns".into(),
                            name: format!("{group}-{i}"),
                            scheduling_group: group.into(),
                            ..Default::default()
                        },
                        ..PodInfo::default()
                    },
                    tokio::time::Instant::now(),
                );
            }
        }
        let pods = q.pop_batch(80, tokio::time::Instant::now());
        // Each route's group of pods is what its arm decides and its shadows evaluate: every
        // member of a PodGroup is in one of them, with no other group's pods left out of it.
        let groups = r.split(pods, "");
        for group in ["g", "h"] {
            let routes: Vec<&str> = groups
                .iter()
                .filter(|(_, pods)| pods.iter().any(|p| p.info.spec.scheduling_group == group))
                .map(|(route, _)| route.arm.as_str())
                .collect();
            assert_eq!(routes.len(), 1, "PodGroup {group} split over arms {routes:?}");
            let (_, pods) = groups.iter().find(|(route, _)| route.arm == routes[0]).unwrap();
            assert_eq!(
                pods.iter().filter(|p| p.info.spec.scheduling_group == group).count(),
                40
            );
        }
    }

    #[test]
    fn a_pin_on_one_member_does_not_split_its_pod_group() {
        let yaml = r#"
experiments:
  - name: e
    unit: pod
    allowPin: true
    arms:
      - {name: a, weight: 1, policy: default}
      - {name: b, weight: 0, policy: bin-packing}
"#;
        let r = Routing::build(ExperimentSet::parse(yaml).unwrap()).unwrap();
        let mut q = crate::queue::SchedulingQueue::new(Default::default());
        for i in 0..4 {
            let mut info = PodInfo {
                spec: proto::Pod {
                    uid: format!("u{i}"),
                    namespace: "ns".into(),
                    name: format!("m{i}"),
                    scheduling_group: "g".into(),
                    ..Default::default()
                },
                ..PodInfo::default()
            };
            if i == 2 {
                info.annotations.insert(PIN_ANNOTATION.into(), "b".into());
            }
            q.add_or_update(info, tokio::time::Instant::now());
        }
        let groups = r.split(q.pop_batch(4, tokio::time::Instant::now()), "");
        assert_eq!(
            groups.len(),
            1,
            "{:?}",
            groups.iter().map(|g| &g.0.arm).collect::<Vec<_>>()
        );
        assert_eq!((groups[0].0.arm.as_str(), groups[0].1.len()), ("a", 4));
    }
}
