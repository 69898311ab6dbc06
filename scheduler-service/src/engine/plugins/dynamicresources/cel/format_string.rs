//! `"…".format(args)` as kube's strings extension has it: cel-go's first formatter
//! (`ext/formatting.go`, strings versions 1 to 3; kube sets version 2), in its default locale
//! `en_US`, which [`super::prepare`] calls in place of the `cel` crate's (cel-go's later
//! formatter, version 4):
//!
//! - `%s`: a string as it is, a double as `string()` writes it, a list or a map in CEL's syntax
//!   (strings quoted as Go quotes them, doubles with six decimals, a map's entries ordered by
//!   their written keys);
//! - `%d` (integers), `%f` (doubles: grouped thousands, `∞`), `%e` (doubles: `1.234500 × 10⁰³`,
//!   always six decimals), `%b`, `%o`, `%x` and `%X`;
//! - `%%` a percent sign; cel-go's errors for the rest.
//!
//! Cost: 1 and the text written (cel-go's default for the call, and reading the result).

use cel::common::types::{DYN_TYPE, STRING_TYPE};
use cel::common::value::CowVal;
use cel::objects::Map;
use cel::{Env, ExecutionError, Value};

use super::convert::go_g;
use super::values::{charge, list_arg, string_arg, string_out, text_units};

/// The formatter's name, which no expression can spell.
pub(super) const FORMAT: &str = "@@format";

/// Longest precision of a clause: cel-go's version 2 has no limit; one keeps the text bounded.
const MAX_PRECISION: usize = 10_000;

/// Declares `@@format`.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    env.add_overload(FORMAT, "dra_string_format", vec![STRING_TYPE, DYN_TYPE], format)
}

fn format<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = string_arg(&args, 0, "format")?;
    let list = list_arg(&args, 1, "format")?;
    charge(1 + text_units(text.len()))?;
    let out = format_v1(&text, &list).map_err(|e| ExecutionError::function_error("format", e))?;
    charge(text_units(out.len()))?;
    string_out(out)
}

/// cel-go's `parseFormatString`.
pub(super) fn format_v1(text: &str, args: &[Value]) -> Result<String, String> {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut arg = 0;
    let mut literal_start = 0;
    while i < b.len() {
        if b[i] != b'%' {
            i += 1;
            continue;
        }
        out.push_str(&text[literal_start..i]);
        if b.get(i + 1) == Some(&b'%') {
            out.push('%');
            i += 2;
            literal_start = i;
            continue;
        }
        let value = args.get(arg).ok_or_else(|| format!("index {arg} out of range"))?;
        if i + 1 >= b.len() {
            return Err("unexpected end of string".into());
        }
        let (read, clause, precision) =
            clause(&text[i + 1..]).map_err(|e| format!("could not parse formatting clause: {e}"))?;
        let written = apply(clause, precision, value).map_err(|e| format!("error during formatting: {e}"))?;
        out.push_str(&written);
        i += 1 + read;
        literal_start = i;
        arg += 1;
    }
    out.push_str(&text[literal_start..]);
    Ok(out)
}

/// cel-go's `parseFormattingClause`: the bytes read, the conversion, the precision.
fn clause(s: &str) -> Result<(usize, char, Option<usize>), String> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut precision = None;
    if b.first() == Some(&b'.') {
        i = 1;
        let start = i;
        loop {
            match b.get(i) {
                None => return Err("error while parsing precision: could not find end of precision specifier".into()),
                Some(c) if c.is_ascii_digit() => i += 1,
                Some(_) => break,
            }
        }
        let digits = &s[start..i];
        let p: usize = digits.parse().map_err(|_| {
            format!(
                "error while parsing precision: error while converting precision to integer: strconv.Atoi: parsing {digits:?}: invalid syntax"
            )
        })?;
        if p > MAX_PRECISION {
            return Err(format!(
                "error while parsing precision: precision {p} exceeds maximum allowed precision {MAX_PRECISION}"
            ));
        }
        precision = Some(p);
    }
    let c = s[i..].chars().next().ok_or("unexpected end of string")?;
    match c {
        's' | 'd' | 'f' | 'e' | 'b' | 'x' | 'X' | 'o' => Ok((i + c.len_utf8(), c, precision)),
        other => Err(format!("unrecognized formatting clause \"{other}\"")),
    }
}

fn apply(clause: char, precision: Option<usize>, v: &Value) -> Result<String, String> {
    match clause {
        's' => string_clause(v),
        'd' => match v {
            Value::Int(i) => Ok(i.to_string()),
            Value::UInt(u) => Ok(u.to_string()),
            other => Err(format!(
                "decimal clause can only be used on integers, was given {}",
                super::values::type_name(other)
            )),
        },
        'f' => double_arg(v, "fixed-point").map(|f| fixed(f, precision.unwrap_or(6))),
        'e' => double_arg(v, "scientific").map(scientific),
        'b' => match v {
            Value::Int(i) => Ok(signed(*i, |u| format!("{u:b}"))),
            Value::UInt(u) => Ok(format!("{u:b}")),
            Value::Bool(b) => Ok(if *b { "1" } else { "0" }.to_string()),
            other => Err(format!(
                "only integers and bools can be formatted as binary, was given {}",
                super::values::type_name(other)
            )),
        },
        'o' => match v {
            Value::Int(i) => Ok(signed(*i, |u| format!("{u:o}"))),
            Value::UInt(u) => Ok(format!("{u:o}")),
            other => Err(format!(
                "octal clause can only be used on integers, was given {}",
                super::values::type_name(other)
            )),
        },
        _ => {
            let upper = clause == 'X';
            let hex = |bytes: &[u8]| {
                bytes
                    .iter()
                    .map(|b| if upper { format!("{b:02X}") } else { format!("{b:02x}") })
                    .collect::<String>()
            };
            match v {
                Value::String(s) => Ok(hex(s.as_bytes())),
                Value::Bytes(b) => Ok(hex(b)),
                Value::Int(i) => Ok(signed(*i, |u| if upper { format!("{u:X}") } else { format!("{u:x}") })),
                Value::UInt(u) => Ok(if upper { format!("{u:X}") } else { format!("{u:x}") }),
                other => Err(format!(
                    "only integers, byte buffers, and strings can be formatted as hex, was given {}",
                    super::values::type_name(other)
                )),
            }
        }
    }
}

/// Go's `%b`/`%o`/`%x` of a signed integer: a minus and the magnitude's digits.
fn signed(i: i64, digits: impl Fn(u64) -> String) -> String {
    let d = digits(i.unsigned_abs());
    if i < 0 {
        format!("-{d}")
    } else {
        d
    }
}

/// The double of a `%f` or `%e` clause: a double, or the strings `NaN`, `Infinity`, `-Infinity`.
fn double_arg(v: &Value, clause: &str) -> Result<f64, String> {
    match v {
        Value::Float(f) => Ok(*f),
        Value::String(s) if s.as_str() == "NaN" => Ok(f64::NAN),
        Value::String(s) if s.as_str() == "Infinity" => Ok(f64::INFINITY),
        Value::String(s) if s.as_str() == "-Infinity" => Ok(f64::NEG_INFINITY),
        other => Err(format!(
            "{clause} clause can only be used on doubles, was given {}",
            super::values::type_name(other)
        )),
    }
}

/// Thousands grouped with commas, as `en_US` writes an integer part.
fn grouped(digits: &str) -> String {
    let n = digits.len();
    let mut out = String::with_capacity(n + n / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (n - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `golang.org/x/text/message`'s `%.<p>f` in `en_US`: grouped thousands, `NaN`, `∞`; a negative
/// zero without its sign.
fn fixed(f: f64, precision: usize) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "∞" } else { "-∞" }.into();
    }
    let text = format!("{:.*}", precision, f.abs());
    let (int, frac) = text
        .split_once('.')
        .map_or((text.as_str(), None), |(a, b)| (a, Some(b)));
    let negative = f < 0.0 && text.bytes().any(|b| b.is_ascii_digit() && b != b'0');
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    out.push_str(&grouped(int));
    if let Some(frac) = frac {
        out.push('.');
        out.push_str(frac);
    }
    out
}

const SUPERSCRIPT: [char; 10] = ['⁰', '¹', '²', '³', '⁴', '⁵', '⁶', '⁷', '⁸', '⁹'];

/// `golang.org/x/text/message`'s `%6e` in `en_US` (cel-go passes the precision as a width):
/// six decimals, `× 10` and the exponent in superscript, two digits at least; `NaN` and `∞`
/// padded to six characters.
fn scientific(f: f64) -> String {
    if f.is_nan() {
        return "   NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "     ∞" } else { "    -∞" }.into();
    }
    let text = format!("{:.6e}", f.abs());
    let (mantissa, exp) = text.split_once('e').unwrap_or((text.as_str(), "0"));
    let x: i64 = exp.parse().unwrap_or(0);
    let digits = format!("{:02}", x.unsigned_abs());
    let mut out = String::new();
    if f < 0.0 {
        out.push('-');
    }
    out.push_str(mantissa);
    out.push_str("\u{202f}×\u{202f}10");
    if x < 0 {
        out.push('⁻');
    }
    for d in digits.bytes() {
        out.push(SUPERSCRIPT[usize::from(d - b'0')]);
    }
    out
}

/// cel-go's `FormatString`: `%s`.
fn string_clause(v: &Value) -> Result<String, String> {
    match v {
        Value::List(items) => {
            let parts: Result<Vec<String>, String> = items.iter().map(|x| member(x).map(|(s, _)| s)).collect();
            Ok(format!("[{}]", parts?.join(", ")))
        }
        Value::Map(m) => format_map(m),
        Value::Int(i) => Ok(i.to_string()),
        Value::UInt(u) => Ok(u.to_string()),
        Value::Float(f) => Ok(go_g(*f)),
        Value::Bool(b) => Ok(b.to_string()),
        Value::String(s) => Ok(s.to_string()),
        Value::Bytes(b) => Ok(String::from_utf8_lossy(b).into_owned()),
        Value::Null => Ok("null".into()),
        other => Err(format!(
            "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given {}",
            super::values::type_name(other)
        )),
    }
}

/// An element of a list or map as `%s` writes it (cel-go's `clauseForType` and `quoteForCEL`),
/// and the text it sorts by.
fn member(v: &Value) -> Result<(String, String), String> {
    let s = match v {
        Value::String(s) => go_quote(s.as_bytes()),
        Value::Bytes(b) => format!("b{}", go_quote(b)),
        Value::Float(f) if f.is_nan() || f.is_infinite() => format!("\"{}\"", go_g(*f)),
        Value::Float(f) => format!("{f:.6}"),
        other => string_clause(other)?,
    };
    Ok((s.clone(), s))
}

/// cel-go's `formatMap`: entries ordered by their written keys.
fn format_map(m: &Map) -> Result<String, String> {
    let mut entries = Vec::with_capacity(m.map.len());
    for (k, v) in m.map.iter() {
        let key = Value::from(k);
        let key_text = match &key {
            Value::String(_) => member(&key)?.0,
            Value::Bool(b) => b.to_string(),
            Value::Int(i) => i.to_string(),
            Value::UInt(u) => u.to_string(),
            other => {
                return Err(format!(
                    "no formatting function for map key of type {}",
                    super::values::type_name(other)
                ))
            }
        };
        entries.push((key_text, member(v)?.0));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let parts: Vec<String> = entries.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
    Ok(format!("{{{}}}", parts.join(", ")))
}

/// Go's `strconv.Quote` of `bytes` (invalid UTF-8 as `\xNN`).
fn go_quote(bytes: &[u8]) -> String {
    let mut out = String::from("\"");
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\u{7}' => out.push_str("\\a"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{b}' => out.push_str("\\v"),
                c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
                c if c.is_control() || c == '\u{202f}' || c == '\u{a0}' || c.is_whitespace() && c != ' ' => {
                    if (c as u32) < 0x10000 {
                        out.push_str(&format!("\\u{:04x}", c as u32));
                    } else {
                        out.push_str(&format!("\\U{:08x}", c as u32));
                    }
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.push('"');
    out
}
