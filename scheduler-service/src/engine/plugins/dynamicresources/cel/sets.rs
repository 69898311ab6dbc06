//! cel-go's sets extension (`ext/sets.go`, `ext.Sets()`, kube's base environment from 1.29):
//! `sets.contains(a, b)`, `sets.equivalent(a, b)`, `sets.intersects(a, b)` on lists, elements
//! compared by CEL equality (numbers across types).
//!
//! Cost (cel-go's `trackSetsCost`): `1 + len(a) × len(b)`, twice that for `equivalent`, the
//! reading of the lists included (called as `@@sets_…`, [`super::prepare`]).

use cel::common::types::LIST_TYPE;
use cel::common::value::CowVal;
use cel::{Env, ExecutionError, Value};

use super::values::{bool_out, charge, list_arg};

/// Declares the library in `env`.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    let lists = || vec![LIST_TYPE, LIST_TYPE];
    env.add_overload("@@sets_contains", "dra_sets_contains", lists(), contains)?;
    env.add_overload("@@sets_equivalent", "dra_sets_equivalent", lists(), equivalent)?;
    env.add_overload("@@sets_intersects", "dra_sets_intersects", lists(), intersects)?;
    env.add_overload(
        "sets.contains",
        "list_sets_contains_list",
        vec![LIST_TYPE, LIST_TYPE],
        contains,
    )?;
    env.add_overload(
        "sets.equivalent",
        "list_sets_equivalent_list",
        vec![LIST_TYPE, LIST_TYPE],
        equivalent,
    )?;
    env.add_overload(
        "sets.intersects",
        "list_sets_intersects_list",
        vec![LIST_TYPE, LIST_TYPE],
        intersects,
    )
}

/// A list's elements, shared.
type Elements = std::sync::Arc<Vec<Value>>;

fn operands(args: &[CowVal<'_, '_>], function: &str, factor: u64) -> Result<(Elements, Elements), ExecutionError> {
    let a = list_arg(args, 0, function)?;
    let b = list_arg(args, 1, function)?;
    charge(1 + (a.len() as u64).saturating_mul(b.len() as u64).saturating_mul(factor))?;
    Ok((a, b))
}

fn all_in(items: &[Value], set: &[Value]) -> bool {
    items.iter().all(|x| set.contains(x))
}

/// Whether every element of `b` is in `a`.
fn contains<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = operands(&args, "sets.contains", 1)?;
    bool_out(all_in(&b, &a))
}

/// Whether `a` and `b` hold the same elements (duplicates aside).
fn equivalent<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = operands(&args, "sets.equivalent", 2)?;
    bool_out(all_in(&b, &a) && all_in(&a, &b))
}

/// Whether `a` and `b` have an element in common.
fn intersects<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = operands(&args, "sets.intersects", 1)?;
    bool_out(a.iter().any(|x| b.contains(x)))
}
