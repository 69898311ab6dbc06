//! Property tests on raw request bytes, through a real server on 127.0.0.1:0: decoding (the wire
//! scan and prost), validation and the engine answer any bytes with a status, never a panic, a
//! dropped connection or an unexpected code. Random bytes mostly fail to decode; mutations of
//! valid requests (bytes flipped, inserted, removed, cut) reach validation and the engine.
//! `cargo test` runs a few hundred cases; `PROPTEST_CASES=100000` runs longer.

mod support;

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use placement_scheduler::grpc::{serve, Metrics, ServerConfig, ServiceConfig};
use placement_scheduler::proto;
use placement_scheduler::proto::snapshot_ref::Source;
use proptest::prelude::*;
use prost::Message;
use tonic::Code;

/// A server and a runtime shared by every case.
struct Fixture {
    runtime: tokio::runtime::Runtime,
    channel: tonic::transport::Channel,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let channel = runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("addr");
            let config = ServerConfig {
                max_message_bytes: 1 << 20,
                service: ServiceConfig {
                    max_batch_size: 64,
                    ..ServiceConfig::default()
                },
                ..ServerConfig::default()
            };
            tokio::spawn(serve(
                listener,
                config,
                Arc::new(Metrics::new()),
                std::future::pending(),
            ));
            tonic::transport::Channel::from_shared(format!("http://{addr}"))
                .expect("uri")
                .connect()
                .await
                .expect("connect")
        });
        Fixture { runtime, channel }
    })
}

fn map(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A small valid snapshot exercising most fields: labels, taints, images, bound pods with
/// ports, affinity, spreading, a namespace and a PodDisruptionBudget.
fn snapshot() -> proto::Snapshot {
    let node = |name: &str, zone: &str| proto::Node {
        name: name.into(),
        labels: map(&[("kubernetes.io/hostname", name), ("topology.kubernetes.io/zone", zone)]),
        allocatable: map(&[
            ("cpu", "4"),
            ("memory", "8Gi"),
            ("pods", "10"),
            ("example.com/gpu", "1"),
        ]),
        taints: vec![proto::Taint {
            key: "dedicated".into(),
            value: "x".into(),
            effect: "PreferNoSchedule".into(),
        }],
        images: vec![proto::ContainerImage {
            names: vec!["nginx:1".into()],
            size_bytes: 100 << 20,
        }],
        ..Default::default()
    };
    proto::Snapshot {
        nodes: vec![node("n1", "a"), node("n2", "b")],
        pods: vec![proto::Pod {
            node_name: "n1".into(),
            priority: 1,
            ..pod("bound")
        }],
        namespaces: vec![proto::Namespace {
            name: "default".into(),
            labels: map(&[("team", "a")]),
        }],
        pod_disruption_budgets: vec![proto::PodDisruptionBudget {
            namespace: "default".into(),
            name: "pdb".into(),
            selector: Some(proto::LabelSelector {
                match_labels: map(&[("app", "web")]),
                match_expressions: vec![],
            }),
            disruptions_allowed: 1,
            ..Default::default()
        }],
        persistent_volume_claims: vec![proto::PersistentVolumeClaim {
            namespace: "default".into(),
            name: "data".into(),
            storage_class_name: "local".into(),
            access_modes: vec!["ReadWriteOnce".into()],
            storage_request: "1Gi".into(),
            ..Default::default()
        }],
        persistent_volumes: vec![proto::PersistentVolume {
            name: "pv-1".into(),
            storage_class_name: "local".into(),
            capacity: "10Gi".into(),
            access_modes: vec!["ReadWriteOnce".into()],
            phase: "Available".into(),
            node_affinity: Some(proto::NodeSelector {
                terms: vec![proto::NodeSelectorTerm {
                    match_expressions: vec![proto::NodeSelectorRequirement {
                        key: "zone".into(),
                        operator: "In".into(),
                        values: vec!["a".into()],
                    }],
                    match_fields: vec![],
                }],
            }),
            ..Default::default()
        }],
        storage_classes: vec![proto::StorageClass {
            name: "local".into(),
            provisioner: "kubernetes.io/no-provisioner".into(),
            volume_binding_mode: "WaitForFirstConsumer".into(),
            allowed_topologies: vec![],
        }],
        csi_nodes: vec![proto::CsiNode {
            name: "n1".into(),
            drivers: vec![proto::CsiNodeDriver {
                name: "ebs.csi.aws.com".into(),
                allocatable_count: Some(2),
            }],
        }],
        csi_drivers: vec![proto::CsiDriver {
            name: "ebs.csi.aws.com".into(),
            storage_capacity: true,
            prevent_pod_scheduling_if_missing: false,
        }],
        csi_storage_capacities: vec![proto::CsiStorageCapacity {
            namespace: "kube-system".into(),
            name: "csisc-1".into(),
            storage_class_name: "local".into(),
            node_topology: Some(proto::LabelSelector {
                match_labels: map(&[("zone", "a")]),
                match_expressions: vec![],
            }),
            capacity: "100Gi".into(),
            maximum_volume_size: "10Gi".into(),
        }],
        device_classes: vec![proto::DeviceClass {
            name: "gpu".into(),
            selectors: vec!["device.driver == 'gpu.example.com'".into()],
            extended_resource_name: String::new(),
            creation_timestamp_seconds: 0,
        }],
        resource_claims: vec![proto::ResourceClaim {
            namespace: "default".into(),
            name: "gpus".into(),
            uid: "claim-1".into(),
            requests: vec![proto::DeviceRequest {
                name: "gpu".into(),
                exactly: Some(proto::ExactDeviceRequest {
                    device_class_name: "gpu".into(),
                    selectors: vec!["device.attributes['gpu.example.com'].model == 'a100'".into()],
                    count: 2,
                    ..Default::default()
                }),
                first_available: vec![],
            }],
            constraints: vec![proto::DeviceConstraint {
                requests: vec![],
                match_attribute: "gpu.example.com/numa".into(),
                distinct_attribute: String::new(),
            }],
            ..Default::default()
        }],
        resource_slices: vec![proto::ResourceSlice {
            name: "n1-gpus".into(),
            driver: "gpu.example.com".into(),
            pool_name: "n1".into(),
            pool_generation: 1,
            pool_resource_slice_count: 1,
            node_name: "n1".into(),
            devices: (0..4)
                .map(|i| proto::Device {
                    name: format!("gpu-{i}"),
                    attributes: [
                        (
                            "model".to_string(),
                            proto::DeviceAttribute {
                                value: Some(proto::device_attribute::Value::String("a100".into())),
                            },
                        ),
                        (
                            "numa".to_string(),
                            proto::DeviceAttribute {
                                value: Some(proto::device_attribute::Value::Int(i / 2)),
                            },
                        ),
                    ]
                    .into_iter()
                    .collect(),
                    capacity: map(&[("memory", "80Gi")]),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        device_taint_rules: vec![proto::DeviceTaintRule {
            name: "gpu-3-maintenance".into(),
            device_selector: Some(proto::DeviceTaintSelector {
                driver: Some("gpu.example.com".into()),
                pool: Some("n1".into()),
                device: Some("gpu-3".into()),
            }),
            taint: Some(proto::DeviceTaint {
                key: "example.com/maintenance".into(),
                value: "true".into(),
                effect: "NoSchedule".into(),
                time_added_seconds: 1_700_000_000,
            }),
        }],
        pod_groups: vec![proto::PodGroup {
            namespace: "default".into(),
            name: "trainer".into(),
            uid: "pg-1".into(),
            generation: 1,
            gang: Some(proto::GangSchedulingPolicy { min_count: 2 }),
            topology_keys: vec!["zone".into()],
            priority: Some(1),
            parent_composite_pod_group_name: "job".into(),
            ..Default::default()
        }],
        composite_pod_groups: vec![proto::CompositePodGroup {
            namespace: "default".into(),
            name: "job".into(),
            uid: "cpg-1".into(),
            min_group_count: Some(1),
            topology_keys: vec!["zone".into()],
            priority: Some(1),
            ..Default::default()
        }],
    }
}

fn pod(uid: &str) -> proto::Pod {
    let selector = || {
        Some(proto::LabelSelector {
            match_labels: map(&[("app", "web")]),
            match_expressions: vec![proto::LabelSelectorRequirement {
                key: "tier".into(),
                operator: "NotIn".into(),
                values: vec!["db".into()],
            }],
        })
    };
    proto::Pod {
        uid: uid.into(),
        namespace: "default".into(),
        name: uid.into(),
        labels: map(&[("app", "web")]),
        containers: vec![proto::Container {
            name: "c".into(),
            image: "nginx:1".into(),
            requests: map(&[("cpu", "500m"), ("memory", "1Gi")]),
            ports: vec![proto::ContainerPort {
                container_port: 80,
                host_port: 8080,
                ..Default::default()
            }],
            ..Default::default()
        }],
        node_affinity: Some(proto::NodeAffinity {
            required: Some(proto::NodeSelector {
                terms: vec![proto::NodeSelectorTerm {
                    match_expressions: vec![proto::NodeSelectorRequirement {
                        key: "topology.kubernetes.io/zone".into(),
                        operator: "In".into(),
                        values: vec!["a".into(), "b".into()],
                    }],
                    match_fields: vec![],
                }],
            }),
            preferred: vec![],
        }),
        pod_anti_affinity: Some(proto::PodAffinity {
            required: vec![proto::PodAffinityTerm {
                label_selector: selector(),
                topology_key: "kubernetes.io/hostname".into(),
                ..Default::default()
            }],
            preferred: vec![],
        }),
        topology_spread_constraints: vec![proto::TopologySpreadConstraint {
            max_skew: 1,
            topology_key: "topology.kubernetes.io/zone".into(),
            when_unsatisfiable: "ScheduleAnyway".into(),
            label_selector: selector(),
            ..Default::default()
        }],
        tolerations: vec![proto::Toleration {
            key: "dedicated".into(),
            operator: "Exists".into(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Valid requests of each method, encoded.
fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let inline = || {
        Some(proto::SnapshotRef {
            source: Some(Source::Inline(snapshot())),
        })
    };
    vec![
        (
            "SyncSnapshot",
            proto::SyncSnapshotRequest {
                kind: Some(proto::sync_snapshot_request::Kind::Full(snapshot())),
            }
            .encode_to_vec(),
        ),
        (
            "Rank",
            proto::RankRequest {
                snapshot: inline(),
                pod: Some(pod("p")),
                top_k: 2,
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "Schedule",
            proto::ScheduleRequest {
                snapshot: inline(),
                pods: vec![pod("p1"), pod("p2")],
                ..Default::default()
            }
            .encode_to_vec(),
        ),
    ]
}

/// Sends `body` to `method` and checks the answer is one the service gives bad input.
fn check(method: &str, body: Vec<u8>) -> Result<(), TestCaseError> {
    let f = fixture();
    let out = f
        .runtime
        .block_on(support::raw_unary(f.channel.clone(), method, Bytes::from(body)));
    match out {
        Ok(_) => Ok(()),
        Err(s) => {
            let expected = match s.code() {
                Code::InvalidArgument | Code::NotFound | Code::ResourceExhausted => true,
                // Bytes that are not a message of the method's type.
                Code::Internal => s.message().contains("failed to decode Protobuf message"),
                _ => false,
            };
            prop_assert!(expected, "{method}: {:?} {}", s.code(), s.message());
            prop_assert!(
                !s.message().contains("task failed"),
                "{method}: a panic: {}",
                s.message()
            );
            Ok(())
        }
    }
}

/// One edit of a byte string.
#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, u8),
    Remove(usize),
    Cut(usize),
}

fn apply(mut bytes: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        if bytes.is_empty() {
            break;
        }
        match *e {
            Edit::Flip(at, mask) => {
                let at = at % bytes.len();
                bytes[at] ^= mask.max(1);
            }
            Edit::Insert(at, b) => {
                let at = at % (bytes.len() + 1);
                bytes.insert(at, b);
            }
            Edit::Remove(at) => {
                let at = at % bytes.len();
                bytes.remove(at);
            }
            Edit::Cut(at) => bytes.truncate(at % (bytes.len() + 1)),
        }
    }
    bytes
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(a, m)| Edit::Flip(a, m)),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Edit::Insert(a, b)),
        2 => any::<usize>().prop_map(Edit::Remove),
        1 => any::<usize>().prop_map(Edit::Cut),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Valid requests with a few bytes changed.
    #[test]
    fn mutated_requests_are_answered(which in 0usize..3, edits in proptest::collection::vec(edit(), 1..6)) {
        let (method, bytes) = seeds().swap_remove(which);
        check(method, apply(bytes, &edits))?;
    }

    /// Bytes of no particular form.
    #[test]
    fn random_bytes_are_answered(which in 0usize..3, bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let method = ["SyncSnapshot", "Rank", "Schedule"][which];
        check(method, bytes)?;
    }
}

/// The seeds themselves are valid and answered OK, so the mutations start from requests that
/// reach the engine.
#[test]
fn the_seeds_are_answered() {
    let f = fixture();
    for (method, body) in seeds() {
        let out = f
            .runtime
            .block_on(support::raw_unary(f.channel.clone(), method, Bytes::from(body)));
        assert!(out.is_ok(), "{method}: {out:?}");
    }
}
