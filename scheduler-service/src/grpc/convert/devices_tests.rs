//! DeviceTaintRules' validation, as the API server validates them (`validateDeviceTaintRuleSpec`).

use super::*;

fn rule() -> proto::DeviceTaintRule {
    proto::DeviceTaintRule {
        name: "gpu-0-maintenance".into(),
        device_selector: Some(proto::DeviceTaintSelector {
            driver: Some("gpu.example.com".into()),
            pool: Some("cluster-a/node-a".into()),
            device: Some("gpu-0".into()),
        }),
        taint: Some(proto::DeviceTaint {
            key: "example.com/maintenance".into(),
            value: "firmware-upgrade".into(),
            effect: "NoExecute".into(),
            time_added_seconds: 1_765_075_775,
        }),
    }
}

fn with_taint(f: impl FnOnce(&mut proto::DeviceTaint)) -> proto::DeviceTaintRule {
    let mut r = rule();
    if let Some(t) = r.taint.as_mut() {
        f(t);
    }
    r
}

fn with_selector(f: impl FnOnce(&mut proto::DeviceTaintSelector)) -> proto::DeviceTaintRule {
    let mut r = rule();
    if let Some(s) = r.device_selector.as_mut() {
        f(s);
    }
    r
}

#[test]
fn a_rule_converts_with_its_selector_and_taint() {
    let r = device_taint_rule("r", &rule()).expect("valid");
    assert_eq!(r.name, "gpu-0-maintenance");
    let s = r.selector.as_ref().expect("a selector");
    assert_eq!(s.driver.as_deref(), Some("gpu.example.com"));
    assert_eq!(s.pool.as_deref(), Some("cluster-a/node-a"));
    assert_eq!(s.device.as_deref(), Some("gpu-0"));
    assert_eq!(
        r.taint(),
        Some(DeviceTaint {
            key: "example.com/maintenance".into(),
            value: "firmware-upgrade".into(),
            effect: crate::engine::devices::DeviceTaintEffect::NoExecute,
        })
    );
    assert_eq!(r.time_added, 1_765_075_775);
}

#[test]
fn selectors_may_be_empty_or_missing() {
    let none = device_taint_rule(
        "r",
        &proto::DeviceTaintRule {
            device_selector: None,
            ..rule()
        },
    )
    .expect("valid");
    assert_eq!(none.selector, None, "no selector: no device");
    let empty = device_taint_rule(
        "r",
        &proto::DeviceTaintRule {
            device_selector: Some(proto::DeviceTaintSelector::default()),
            ..rule()
        },
    )
    .expect("valid");
    assert_eq!(
        empty.selector,
        Some(DeviceTaintSelector::default()),
        "empty: every device"
    );
}

/// `None` adds a taint that keeps nothing off; an effect this version does not know is read as
/// `None`, as the API asks of its consumers.
#[test]
fn the_effect_none_and_unknown_effects_taint_nothing() {
    for effect in ["None", "PreferNoSchedule", "NoExecuteWithPodDisruptionBudget"] {
        let r = device_taint_rule("r", &with_taint(|t| t.effect = effect.into())).expect("valid");
        assert_eq!(r.effect, None, "{effect}");
        assert_eq!(r.taint(), None, "{effect}");
    }
    let r = device_taint_rule("r", &with_taint(|t| t.effect = "NoSchedule".into())).expect("valid");
    assert_eq!(r.effect, Some(crate::engine::devices::DeviceTaintEffect::NoSchedule));
}

#[test]
fn invalid_rules_name_the_field() {
    let long = "a".repeat(64);
    let cases: Vec<(proto::DeviceTaintRule, &str, &str)> = vec![
        (
            proto::DeviceTaintRule {
                name: String::new(),
                ..rule()
            },
            "r.name",
            "must not be empty",
        ),
        (
            proto::DeviceTaintRule { taint: None, ..rule() },
            "r.taint",
            "must be set",
        ),
        (
            with_taint(|t| t.key = String::new()),
            "r.taint.key",
            "must not be empty",
        ),
        (
            with_taint(|t| t.key = "not a key".into()),
            "r.taint.key",
            "invalid label key",
        ),
        (
            with_taint(|t| t.value = "-x".into()),
            "r.taint.value",
            "invalid label value",
        ),
        (
            with_taint(|t| t.effect = String::new()),
            "r.taint.effect",
            "must be set",
        ),
        (
            with_selector(|s| s.driver = Some(String::new())),
            "r.device_selector.driver",
            "must not be empty",
        ),
        (
            with_selector(|s| s.driver = Some(long.clone())),
            "r.device_selector.driver",
            "at most 63 bytes",
        ),
        (
            with_selector(|s| s.driver = Some("gpu_example.com".into())),
            "r.device_selector.driver",
            "DNS subdomain",
        ),
        (
            with_selector(|s| s.pool = Some("node-a/".into())),
            "r.device_selector.pool",
            "separated by '/'",
        ),
        (
            with_selector(|s| s.pool = Some("a".repeat(254))),
            "r.device_selector.pool",
            "at most 253 bytes",
        ),
        (
            with_selector(|s| s.device = Some("gpu.0".into())),
            "r.device_selector.device",
            "DNS label",
        ),
        (
            with_selector(|s| s.device = Some("GPU-0".into())),
            "r.device_selector.device",
            "DNS label",
        ),
        (
            with_selector(|s| s.device = Some(long.clone())),
            "r.device_selector.device",
            "at most 63 bytes",
        ),
    ];
    for (r, field, says) in cases {
        let e = device_taint_rule("r", &r).expect_err(field);
        assert_eq!(e.field, field, "{e}");
        assert!(e.message.contains(says), "{field}: {e}");
    }
}

/// The API server's driver names are case-insensitive DNS subdomains (`ValidateCSIDriverName`).
#[test]
fn a_driver_name_in_capitals_is_valid() {
    device_taint_rule("r", &with_selector(|s| s.driver = Some("GPU.Example.com".into()))).expect("valid");
}

#[test]
fn snapshots_and_deltas_carry_rules() {
    let snapshot = proto::Snapshot {
        device_taint_rules: vec![rule()],
        ..Default::default()
    };
    let parts = devices("full", &snapshot).expect("valid");
    assert_eq!(parts.taint_rules.len(), 1);
    let bad = proto::Snapshot {
        device_taint_rules: vec![rule(), with_taint(|t| t.effect = String::new())],
        ..Default::default()
    };
    assert_eq!(
        devices("full", &bad).expect_err("invalid").field,
        "full.device_taint_rules[1].taint.effect"
    );
    let delta = proto::SnapshotDelta {
        upsert_device_taint_rules: vec![rule()],
        remove_device_taint_rules: vec!["old".into()],
        ..Default::default()
    };
    let d = device_delta("delta", &delta).expect("valid");
    assert_eq!(d.upsert_taint_rules.len(), 1);
    assert_eq!(d.remove_taint_rules, ["old"]);
}
