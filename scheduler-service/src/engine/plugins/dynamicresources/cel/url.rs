//! Kubernetes' URL library (`k8s.io/apiserver/pkg/cel/library/urls.go`): `url(s)`, `isURL(s)`,
//! and on a URL `getScheme()`, `getHost()`, `getHostname()`, `getPort()`, `getEscapedPath()`,
//! `getQuery()`, over Go's `net/url` as kube calls it: `url.ParseRequestURI` decides whether the
//! text is a URL (an absolute URI or an absolute path), `url.Parse` what its parts are.
//!
//! Cost (kube's `library/cost.go`): `url` a traversal of the text (the meter's reading of the
//! operand), the accessors 1.

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::types::{Type, STRING_TYPE};
use cel::common::value::CowVal;
use cel::objects::Opaque;
use cel::{Env, ExecutionError, Value};

use super::values::{bool_out, opaque_arg, opaque_out, string_arg, string_out, value_out};

/// The CEL type name of URLs (kube's `apiservercel.URLType`).
pub const URL_TYPE_NAME: &str = "kubernetes.URL";

/// A parsed URL (kube's `apiservercel.URL`, Go's `url.URL`): the parts the accessors read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    scheme: String,
    host: String,
    /// The path as written (escaped); `None` for an opaque URL (`mailto:x`).
    raw_path: Option<String>,
    raw_query: String,
}

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        URL_TYPE_NAME
    }
}

fn url_type() -> Type {
    Type::new_opaque_type(URL_TYPE_NAME)
}

/// Declares the library in `env`.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    env.add_type(url_type())?;
    let u = url_type;
    env.add_overload("url", "string_to_url", vec![STRING_TYPE], string_to_url)?;
    env.add_overload("isURL", "is_url_string", vec![STRING_TYPE], is_url)?;
    env.add_member_overload("getScheme", "url_get_scheme", u(), vec![], get_scheme)?;
    env.add_member_overload("getHost", "url_get_host", u(), vec![], get_host)?;
    env.add_member_overload("getHostname", "url_get_hostname", u(), vec![], get_hostname)?;
    env.add_member_overload("getPort", "url_get_port", u(), vec![], get_port)?;
    env.add_member_overload("getEscapedPath", "url_get_escaped_path", u(), vec![], get_escaped_path)?;
    env.add_member_overload("getQuery", "url_get_query", u(), vec![], get_query)
}

/// Go's `url.Error` text: `parse "<url>": <why>`.
fn parse_error(raw: &str, why: &str) -> String {
    format!("parse {raw:?}: {why}")
}

/// Go's `getScheme`: the scheme (lowercased) and the rest, or no scheme.
fn split_scheme(raw: &str) -> Result<(String, &str), String> {
    for (i, c) in raw.char_indices() {
        match c {
            'a'..='z' | 'A'..='Z' => {}
            '0'..='9' | '+' | '-' | '.' if i > 0 => {}
            ':' if i == 0 => return Err("missing protocol scheme".into()),
            ':' => return Ok((raw[..i].to_ascii_lowercase(), &raw[i + 1..])),
            _ => return Ok((String::new(), raw)),
        }
    }
    Ok((String::new(), raw))
}

fn unhex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// Whether `b` must be escaped in a host (Go's `shouldEscape(c, encodeHost)`).
fn host_char_invalid(b: u8) -> bool {
    !(b.is_ascii_alphanumeric() || b >= 0x80 || b"-_.~!$&'()*+,;=:[]<>\"%".contains(&b))
}

/// Go's `unescape`: `%XX` decoded (`+` a space in a query), a bad escape an error.
fn unescape(s: &str, query: bool) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let (Some(h), Some(l)) = (
                    b.get(i + 1).and_then(|c| unhex(*c)),
                    b.get(i + 2).and_then(|c| unhex(*c)),
                ) else {
                    let end = (i + 3).min(b.len());
                    return Err(format!("invalid URL escape {:?}", String::from_utf8_lossy(&b[i..end])));
                };
                out.push(h << 4 | l);
                i += 3;
            }
            b'+' if query => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Go's `parseHost`: an IPv6 literal in brackets, a port of digits only.
fn check_host(host: &str) -> Result<(), String> {
    if let Some(rest) = host.strip_prefix('[') {
        let Some(close) = rest.find(']') else {
            return Err("missing ']' in host".into());
        };
        let port = &rest[close + 1..];
        if !valid_port(port) {
            return Err(format!("invalid port {port:?} after host"));
        }
        return host_escapes(host);
    }
    if let Some(i) = host.rfind(':') {
        let port = &host[i..];
        if !valid_port(port) {
            return Err(format!("invalid port {port:?} after host"));
        }
    }
    if let Some(b) = host.bytes().find(|b| host_char_invalid(*b)) {
        return Err(format!("invalid character {:?} in host name", (b as char).to_string()));
    }
    host_escapes(host)
}

/// Go's `unescape(host, encodeHost)`: an escape in a host names a byte of a multi-byte
/// character (`%25` aside), never an ASCII one, and is two hex digits.
fn host_escapes(host: &str) -> Result<(), String> {
    let b = host.as_bytes();
    for (i, _) in host.match_indices('%') {
        let ascii = b.get(i + 1).and_then(|c| unhex(*c)).is_some_and(|h| h < 8);
        if ascii && host.get(i..i + 3) != Some("%25") {
            return Err(format!(
                "invalid URL escape {:?}",
                host.get(i..(i + 3).min(host.len())).unwrap_or("%")
            ));
        }
    }
    unescape(host, false).map(|_| ())
}

/// Go's `validOptionalPort`: empty, or `:` and digits.
fn valid_port(port: &str) -> bool {
    port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

/// Go's `url.ParseRequestURI` then `url.Parse`: the URL, or Go's error text.
pub(super) fn parse_request_uri(raw: &str) -> Result<Url, String> {
    let fail = |why: &str| parse_error(raw, why);
    if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err(fail("net/url: invalid control character in URL"));
    }
    if raw.is_empty() {
        return Err(fail("empty url"));
    }
    if raw == "*" {
        return Ok(Url {
            scheme: String::new(),
            host: String::new(),
            raw_path: Some("*".into()),
            raw_query: String::new(),
        });
    }
    let (scheme, rest) = split_scheme(raw).map_err(|e| fail(&e))?;
    // `url.Parse` (which kube's `url()` keeps) cuts a fragment first; `ParseRequestURI` keeps it
    // in the path or query: either way nothing here reads it.
    let rest = rest.split_once('#').map_or(rest, |(r, _)| r);
    let (rest, raw_query) = match rest.split_once('?') {
        Some((r, q)) => (r, q.to_string()),
        None => (rest, String::new()),
    };
    if !rest.starts_with('/') {
        if !scheme.is_empty() {
            return Ok(Url {
                scheme,
                host: String::new(),
                raw_path: None,
                raw_query,
            });
        }
        return Err(fail("invalid URI for request"));
    }
    let (host, path) = if !scheme.is_empty() && rest.starts_with("//") {
        let authority = &rest[2..];
        let (authority, path) = match authority.find('/') {
            Some(i) => (&authority[..i], &authority[i..]),
            None => (authority, ""),
        };
        let host = match authority.rfind('@') {
            Some(i) => &authority[i + 1..],
            None => authority,
        };
        check_host(host).map_err(|e| fail(&e))?;
        (host.to_string(), path)
    } else {
        (String::new(), rest)
    };
    unescape(path, false).map_err(|e| fail(&e))?;
    Ok(Url {
        scheme,
        host,
        raw_path: Some(path.to_string()),
        raw_query,
    })
}

/// Go's `URL.Hostname`: the host without port or brackets.
fn hostname(host: &str) -> &str {
    let (h, _) = split_host_port(host);
    h.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(h)
}

fn split_host_port(host: &str) -> (&str, &str) {
    let colon = host.rfind(':');
    match colon {
        Some(i) if valid_port(&host[i..]) && !host[i..].contains(']') => (&host[..i], &host[i + 1..]),
        _ => (host, ""),
    }
}

/// Whether `b` may stay as it is in an escaped path (Go's `validEncoded(s, encodePath)`).
fn path_char_ok(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-_.~!$&'()*+,;=:@[]/%".contains(&b)
}

/// Go's `URL.EscapedPath`: the path as written when that is a valid encoding, else escaped.
fn escaped_path(url: &Url) -> String {
    let Some(raw) = &url.raw_path else {
        return String::new();
    };
    if raw.bytes().all(path_char_ok) {
        return raw.clone();
    }
    let path = unescape(raw, false).unwrap_or_else(|_| raw.clone());
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~$&+,/:;=@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Go's `url.ParseQuery`, errors skipped as `URL.Query` skips them: values by key, in order.
fn query(raw: &str) -> HashMap<String, Vec<String>> {
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    for part in raw.split('&') {
        if part.is_empty() || part.contains(';') {
            continue;
        }
        let (k, v) = part.split_once('=').unwrap_or((part, ""));
        let (Ok(k), Ok(v)) = (unescape(k, true), unescape(v, true)) else {
            continue;
        };
        out.entry(k).or_default().push(v);
    }
    out
}

fn url_of(args: &[CowVal<'_, '_>], f: &str) -> Result<Url, ExecutionError> {
    opaque_arg::<Url>(args, 0, f)
}

fn string_to_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let s = string_arg(&args, 0, "url")?;
    let u = parse_request_uri(&s).map_err(|e| {
        ExecutionError::function_error("url", format!("URL parse error during conversion from string: {e}"))
    })?;
    opaque_out(u)
}

fn is_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    bool_out(parse_request_uri(&string_arg(&args, 0, "isURL")?).is_ok())
}

fn get_scheme<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string_out(url_of(&args, "getScheme")?.scheme)
}

fn get_host<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string_out(url_of(&args, "getHost")?.host)
}

fn get_hostname<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string_out(hostname(&url_of(&args, "getHostname")?.host).to_string())
}

fn get_port<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string_out(split_host_port(&url_of(&args, "getPort")?.host).1.to_string())
}

fn get_escaped_path<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string_out(escaped_path(&url_of(&args, "getEscapedPath")?))
}

fn get_query<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let u = url_of(&args, "getQuery")?;
    let map: HashMap<String, Value> = query(&u.raw_query)
        .into_iter()
        .map(|(k, v)| (k, Value::List(Arc::new(v.into_iter().map(Value::from).collect()))))
        .collect();
    value_out(Value::from(map))
}
