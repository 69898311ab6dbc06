//! kube-scheduler's plugin sets as a profile's `plugins` change them: the default set merged with
//! the operator's (`mergePluginSet`, `pkg/scheduler/apis/config/v1/default_plugins.go`) and
//! multiPoint expanded into one extension point (`expandMultiPointPlugins`,
//! `pkg/scheduler/framework/runtime/framework.go`).

use std::collections::HashSet;

use super::specs::{PluginSetSpec, PluginSpec};
use crate::engine::registry::{self, Runs};

/// A plugin multiPoint enables twice for one extension point (kube's `plugin %q already
/// registered as %q`).
#[derive(Debug)]
pub(super) struct AlreadyRegistered {
    /// Path of the second entry.
    pub(super) field: String,
    /// What is wrong.
    pub(super) message: String,
}

/// One enabled plugin after merging: where it came from and whether the operator wrote it.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) name: String,
    pub(super) weight: Option<i64>,
    /// Written in the file (not merely implied by kube-scheduler's defaults).
    pub(super) explicit: bool,
    /// Path of the entry in the file (empty for implied defaults).
    pub(super) field: String,
}

fn entries(set: &[PluginSpec], path: &str) -> Vec<Entry> {
    set.iter()
        .enumerate()
        .map(|(i, p)| Entry {
            name: p.name.clone(),
            weight: p.weight,
            explicit: true,
            field: format!("{path}.enabled[{i}]"),
        })
        .collect()
}

fn disabled_names(set: &PluginSetSpec) -> HashSet<&str> {
    set.disabled.iter().map(|p| p.name.as_str()).collect()
}

/// kube-scheduler's `mergePluginSet`: defaults minus the disabled ones (all with `"*"`), a default
/// the operator re-lists replaced in place (keeping its position), the rest of the operator's list
/// appended in order.
pub(super) fn merge_plugin_set(defaults: Vec<Entry>, custom: &PluginSetSpec, path: &str) -> Vec<Entry> {
    let disabled = disabled_names(custom);
    let custom = entries(&custom.enabled, path);
    let mut replaced = HashSet::new();
    let mut out = Vec::new();
    if !disabled.contains("*") {
        for d in defaults {
            if disabled.contains(d.name.as_str()) {
                continue;
            }
            // The last custom entry of a name wins, as kube-scheduler's map does.
            match custom.iter().enumerate().rev().find(|(_, c)| c.name == d.name) {
                Some((i, c)) => {
                    replaced.insert(i);
                    out.push(c.clone());
                }
                None => out.push(d),
            }
        }
    }
    out.extend(
        custom
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !replaced.contains(i))
            .map(|(_, c)| c),
    );
    out
}

/// kube-scheduler's multiPoint expansion for one extension point: plugins also listed at the point
/// (overrides, in multiPoint order), then multiPoint plugins that implement the point and are not
/// disabled there, then the point's other plugins. `"*"` at the point skips the expansion.
pub(super) fn expand(
    multi_point: &[Entry],
    point: &[Entry],
    point_set: &PluginSetSpec,
    implements: impl Fn(&str) -> bool,
    point_path: &str,
) -> Result<Vec<Entry>, AlreadyRegistered> {
    let disabled = disabled_names(point_set);
    if disabled.contains("*") {
        return Ok(point.to_vec());
    }
    let mut overrides: Vec<Entry> = Vec::new();
    let mut from_multi: Vec<Entry> = Vec::new();
    for e in multi_point {
        if !implements(&e.name) || disabled.contains(e.name.as_str()) {
            continue;
        }
        if let Some(o) = point.iter().find(|p| p.name == e.name) {
            if !overrides.iter().any(|x| x.name == o.name) {
                overrides.push(o.clone());
            }
            continue;
        }
        if from_multi.iter().any(|x| x.name == e.name) {
            return Err(AlreadyRegistered {
                field: e.field.clone(),
                message: format!("plugin {:?} already registered at {point_path}", e.name),
            });
        }
        from_multi.push(e.clone());
    }
    let rest: Vec<Entry> = point
        .iter()
        .filter(|p| !overrides.iter().any(|o| o.name == p.name))
        .cloned()
        .collect();
    Ok(overrides.into_iter().chain(from_multi).chain(rest).collect())
}

/// Whether `name` is a plugin the engine runs as a PostFilter (DefaultPreemption).
pub(super) fn is_post_filter(name: &str) -> bool {
    matches!(registry::by_name(name).map(|r| r.runs), Some(Runs::PostFilter { .. }))
}
