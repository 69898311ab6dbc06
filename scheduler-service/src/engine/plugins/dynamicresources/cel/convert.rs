//! `string(x)` as cel-go converts (`common/types`' `ConvertToType(StringType)`), which
//! [`super::prepare`] calls in place of the crate's: a double written as Go's `%g` writes it
//! (`1e+100`, `1e-06`, `+Inf`; the crate writes every digit), and Kubernetes' `string(ip)` and
//! `string(cidr)` (`ip.go`, `cidr.go`).
//!
//! Cost: 1, and the text of a string or bytes operand (cel-go's default).

use cel::common::types::DYN_TYPE;
use cel::common::value::CowVal;
use cel::{Env, ExecutionError, Value};

use super::net::{Cidr, Ip};
use super::values::{charge, no_overload, string_out, text_units, value_arg};

/// The conversion's name, which no expression can spell.
pub(super) const STRING: &str = "@@string";

/// Declares `@@string`.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    env.add_overload(STRING, "dra_string_dyn", vec![DYN_TYPE], string)
}

/// Go's `fmt.Sprintf("%g", f)`: the shortest digits that read back as `f`, in `%e` form when
/// the exponent is below -4 or at least 6 (two exponent digits at least), `%f` form otherwise.
pub(super) fn go_g(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    let sign = if f.is_sign_negative() { "-" } else { "" };
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let x: i64 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&x) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if x < 0 { '-' } else { '+' };
        return format!("{sign}{first}{frac}e{esign}{:02}", x.unsigned_abs());
    }
    let dp = x + 1;
    let nd = digits.len() as i64;
    let body = if dp <= 0 {
        format!("0.{}{digits}", "0".repeat(dp.unsigned_abs() as usize))
    } else if dp >= nd {
        format!("{digits}{}", "0".repeat((dp - nd) as usize))
    } else {
        let (int, frac) = digits.split_at(dp as usize);
        format!("{int}.{frac}")
    };
    format!("{sign}{body}")
}

fn string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let v = value_arg(&args, 0, "string")?;
    charge(1)?;
    let text = match &v {
        Value::String(s) => {
            charge(text_units(s.len()))?;
            s.to_string()
        }
        Value::Bytes(b) => {
            charge(text_units(b.len()))?;
            String::from_utf8(b.to_vec()).map_err(|_| {
                ExecutionError::function_error("string", "invalid UTF-8 in bytes, cannot convert to string")
            })?
        }
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Float(f) => go_g(*f),
        Value::Bool(b) => b.to_string(),
        Value::Opaque(o) => match (o.downcast_ref::<Ip>(), o.downcast_ref::<Cidr>()) {
            (Some(ip), _) => ip.text(),
            (_, Some(c)) => c.text(),
            _ => return Err(no_overload("string")),
        },
        _ => return Err(no_overload("string")),
    };
    string_out(text)
}
