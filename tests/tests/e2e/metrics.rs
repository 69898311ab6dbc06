//! kube-scheduler's metric names on a real control plane (issue 47, item 4): the same small
//! workload through the cluster's kube-scheduler and through placement's binder, then, for each
//! of kube's series in [`SERIES`], the series exists on both sides with the same label names (and,
//! for histograms, the same bucket boundaries), and the counts the workload makes equal agree.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use k8s_openapi::api::core::v1::Pod;
use placement_tests::e2e::{cluster, marked_unschedulable, node_of, pod_for, serial, Scope, WAIT};
use placement_tests::fixtures::eventually;

use super::{list_pods, InProcessBinder};

/// kube-scheduler 1.37's series the binder exports under the same name, and whether it is a
/// histogram (compared by bucket boundaries too).
const SERIES: &[(&str, bool)] = &[
    ("scheduler_schedule_attempts_total", false),
    ("scheduler_scheduling_attempt_duration_seconds", true),
    ("scheduler_pod_scheduling_sli_duration_seconds", true),
    ("scheduler_pod_scheduling_attempts", true),
    ("scheduler_pending_pods", false),
    ("scheduler_framework_extension_point_duration_seconds", true),
    ("scheduler_preemption_attempts_total", false),
    ("scheduler_preemption_victims", true),
];

/// One sample: its series name (with `_bucket`, `_count`, `_sum`), labels and value.
#[derive(Debug, Clone)]
pub(super) struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The samples of a Prometheus (or OpenMetrics) text exposition.
pub(super) fn parse(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (name, rest) = match line.find('{') {
            Some(i) => (&line[..i], &line[i + 1..]),
            None => match line.split_once(' ') {
                Some((n, v)) => (n, v),
                None => continue,
            },
        };
        let mut labels = BTreeMap::new();
        let value_part = if line.contains('{') {
            let Some(end) = rest.rfind('}') else { continue };
            let mut body = &rest[..end];
            while let Some(eq) = body.find("=\"") {
                let key = body[..eq].trim_start_matches(',').trim().to_string();
                let after = &body[eq + 2..];
                // Label values here hold no escaped quotes.
                let Some(close) = after.find('"') else { break };
                labels.insert(key, after[..close].to_string());
                body = &after[close + 1..];
            }
            &rest[end + 1..]
        } else {
            rest
        };
        let Some(value) = value_part.split_whitespace().next().and_then(|v| v.parse::<f64>().ok()) else {
            continue;
        };
        out.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    out
}

/// The samples of `series` (its `_bucket`, `_count`, `_sum` for a histogram).
fn of<'a>(samples: &'a [Sample], series: &'a str, histogram: bool) -> impl Iterator<Item = &'a Sample> + 'a {
    samples.iter().filter(move |s| {
        if histogram {
            ["_bucket", "_count", "_sum"]
                .iter()
                .any(|suffix| s.name.strip_suffix(suffix) == Some(series))
        } else {
            s.name == series
        }
    })
}

/// The label names of `series` (without `le`).
fn label_names(samples: &[Sample], series: &str, histogram: bool) -> BTreeSet<String> {
    of(samples, series, histogram)
        .flat_map(|s| s.labels.keys().filter(|k| *k != "le").cloned())
        .collect()
}

/// The bucket boundaries of a histogram, in micro-units (to compare `0.001` with `1e-03`).
fn buckets(samples: &[Sample], series: &str) -> BTreeSet<i64> {
    let bucket = format!("{series}_bucket");
    samples
        .iter()
        .filter(|s| s.name == bucket)
        .filter_map(|s| s.labels.get("le"))
        .filter(|le| le.as_str() != "+Inf")
        .map(|le| (le.parse::<f64>().expect("a bucket boundary") * 1e6).round() as i64)
        .collect()
}

/// The sum of `name`'s samples whose labels include every pair of `labels`.
pub(super) fn total(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(v))
        })
        .map(|s| s.value)
        .sum::<f64>()
        + 0.0
}

/// kube-scheduler's `/metrics`, as the cluster's admin (its client certificate beside the admin
/// kubeconfig, as `../shared/k8s/cluster.sh` writes them; kube-scheduler authenticates it against
/// the cluster's client CA and authorizes `system:masters` through the API server).
pub(super) fn scrape_kube_scheduler(kubeconfig: &Path) -> Result<String, String> {
    let dir = kubeconfig.parent().ok_or("the kubeconfig has no folder")?;
    let (cert, key) = (dir.join("admin.crt"), dir.join("admin.key"));
    if !cert.exists() || !key.exists() {
        return Err(format!("no admin.crt and admin.key beside {}", kubeconfig.display()));
    }
    let port = std::env::var("SCHEDULER_PORT").unwrap_or_else(|_| "10259".into());
    let out = Command::new("curl")
        .args(["-sSf", "-k", "--max-time", "10", "--cert"])
        .arg(&cert)
        .arg("--key")
        .arg(&key)
        .arg(format!("https://127.0.0.1:{port}/metrics"))
        .output()
        .map_err(|e| format!("curl: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "kube-scheduler's /metrics on port {port}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    String::from_utf8(out.stdout).map_err(|e| e.to_string())
}

/// `after - before` of every counter-like sample (counts, sums, buckets, counters), by name and
/// labels; gauges keep their value after.
fn delta(before: &[Sample], after: &[Sample]) -> Vec<Sample> {
    after
        .iter()
        .map(|a| {
            let was = before
                .iter()
                .find(|b| b.name == a.name && b.labels == a.labels)
                .map_or(0.0, |b| b.value);
            let gauge = a.name == "scheduler_pending_pods";
            Sample {
                value: if gauge { a.value } else { a.value - was },
                ..a.clone()
            }
        })
        .collect()
}

/// Issue 47, item 4: `PODS` pods that fit and one that fits no node, through kube-scheduler
/// (`default-scheduler`) and through placement's binder; then kube's series exist on both sides
/// with the same label names and buckets, and the counts agree: one scheduled attempt, one
/// attempt-duration and SLI observation (`attempts="1"`), one `scheduler_pod_scheduling_attempts`
/// observation, one `PreBind`, `Bind` and `Permit` of status `Success` per bound pod, and at least
/// one unschedulable attempt and one preemption attempt for the pod that fits nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_scheduler_metric_names_labels_and_counts_match() {
    const PODS: usize = 4;
    let test = "kube_scheduler_metric_names_labels_and_counts_match";
    let Some(cluster) = cluster(test).await else {
        return;
    };
    if std::env::var("E2E_KUBE_SCHEDULER").as_deref() != Ok("1") {
        eprintln!(
            "e2e {test}: skipped: set E2E_KUBE_SCHEDULER=1 when the cluster's kube-scheduler serves default-scheduler"
        );
        return;
    }
    // The baseline once this test holds the cluster (other tests' pods no longer bound by
    // kube-scheduler while it waited for the lock), and once kube-scheduler has gone quiet:
    // its scheduled attempts unchanged for 2 s (a pod of an earlier test may still be bound).
    let _serial = serial().await;
    let scrape = || match scrape_kube_scheduler(&cluster.kubeconfig) {
        Ok(text) => parse(&text),
        Err(e) => panic!("e2e {test}: kube-scheduler's metrics: {e}"),
    };
    let mut kube_before = scrape();
    let started = std::time::Instant::now();
    while started.elapsed() < WAIT {
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        let now = scrape();
        let quiet = total(&delta(&kube_before, &now), "scheduler_schedule_attempts_total", &[]) == 0.0;
        kube_before = now;
        if quiet {
            break;
        }
    }
    let mut scope = Scope::new(&cluster, "metrics").await;
    for i in 1..=3 {
        scope.add_node(&format!("n{i}"), "4", &[]).await;
    }
    let binder = InProcessBinder::start(&cluster, &scope).await;
    for (who, scheduler) in [
        ("ours", scope.scheduler.clone()),
        ("kube", "default-scheduler".to_string()),
    ] {
        for i in 0..PODS {
            scope
                .create(&pod_for(
                    &scope.ns,
                    &format!("fits-{i}-{who}"),
                    &scheduler,
                    &scope.run,
                    "100m",
                ))
                .await;
        }
        scope
            .create(&pod_for(
                &scope.ns,
                &format!("huge-{who}"),
                &scheduler,
                &scope.run,
                "100",
            ))
            .await;
    }
    eventually(
        WAIT,
        "both schedulers bound their pods and reported the huge ones",
        || async {
            let pods: Vec<Pod> = list_pods(&scope).await;
            let bound = pods.iter().filter(|p| node_of(p).is_some()).count();
            let unschedulable = pods.iter().filter(|p| marked_unschedulable(p)).count();
            bound == 2 * PODS && unschedulable == 2
        },
    )
    .await;
    // Both record a bound pod right after its Binding returns, possibly after the watch shows it.
    let ours = match eventually_scraped(&binder, PODS).await {
        Some(samples) => samples,
        None => parse(&binder.binder.metrics().encode()),
    };
    let kube = {
        let mut kube = Vec::new();
        let started = std::time::Instant::now();
        while started.elapsed() < WAIT {
            let text = scrape_kube_scheduler(&cluster.kubeconfig).expect("kube-scheduler's metrics");
            kube = delta(&kube_before, &parse(&text));
            // The SLI histogram is the last of kube's per-pod observations after a Binding.
            if total(&kube, "scheduler_pod_scheduling_sli_duration_seconds_count", &[]) >= PODS as f64 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        kube
    };
    binder.stop().await;

    let mut problems = Vec::new();
    // Names, label names and buckets.
    for (series, histogram) in SERIES {
        let (a, b) = (
            label_names(&ours, series, *histogram),
            label_names(&kube, series, *histogram),
        );
        if of(&ours, series, *histogram).next().is_none() {
            problems.push(format!("{series}: not exported by placement's binder"));
        }
        if of(&kube, series, *histogram).next().is_none() {
            problems.push(format!("{series}: not exported by kube-scheduler"));
        }
        if a != b {
            problems.push(format!(
                "{series}: labels {a:?} (placement) against {b:?} (kube-scheduler)"
            ));
        }
        if *histogram {
            let (a, b) = (buckets(&ours, series), buckets(&kube, series));
            if a != b {
                problems.push(format!(
                    "{series}: buckets (µ) {a:?} (placement) against {b:?} (kube-scheduler)"
                ));
            }
        }
    }
    // Queue names: every queue the binder reports is one of kube-scheduler's.
    let queues = |samples: &[Sample]| -> BTreeSet<String> {
        of(samples, "scheduler_pending_pods", false)
            .filter_map(|s| s.labels.get("queue").cloned())
            .collect()
    };
    let (ours_queues, kube_queues) = (queues(&ours), queues(&kube));
    if !ours_queues.is_subset(&kube_queues) {
        problems.push(format!(
            "scheduler_pending_pods: queues {ours_queues:?} (placement), kube-scheduler's are {kube_queues:?}"
        ));
    }
    // Counts the workload makes equal (kube's side: the delta over this test, its profile only;
    // placement's: a binder of this test's own).
    let profile = |side: &str| {
        if side == "kube" {
            Some("default-scheduler")
        } else {
            None
        }
    };
    for (side, samples) in [("placement", &ours), ("kube", &kube)] {
        let with = |labels: &[(&'static str, &'static str)]| -> Vec<(&str, &str)> {
            let mut l: Vec<(&str, &str)> = labels.to_vec();
            if let Some(p) = profile(side) {
                l.push(("profile", p));
            }
            l
        };
        let n = PODS as f64;
        let checks: Vec<(String, f64, f64)> = vec![
            (
                "scheduler_schedule_attempts_total{result=scheduled}".into(),
                total(
                    samples,
                    "scheduler_schedule_attempts_total",
                    &with(&[("result", "scheduled")]),
                ),
                n,
            ),
            (
                "scheduler_scheduling_attempt_duration_seconds_count{result=scheduled}".into(),
                total(
                    samples,
                    "scheduler_scheduling_attempt_duration_seconds_count",
                    &with(&[("result", "scheduled")]),
                ),
                n,
            ),
            (
                "scheduler_pod_scheduling_sli_duration_seconds_count{attempts=1}".into(),
                total(
                    samples,
                    "scheduler_pod_scheduling_sli_duration_seconds_count",
                    &[("attempts", "1")],
                ),
                n,
            ),
            (
                "scheduler_pod_scheduling_sli_duration_seconds_count".into(),
                total(samples, "scheduler_pod_scheduling_sli_duration_seconds_count", &[]),
                n,
            ),
            (
                "scheduler_pod_scheduling_attempts_count".into(),
                total(samples, "scheduler_pod_scheduling_attempts_count", &[]),
                n,
            ),
        ];
        let mut checks = checks;
        for point in ["PreBind", "Bind", "Permit"] {
            checks.push((
                format!("scheduler_framework_extension_point_duration_seconds_count{{extension_point={point},status=Success}}"),
                total(
                    samples,
                    "scheduler_framework_extension_point_duration_seconds_count",
                    &with(&[("extension_point", point), ("status", "Success")]),
                ),
                n,
            ));
        }
        for (what, got, want) in checks {
            eprintln!("e2e {test}: {side}: {what} = {got}");
            if got != want {
                problems.push(format!("{side}: {what} = {got}, want {want} (the pods it bound)"));
            }
        }
        for (what, got) in [
            (
                "scheduler_schedule_attempts_total{result=unschedulable}",
                total(
                    samples,
                    "scheduler_schedule_attempts_total",
                    &with(&[("result", "unschedulable")]),
                ),
            ),
            (
                "scheduler_preemption_attempts_total",
                total(samples, "scheduler_preemption_attempts_total", &[]),
            ),
        ] {
            eprintln!("e2e {test}: {side}: {what} = {got}");
            if got < 1.0 {
                problems.push(format!(
                    "{side}: {what} = {got}, want at least 1 (the pod that fits nowhere)"
                ));
            }
        }
    }
    scope.cleanup().await;
    assert!(
        problems.is_empty(),
        "kube-scheduler's series compared with placement's binder:\n  {}",
        problems.join("\n  ")
    );
}

/// The binder's metrics once it recorded `pods` bound pods (`None` if it never did).
async fn eventually_scraped(binder: &InProcessBinder, pods: usize) -> Option<Vec<Sample>> {
    let started = std::time::Instant::now();
    while started.elapsed() < WAIT {
        let samples = parse(&binder.binder.metrics().encode());
        // The SLI histogram is observed last, after the scheduled attempt.
        if total(&samples, "scheduler_pod_scheduling_sli_duration_seconds_count", &[]) >= pods as f64 {
            return Some(samples);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    None
}

#[test]
fn parses_kube_and_openmetrics_lines() {
    let s = parse(
        "# HELP x y\nscheduler_pending_pods{queue=\"active\"} 0\n\
         scheduler_preemption_victims_bucket{le=\"1\"} 0\n\
         scheduler_schedule_attempts_total{profile=\"default-scheduler\",result=\"scheduled\"} 4\n\
         scheduler_preemption_attempts_total 2\n# EOF\n",
    );
    assert_eq!(s.len(), 4);
    assert_eq!(
        total(&s, "scheduler_schedule_attempts_total", &[("result", "scheduled")]),
        4.0
    );
    assert_eq!(
        label_names(&s, "scheduler_schedule_attempts_total", false),
        ["profile", "result"].iter().map(|s| s.to_string()).collect()
    );
    assert_eq!(buckets(&s, "scheduler_preemption_victims"), [1_000_000].into());
    assert_eq!(total(&s, "scheduler_preemption_attempts_total", &[]), 2.0);
}
