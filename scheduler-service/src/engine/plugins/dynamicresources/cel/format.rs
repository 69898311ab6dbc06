//! Kubernetes' format library (`k8s.io/apiserver/pkg/cel/library/format.go`, kube's base
//! environment from 1.31): the named formats `format.dns1123Label()`,
//! `format.dns1123Subdomain()`, `format.dns1035Label()`, `format.qualifiedName()`, their
//! `…Prefix()` forms, `format.labelValue()`, `format.uri()`, `format.uuid()`, `format.byte()`,
//! `format.date()`, `format.datetime()`, `format.named(name)` (an optional format), and
//! `<format>.validate(s)`: `optional.none()` when `s` is valid, else the optional list of
//! apimachinery's messages (`k8s.io/apimachinery/pkg/util/validation`, `…/api/validate/content`).
//!
//! Cost (kube's `library/cost.go`): `validate` as a regex of the format's `MaxRegexSize`,
//! `⌈(1 + len(s)) × 0.1⌉ × ⌈MaxRegexSize × 0.25⌉`, the reading of `s` included (called as
//! `@@validate`, [`super::prepare`]); `format.named` 1.

use std::sync::LazyLock;

use cel::common::types::{Type, STRING_TYPE};
use cel::common::value::CowVal;
use cel::objects::Opaque;
use cel::{Env, ExecutionError, Value};

use super::regex::search_units;
use super::values::{charge, opaque_arg, opaque_out, optional_out, string_arg};

/// The CEL type name of formats (kube's `apiservercel.FormatType`).
pub const FORMAT_TYPE_NAME: &str = "kubernetes.NamedFormat";

/// A named format (kube's `apiservercel.Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format {
    /// The name `format.named` knows it by.
    name: &'static str,
    /// kube's `MaxRegexSize`, its cost.
    max_regex_size: usize,
}

impl Opaque for Format {
    fn runtime_type_name(&self) -> &str {
        FORMAT_TYPE_NAME
    }
}

/// kube's `ConstantFormats`: name and `MaxRegexSize`.
const FORMATS: &[(&str, usize)] = &[
    ("dns1123Label", 30),
    ("dns1123Subdomain", 60),
    ("dns1035Label", 30),
    ("qualifiedName", 60),
    ("dns1123LabelPrefix", 30),
    ("dns1123SubdomainPrefix", 60),
    ("dns1035LabelPrefix", 30),
    ("labelValue", 40),
    ("uri", 1103),
    // `len(strfmt.UUIDPattern)`, `base64Length`, `len(strfmt.DateTimePattern)`.
    ("uuid", 110),
    ("byte", 84),
    ("date", 27),
    ("datetime", 27),
];

fn format_type() -> Type {
    Type::new_opaque_type(FORMAT_TYPE_NAME)
}

fn named(name: &str) -> Option<Format> {
    FORMATS.iter().find(|(n, _)| *n == name).map(|(n, size)| Format {
        name: n,
        max_regex_size: *size,
    })
}

macro_rules! constant_formats {
    ($($name:literal => $f:ident),* $(,)?) => {
        $(
            fn $f<'b, 'v>(_: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
                opaque_out(named($name).ok_or_else(|| ExecutionError::function_error($name, "unknown format"))?)
            }
        )*
        const CONSTANTS: &[(&str, cel::common::functions::Function)] = &[$(($name, $f)),*];
    };
}

constant_formats! {
    "dns1123Label" => f_dns1123_label,
    "dns1123Subdomain" => f_dns1123_subdomain,
    "dns1035Label" => f_dns1035_label,
    "qualifiedName" => f_qualified_name,
    "dns1123LabelPrefix" => f_dns1123_label_prefix,
    "dns1123SubdomainPrefix" => f_dns1123_subdomain_prefix,
    "dns1035LabelPrefix" => f_dns1035_label_prefix,
    "labelValue" => f_label_value,
    "uri" => f_uri,
    "uuid" => f_uuid,
    "byte" => f_byte,
    "date" => f_date,
    "datetime" => f_datetime,
}

/// Declares the library in `env`.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    env.add_type(format_type())?;
    for (name, f) in CONSTANTS {
        let qualified = format!("format.{name}");
        env.add_overload(&qualified, &qualified, vec![], *f)?;
    }
    env.add_overload("format.named", "format-named", vec![STRING_TYPE], format_named)?;
    env.add_overload(
        "@@validate",
        "dra_format_validate",
        vec![format_type(), STRING_TYPE],
        validate,
    )?;
    env.add_member_overload(
        "validate",
        "format-validate",
        format_type(),
        vec![STRING_TYPE],
        validate,
    )
}

fn format_named<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let name = string_arg(&args, 0, "format.named")?;
    match named(&name) {
        Some(f) => optional_out(Some(Value::Opaque(std::sync::Arc::new(f)))),
        None => optional_out(None),
    }
}

fn validate<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let f = opaque_arg::<Format>(&args, 0, "validate")?;
    let s = string_arg(&args, 1, "validate")?;
    charge(search_units(s.len(), f.max_regex_size))?;
    let errors = messages(f.name, &s);
    if errors.is_empty() {
        return optional_out(None);
    }
    optional_out(Some(Value::List(std::sync::Arc::new(
        errors.into_iter().map(Value::from).collect(),
    ))))
}

/// apimachinery's messages for `s` in format `name`, none if it is valid.
pub(super) fn messages(name: &str, s: &str) -> Vec<String> {
    match name {
        "dns1123Label" => dns1123_label(s),
        "dns1123Subdomain" => dns1123_subdomain(s, "characters"),
        "dns1035Label" => dns1035_label(s),
        "qualifiedName" => qualified_name(s),
        "dns1123LabelPrefix" => dns1123_label(&mask_trailing_dash(s)),
        "dns1123SubdomainPrefix" => dns1123_subdomain(&mask_trailing_dash(s), "characters"),
        "dns1035LabelPrefix" => dns1035_label(&mask_trailing_dash(s)),
        "labelValue" => label_value(s),
        "uri" => super::url::parse_request_uri(s).err().into_iter().collect(),
        "uuid" => (!UUID.is_match(s))
            .then(|| "does not match the UUID format".to_string())
            .into_iter()
            .collect(),
        "byte" => (!is_base64(s))
            .then(|| "invalid base64".to_string())
            .into_iter()
            .collect(),
        "date" => (!is_date(s)).then(|| "invalid date".to_string()).into_iter().collect(),
        "datetime" => (!is_datetime(s))
            .then(|| "invalid datetime".to_string())
            .into_iter()
            .collect(),
        _ => Vec::new(),
    }
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_MSG: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

fn subdomain_fmt() -> String {
    format!("{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*")
}

fn anchored(re: &str) -> regex::Regex {
    // The patterns are constants of this file.
    regex::Regex::new(&format!("^(?:{re})$")).unwrap_or_else(|_| regex::Regex::new("^$").expect("trivial regex"))
}

static DNS1123_LABEL: LazyLock<regex::Regex> = LazyLock::new(|| anchored(DNS1123_LABEL_FMT));
static DNS1123_SUBDOMAIN: LazyLock<regex::Regex> = LazyLock::new(|| anchored(&subdomain_fmt()));
static DNS1035_LABEL: LazyLock<regex::Regex> = LazyLock::new(|| anchored(DNS1035_LABEL_FMT));
static LABEL_KEY: LazyLock<regex::Regex> = LazyLock::new(|| anchored(LABEL_KEY_FMT));
static LABEL_VALUE: LazyLock<regex::Regex> = LazyLock::new(|| anchored(&format!("({LABEL_KEY_FMT})?")));
static UUID: LazyLock<regex::Regex> =
    LazyLock::new(|| anchored("(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}"));

/// apimachinery's `RegexError`.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{fmt}')",
        examples.join(" or ")
    )
}

/// `validation.IsDNS1123Label`.
fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !DNS1123_LABEL.is_match(s) {
        if DNS1123_SUBDOMAIN.is_match(s) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_MSG,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// `validation.IsDNS1123Subdomain` (`unit`: `characters`), or `content`'s (`bytes`).
fn dns1123_subdomain(s: &str, unit: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push(format!("must be no more than 253 {unit}"));
    }
    if !DNS1123_SUBDOMAIN.is_match(s) {
        errs.push(regex_error(DNS1123_SUBDOMAIN_MSG, &subdomain_fmt(), &["example.com"]));
    }
    errs
}

/// `validation.IsDNS1035Label`.
fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !DNS1035_LABEL.is_match(s) {
        errs.push(regex_error(
            DNS1035_LABEL_MSG,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// apimachinery's `maskTrailingDash` (which drops two characters for the one it masks).
fn mask_trailing_dash(s: &str) -> String {
    if s.len() > 1 && s.ends_with('-') {
        format!("{}a", &s[..s.len() - 2])
    } else {
        s.to_string()
    }
}

/// `content.IsLabelKey` (`validation.IsQualifiedName`).
fn qualified_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix, "bytes")
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            )]
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 bytes".to_string());
    }
    if !LABEL_KEY.is_match(name) {
        errs.push(format!(
            "name part {}",
            regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
        ));
    }
    errs
}

/// `content.IsLabelValue`.
fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 bytes".to_string());
    }
    if !LABEL_VALUE.is_match(s) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            &format!("({LABEL_KEY_FMT})?"),
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// strfmt's `byte`: standard base64 with padding, not empty.
fn is_base64(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() || !b.len().is_multiple_of(4) {
        return false;
    }
    let body = s.trim_end_matches('=');
    b.len() - body.len() <= 2
        && body
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/')
}

fn is_leap(y: u32) -> bool {
    (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400)
}

/// Go's `time.Parse("2006-01-02", s)` (strfmt's `date`).
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let num = |r: std::ops::Range<usize>| {
        s.get(r)
            .filter(|p| p.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|p| p.parse::<u32>().ok())
    };
    let (Some(y), Some(m), Some(d)) = (num(0..4), num(5..7), num(8..10)) else {
        return false;
    };
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(y) => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

/// strfmt's `datetime` (RFC 3339, the fraction optional, `T` or `t`, `Z` or an offset).
fn is_datetime(s: &str) -> bool {
    static DATETIME: LazyLock<regex::Regex> =
        LazyLock::new(|| anchored(r"(\d{4}-\d{2}-\d{2})[Tt](\d{2}):(\d{2}):(\d{2})([.,]\d+)?([Zz]|[+-]\d{2}:\d{2})"));
    let Some(c) = DATETIME.captures(s) else {
        return false;
    };
    let n = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<u32>().ok()).unwrap_or(99);
    c.get(1).is_some_and(|d| is_date(d.as_str())) && n(2) < 24 && n(3) < 60 && n(4) < 60
}
