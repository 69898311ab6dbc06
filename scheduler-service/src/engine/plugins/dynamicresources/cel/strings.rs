//! cel-go's strings extension at the version kube's base environment sets
//! (`ext/strings.go`, `ext.Strings(ext.StringsVersion(2))`, from 1.29): `charAt`, `indexOf`,
//! `lastIndexOf`, `lowerAscii`, `upperAscii`, `replace`, `split`, `substring`, `trim`, `join`,
//! `format` and `strings.quote`: the `cel` crate's implementation
//! (`cel::extensions::strings`), which follows cel-go's (code-point indices, cel-go's error
//! texts).
//!
//! Cost (kube's `library/cost.go`; version 2 has no trackers of its own): one traversal of the
//! string for `lowerAscii`, `upperAscii`, `substring`, `trim`, `indexOf` and `lastIndexOf`
//! (the meter's reading of the operands), two for `split` and `replace`, two of the text for
//! `join` ([`super::prepare`]).
//!
//! `indexOf` and `lastIndexOf` with an offset are cel-go 0.29's (an offset past the end finds
//! nothing; the crate's fails), called in place of the crate's ([`super::prepare`]).
//!
//! The crate also declares `reverse` on strings (version 3), which kube's environment does not
//! have: an expression using it is one kube's API server refuses, never one it accepts.

use cel::common::types::{INT_TYPE, STRING_TYPE};
use cel::common::value::CowVal;
use cel::{Env, ExecutionError};

use super::values::{charge, int_arg, int_out, string_arg, text_units};

/// Declares the library in `env`.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    cel::extensions::strings(env)?;
    register_offsets(env)
}

/// `s.indexOf(sub, offset)` as cel-go 0.29 has it (`@@indexOfOffset`, which [`super::prepare`]
/// calls instead of the crate's): an offset past the end finds nothing rather than failing.
pub(super) const INDEX_OF_OFFSET: &str = "@@indexOfOffset";
/// `s.lastIndexOf(sub, offset)` as cel-go 0.29 has it (`@@lastIndexOfOffset`).
pub(super) const LAST_INDEX_OF_OFFSET: &str = "@@lastIndexOfOffset";

/// Declares cel-go's `indexOf` and `lastIndexOf` with an offset.
pub(super) fn register_offsets(env: &mut Env) -> Result<(), cel::DeclarationError> {
    let args = || vec![STRING_TYPE, STRING_TYPE, INT_TYPE];
    env.add_overload(INDEX_OF_OFFSET, "string_index_of_string_int", args(), index_of_offset)?;
    env.add_overload(
        LAST_INDEX_OF_OFFSET,
        "string_last_index_of_string_int",
        args(),
        last_index_of_offset,
    )
}

fn offset_args(args: &[CowVal<'_, '_>], f: &str) -> Result<(Vec<char>, Vec<char>, i64), ExecutionError> {
    let s = string_arg(args, 0, f)?;
    let sub = string_arg(args, 1, f)?;
    let off = int_arg(args, 2, f)?;
    // kube's cost of `indexOf` and `lastIndexOf`: a traversal of the string.
    charge(1 + text_units(s.len()) + text_units(sub.len()))?;
    Ok((s.chars().collect(), sub.chars().collect(), off))
}

fn out_of_range(f: &str, off: i64) -> ExecutionError {
    ExecutionError::function_error(f, format!("index out of range: {off}"))
}

/// cel-go's `indexOfOffset`.
fn index_of_offset<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (runes, sub, off) = offset_args(&args, "indexOf")?;
    if off < 0 {
        return Err(out_of_range("indexOf", off));
    }
    let len = runes.len() as i64;
    if sub.is_empty() {
        return int_out(off.min(len));
    }
    if off >= len {
        return int_out(-1);
    }
    let start = off as usize;
    let found = (start..runes.len().saturating_sub(sub.len() - 1)).find(|&i| runes[i..i + sub.len()] == sub[..]);
    int_out(found.map_or(-1, |i| i as i64))
}

/// cel-go's `lastIndexOfOffset`.
fn last_index_of_offset<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (runes, sub, off) = offset_args(&args, "lastIndexOf")?;
    if off < 0 {
        return Err(out_of_range("lastIndexOf", off));
    }
    let len = runes.len() as i64;
    if sub.is_empty() {
        return int_out(off.min(len));
    }
    if off >= len || sub.len() > runes.len() {
        return int_out(-1);
    }
    let last = (off as usize).min(runes.len() - sub.len());
    let found = (0..=last).rev().find(|&i| runes[i..i + sub.len()] == sub[..]);
    int_out(found.map_or(-1, |i| i as i64))
}
