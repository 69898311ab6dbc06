//! DeviceTaintRules (`resource.k8s.io/v1`, the `DRADeviceTaintRules` feature, GA and on by
//! default in Kubernetes 1.37) applied to the ResourceSlices DynamicResources reads, as kube's
//! ResourceSlice tracker applies them: `k8s.io/dynamic-resource-allocation/resourceslice/tracker/tracker.go`
//! (`applyPatches`), whose patched slices kube-scheduler's DynamicResources lists
//! (`ListWithDeviceTaintRules`, `pkg/scheduler/framework/plugins/dynamicresources/dra_manager.go`).
//!
//! A rule selects devices by its selector: none selects no device; each field set (driver, pool,
//! device name) must equal the slice's driver, the slice's pool name and the device's name; an
//! empty selector selects every device. A selected device gets the rule's taint appended after the
//! taints its slice gives it (the tracker's `append`), so a device may carry the same taint twice;
//! the allocator then refuses it to a request that does not tolerate every `NoSchedule` and
//! `NoExecute` taint, as for a slice's own taints (`taintPreventsAllocation`). A rule whose effect
//! is `None` (or one this version does not know) adds a taint that keeps nothing from being
//! allocated; placement drops such taints when it reads a slice, and adds nothing for such a rule.
//! A taint's `timeAdded` decides nothing here (only kube's eviction controller reads it).
//!
//! The tracker applies the rules in its informer's list order (unordered); the order only changes
//! the order of a device's taints, not what the allocator decides. Here they apply in name order,
//! so that one snapshot always gives the same devices.
//!
//! The slices no rule touches are shared, not copied; the devices' taints are part of each node's
//! device signature (`devices::SliceIndex`), so a rule added, changed or removed by a delta gives
//! the nodes whose devices it touches new verdicts.

use std::sync::Arc;

use super::devices::{DeviceObjects, DeviceTaint, DeviceTaintRule, ResourceSlice};

/// Whether `rule` selects the devices of `slice` at all (its driver and pool), before the device
/// name: `None` when it selects none of them.
fn slice_selected<'r>(rule: &'r DeviceTaintRule, slice: &ResourceSlice) -> Option<(Option<&'r str>, DeviceTaint)> {
    // No selector matches no devices.
    let selector = rule.selector.as_ref()?;
    if selector.driver.as_deref().is_some_and(|d| d != &*slice.driver) {
        return None;
    }
    if selector.pool.as_deref().is_some_and(|p| p != &*slice.pool) {
        return None;
    }
    // A taint with the effect None changes nothing the allocator reads.
    let taint = rule.taint()?;
    Some((selector.device.as_deref(), taint))
}

/// `slice` with the taints of `rules` applied (the tracker's `applyPatches`), or `None` when no
/// rule selects any of its devices (the slice is then read as it is).
pub fn apply<'r>(slice: &ResourceSlice, rules: impl IntoIterator<Item = &'r DeviceTaintRule>) -> Option<ResourceSlice> {
    let mut patched: Option<ResourceSlice> = None;
    for rule in rules {
        let Some((device, taint)) = slice_selected(rule, slice) else {
            continue;
        };
        for (i, d) in slice.devices.iter().enumerate() {
            if device.is_some_and(|name| name != &*d.name) {
                continue;
            }
            // Copied on the first device a rule selects.
            let p = patched.get_or_insert_with(|| slice.clone());
            p.devices[i].taints.push(taint.clone());
        }
    }
    patched
}

/// The snapshot's ResourceSlices in name order as DynamicResources reads them: with the
/// DeviceTaintRules' taints applied. A slice no rule selects is the snapshot's own.
pub fn patched_slices(objects: &DeviceObjects) -> Vec<Arc<ResourceSlice>> {
    // Only the rules that can taint a device.
    let rules: Vec<&DeviceTaintRule> = objects
        .taint_rules
        .values()
        .map(|r| &**r)
        .filter(|r| r.selector.is_some() && r.effect.is_some())
        .collect();
    objects
        .slices
        .values()
        .map(|s| match apply(s, rules.iter().copied()) {
            Some(patched) => Arc::new(patched),
            None => Arc::clone(s),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::devices::{Device, DeviceTaintEffect, DeviceTaintSelector, NodeSelection};

    fn slice(name: &str, driver: &str, pool: &str, devices: &[&str]) -> ResourceSlice {
        ResourceSlice {
            name: name.into(),
            driver: driver.into(),
            pool: pool.into(),
            pool_generation: 1,
            pool_slice_count: 1,
            node_selection: NodeSelection::NodeName(pool.into()),
            devices: devices
                .iter()
                .map(|d| Device {
                    name: (*d).into(),
                    ..Default::default()
                })
                .collect(),
            shared_counters: vec![],
        }
    }

    fn rule(name: &str, driver: Option<&str>, pool: Option<&str>, device: Option<&str>) -> DeviceTaintRule {
        DeviceTaintRule {
            name: name.into(),
            selector: Some(DeviceTaintSelector {
                driver: driver.map(Into::into),
                pool: pool.map(Into::into),
                device: device.map(Into::into),
            }),
            key: format!("example.com/{name}"),
            value: "true".into(),
            effect: Some(DeviceTaintEffect::NoSchedule),
            time_added: 1_700_000_000,
        }
    }

    fn taint(key: &str, effect: DeviceTaintEffect) -> DeviceTaint {
        DeviceTaint {
            key: key.into(),
            value: "true".into(),
            effect,
        }
    }

    /// Each device's expected taint keys (none: the slice is not copied).
    type Expected<'a> = &'a [(&'a str, &'a [&'a str])];

    /// Each device's taint keys, in order.
    fn keys(s: &ResourceSlice) -> Vec<(String, Vec<String>)> {
        s.devices
            .iter()
            .map(|d| (d.name.to_string(), d.taints.iter().map(|t| t.key.clone()).collect()))
            .collect()
    }

    fn keys_of(devices: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
        devices
            .iter()
            .map(|(d, ks)| (d.to_string(), ks.iter().map(|k| k.to_string()).collect()))
            .collect()
    }

    /// The selectors' cases of tracker_test.go: by driver, pool, device, all three, none set, no
    /// selector.
    #[test]
    fn rules_select_devices_by_driver_pool_and_device() {
        let s = slice("n1-gpus", "gpu.example.com", "n1", &["gpu-0", "gpu-1"]);
        let cases: Vec<(&str, DeviceTaintRule, Expected)> = vec![
            (
                "the driver",
                rule("drv", Some("gpu.example.com"), None, None),
                &[("gpu-0", &["example.com/drv"]), ("gpu-1", &["example.com/drv"])],
            ),
            ("another driver", rule("drv", Some("nic.example.com"), None, None), &[]),
            (
                "the pool",
                rule("pool", None, Some("n1"), None),
                &[("gpu-0", &["example.com/pool"]), ("gpu-1", &["example.com/pool"])],
            ),
            ("another pool", rule("pool", None, Some("n2"), None), &[]),
            (
                "one device",
                rule("dev", None, None, Some("gpu-1")),
                &[("gpu-0", &[]), ("gpu-1", &["example.com/dev"])],
            ),
            (
                "a device the slice has not",
                rule("dev", None, None, Some("gpu-7")),
                &[],
            ),
            (
                "driver, pool and device",
                rule("all", Some("gpu.example.com"), Some("n1"), Some("gpu-0")),
                &[("gpu-0", &["example.com/all"]), ("gpu-1", &[])],
            ),
            (
                "the device of another driver's pool of that name",
                rule("all", Some("nic.example.com"), Some("n1"), Some("gpu-0")),
                &[],
            ),
            (
                "an empty selector: every device",
                rule("any", None, None, None),
                &[("gpu-0", &["example.com/any"]), ("gpu-1", &["example.com/any"])],
            ),
            (
                "no selector: no device",
                DeviceTaintRule {
                    selector: None,
                    ..rule("none", None, None, None)
                },
                &[],
            ),
        ];
        for (what, r, want) in cases {
            let got = apply(&s, [&r]);
            if want.is_empty() {
                assert_eq!(got, None, "{what}: the slice is read as it is");
            } else {
                assert_eq!(got.as_ref().map(keys), Some(keys_of(want)), "{what}");
            }
        }
    }

    /// A rule's taint comes after the slice's own; two rules add two taints, in the order given;
    /// the same taint twice stays twice (the tracker appends).
    #[test]
    fn rule_taints_follow_the_slices_own() {
        let mut s = slice("n1-gpus", "gpu.example.com", "n1", &["gpu-0", "gpu-1"]);
        s.devices[0].taints = vec![taint("example.com/own", DeviceTaintEffect::NoExecute)];
        let a = rule("a", None, Some("n1"), None);
        let b = rule("b", None, None, Some("gpu-0"));
        let own_again = DeviceTaintRule {
            key: "example.com/own".into(),
            effect: Some(DeviceTaintEffect::NoExecute),
            ..rule("c", None, None, Some("gpu-0"))
        };
        let got = apply(&s, [&a, &b, &own_again]).expect("patched");
        assert_eq!(
            keys(&got),
            keys_of(&[
                (
                    "gpu-0",
                    &["example.com/own", "example.com/a", "example.com/b", "example.com/own"]
                ),
                ("gpu-1", &["example.com/a"]),
            ])
        );
        assert_eq!(
            got.devices[0].taints[1],
            taint("example.com/a", DeviceTaintEffect::NoSchedule)
        );
        // The original is untouched.
        assert_eq!(s.devices[0].taints.len(), 1);
        assert!(s.devices[1].taints.is_empty());
    }

    /// A rule with the effect None adds nothing the allocator reads.
    #[test]
    fn a_rule_with_the_effect_none_taints_nothing() {
        let s = slice("n1-gpus", "gpu.example.com", "n1", &["gpu-0"]);
        let none = DeviceTaintRule {
            effect: None,
            ..rule("info", None, None, None)
        };
        assert_eq!(apply(&s, [&none]), None);
    }

    /// The snapshot's slices with the rules applied, in name order; a slice no rule selects is
    /// shared, not copied.
    #[test]
    fn patched_slices_share_the_slices_no_rule_selects() {
        let mut objects = DeviceObjects::default();
        objects
            .apply(
                crate::engine::devices::DeviceDelta {
                    upsert_slices: vec![
                        slice("n1-gpus", "gpu.example.com", "n1", &["gpu-0"]),
                        slice("n2-gpus", "gpu.example.com", "n2", &["gpu-0"]),
                    ],
                    upsert_taint_rules: vec![
                        rule("n2", None, Some("n2"), None),
                        DeviceTaintRule {
                            effect: None,
                            ..rule("everything", None, None, None)
                        },
                    ],
                    ..Default::default()
                },
                false,
            )
            .expect("no duplicates");
        let patched = patched_slices(&objects);
        assert_eq!(
            patched.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["n1-gpus", "n2-gpus"]
        );
        assert!(Arc::ptr_eq(&patched[0], &objects.slices["n1-gpus"]));
        assert_eq!(keys(&patched[1]), keys_of(&[("gpu-0", &["example.com/n2"])]));
        assert!(objects.slices["n2-gpus"].devices[0].taints.is_empty());
        // A delta removing the rule gives the slice back as it is.
        objects
            .apply(
                crate::engine::devices::DeviceDelta {
                    remove_taint_rules: vec!["n2".into()],
                    ..Default::default()
                },
                false,
            )
            .expect("no duplicates");
        assert!(patched_slices(&objects).iter().all(|s| s.devices[0].taints.is_empty()));
    }
}
