//! Kubernetes' regex library (`k8s.io/apiserver/pkg/cel/library/regex.go`): `find` and
//! `findAll` on strings, RE2 syntax (the `regex` crate's, as `matches` uses), the patterns
//! compiled once in the meter's shared cache ([`rule_cost::compiled`]).
//!
//! Cost (kube's `library/cost.go`): `⌈(1 + len(text)) × 0.1⌉ × ⌈len(pattern) × 0.25⌉`, the
//! reading of the operands included (called as `@@find` and `@@findAll`, [`super::prepare`]).

use cel::common::types::{INT_TYPE, STRING_TYPE};
use cel::common::value::CowVal;
use cel::{Env, ExecutionError};

use super::values::{charge, int_arg, string_arg, string_out, strings_out};
use crate::engine::rule_cost::{self, PATTERN_BYTES_PER_UNIT, TEXT_BYTES_PER_UNIT};

/// Declares the library in `env`.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    env.add_overload("@@find", "dra_find", vec![STRING_TYPE, STRING_TYPE], find)?;
    env.add_overload("@@findAll", "dra_find_all", vec![STRING_TYPE, STRING_TYPE], find_all)?;
    env.add_overload(
        "@@findAll",
        "dra_find_all_int",
        vec![STRING_TYPE, STRING_TYPE, INT_TYPE],
        find_all,
    )?;
    env.add_member_overload("find", "string_find_string", STRING_TYPE, vec![STRING_TYPE], find)?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string",
        STRING_TYPE,
        vec![STRING_TYPE],
        find_all,
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string_int",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        find_all,
    )
}

/// kube's cost of searching `text` for `pattern`.
pub(super) fn search_units(text: usize, pattern: usize) -> u64 {
    let text = (1 + text as u64).div_ceil(TEXT_BYTES_PER_UNIT);
    let pattern = (pattern as u64).div_ceil(PATTERN_BYTES_PER_UNIT);
    text.saturating_mul(pattern)
}

fn compiled(function: &str, pattern: &str) -> Result<std::sync::Arc<regex::Regex>, ExecutionError> {
    rule_cost::compiled(pattern).map_err(|e| ExecutionError::function_error(function, format!("Illegal regex: {e}")))
}

/// `s.find(re)`: the first match, `""` if none.
fn find<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = string_arg(&args, 0, "find")?;
    let pattern = string_arg(&args, 1, "find")?;
    charge(search_units(text.len(), pattern.len()))?;
    let re = compiled("find", &pattern)?;
    string_out(re.find(&text).map(|m| m.as_str().to_string()).unwrap_or_default())
}

/// `s.findAll(re)`, `s.findAll(re, n)`: the matches, at most `n` of them when `n` ≥ 0 (Go's
/// `FindAllString`).
fn find_all<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = string_arg(&args, 0, "findAll")?;
    let pattern = string_arg(&args, 1, "findAll")?;
    let n = if args.len() > 2 {
        int_arg(&args, 2, "findAll")?
    } else {
        -1
    };
    charge(search_units(text.len(), pattern.len()))?;
    let re = compiled("findAll", &pattern)?;
    let limit = usize::try_from(n).unwrap_or(usize::MAX);
    strings_out(
        re.find_iter(&text)
            .take(limit)
            .map(|m| m.as_str().to_string())
            .collect(),
    )
}
