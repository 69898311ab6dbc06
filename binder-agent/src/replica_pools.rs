//! The binder's decision replicas by backend: its own pool (`--decision-endpoints` or
//! `--decision-dns`), and one pool per distinct backend the live experiments file names (an
//! arm's or a shadow's own replicas). A pool is created when a file naming its backend goes live
//! and kept, with its replicas' synced snapshots, while the backend stays unchanged; a backend no
//! longer named is dropped.

use std::sync::Arc;

use parking_lot::RwLock;

use crate::experiments::{client_tls, Backend, BackendSpec, ExperimentSet, Experiments, Routing, RoutingError};
use crate::replicas::{EndpointSource, ReplicaConfig, ReplicaPool};

/// The replica pools, by backend.
#[derive(Debug)]
pub struct ReplicaPools {
    main: Arc<ReplicaPool>,
    named: RwLock<Vec<(BackendSpec, Arc<ReplicaPool>)>>,
}

impl ReplicaPools {
    /// The binder's own pool, and no other.
    pub fn new(main: Arc<ReplicaPool>) -> Self {
        Self {
            main,
            named: RwLock::new(Vec::new()),
        }
    }

    /// The binder's own pool ([`Backend::MAIN`] of every routing).
    pub fn main(&self) -> &Arc<ReplicaPool> {
        &self.main
    }

    /// The pool of `routing`'s `backend`; `None` when the routing's backends were never set up
    /// here (a routing that is not live).
    pub fn of(&self, routing: &Routing, backend: Backend) -> Option<Arc<ReplicaPool>> {
        match routing.backends.get(backend.0)? {
            None => Some(Arc::clone(&self.main)),
            Some(spec) => self
                .named
                .read()
                .iter()
                .find(|(s, _)| s == spec)
                .map(|(_, pool)| Arc::clone(pool)),
        }
    }

    /// Sets up a pool for each backend of `routing` (reusing those already set up) and drops the
    /// pools of backends it does not name. Replica settings other than TLS are the binder's own.
    pub fn adopt(&self, routing: &Routing) -> Result<(), RoutingError> {
        let mut next: Vec<(BackendSpec, Arc<ReplicaPool>)> = Vec::new();
        {
            let current = self.named.read();
            for (spec, field) in routing.backends.iter().zip(&routing.fields) {
                let Some(spec) = spec else { continue };
                let reused = current.iter().find(|(s, _)| s == spec).map(|(_, p)| Arc::clone(p));
                let pool = match reused {
                    Some(pool) => pool,
                    None => {
                        let config = ReplicaConfig {
                            tls: client_tls(field, spec)?,
                            ..self.main.config.clone()
                        };
                        Arc::new(
                            ReplicaPool::new(EndpointSource::Static(spec.endpoints.clone()), config).map_err(
                                |source| RoutingError::Backend {
                                    field: field.clone(),
                                    source,
                                },
                            )?,
                        )
                    }
                };
                next.push((spec.clone(), pool));
            }
        }
        *self.named.write() = next;
        Ok(())
    }

    /// Makes `set` live in `experiments`: its backends' pools, then its routing. On error nothing
    /// changes.
    pub fn make_live(&self, experiments: &Experiments, set: ExperimentSet) -> Result<(), RoutingError> {
        let routing = Routing::build(set)?;
        self.adopt(&routing)?;
        experiments.install(routing);
        Ok(())
    }

    /// Makes a changed experiments file's text live, counting the reload
    /// (`binder_experiments_reloads_total`); on error the live version stays.
    pub fn reload_text(&self, experiments: &Experiments, text: &str) -> Result<(), RoutingError> {
        let result = ExperimentSet::parse(text)
            .map_err(RoutingError::from)
            .and_then(|set| self.make_live(experiments, set));
        experiments.count_reload(result.is_ok());
        result
    }

    /// The lowest state version a synced replica of any pool holds (replicas that hold nothing
    /// get a full snapshot anyway, so they hold no history back); `None` when none.
    pub fn min_synced_version(&self) -> Option<u64> {
        let named = self.named.read();
        std::iter::once(&self.main)
            .chain(named.iter().map(|(_, p)| p))
            .flat_map(|p| p.all())
            .filter_map(|r| r.synced.lock().as_ref().map(|h| h.version))
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> Arc<ReplicaPool> {
        Arc::new(
            ReplicaPool::new(
                EndpointSource::Static(vec!["http://127.0.0.1:1".into()]),
                ReplicaConfig::default(),
            )
            .unwrap(),
        )
    }

    #[tokio::test]
    async fn a_backend_keeps_its_pool_while_named_and_loses_it_after() {
        let yaml = r#"
experiments:
  - name: e
    arms:
      - {name: a, weight: 1, policy: default}
      - {name: b, weight: 1, policy: bin-packing, backend: {endpoints: ["http://127.0.0.1:2"]}}
"#;
        let pools = ReplicaPools::new(pool());
        let r1 = Routing::build(ExperimentSet::parse(yaml).unwrap()).unwrap();
        assert!(pools.of(&r1, Backend(1)).is_none(), "not set up before adopt");
        pools.adopt(&r1).unwrap();
        let first = pools.of(&r1, Backend(1)).expect("set up");
        assert!(
            Arc::ptr_eq(&pools.of(&r1, Backend::MAIN).unwrap(), pools.main()),
            "backend 0 is the binder's own"
        );
        let r2 = Routing::build(ExperimentSet::parse(yaml).unwrap()).unwrap();
        pools.adopt(&r2).unwrap();
        assert!(
            Arc::ptr_eq(&first, &pools.of(&r2, Backend(1)).unwrap()),
            "an unchanged backend is reused"
        );
        pools.adopt(&Routing::none()).unwrap();
        assert!(
            pools.of(&r2, Backend(1)).is_none(),
            "a backend no longer named is dropped"
        );
    }
}
