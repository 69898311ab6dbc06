//! The operator-facing deploy package, `deploy/base` and the overlay `deploy/overlays/tls`:
//!
//! - `kubectl kustomize deploy/base` renders, and every object survives a round trip through its
//!   k8s-openapi type (a misspelled or misplaced field, which the API server would drop or
//!   reject, fails here); the TLS overlay renders too, its built-in kinds round-trip the same way
//!   and its cert-manager objects carry the fields cert-manager requires;
//! - the binder's RBAC grants exactly what the binder uses: the real agent runs against the
//!   recording fake API server with leader election on, each request becomes an
//!   (apiGroup, resource[/subresource], verb) access, and the rendered ClusterRole and Role must
//!   allow every one of them and grant nothing that none of them used.
//!
//! kubectl comes from `$KUBECTL` or `PATH`; `scripts/install-tools.sh` installs one when missing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Namespace, PodSpec, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use placement_binder::run::{LogFormat, RunArgs};
use placement_scheduler::engine::policy_config::parse_policy_file;
use placement_scheduler::engine::Policy;
use placement_scheduler::grpc::{serve, Metrics, ServerConfig};
use placement_tests::fake_apiserver::{FakeApiServer, RequestRecord};
use placement_tests::fixtures::{eventually, node, pod};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

const NAMESPACE: &str = "placement-system";
const BINDER_SA: &str = "placement-binder";
const DECISION_SA: &str = "placement-decision";
const WAIT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// Rendering and the typed round trip
// ---------------------------------------------------------------------------------------------

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// `kubectl kustomize deploy/{dir}`, or a failure saying how to get kubectl.
fn render(dir: &str) -> String {
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
    let base = repo_root().join("deploy").join(dir);
    let out = match Command::new(&kubectl).arg("kustomize").arg(&base).output() {
        Ok(out) => out,
        Err(e) => panic!(
            "cannot run kubectl ({kubectl:?}: {e}); run scripts/install-tools.sh and put .tools/bin on PATH, \
             or set KUBECTL to a kubectl binary"
        ),
    };
    assert!(
        out.status.success(),
        "kubectl kustomize {} failed: {}",
        base.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The objects of a YAML stream (empty documents dropped).
fn documents(yaml: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).expect("the rendered YAML parses");
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

fn rendered() -> Vec<Value> {
    rendered_from("base")
}

fn rendered_from(dir: &str) -> Vec<Value> {
    let docs = documents(&render(dir));
    assert!(!docs.is_empty(), "kubectl kustomize rendered nothing");
    docs
}

fn kind(obj: &Value) -> &str {
    obj["kind"].as_str().unwrap_or_default()
}

fn name(obj: &Value) -> &str {
    obj["metadata"]["name"].as_str().unwrap_or_default()
}

/// Where `after` differs from `before`, as JSON paths (fields dropped, changed or added).
fn differences(path: &str, before: &Value, after: &Value, out: &mut Vec<String>) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            for (k, bv) in b {
                match a.get(k) {
                    Some(av) => differences(&format!("{path}.{k}"), bv, av, out),
                    None => out.push(format!("{path}.{k} was dropped")),
                }
            }
            for k in a.keys().filter(|k| !b.contains_key(*k)) {
                out.push(format!("{path}.{k} was added"));
            }
        }
        (Value::Array(b), Value::Array(a)) if b.len() == a.len() => {
            for (i, (bv, av)) in b.iter().zip(a).enumerate() {
                differences(&format!("{path}[{i}]"), bv, av, out);
            }
        }
        _ if before == after => {}
        _ => out.push(format!("{path}: {before} became {after}")),
    }
}

fn typed<T: DeserializeOwned + Serialize>(obj: &Value) -> Result<Value, String> {
    let t: T = serde_json::from_value(obj.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(&t).map_err(|e| e.to_string())
}

/// Deserializes `obj` into the k8s-openapi type of its kind and back; every field must survive.
fn round_trip(obj: &Value) -> Result<(), String> {
    let back = match kind(obj) {
        "Namespace" => typed::<Namespace>(obj),
        "ServiceAccount" => typed::<ServiceAccount>(obj),
        "ClusterRole" => typed::<ClusterRole>(obj),
        "ClusterRoleBinding" => typed::<ClusterRoleBinding>(obj),
        "Role" => typed::<Role>(obj),
        "RoleBinding" => typed::<RoleBinding>(obj),
        "ConfigMap" => typed::<ConfigMap>(obj),
        "Deployment" => typed::<Deployment>(obj),
        "Service" => typed::<Service>(obj),
        "PodDisruptionBudget" => typed::<PodDisruptionBudget>(obj),
        "HorizontalPodAutoscaler" => typed::<HorizontalPodAutoscaler>(obj),
        "NetworkPolicy" => typed::<NetworkPolicy>(obj),
        other => return Err(format!("unexpected kind {other:?}")),
    }?;
    let mut diffs = Vec::new();
    differences("", obj, &back, &mut diffs);
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(diffs.join("; "))
    }
}

fn the<'a>(docs: &'a [Value], kind_: &str, name_: &str) -> &'a Value {
    docs.iter()
        .find(|d| kind(d) == kind_ && name(d) == name_)
        .unwrap_or_else(|| panic!("no {kind_} {name_} rendered"))
}

/// The experiments file as rendered (ConfigMap `binder-experiments`).
fn experiments_file(docs: &[Value]) -> String {
    let cm: ConfigMap = parse(the(docs, "ConfigMap", "binder-experiments"));
    cm.data.unwrap()["experiments.yaml"].clone()
}

fn parse<T: DeserializeOwned>(obj: &Value) -> T {
    serde_json::from_value(obj.clone()).unwrap()
}

/// The binder's settings: the ConfigMap `binder-config-<hash>`.
fn binder_config(docs: &[Value]) -> ConfigMap {
    parse(
        docs.iter()
            .find(|d| kind(d) == "ConfigMap" && name(d).starts_with("binder-config"))
            .expect("a binder-config ConfigMap"),
    )
}

#[test]
fn every_rendered_object_survives_a_round_trip_through_its_type() {
    let docs = rendered();
    let mut failures = Vec::new();
    for d in &docs {
        if let Err(e) = round_trip(d) {
            failures.push(format!("{} {}: {e}", kind(d), name(d)));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");

    let kinds: BTreeSet<&str> = docs.iter().map(kind).collect();
    let expected = [
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Deployment",
        "HorizontalPodAutoscaler",
        "Namespace",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ];
    assert_eq!(kinds, expected.into_iter().collect());
    for d in docs
        .iter()
        .filter(|d| !matches!(kind(d), "Namespace" | "ClusterRole" | "ClusterRoleBinding"))
    {
        assert_eq!(d["metadata"]["namespace"], NAMESPACE, "{} {}", kind(d), name(d));
    }
}

/// cert-manager kinds have no k8s-openapi type: their identity and the spec fields cert-manager
/// requires are checked instead.
fn check_cert_manager(obj: &Value) -> Result<(), String> {
    if obj["apiVersion"] != "cert-manager.io/v1" {
        return Err(format!("apiVersion {}", obj["apiVersion"]));
    }
    if name(obj).is_empty() {
        return Err("no metadata.name".into());
    }
    let spec = &obj["spec"];
    match kind(obj) {
        "Certificate" => {
            let issuer = &spec["issuerRef"];
            if !spec["secretName"].is_string() || !issuer["name"].is_string() {
                return Err("spec.secretName and spec.issuerRef.name are required".into());
            }
            if !matches!(issuer["kind"].as_str(), None | Some("Issuer" | "ClusterIssuer")) {
                return Err(format!("issuerRef.kind {}", issuer["kind"]));
            }
            Ok(())
        }
        "Issuer" => match ["selfSigned", "ca", "acme", "vault", "venafi"]
            .iter()
            .filter(|k| spec.get(**k).is_some())
            .count()
        {
            1 => Ok(()),
            n => Err(format!("an Issuer needs exactly one issuer type, has {n}")),
        },
        other => Err(format!("unexpected cert-manager kind {other:?}")),
    }
}

#[test]
fn the_tls_overlay_renders_and_wires_certificates_into_both_workloads() {
    let docs = rendered_from("overlays/tls");
    let mut failures = Vec::new();
    for d in &docs {
        let checked = match d["apiVersion"].as_str().unwrap_or_default() {
            v if v.starts_with("cert-manager.io/") => check_cert_manager(d),
            _ => round_trip(d),
        };
        if let Err(e) = checked {
            failures.push(format!("{} {}: {e}", kind(d), name(d)));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    let kinds: BTreeSet<&str> = docs.iter().map(kind).collect();
    assert!(kinds.contains("Certificate") && kinds.contains("Issuer"), "{kinds:?}");
    let base: BTreeSet<String> = rendered().iter().map(|d| kind(d).to_string()).collect();
    assert!(
        base.iter().all(|k| kinds.contains(k.as_str())),
        "a base kind is missing"
    );

    // Every Certificate is issued by an Issuer of the overlay.
    for cert in docs.iter().filter(|d| kind(d) == "Certificate") {
        the(&docs, "Issuer", cert["spec"]["issuerRef"]["name"].as_str().unwrap());
    }
    let server = the(&docs, "Certificate", "placement-decision-tls");
    let client = the(&docs, "Certificate", "placement-binder-tls");
    assert!(client["spec"]["usages"]
        .as_array()
        .unwrap()
        .contains(&"client auth".into()));

    // The decision service: mutual TLS from its Secret, TCP probes (kubelet gRPC probes are
    // plaintext).
    let decision: Deployment = parse(the(&docs, "Deployment", "placement-decision"));
    let pod = decision.spec.template.spec.unwrap();
    let c = &pod.containers[0];
    let env: BTreeMap<String, String> = c
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect();
    let mount = |c: &Container, pod: &PodSpec, secret: &Value| {
        let volume = pod
            .volumes
            .iter()
            .flatten()
            .find(|v| v.secret.as_ref().and_then(|s| s.secret_name.as_deref()) == secret["spec"]["secretName"].as_str())
            .expect("the certificate's Secret is a volume");
        let m = c
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == volume.name)
            .expect("the Secret is mounted");
        m.mount_path.clone()
    };
    let dir = mount(c, &pod, server);
    for (var, file) in [
        ("PLACEMENT_TLS_CERT", "tls.crt"),
        ("PLACEMENT_TLS_KEY", "tls.key"),
        ("PLACEMENT_TLS_CLIENT_CA", "ca.crt"),
    ] {
        assert_eq!(env[var], format!("{dir}/{file}"));
    }
    for probe in [&c.liveness_probe, &c.readiness_probe] {
        let probe = probe.clone().unwrap();
        assert!(probe.grpc.is_none() && probe.tcp_socket.is_some());
    }

    // The binder: its client certificate, and a server name the decision certificate carries.
    let binder: Deployment = parse(the(&docs, "Deployment", "placement-binder"));
    let pod = binder.spec.template.spec.unwrap();
    let dir = mount(&pod.containers[0], &pod, client);
    let config: ConfigMap = binder_config(&docs);
    let data = config.data.unwrap();
    for (var, file) in [
        ("BINDER_DECISION_TLS_CA", "ca.crt"),
        ("BINDER_DECISION_TLS_CERT", "tls.crt"),
        ("BINDER_DECISION_TLS_KEY", "tls.key"),
    ] {
        assert_eq!(data[var], format!("{dir}/{file}"));
    }
    let names = server["spec"]["dnsNames"].as_array().unwrap();
    assert!(names.contains(&data["BINDER_DECISION_TLS_SERVER_NAME"].clone().into()));
    assert_eq!(
        data["BINDER_DECISION_DNS"],
        format!("placement-decision.{NAMESPACE}.svc:50051")
    );
}

/// The experiments file is mounted where `BINDER_EXPERIMENTS_FILE` points, parses as the binder
/// parses it, and so do the examples in `deploy/experiments/`.
#[test]
fn the_experiments_file_is_mounted_where_the_binder_reads_it() {
    let docs = rendered();
    let config: ConfigMap = binder_config(&docs);
    let data = config.data.unwrap();
    let file = std::path::Path::new(&data["BINDER_EXPERIMENTS_FILE"]);
    let binder: Deployment = parse(the(&docs, "Deployment", "placement-binder"));
    let pod = binder.spec.template.spec.unwrap();
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.config_map.as_ref().is_some_and(|c| c.name == "binder-experiments"))
        .expect("the experiments ConfigMap is a volume");
    let mount = pod.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == volume.name)
        .expect("the binder mounts it");
    assert_eq!(file.parent().unwrap(), std::path::Path::new(&mount.mount_path));
    assert_eq!(mount.read_only, Some(true));
    let text = experiments_file(&docs);
    assert_eq!(file.file_name().unwrap(), "experiments.yaml");
    placement_binder::experiments::ExperimentSet::parse(&text).expect("the base experiments file parses");
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/experiments");
    for entry in std::fs::read_dir(&examples).unwrap() {
        let path = entry.unwrap().path();
        placement_binder::experiments::ExperimentSet::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

#[test]
fn a_misspelled_field_fails_the_round_trip() {
    let yaml = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  replica: 3\n  selector: {}\n  \
                template:\n    spec:\n      containers: []\n";
    let docs = documents(yaml);
    let err = round_trip(&docs[0]).unwrap_err();
    assert!(err.contains(".spec.replica was dropped"), "{err}");
    // Spelled right, the same object passes.
    let docs = documents(&yaml.replace("replica:", "replicas:"));
    round_trip(&docs[0]).unwrap();
    // A field in the wrong place is caught as well.
    let docs = documents(&yaml.replace("      containers: []", "      containers: []\n      image: x"));
    assert!(round_trip(&docs[0])
        .unwrap_err()
        .contains(".spec.template.spec.image was dropped"));
}

#[test]
fn the_workloads_are_locked_down_and_wired_together() {
    let docs = rendered();
    let decision: Deployment = parse(the(&docs, "Deployment", "placement-decision"));
    let binder: Deployment = parse(the(&docs, "Deployment", "placement-binder"));
    let spec = |d: &Deployment| d.spec.clone();
    assert_eq!(spec(&decision).replicas, Some(3));
    assert_eq!(spec(&binder).replicas, Some(2));

    for (d, image, sa) in [
        (&decision, "ghcr.io/placement/scheduler-service:0.1.0", DECISION_SA),
        (&binder, "ghcr.io/placement/binder-agent:0.1.0", BINDER_SA),
    ] {
        let pod = spec(d).template.spec.unwrap();
        assert_eq!(pod.service_account_name.as_deref(), Some(sa));
        let psc = pod.security_context.unwrap();
        assert_eq!(psc.run_as_non_root, Some(true));
        assert_eq!(psc.run_as_user, Some(65532));
        assert_eq!(psc.seccomp_profile.unwrap().type_, "RuntimeDefault");
        for c in &pod.containers {
            assert_eq!(c.image.as_deref(), Some(image));
            let sc = c.security_context.clone().unwrap();
            assert_eq!(sc.run_as_non_root, Some(true));
            assert_eq!(sc.run_as_user, Some(65532));
            assert_eq!(sc.read_only_root_filesystem, Some(true));
            assert_eq!(sc.allow_privilege_escalation, Some(false));
            assert_eq!(sc.capabilities.unwrap().drop, Some(vec!["ALL".to_string()]));
            assert_eq!(sc.seccomp_profile.unwrap().type_, "RuntimeDefault");
            let r = c.resources.clone().unwrap();
            assert!(r.requests.is_some() && r.limits.is_some(), "{} resources", c.name);
            assert!(
                c.liveness_probe.is_some() && c.readiness_probe.is_some(),
                "{} probes",
                c.name
            );
        }
    }

    // The decision service: no API access, gRPC probes, listening on the pod's address.
    let pod = spec(&decision).template.spec.unwrap();
    assert_eq!(pod.automount_service_account_token, Some(false));
    let sa: ServiceAccount = parse(the(&docs, "ServiceAccount", DECISION_SA));
    assert_eq!(sa.automount_service_account_token, Some(false));
    let c = &pod.containers[0];
    assert!(c.args.as_ref().unwrap().contains(&"--listen=0.0.0.0:50051".to_string()));
    for probe in [&c.liveness_probe, &c.readiness_probe] {
        assert_eq!(probe.clone().unwrap().grpc.unwrap().port, 50051);
    }
    assert!(pod.topology_spread_constraints.is_some());
    let svc: Service = parse(the(&docs, "Service", "placement-decision"));
    let svc = svc.spec.unwrap();
    assert_eq!(svc.cluster_ip.as_deref(), Some("None"));
    assert_eq!(
        svc.selector,
        spec(&decision)
            .template
            .metadata
            .unwrap()
            .labels
            .map(|l| { l.into_iter().filter(|(k, _)| k == "app.kubernetes.io/name").collect() })
    );

    // The binder finds the decision replicas through the headless Service.
    let config: ConfigMap = binder_config(&docs);
    let data = config.data.unwrap();
    assert_eq!(
        data["BINDER_DECISION_DNS"],
        format!("placement-decision.{NAMESPACE}.svc:50051")
    );
    let c = &spec(&binder).template.spec.unwrap().containers[0];
    let from = c.env_from.clone().unwrap();
    assert_eq!(
        from[0].config_map_ref.as_ref().map(|r| r.name.as_str()),
        config.metadata.name.as_deref()
    );
    let http = |p: &Option<k8s_openapi::api::core::v1::Probe>| p.clone().unwrap().http_get.unwrap().path;
    assert_eq!(http(&c.liveness_probe).as_deref(), Some("/healthz"));
    assert_eq!(http(&c.readiness_probe).as_deref(), Some("/readyz"));

    // Only the binder reaches the gRPC port.
    let np: NetworkPolicy = parse(the(&docs, "NetworkPolicy", "placement-decision"));
    let ingress = np.spec.unwrap().ingress.unwrap();
    let grpc: Vec<_> = ingress
        .iter()
        .filter(|r| {
            r.ports
                .iter()
                .flatten()
                .any(|p| p.port == Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(50051)))
        })
        .collect();
    assert_eq!(grpc.len(), 1);
    let peers = grpc[0].from.clone().unwrap();
    assert_eq!(peers.len(), 1);
    let labels = peers[0].pod_selector.clone().unwrap().match_labels.unwrap();
    assert_eq!(labels["app.kubernetes.io/name"], "placement-binder");
    assert!(
        peers[0].namespace_selector.is_none(),
        "binder pods of this namespace only"
    );
}

// ---------------------------------------------------------------------------------------------
// RBAC against the binder's real requests
// ---------------------------------------------------------------------------------------------

/// One API access as RBAC sees it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Access {
    group: String,
    /// `resource` or `resource/subresource`.
    resource: String,
    verb: &'static str,
    namespace: Option<String>,
    name: Option<String>,
}

/// A request's RBAC verb and resource, as the API server's request-info resolver derives them.
fn access(method: &str, path: &str, watch: bool) -> Access {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, mut rest) = match segs.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => panic!("not a resource path: {path}"),
    };
    let mut namespace = None;
    if rest.len() >= 3 && rest[0] == "namespaces" {
        namespace = Some(rest[1].to_string());
        rest = &rest[2..];
    }
    let name = rest.get(1).map(|s| s.to_string());
    let resource = match rest.get(2) {
        Some(sub) => format!("{}/{sub}", rest[0]),
        None => rest[0].to_string(),
    };
    let verb = match (method, name.is_some(), watch) {
        ("GET", _, true) => "watch",
        ("GET", false, false) => "list",
        ("GET", true, false) => "get",
        ("POST", ..) => "create",
        ("PUT", ..) => "update",
        ("PATCH", ..) => "patch",
        ("DELETE", true, _) => "delete",
        ("DELETE", false, _) => "deletecollection",
        _ => panic!("unexpected request {method} {path}"),
    };
    Access {
        group: group.into(),
        resource,
        verb,
        namespace,
        name,
    }
}

/// A rule together with where it applies (`None`: every namespace and cluster-scoped objects).
struct Grant {
    rule: PolicyRule,
    namespace: Option<String>,
    from: String,
}

impl Grant {
    fn allows(&self, a: &Access) -> bool {
        let has = |v: &Option<Vec<String>>, x: &str| v.iter().flatten().any(|s| s == x);
        let names = self.rule.resource_names.clone().unwrap_or_default();
        (self.namespace.is_none() || self.namespace == a.namespace)
            && has(&self.rule.api_groups, &a.group)
            && has(&self.rule.resources, &a.resource)
            && self.rule.verbs.iter().any(|v| v == a.verb)
            && (names.is_empty() || a.name.as_ref().is_some_and(|n| names.contains(n)))
    }
}

fn binds_binder(subjects: &Option<Vec<k8s_openapi::api::rbac::v1::Subject>>) -> bool {
    subjects
        .iter()
        .flatten()
        .any(|s| s.kind == "ServiceAccount" && s.name == BINDER_SA && s.namespace.as_deref() == Some(NAMESPACE))
}

/// The rules the binder's ServiceAccount gets from the rendered bindings.
fn binder_grants(docs: &[Value]) -> Vec<Grant> {
    let mut grants = Vec::new();
    for d in docs {
        match kind(d) {
            "ClusterRoleBinding" => {
                let b: ClusterRoleBinding = parse(d);
                assert!(!names_decision_sa(&b.subjects), "the decision service gets no role");
                if binds_binder(&b.subjects) {
                    assert_eq!(b.role_ref.kind, "ClusterRole");
                    let role: ClusterRole = parse(the(docs, "ClusterRole", &b.role_ref.name));
                    for rule in role.rules.unwrap_or_default() {
                        grants.push(Grant {
                            rule,
                            namespace: None,
                            from: format!("ClusterRole {}", b.role_ref.name),
                        });
                    }
                }
            }
            "RoleBinding" => {
                let b: RoleBinding = parse(d);
                assert!(!names_decision_sa(&b.subjects), "the decision service gets no role");
                if binds_binder(&b.subjects) {
                    assert_eq!(
                        b.role_ref.kind, "Role",
                        "a RoleBinding of a ClusterRole is not expected"
                    );
                    let role: Role = parse(the(docs, "Role", &b.role_ref.name));
                    assert_eq!(role.metadata.namespace, b.metadata.namespace);
                    for rule in role.rules.unwrap_or_default() {
                        grants.push(Grant {
                            rule,
                            namespace: b.metadata.namespace.clone(),
                            from: format!("Role {}", b.role_ref.name),
                        });
                    }
                }
            }
            _ => {}
        }
    }
    grants
}

fn names_decision_sa(subjects: &Option<Vec<k8s_openapi::api::rbac::v1::Subject>>) -> bool {
    subjects.iter().flatten().any(|s| s.name == DECISION_SA)
}

/// The FailedScheduling events about the `shop` pod `name`.
fn failed_scheduling_events_of(server: &FakeApiServer, name: &str) -> Vec<k8s_openapi::api::events::v1::Event> {
    server
        .events_v1()
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("FailedScheduling"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect()
}

/// A local volume on n1 and a claim of its WaitForFirstConsumer class, a claim of a
/// WaitForFirstConsumer class that provisions, and a pod using each.
fn storage_pods(server: &FakeApiServer, scheduler: &str) {
    use placement_tests::fake_apiserver::Kind;
    use serde_json::json;
    for (name, provisioner) in [("local", "kubernetes.io/no-provisioner"), ("fast", "csi.example.com")] {
        server.create_raw(
            Kind::StorageClass,
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                   "provisioner": provisioner, "volumeBindingMode": "WaitForFirstConsumer"}),
        );
        server.create_raw(
            Kind::PersistentVolumeClaim,
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": format!("data-{name}"), "namespace": "shop"},
                   "spec": {"storageClassName": name, "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}}}}),
        );
        let mut p = pod("shop", &format!("db-{name}"), scheduler, "1m", None);
        p.spec.as_mut().unwrap().volumes = Some(vec![k8s_openapi::api::core::v1::Volume {
            name: "data".into(),
            persistent_volume_claim: Some(k8s_openapi::api::core::v1::PersistentVolumeClaimVolumeSource {
                claim_name: format!("data-{name}"),
                read_only: None,
            }),
            ..Default::default()
        }]);
        server.create_pod(p);
    }
    server.create_raw(
        Kind::PersistentVolume,
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "local-1"},
               "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                        "storageClassName": "local", "local": {"path": "/mnt/1"},
                        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}},
               "status": {"phase": "Available"}}),
    );
}

/// The device driver of [`device_pods`]' ResourceSlice.
const GPU_DRIVER: &str = "gpu.deploy-test.example.com";

/// DynamicResources: a DeviceClass, a ResourceSlice with three GPUs on n1, and two pods of
/// `scheduler` with claims of that class: `shop/render` (claim `gpu-render`) and `shop/train`
/// (claims `gpu-train-a` then `gpu-train-b`). The fake server answers the first status write of
/// `gpu-train-b` with an error, so train's first PreBind reserves `gpu-train-a`, fails on
/// `gpu-train-b` and releases `gpu-train-a` again (Unreserve's status PATCH) before the pod is
/// decided and bound again; it answers the first status write of `gpu-render` with a conflict,
/// so render's PreBind reads that claim again (the only read of a claim PreBind makes).
fn device_pods(server: &FakeApiServer, scheduler: &str) {
    use placement_tests::fake_apiserver::{matcher, Kind};
    use serde_json::json;
    server.create_raw(
        Kind::DeviceClass,
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
               "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{GPU_DRIVER}\"")}}],
                        "extendedResourceName": "example.com/gpu"}}),
    );
    let devices: Vec<Value> = (0..4)
        .map(|i| json!({"name": format!("gpu-{i}"), "attributes": {"model": {"string": "a100"}}}))
        .collect();
    server.create_raw(
        Kind::ResourceSlice,
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n1-gpus"},
               "spec": {"driver": GPU_DRIVER, "nodeName": "n1",
                        "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                        "devices": devices}}),
    );
    for (pod_name, claims) in [
        ("render", &["gpu-render"][..]),
        ("train", &["gpu-train-a", "gpu-train-b"][..]),
    ] {
        for claim in claims {
            server.create_raw(
                Kind::ResourceClaim,
                json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                       "metadata": {"name": claim, "namespace": "shop"},
                       "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}),
            );
        }
        let mut p = serde_json::to_value(pod("shop", pod_name, scheduler, "0", None)).unwrap();
        p["spec"]["resourceClaims"] = claims
            .iter()
            .enumerate()
            .map(|(i, c)| json!({"name": format!("gpu-{i}"), "resourceClaimName": c}))
            .collect();
        p["spec"]["containers"][0]["resources"]["claims"] = claims
            .iter()
            .enumerate()
            .map(|(i, _)| json!({"name": format!("gpu-{i}")}))
            .collect();
        server.create_pod(serde_json::from_value(p).unwrap());
    }
    server.fail_next(1, matcher("PATCH", "/resourceclaims/gpu-train-b/status"), 500);
    server.fail_next(1, matcher("PATCH", "/resourceclaims/gpu-render/status"), 409);
    // A pod asking for the class's extended resource: its special claim is created; the first
    // one's finalizer update fails, so it is deleted (Unreserve) and the pod tried again.
    let mut p = serde_json::to_value(pod("shop", "infer", scheduler, "0", None)).unwrap();
    p["spec"]["containers"][0]["resources"]["limits"] = json!({"example.com/gpu": "1"});
    p["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"] = json!("1");
    server.create_pod(serde_json::from_value(p).unwrap());
    server.fail_next(1, matcher("PATCH", "/resourceclaims/infer-extended-resources-"), 500);
}

/// A gang PodGroup `shop/trainers` (minCount 2) and its two pods of `scheduler`: decided in one
/// PodGroup cycle, the group's PodGroupInitiallyScheduled condition patched.
fn pod_group_pods(server: &FakeApiServer, scheduler: &str) {
    use placement_tests::fake_apiserver::Kind;
    use serde_json::json;
    server.create_raw(
        Kind::PodGroup,
        json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
               "metadata": {"name": "trainers", "namespace": "shop"},
               "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}),
    );
    for i in 0..2 {
        let mut p = serde_json::to_value(pod("shop", &format!("trainer-{i}"), scheduler, "1m", None)).unwrap();
        p["spec"]["schedulingGroup"] = json!({"podGroupName": "trainers"});
        server.create_pod(serde_json::from_value(p).unwrap());
    }
}

/// The `shop` ResourceClaim `name` as stored.
fn claim(server: &FakeApiServer, name: &str) -> k8s_openapi::api::resource::v1::ResourceClaim {
    let raw = server
        .get_raw(placement_tests::fake_apiserver::Kind::ResourceClaim, Some("shop"), name)
        .unwrap_or_else(|| panic!("claim {name} exists"));
    serde_json::from_value(raw).unwrap()
}

/// Runs `binder-agent run` as the Deployment configures it (the rendered ConfigMap's settings,
/// leader election on, the lease in the pod's namespace) through every kind of write it makes:
/// binds with Scheduled events, VolumeBinding's PreBind ([`storage_pods`]), DynamicResources'
/// PreBind and Unreserve ([`device_pods`]), an unschedulable pod (status patch, FailedScheduling
/// event, then the event series patch on a repeat), a preemption (nominatedNodeName and
/// DisruptionTarget status patches, a victim's graceful delete, the Preempted event), and the
/// lease's create, renewals and release.
async fn binder_requests(config: &BTreeMap<String, String>, experiments: &str) -> Vec<RequestRecord> {
    let server = FakeApiServer::start().await;
    let scheduler = config["BINDER_SCHEDULER_NAME"].clone();
    server.create_node(node("n1", "1"));
    server.create_pod(pod("default", "web-0", &scheduler, "250m", None));
    server.create_pod(pod("shop", "web-1", &scheduler, "250m", None));
    server.create_pod(pod("shop", "huge", &scheduler, "10", None));
    // Two pods with WaitForFirstConsumer claims: one bound to a local volume (the binder updates
    // the volume), one provisioned (the binder updates the claim).
    storage_pods(&server, &scheduler);
    // Two pods with ResourceClaims (DynamicResources' PreBind, and its Unreserve on a failure).
    device_pods(&server, &scheduler);
    // A PodGroup's two pods (its PodGroupInitiallyScheduled condition).
    pod_group_pods(&server, &scheduler);

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let (stop_decisions, decisions_stopped) = oneshot::channel::<()>();
    tokio::spawn(serve(
        listener,
        ServerConfig::default(),
        Arc::new(Metrics::new()),
        async {
            let _ = decisions_stopped.await;
        },
    ));

    // In the pod, BINDER_LEASE_NAMESPACE is the pod's namespace; here the kubeconfig's.
    let kubeconfig = std::env::temp_dir().join(format!(
        "deploy-rbac-{}-{}.yaml",
        std::process::id(),
        server.addr().port()
    ));
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\nusers:\n- name: binder\n  user: {{}}\n\
             contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: binder\n    namespace: {NAMESPACE}\n\
             current-context: fake\n",
            server.url()
        ),
    )
    .unwrap();
    // The rendered experiments file, where the Deployment mounts it.
    let experiments_path = kubeconfig.with_extension("experiments.yaml");
    std::fs::write(&experiments_path, experiments).unwrap();
    let http = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let num = |k: &str| config[k].parse::<u64>().unwrap();
    let args = RunArgs {
        kubeconfig: Some(kubeconfig.clone()),
        scheduler_names: vec![scheduler.clone()],
        decision_endpoints: vec![endpoint],
        decision_dns: None,
        decision_dns_refresh_secs: 10,
        decision_timeout_ms: num("BINDER_DECISION_TIMEOUT_MS"),
        decision_tls_ca: None,
        decision_tls_cert: None,
        decision_tls_key: None,
        decision_tls_server_name: None,
        batch_size: 256,
        batch_window_ms: 5,
        batches_in_flight: 1,
        gang_timeout_seconds: 60,
        nomination_timeout_seconds: num("BINDER_NOMINATION_TIMEOUT_SECONDS"),
        volume_bind_timeout_seconds: 600,
        dra_binding_timeout_seconds: 600,
        bind_concurrency: 64,
        event_concurrency: 8,
        api_qps: 0,
        api_burst: 100,
        api_timeout_ms: 5_000,
        api_http2: false,
        policy: String::new(),
        policy_file: None,
        seed: 0,
        experiments_file: Some(experiments_path.clone()),
        experiments_reload_secs: num("BINDER_EXPERIMENTS_RELOAD_SECS"),
        leader_elect: config["BINDER_LEADER_ELECT"] == "true",
        no_leader_elect: false,
        lease_namespace: None,
        lease_name: config["BINDER_LEASE_NAME"].clone(),
        lease_duration_secs: num("BINDER_LEASE_DURATION_SECS"),
        lease_grace_secs: num("BINDER_LEASE_GRACE_SECS"),
        identity: Some("binder-0".into()),
        reporting_controller: config["BINDER_REPORTING_CONTROLLER"].clone(),
        http_listen: http,
        log_format: LogFormat::Text,
        tracing_config_file: None,
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let agent = tokio::spawn(placement_binder::run::run_until(args, async {
        let _ = stopped.await;
    }));

    eventually(WAIT, "the small pods bound and the huge one reported", || {
        // The PV controller completes the claims' bindings.
        server.play_pv_controller();
        async {
            let bound = server
                .pods()
                .iter()
                .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
                .count();
            bound == 9 && failed_scheduling_events_of(&server, "huge").len() == 1
        }
    })
    .await;
    // The device pods' claims are allocated on n1 and reserved for them; train's failed first
    // PreBind was reported (SchedulerError) and released gpu-train-a before the retry.
    for (pod_name, claim_names) in [
        ("render", &["gpu-render"][..]),
        ("train", &["gpu-train-a", "gpu-train-b"][..]),
    ] {
        let p = server.get_pod("shop", pod_name).expect("the pod exists");
        assert_eq!(p.spec.as_ref().and_then(|s| s.node_name.as_deref()), Some("n1"));
        for name in claim_names {
            let c = claim(&server, name);
            let status = c.status.unwrap_or_default();
            assert!(status.allocation.is_some(), "{name} is allocated: {status:?}");
            let reserved: Vec<_> = status
                .reserved_for
                .unwrap_or_default()
                .into_iter()
                .map(|r| r.uid)
                .collect();
            assert_eq!(
                reserved,
                vec![p.metadata.uid.clone().unwrap()],
                "{name} is reserved for {pod_name}"
            );
            assert!(c
                .metadata
                .finalizers
                .unwrap_or_default()
                .contains(&"resource.kubernetes.io/delete-protection".to_string()));
        }
    }
    // The pod asking for the class's extended resource: on n1, its special claim (the second one
    // created: the first was deleted after its failed PreBind) allocated and reserved for it.
    let infer = server.get_pod("shop", "infer").expect("the pod exists");
    assert_eq!(infer.spec.as_ref().and_then(|s| s.node_name.as_deref()), Some("n1"));
    let special = infer
        .status
        .and_then(|s| s.extended_resource_claim_status)
        .expect("infer's extendedResourceClaimStatus");
    assert!(special.resource_claim_name.starts_with("infer-extended-resources-"));
    let c = claim(&server, &special.resource_claim_name);
    let status = c.status.unwrap_or_default();
    assert!(status.allocation.is_some(), "the special claim is allocated");
    assert_eq!(
        status
            .reserved_for
            .unwrap_or_default()
            .iter()
            .map(|r| r.uid.clone())
            .collect::<Vec<_>>(),
        vec![infer.metadata.uid.clone().unwrap()]
    );
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.method == "DELETE" && r.path.contains("/resourceclaims/infer-extended-resources-")),
        "the first special claim was deleted"
    );
    // The PodGroup's pods are bound together and its condition says so, as kube-scheduler's.
    eventually(WAIT, "the PodGroup scheduled", || async {
        server
            .get_raw(
                placement_tests::fake_apiserver::Kind::PodGroup,
                Some("shop"),
                "trainers",
            )
            .and_then(|g| g["status"]["conditions"].as_array().cloned())
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c["type"] == "PodGroupInitiallyScheduled" && c["status"] == "True" && c["reason"] == "Scheduled"
                })
            })
    })
    .await;
    for i in 0..2 {
        let p = server.get_pod("shop", &format!("trainer-{i}")).expect("the pod exists");
        assert_eq!(p.spec.as_ref().and_then(|s| s.node_name.as_deref()), Some("n1"));
    }
    assert_eq!(
        failed_scheduling_events_of(&server, "train").len(),
        1,
        "train's first PreBind failed"
    );
    assert!(server
        .requests()
        .iter()
        .any(|r| r.method == "PATCH" && r.path.ends_with("/resourceclaims/gpu-train-a/status") && r.status == 200));
    // A node change sends the huge pod round again: the same failure becomes an event series.
    server.modify_node("n1", |n| {
        n.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("tier".into(), "2".into());
    });
    eventually(WAIT, "the FailedScheduling event series", || async {
        failed_scheduling_events_of(&server, "huge")
            .iter()
            .any(|e| e.series.is_some())
    })
    .await;
    // Preemption: a low-priority pod fills n1; a more important pod evicts (deletes) a victim.
    let mut filler = pod("shop", "batch", "default-scheduler", "500m", Some("n1"));
    filler.spec.as_mut().unwrap().priority = Some(0);
    server.create_pod(filler);
    let mut urgent = pod("shop", "urgent", &scheduler, "500m", None);
    urgent.spec.as_mut().unwrap().priority = Some(1000);
    server.create_pod(urgent);
    eventually(WAIT, "a victim terminating", || async {
        server.pods().iter().any(|p| p.metadata.deletion_timestamp.is_some())
    })
    .await;

    let _ = stop.send(());
    tokio::time::timeout(WAIT, agent)
        .await
        .expect("the agent stops")
        .unwrap()
        .unwrap();
    let lease = server
        .get_lease(NAMESPACE, &config["BINDER_LEASE_NAME"])
        .and_then(|l| l.spec?.holder_identity);
    assert_eq!(lease, None, "the lease was released");
    let _ = stop_decisions.send(());
    let _ = std::fs::remove_file(kubeconfig);
    let _ = std::fs::remove_file(experiments_path);
    let requests = server.requests();
    server.shutdown().await;
    requests
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binder_rbac_grants_exactly_the_calls_the_binder_makes() {
    let docs = rendered();
    let config: ConfigMap = binder_config(&docs);
    let requests = binder_requests(&config.data.unwrap(), &experiments_file(&docs)).await;
    let accesses: BTreeSet<Access> = requests.iter().map(|r| access(&r.method, &r.path, r.watch)).collect();

    let grants = binder_grants(&docs);
    for g in &grants {
        let r = &g.rule;
        assert!(r.non_resource_urls.is_none(), "{}: no non-resource URLs", g.from);
        for list in [&r.api_groups, &r.resources, &Some(r.verbs.clone()), &r.resource_names] {
            assert!(
                !list.iter().flatten().any(|s| s.contains('*')),
                "{}: no wildcards: {r:?}",
                g.from
            );
        }
    }

    // The API server authorizes some requests a second time, against an access no URL names:
    // since kube 1.36 (DRAResourceClaimGranularStatusAuthorization) a status update of a
    // ResourceClaim that changes `status.allocation` or `status.reservedFor` must also be allowed
    // as the same verb on the `resourceclaims/binding` subresource, cluster-wide and for every
    // name (kube's `AuthorizedForBinding`; kube-scheduler's bootstrap role has update/patch of
    // it, for its updates). Every status write of the binder changes them, each a PATCH:
    // PreBind's adds the allocation and the pod to `reservedFor`, Unreserve's removes the pod.
    let authorization_only: BTreeSet<Access> = requests
        .iter()
        .filter(|r| {
            r.body
                .as_ref()
                .and_then(|b| b.get("status"))
                .is_some_and(|st| st.get("allocation").is_some() || st.get("reservedFor").is_some())
        })
        .map(|r| access(&r.method, &r.path, r.watch))
        .filter(|a| a.group == "resource.k8s.io" && a.resource == "resourceclaims/status")
        .map(|a| Access {
            resource: "resourceclaims/binding".into(),
            namespace: None,
            name: None,
            ..a
        })
        .collect();
    let authorizations: BTreeSet<&Access> = accesses.iter().chain(&authorization_only).collect();

    // Everything the binder did is allowed (with the checks the API server adds)...
    let denied: Vec<&&Access> = authorizations
        .iter()
        .filter(|a| !grants.iter().any(|g| g.allows(a)))
        .collect();
    assert!(denied.is_empty(), "the binder's RBAC denies {denied:#?}");

    // ...and everything granted was used: each (group, resource, verb) of each rule by some
    // access. `resourceclaims/binding` is used only through the API server's added check above,
    // so it counts as used exactly when a status write of a claim was made.
    let mut unused = Vec::new();
    for g in &grants {
        for group in g.rule.api_groups.iter().flatten() {
            for resource in g.rule.resources.iter().flatten() {
                for verb in &g.rule.verbs {
                    let used = authorizations
                        .iter()
                        .any(|a| &a.group == group && &a.resource == resource && a.verb == verb && g.allows(a));
                    if !used {
                        unused.push(format!("{}: {group:?} {resource} {verb}", g.from));
                    }
                }
            }
        }
    }
    assert!(
        unused.is_empty(),
        "granted but never used by the binder: {unused:#?}\nused: {authorizations:#?}"
    );
    assert_eq!(
        authorization_only
            .iter()
            .map(|a| (a.group.as_str(), a.resource.as_str(), a.verb))
            .collect::<BTreeSet<_>>(),
        BTreeSet::from([("resource.k8s.io", "resourceclaims/binding", "patch")]),
        "the claims' status writes are authorized as resourceclaims/binding too"
    );

    // The expected shape, to make a change of the binder's calls visible in review.
    let used: BTreeSet<(String, String, &str)> = accesses
        .iter()
        .map(|a| (a.group.clone(), a.resource.clone(), a.verb))
        .collect();
    let expected: BTreeSet<(String, String, &str)> = [
        ("", "nodes", "list"),
        ("", "nodes", "watch"),
        ("", "namespaces", "list"),
        ("", "namespaces", "watch"),
        ("policy", "poddisruptionbudgets", "list"),
        ("policy", "poddisruptionbudgets", "watch"),
        ("", "persistentvolumeclaims", "list"),
        ("", "persistentvolumeclaims", "watch"),
        ("", "persistentvolumes", "list"),
        ("", "persistentvolumes", "watch"),
        ("", "persistentvolumeclaims", "get"),
        ("", "persistentvolumeclaims", "update"),
        ("", "persistentvolumes", "get"),
        ("", "persistentvolumes", "update"),
        ("storage.k8s.io", "storageclasses", "list"),
        ("storage.k8s.io", "storageclasses", "watch"),
        ("storage.k8s.io", "csinodes", "list"),
        ("storage.k8s.io", "csinodes", "watch"),
        ("storage.k8s.io", "csidrivers", "list"),
        ("storage.k8s.io", "csidrivers", "watch"),
        ("storage.k8s.io", "csistoragecapacities", "list"),
        ("storage.k8s.io", "csistoragecapacities", "watch"),
        ("resource.k8s.io", "deviceclasses", "list"),
        ("resource.k8s.io", "deviceclasses", "watch"),
        ("resource.k8s.io", "resourceclaims", "list"),
        ("resource.k8s.io", "resourceclaims", "watch"),
        ("resource.k8s.io", "resourceslices", "list"),
        ("resource.k8s.io", "resourceslices", "watch"),
        ("resource.k8s.io", "devicetaintrules", "list"),
        ("resource.k8s.io", "devicetaintrules", "watch"),
        ("resource.k8s.io", "resourceclaims", "get"),
        ("resource.k8s.io", "resourceclaims", "patch"),
        ("resource.k8s.io", "resourceclaims", "create"),
        ("resource.k8s.io", "resourceclaims", "delete"),
        ("resource.k8s.io", "resourceclaims/status", "patch"),
        ("scheduling.k8s.io", "podgroups", "list"),
        ("scheduling.k8s.io", "podgroups", "watch"),
        ("scheduling.k8s.io", "podgroups/status", "patch"),
        ("scheduling.k8s.io", "compositepodgroups", "list"),
        ("scheduling.k8s.io", "compositepodgroups", "watch"),
        ("", "pods", "list"),
        ("", "pods", "watch"),
        ("", "pods", "delete"),
        ("", "pods/binding", "create"),
        ("", "pods/status", "patch"),
        ("events.k8s.io", "events", "create"),
        ("events.k8s.io", "events", "patch"),
        ("coordination.k8s.io", "leases", "get"),
        ("coordination.k8s.io", "leases", "create"),
        ("coordination.k8s.io", "leases", "patch"),
    ]
    .into_iter()
    .map(|(g, r, v)| (g.to_string(), r.to_string(), v))
    .collect();
    assert_eq!(used, expected);
    // Pods are watched across all namespaces, leases only in the binder's own.
    assert!(accesses
        .iter()
        .any(|a| a.resource == "pods" && a.verb == "watch" && a.namespace.is_none()));
    assert!(accesses
        .iter()
        .filter(|a| a.resource == "leases")
        .all(|a| a.namespace.as_deref() == Some(NAMESPACE)));
}

#[test]
fn requests_map_to_rbac_verbs() {
    let a = access("GET", "/api/v1/pods", true);
    assert_eq!(
        (a.group.as_str(), a.resource.as_str(), a.verb, a.namespace),
        ("", "pods", "watch", None)
    );
    let a = access("GET", "/api/v1/nodes", false);
    assert_eq!((a.resource.as_str(), a.verb), ("nodes", "list"));
    let a = access("POST", "/api/v1/namespaces/shop/pods/web-1/binding", false);
    assert_eq!(
        (a.resource.as_str(), a.verb, a.namespace.as_deref(), a.name.as_deref()),
        ("pods/binding", "create", Some("shop"), Some("web-1"))
    );
    let a = access("PATCH", "/api/v1/namespaces/shop/pods/web-1/status", false);
    assert_eq!((a.resource.as_str(), a.verb), ("pods/status", "patch"));
    let a = access(
        "GET",
        "/apis/coordination.k8s.io/v1/namespaces/placement-system/leases/placement-binder",
        false,
    );
    assert_eq!(
        (a.group.as_str(), a.resource.as_str(), a.verb, a.name.as_deref()),
        ("coordination.k8s.io", "leases", "get", Some("placement-binder"))
    );
    let a = access("POST", "/apis/events.k8s.io/v1/namespaces/shop/events", false);
    assert_eq!(
        (a.group.as_str(), a.resource.as_str(), a.verb, a.name),
        ("events.k8s.io", "events", "create", None)
    );
    assert_eq!(access("PUT", "/api/v1/nodes/n1", false).verb, "update");
    assert_eq!(
        access("DELETE", "/api/v1/namespaces/a/pods", false).verb,
        "deletecollection"
    );
}

#[test]
fn the_decision_service_reads_a_valid_policy_file_from_its_configmap() {
    let docs = rendered();
    // Not hashed: the replicas reload the mounted file in place.
    let policies: ConfigMap = parse(the(&docs, "ConfigMap", "placement-policies"));
    let data = policies.data.unwrap();

    // --policy-file names a key of that ConfigMap, mounted as a directory (a subPath mount is
    // never updated).
    let decision: Deployment = parse(the(&docs, "Deployment", "placement-decision"));
    let pod = decision.spec.template.spec.unwrap();
    let c = &pod.containers[0];
    let file = c
        .args
        .iter()
        .flatten()
        .find_map(|a| a.strip_prefix("--policy-file="))
        .expect("--policy-file is set");
    let (dir, key) = file.rsplit_once('/').unwrap();
    let mount = c
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == dir)
        .expect("the policy file's directory is a volume mount");
    assert_eq!(mount.sub_path, None);
    assert_eq!(mount.read_only, Some(true));
    let volume = pod.volumes.iter().flatten().find(|v| v.name == mount.name).unwrap();
    assert_eq!(volume.config_map.as_ref().unwrap().name, "placement-policies");
    let text = data
        .get(key)
        .unwrap_or_else(|| panic!("the ConfigMap has no key {key}"));

    // The shipped file is valid and reproduces the built-in policies.
    let file = parse_policy_file(text).unwrap_or_else(|e| panic!("{e}"));
    let built_in = Policy::built_in();
    let names = |ps: &[Policy]| ps.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&file.policies), names(&built_in));
    for (p, b) in file.policies.iter().zip(&built_in) {
        assert_eq!(p.description, b.description);
        assert_eq!(p.scoring_strategy, b.scoring_strategy, "{}", p.name);
    }
    assert_eq!(file.policies[0].digest(), built_in[0].digest());
    assert_eq!(file.policies[1].digest(), built_in[1].digest());

    // The example KubeSchedulerConfiguration is valid as well.
    let example =
        std::fs::read_to_string(repo_root().join("deploy/examples/kube-scheduler-configuration.yaml")).unwrap();
    let file = parse_policy_file(&example).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        names(&file.policies),
        ["default-scheduler", "placement-scheduler", "minimal-scheduler"]
    );
}

/// The series a PromQL expression reads: identifiers followed by `{` (every query of the dashboard
/// selects its series with a label matcher), without Prometheus' histogram and counter suffixes.
fn series_of(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = expr.as_bytes();
    let mut start = None;
    for (i, &b) in bytes.iter().enumerate() {
        let ident = b.is_ascii_alphanumeric() || b == b'_' || b == b':';
        match (start, ident) {
            (None, true) => start = Some(i),
            (Some(s), false) => {
                if b == b'{' {
                    out.insert(expr[s..i].to_string());
                }
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// The metric families an exposition declares (`# TYPE name kind`), with the sample names each
/// kind gives (a counter's `_total`, a histogram's `_bucket`, `_sum`, `_count`).
fn exported(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        if let (Some("#"), Some("TYPE"), Some(name), Some(kind)) =
            (words.next(), words.next(), words.next(), words.next())
        {
            match kind {
                "counter" => {
                    out.insert(format!("{name}_total"));
                }
                "histogram" => {
                    for suffix in ["_bucket", "_sum", "_count"] {
                        out.insert(format!("{name}{suffix}"));
                    }
                }
                _ => {
                    out.insert(name.to_string());
                }
            }
        }
    }
    out
}

/// Every query of the chart's Grafana dashboard reads series the binder or the decision service
/// exports (names taken from their registries, so a renamed metric fails here), and the dashboard
/// is valid JSON with a panel per query.
#[test]
fn the_grafana_dashboard_reads_only_series_placement_exports() {
    let path = repo_root().join("deploy/chart/placement/dashboards/placement.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("read the dashboard"))
        .expect("the dashboard is JSON");
    // A family is exported once it has a sample: one observation each, through the calls the
    // binder and the service make.
    let binder = placement_binder::metrics::BinderMetrics::new();
    let took = Duration::from_millis(3);
    binder.attempt("default", "scheduled", took);
    binder.pod_bound(took, 1);
    binder.extension_point("Bind", "Success", "default", took);
    binder.set_pending(placement_binder::queue::QueueCounts::default());
    binder.bind(&Ok(()), took);
    binder.replica_error("replica-0");
    binder.sync(true, 1024, took);
    binder.volume_prebind("failed", took);
    binder.batch("alone");
    let service = Metrics::new();
    let rpc = "Schedule";
    let policy = "default".to_string();
    service
        .requests
        .get_or_create(&placement_scheduler::grpc::metrics::RequestLabels {
            rpc,
            policy: policy.clone(),
            code: "OK".into(),
        })
        .inc();
    service
        .latency
        .get_or_create(&placement_scheduler::grpc::metrics::LatencyLabels {
            rpc,
            policy: policy.clone(),
        })
        .observe(0.001);
    service
        .decisions
        .get_or_create(&placement_scheduler::grpc::metrics::DecisionLabels {
            policy,
            result: "placed",
        })
        .inc();
    let mut names = exported(&binder.encode());
    names.extend(exported(&service.encode()));
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut queried = BTreeSet::new();
    for panel in panels {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("a PromQL expression");
            let series = series_of(expr);
            assert!(!series.is_empty(), "{}: no series in {expr}", panel["title"]);
            queried.extend(series);
        }
    }
    let missing: Vec<_> = queried.difference(&names).collect();
    assert!(
        missing.is_empty(),
        "the dashboard reads series nothing exports: {missing:?}"
    );
    // kube-scheduler's SLO series are on it.
    for kube in [
        "scheduler_schedule_attempts_total",
        "scheduler_pending_pods",
        "scheduler_pod_scheduling_sli_duration_seconds_bucket",
        "scheduler_scheduling_attempt_duration_seconds_bucket",
        "scheduler_framework_extension_point_duration_seconds_bucket",
    ] {
        assert!(queried.contains(kube), "the dashboard shows {kube}");
    }
}
