//! Label and field selectors, parsed and evaluated like the Kubernetes API server does.

use serde_json::Value;

use super::Kind;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed `labelSelector` (requirements ANDed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector(Vec<LabelReq>);

/// Splits on commas that are not inside parentheses.
fn split_top_level(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

fn valid_label_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn parse_set(rest: &str) -> Result<Vec<String>, String> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("expected a parenthesised set of values, found {rest:?}"))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

impl LabelSelector {
    /// Parses the `labelSelector` query parameter syntax.
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(Self(reqs));
        }
        for term in split_top_level(s) {
            let term = term.trim();
            if term.is_empty() {
                return Err(format!("unable to parse requirement: empty term in {s:?}"));
            }
            if let Some(k) = term.strip_prefix('!') {
                let k = k.trim();
                if !valid_label_key(k) {
                    return Err(format!("invalid label key {k:?}"));
                }
                reqs.push(LabelReq::NotExists(k.to_string()));
                continue;
            }
            if let Some((k, v)) = term.split_once("!=") {
                reqs.push(LabelReq::NotEq(k.trim().to_string(), v.trim().to_string()));
                continue;
            }
            if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                let k = k.trim();
                if !valid_label_key(k) {
                    return Err(format!("invalid label key {k:?}"));
                }
                reqs.push(LabelReq::Eq(k.to_string(), v.trim().to_string()));
                continue;
            }
            // Set-based: `key in (a,b)`, `key notin (a,b)` or a bare `key`.
            let key_end = term.find(|c: char| c.is_whitespace() || c == '(').unwrap_or(term.len());
            let (k, rest) = term.split_at(key_end);
            let rest = rest.trim_start();
            if rest.is_empty() {
                if !valid_label_key(k) {
                    return Err(format!("invalid label key {k:?}"));
                }
                reqs.push(LabelReq::Exists(k.to_string()));
            } else if let Some(set) = rest.strip_prefix("notin") {
                reqs.push(LabelReq::NotIn(k.to_string(), parse_set(set)?));
            } else if let Some(set) = rest.strip_prefix("in") {
                reqs.push(LabelReq::In(k.to_string(), parse_set(set)?));
            } else {
                return Err(format!("unable to parse requirement: {term:?}"));
            }
        }
        Ok(Self(reqs))
    }

    /// Whether the object's `metadata.labels` satisfy every requirement.
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels").and_then(Value::as_object);
        self.matches_labels(|k| labels.and_then(|l| l.get(k)).and_then(Value::as_str))
    }

    /// Whether the labels `get` reads satisfy every requirement.
    pub(crate) fn matches_labels<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|r| match r {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }
}

/// One `field=value` / `field!=value` term of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldReq {
    field: String,
    value: String,
    negate: bool,
}

/// A parsed `fieldSelector` (terms ANDed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector(Vec<FieldReq>);

/// Splits on unescaped commas and unescapes `\,`, `\=` and `\\` afterwards.
fn split_fields(s: &str) -> Vec<(String, Option<(String, bool)>)> {
    // Returns (lhs, Some((rhs, negate))) per term, with escapes resolved in the value.
    let mut terms = Vec::new();
    let mut cur = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                cur.push('\\');
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            ',' => terms.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    terms.push(cur);
    terms
        .into_iter()
        .map(|t| {
            // Find the first unescaped operator.
            let bytes: Vec<char> = t.chars().collect();
            let mut i = 0;
            while i < bytes.len() {
                match bytes[i] {
                    '\\' => i += 2,
                    '!' if bytes.get(i + 1) == Some(&'=') => {
                        let lhs: String = bytes[..i].iter().collect();
                        let rhs: String = bytes[i + 2..].iter().collect();
                        return (lhs, Some((unescape(&rhs), true)));
                    }
                    '=' => {
                        let lhs: String = bytes[..i].iter().collect();
                        let skip = if bytes.get(i + 1) == Some(&'=') { 2 } else { 1 };
                        let rhs: String = bytes[i + skip..].iter().collect();
                        return (lhs, Some((unescape(&rhs), false)));
                    }
                    _ => i += 1,
                }
            }
            (t, None)
        })
        .collect()
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The field labels a kind supports in field selectors (`None` = any JSON path is accepted).
fn supported_fields(kind: Kind) -> Option<&'static [&'static str]> {
    match kind {
        Kind::Pod => Some(&[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ]),
        Kind::Node => Some(&["metadata.name", "spec.unschedulable"]),
        Kind::Lease | Kind::PodDisruptionBudget => Some(&["metadata.name", "metadata.namespace"]),
        Kind::Namespace | Kind::StorageClass | Kind::CsiNode | Kind::CsiDriver => Some(&["metadata.name"]),
        Kind::CsiStorageCapacity => Some(&["metadata.name", "metadata.namespace"]),
        Kind::PersistentVolumeClaim => Some(&["metadata.name", "metadata.namespace"]),
        Kind::PersistentVolume | Kind::DeviceClass | Kind::DeviceTaintRule => Some(&["metadata.name"]),
        Kind::ResourceClaim | Kind::PodGroup | Kind::CompositePodGroup => {
            Some(&["metadata.name", "metadata.namespace"])
        }
        Kind::ResourceSlice => Some(&["metadata.name", "spec.nodeName", "spec.driver", "spec.pool.name"]),
        Kind::CoreEvent | Kind::Event => None,
    }
}

/// The string value the API server compares a field label against.
fn field_value(kind: Kind, obj: &Value, field: &str) -> String {
    let pointer = format!("/{}", field.replace('.', "/"));
    let v = obj.pointer(&pointer);
    match (kind, field) {
        (Kind::Pod, "spec.hostNetwork") | (Kind::Node, "spec.unschedulable") => {
            v.and_then(Value::as_bool).unwrap_or(false).to_string()
        }
        (Kind::CoreEvent, "source") => obj
            .pointer("/source/component")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        _ => match v {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        },
    }
}

impl FieldSelector {
    /// Parses the `fieldSelector` query parameter, rejecting labels the kind does not support.
    pub(crate) fn parse(s: &str, kind: Kind) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(Self(reqs));
        }
        for (lhs, rhs) in split_fields(s) {
            let Some((value, negate)) = rhs else {
                return Err(format!("invalid selector: '{s}'; can't understand '{lhs}'"));
            };
            let field = lhs.trim().to_string();
            if let Some(ok) = supported_fields(kind) {
                if !ok.contains(&field.as_str()) {
                    return Err(format!("field label not supported: {field}"));
                }
            }
            reqs.push(FieldReq { field, value, negate });
        }
        Ok(Self(reqs))
    }

    /// Whether the object satisfies every term.
    pub(crate) fn matches(&self, kind: Kind, obj: &Value) -> bool {
        self.matches_fields(|field| field_value(kind, obj, field))
    }

    /// Whether the field values `value` reads satisfy every term.
    pub(crate) fn matches_fields(&self, value: impl Fn(&str) -> String) -> bool {
        self.0.iter().all(|r| (value(&r.field) == r.value) != r.negate)
    }
}

/// What label and field selectors read of a stored object, extracted when it is written: its
/// labels and the value of every field label its kind supports.
#[derive(Debug, Clone)]
pub(crate) struct Selectable {
    /// `metadata.labels`, sorted by key.
    labels: Box<[(Box<str>, Box<str>)]>,
    /// The value of each of `supported_fields(kind)`, in that order.
    fields: Box<[Box<str>]>,
    kind: Kind,
}

impl Selectable {
    /// The selectable view of `obj`; `None` for kinds whose field selectors accept any path
    /// (those are evaluated on the object itself).
    pub(crate) fn of(kind: Kind, obj: &Value) -> Option<Self> {
        let supported = supported_fields(kind)?;
        let labels = obj
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.as_str().into(), v.as_str()?.into())))
            .collect();
        let fields = supported.iter().map(|f| field_value(kind, obj, f).into()).collect();
        Some(Self { labels, fields, kind })
    }

    /// The value of the label `key`.
    pub(crate) fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &*self.labels[i].1)
    }

    /// The value of the field label `field` (one its kind supports: selectors are checked
    /// against that list when parsed).
    pub(crate) fn field(&self, field: &str) -> String {
        supported_fields(self.kind)
            .and_then(|fs| fs.iter().position(|f| *f == field))
            .map(|i| self.fields[i].to_string())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn labels() {
        let obj = json!({"metadata": {"labels": {"app": "web", "tier": "fe"}}});
        let ok = |s: &str| LabelSelector::parse(s).unwrap().matches(&obj);
        assert!(ok(""));
        assert!(ok("app=web"));
        assert!(ok("app==web,tier"));
        assert!(!ok("app!=web"));
        assert!(ok("app in (web, db)"));
        assert!(!ok("app notin (web,db)"));
        assert!(ok("missing notin (x)"));
        assert!(ok("!missing"));
        assert!(!ok("!app"));
        assert!(ok("tier in (fe),app"));
        assert!(LabelSelector::parse("app in web").is_err());
    }

    #[test]
    fn the_selectable_view_answers_as_the_object() {
        let pod = json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web", "tier": "fe"}},
                         "spec": {"nodeName": "n1", "hostNetwork": true}, "status": {"phase": "Running"}});
        let view = Selectable::of(Kind::Pod, &pod).unwrap();
        for s in ["app=web", "app in (db)", "tier,!missing", "app notin (web)", "zone"] {
            let sel = LabelSelector::parse(s).unwrap();
            assert_eq!(sel.matches_labels(|k| view.label(k)), sel.matches(&pod), "{s}");
        }
        for s in [
            "spec.nodeName=n1",
            "spec.nodeName=",
            "spec.hostNetwork=true",
            "status.phase!=Running",
            "metadata.name=p,metadata.namespace=ns",
            "spec.schedulerName=",
        ] {
            let sel = FieldSelector::parse(s, Kind::Pod).unwrap();
            assert_eq!(
                sel.matches_fields(|f| view.field(f)),
                sel.matches(Kind::Pod, &pod),
                "{s}"
            );
        }
        assert!(
            Selectable::of(Kind::Event, &pod).is_none(),
            "events take any field path"
        );
    }

    #[test]
    fn fields() {
        let bound = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1", "schedulerName": "s"}, "status": {"phase": "Running"}});
        let unbound = json!({"metadata": {"name": "q", "namespace": "ns"}, "spec": {}, "status": {}});
        let sel = |s: &str| FieldSelector::parse(s, Kind::Pod).unwrap();
        assert!(sel("spec.nodeName=").matches(Kind::Pod, &unbound));
        assert!(!sel("spec.nodeName=").matches(Kind::Pod, &bound));
        assert!(sel("spec.nodeName!=").matches(Kind::Pod, &bound));
        assert!(sel("spec.nodeName==n1,status.phase!=Succeeded,status.phase!=Failed").matches(Kind::Pod, &bound));
        assert!(sel("metadata.name=q,metadata.namespace=ns").matches(Kind::Pod, &unbound));
        assert!(sel("spec.schedulerName=s").matches(Kind::Pod, &bound));
        assert!(FieldSelector::parse("spec.bogus=1", Kind::Pod).is_err());
        assert!(FieldSelector::parse("novalue", Kind::Pod).is_err());
        let esc = FieldSelector::parse(r"metadata.name=a\,b", Kind::Pod).unwrap();
        assert!(esc.matches(Kind::Pod, &json!({"metadata": {"name": "a,b"}})));
    }
}
