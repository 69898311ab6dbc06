//! The gRPC load tool (`placement-load`) in a tiny configuration: it starts real replicas, syncs,
//! ranks and schedules over loopback, and reports every section. Numbers are not judged here (no
//! timing assertions); only that each measurement ran and its counts add up.

use std::process::Command;

use serde_json::Value;

fn run_load(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_placement-load"))
        .args(["--service-bin", env!("CARGO_BIN_EXE_scheduler-service")])
        .args(args)
        .output()
        .expect("placement-load runs")
}

#[test]
fn a_small_run_reports_every_measurement() {
    let out = run_load(&[
        "--replicas",
        "2",
        "--nodes",
        "200",
        "--pods",
        "2000",
        "--batch-size",
        "32",
        "--batches",
        "6",
        "--rank-samples",
        "20",
        "--delta-samples",
        "3",
        "--in-flight",
        "2",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "placement-load failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("--json prints one JSON document");
    assert_eq!(report["nodes"], 200);
    assert_eq!(report["bound_pods"], 2000);

    let full = report["full_sync"].as_array().expect("full_sync");
    assert_eq!(full.len(), 2, "one full sync per replica");
    for s in full {
        assert_eq!(s["nodes"], 200);
        assert_eq!(s["pods"], 2000);
        assert!(s["request_bytes"].as_u64().unwrap_or(0) > 0);
    }

    // One node changed, then 1% of the nodes (2): the request grows with the change.
    let deltas = report["deltas"].as_array().expect("deltas");
    let changed: Vec<u64> = deltas.iter().filter_map(|d| d["nodes_changed"].as_u64()).collect();
    assert_eq!(changed, [1, 2]);
    let bytes: Vec<u64> = deltas.iter().filter_map(|d| d["request_bytes"].as_u64()).collect();
    assert!(
        bytes[1] > bytes[0],
        "a delta of 2 nodes is larger than one of 1: {bytes:?}"
    );
    assert!(
        bytes[1] < full[0]["request_bytes"].as_u64().unwrap_or(0) / 10,
        "a delta is much smaller than the full snapshot"
    );
    assert_eq!(deltas[0]["latency"]["samples"], 2, "the first delta is reported apart");

    assert_eq!(report["rank"]["latency"]["samples"], 20);
    assert!(report["rank"]["mean_response_bytes"].as_u64().unwrap_or(0) > 0);

    // Sequential distinct and replica batches on one replica, then 1 and 2 replicas, each also
    // with the batches in flight on node partitions.
    let runs = report["schedule"].as_array().expect("schedule");
    let shape: Vec<(String, u64, u64)> = runs
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap_or_default().to_string(),
                r["replicas"].as_u64().unwrap_or(0),
                r["in_flight"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            ("distinct pods".to_string(), 1, 1),
            ("replica pods".to_string(), 1, 1),
            ("distinct pods".to_string(), 1, 2),
            ("partitioned".to_string(), 1, 2),
            ("distinct pods".to_string(), 2, 2),
            ("partitioned".to_string(), 2, 2),
        ]
    );
    for r in runs {
        assert_eq!(r["batches"], 6);
        assert_eq!(r["pods"], 6 * 32, "every pod of every batch got a placement");
        assert!(r["placed"].as_u64().unwrap_or(0) > 0, "some pods were placed: {r}");
        assert_eq!(r["batch_latency"]["samples"], 6);
    }

    // Started replicas have their memory read from /proc (Linux).
    if cfg!(target_os = "linux") {
        for m in report["memory"].as_array().expect("memory") {
            assert!(m["after_sync"]["rss_mib"].as_f64().unwrap_or(0.0) > 0.0, "{m}");
            assert!(m["after_load"]["hwm_mib"].as_f64().unwrap_or(0.0) > 0.0, "{m}");
        }
    }
}

#[test]
fn bad_flags_are_refused_naming_the_flag() {
    let out = run_load(&["--nodes", "10", "--pods", "5000"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--pods: at most 110 per node"), "{stderr}");

    let out = run_load(&["--nodes", "0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--nodes: must be at least 1"));
}
