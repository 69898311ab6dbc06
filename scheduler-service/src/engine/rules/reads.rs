//! What a rule's expression reads of `pod` and `node`: whether it reads only what a node class
//! shares, whether it reads the pod at all, and the paths it reads them through; values cut down
//! to such paths, and the keys under which pods reading alike share outcomes.

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr, LiteralValue};
use cel::{IdedExpr, Value};

use crate::engine::snapshot::NODE_UNIQUE_LABELS;

/// Whether `e` reads of `node` only what a node class shares: `node.metadata.labels` by a
/// literal key that is not per node (`labels['k']`, `labels.k`, `'k' in labels`, `has(labels.k)`)
/// and `node.spec.taints` / `node.spec.unschedulable`. Such a rule's verdict is the same on every
/// node of a class, so it is evaluated once per class and pod.
pub fn reads_only_class(e: &IdedExpr) -> bool {
    fn is_ident(e: &IdedExpr, name: &str) -> bool {
        matches!(&e.expr, Expr::Ident(n) if n == name)
    }
    fn select<'e>(e: &'e IdedExpr, field: &str) -> Option<&'e IdedExpr> {
        match &e.expr {
            Expr::Select(s) if !s.test && s.field == field => Some(&s.operand),
            _ => None,
        }
    }
    fn node_labels(e: &IdedExpr) -> bool {
        select(e, "labels")
            .and_then(|m| select(m, "metadata"))
            .is_some_and(|n| is_ident(n, "node"))
    }
    fn shared_key(e: &IdedExpr) -> bool {
        matches!(&e.expr, Expr::Literal(LiteralValue::String(k)) if !NODE_UNIQUE_LABELS.contains(&k.inner()))
    }
    fn ok(e: &IdedExpr) -> bool {
        match &e.expr {
            Expr::Ident(n) => n != "node",
            Expr::Literal(_) | Expr::Unspecified => true,
            // node.spec.taints and node.spec.unschedulable: the class's own.
            Expr::Select(s)
                if !s.test
                    && matches!(s.field.as_str(), "taints" | "unschedulable")
                    && select(&s.operand, "spec").is_some_and(|n| is_ident(n, "node")) =>
            {
                true
            }
            // node.metadata.labels.k and has(node.metadata.labels.k).
            Expr::Select(s) if node_labels(&s.operand) => !NODE_UNIQUE_LABELS.contains(&s.field.as_str()),
            Expr::Select(s) => ok(&s.operand),
            Expr::Call(c) => {
                match (c.func_name.as_str(), c.target.as_deref(), c.args.as_slice()) {
                    ("_[_]", None, [m, k]) if node_labels(m) => return shared_key(k),
                    ("@in", None, [k, m]) if node_labels(m) => return shared_key(k),
                    _ => {}
                }
                c.target.as_deref().is_none_or(ok) && c.args.iter().all(ok)
            }
            Expr::Comprehension(c) => {
                // A loop variable named `node` hides the node: refused, to stay simple.
                c.iter_var != "node"
                    && c.iter_var2.as_deref() != Some("node")
                    && c.accu_var != "node"
                    && [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result]
                        .into_iter()
                        .all(ok)
            }
            Expr::List(l) => l.elements.iter().all(ok),
            Expr::Map(m) => m.entries.iter().all(|e| entry_ok(&e.expr)),
            Expr::Struct(s) => s.entries.iter().all(|e| entry_ok(&e.expr)),
        }
    }
    fn entry_ok(e: &EntryExpr) -> bool {
        match e {
            EntryExpr::StructField(f) => ok(&f.value),
            EntryExpr::MapEntry(m) => ok(&m.key) && ok(&m.value),
        }
    }
    ok(e)
}

/// Whether `e` mentions `pod` anywhere (a comprehension variable of that name included: the
/// answer errs towards "reads the pod"). A rule that does not is the same for every pod, so its
/// outcome on a node is kept until the node's usage changes.
pub fn reads_pod(e: &IdedExpr) -> bool {
    fn any(e: &IdedExpr) -> bool {
        match &e.expr {
            Expr::Ident(n) => n == "pod",
            Expr::Literal(_) | Expr::Unspecified => false,
            Expr::Select(s) => any(&s.operand),
            Expr::Call(c) => c.target.as_deref().is_some_and(any) || c.args.iter().any(any),
            Expr::Comprehension(c) => {
                c.iter_var == "pod"
                    || c.iter_var2.as_deref() == Some("pod")
                    || c.accu_var == "pod"
                    || [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result]
                        .into_iter()
                        .any(any)
            }
            Expr::List(l) => l.elements.iter().any(any),
            Expr::Map(m) => m.entries.iter().any(|e| entry(&e.expr)),
            Expr::Struct(s) => s.entries.iter().any(|e| entry(&e.expr)),
        }
    }
    fn entry(e: &EntryExpr) -> bool {
        match e {
            EntryExpr::StructField(f) => any(&f.value),
            EntryExpr::MapEntry(m) => any(&m.key) || any(&m.value),
        }
    }
    any(e)
}

/// The paths into `pod` that `e` reads (`pod.metadata.labels['team']` is `metadata`, `labels`,
/// `team`), when it reads the pod only through such paths of literal names and keys, one at
/// least a field deep; `None` when it reads the pod another way (whole, or a comprehension
/// variable named `pod`). A class-level rule's outcome for a pod depends on the pod only
/// through the values at these paths, so pods agreeing on them share its outcomes per class.
pub fn pod_paths(e: &IdedExpr) -> Option<Vec<Vec<String>>> {
    var_paths(e, "pod")
}

/// The paths into `node` that `e` reads, as [`pod_paths`] finds them into `pod`: a rule that
/// reads the node only through them is evaluated on the node's value cut down to them
/// ([`project`]), which is all the evaluation converts.
pub fn node_paths(e: &IdedExpr) -> Option<Vec<Vec<String>>> {
    var_paths(e, "node")
}

/// The paths into the variable `var` that `e` reads (see [`pod_paths`]).
fn var_paths(e: &IdedExpr, var: &str) -> Option<Vec<Vec<String>>> {
    fn path(e: &IdedExpr, var: &str) -> Option<Vec<String>> {
        match &e.expr {
            Expr::Ident(n) if n == var => Some(Vec::new()),
            Expr::Select(s) => path(&s.operand, var).map(|mut p| {
                p.push(s.field.clone());
                p
            }),
            Expr::Call(c) if c.func_name == "_[_]" && c.target.is_none() => match c.args.as_slice() {
                [m, k] => match &k.expr {
                    Expr::Literal(LiteralValue::String(k)) => path(m, var).map(|mut p| {
                        p.push(k.inner().to_string());
                        p
                    }),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        }
    }
    fn walk(e: &IdedExpr, var: &str, out: &mut Vec<Vec<String>>) -> Option<()> {
        if let Some(p) = path(e, var) {
            if p.is_empty() {
                return None;
            }
            out.push(p);
            return Some(());
        }
        match &e.expr {
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Some(()),
            Expr::Select(s) => walk(&s.operand, var, out),
            Expr::Call(c) => {
                if let Some(t) = c.target.as_deref() {
                    walk(t, var, out)?;
                }
                c.args.iter().try_for_each(|a| walk(a, var, out))
            }
            Expr::Comprehension(c) => {
                if c.iter_var == var || c.iter_var2.as_deref() == Some(var) || c.accu_var == var {
                    return None;
                }
                [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result]
                    .into_iter()
                    .try_for_each(|x| walk(x, var, out))
            }
            Expr::List(l) => l.elements.iter().try_for_each(|x| walk(x, var, out)),
            Expr::Map(m) => m.entries.iter().try_for_each(|x| entry(&x.expr, var, out)),
            Expr::Struct(s) => s.entries.iter().try_for_each(|x| entry(&x.expr, var, out)),
        }
    }
    fn entry(e: &EntryExpr, var: &str, out: &mut Vec<Vec<String>>) -> Option<()> {
        match e {
            EntryExpr::StructField(f) => walk(&f.value, var, out),
            EntryExpr::MapEntry(m) => {
                walk(&m.key, var, out)?;
                walk(&m.value, var, out)
            }
        }
    }
    let mut out = Vec::new();
    walk(e, var, &mut out)?;
    out.sort();
    out.dedup();
    Some(out)
}

/// `value` cut down to what lies at `paths` (see [`var_paths`]): the maps along each path with
/// only the keys the paths name, and whole whatever a path ends at (or reaches that is not a
/// map). An expression that reads the value only through these paths reads the same from it:
/// what a path names exists in both or in neither.
pub fn project(value: &Value, paths: &[Vec<String>]) -> Value {
    fn insert(out: &mut HashMap<cel::objects::Key, Value>, from: &Value, path: &[String]) {
        let (Value::Map(m), Some((first, rest))) = (from, path.split_first()) else {
            return;
        };
        let Some(v) = m.get(&cel::objects::KeyRef::String(first.as_str())) else {
            return;
        };
        let key = cel::objects::Key::from(first.as_str());
        if rest.is_empty() || !matches!(v, Value::Map(_)) {
            out.insert(key, v.clone());
            return;
        }
        let at = out
            .entry(key)
            .or_insert_with(|| Value::from(HashMap::<String, Value>::new()));
        if let Value::Map(sub) = at {
            insert(Arc::make_mut(&mut sub.map), v, rest);
        }
    }
    let mut out = HashMap::new();
    for p in paths {
        insert(&mut out, value, p);
    }
    Value::Map(cel::objects::Map { map: Arc::new(out) })
}

/// The values of `pod` at `paths` (see [`pod_paths`]), written out: pods with equal keys read
/// alike through those paths.
pub(super) fn pod_key(pod: &Value, paths: &[Vec<String>]) -> String {
    use std::fmt::Write;
    let mut key = String::new();
    for p in paths {
        let mut at = Some(pod);
        for step in p {
            at = match at {
                Some(Value::Map(m)) => m.get(&cel::objects::KeyRef::String(step.as_str())),
                _ => None,
            };
        }
        match at {
            // A string as its length and bytes (no escaping to do); anything else as it
            // prints. Maps print in no fixed order: equal maps may give other keys (and share
            // less), never unequal ones the same key.
            Some(Value::String(v)) => {
                let _ = write!(key, "s{}:", v.len());
                key.push_str(v);
                key.push(';');
            }
            Some(v) => {
                let _ = write!(key, "{v:?};");
            }
            None => key.push_str("-;"),
        }
    }
    key
}

#[cfg(test)]
mod tests {
    use cel::Program;

    use super::*;
    use crate::engine::model::PodSpec;
    use crate::engine::rules::compile::tests::rules;
    use crate::engine::rules::values::pod_value;

    #[test]
    fn rules_reading_only_shared_labels_and_taints_are_class_level() {
        let class = |e: &str| reads_only_class(Program::compile(e).unwrap().expression());
        assert!(class(
            "pod.metadata.labels['workload_name'] != 'nginx' || 'test/test' in node.metadata.labels"
        ));
        assert!(class("node.metadata.labels['zone'] == pod.metadata.labels['zone']"));
        assert!(class(
            "has(node.metadata.labels.zone) && node.metadata.labels.zone == 'a'"
        ));
        assert!(class(
            "!node.spec.taints.exists(t, t.effect == 'NoExecute') && !node.spec.unschedulable"
        ));
        assert!(!class("node.metadata.name == 'a'"), "the name is per node");
        assert!(
            !class("node.metadata.labels['kubernetes.io/hostname'] == 'a'"),
            "a per-node label"
        );
        assert!(
            !class("node.metadata.labels[pod.metadata.labels['k']] == 'a'"),
            "a computed key"
        );
        assert!(!class("node.metadata.labels.exists(k, k == 'x')"), "every label");
        assert!(!class("node.status.requested.cpu < 1000"));
        assert!(!class("size(node) > 0"));
    }

    #[test]
    fn pods_reading_alike_share_a_key() {
        let paths = |e: &str| pod_paths(Program::compile(e).unwrap().expression());
        let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            paths("pod.metadata.labels['team'] != 'ml' || 'ssd' in node.metadata.labels"),
            Some(vec![path(&["metadata", "labels", "team"])])
        );
        assert_eq!(
            paths("has(pod.metadata.labels.team) && pod.requests.cpu > 100"),
            Some(vec![path(&["metadata", "labels", "team"]), path(&["requests", "cpu"])])
        );
        assert_eq!(
            paths("pod.spec.containers.all(c, c.image != '')"),
            Some(vec![path(&["spec", "containers"])])
        );
        // A computed key reads the whole map; the whole pod, or a variable named pod, no path.
        assert_eq!(
            paths("node.metadata.labels[pod.metadata.labels['k']] == 'a'"),
            Some(vec![path(&["metadata", "labels", "k"])])
        );
        assert_eq!(
            paths("pod.metadata.labels[node.metadata.labels['k']] == 'a'"),
            Some(vec![path(&["metadata", "labels"])])
        );
        assert_eq!(paths("size(pod) > 0"), None);
        assert_eq!(paths("[1].all(pod, pod > 0)"), None);
        assert_eq!(paths("node.metadata.labels['zone'] == 'a'"), Some(vec![]));

        let compiled = rules(
            &[(
                "team",
                "pod.metadata.labels['team'] != 'ml' || 'ssd' in node.metadata.labels",
            )],
            &[],
        )
        .compile()
        .unwrap();
        let with = |name: &str, team: Option<&str>| {
            let mut p = PodSpec {
                name: name.into(),
                ..Default::default()
            };
            if let Some(t) = team {
                p.labels.insert("team".into(), t.into());
            }
            compiled.pod_key(0, &pod_value(&p))
        };
        assert_eq!(with("a", Some("ml")), with("b", Some("ml")), "names are not read");
        assert_ne!(with("a", Some("ml")), with("a", Some("data")));
        assert_ne!(
            with("a", Some("")),
            with("a", None),
            "an empty label is not a missing one"
        );
    }
}
