//! The list libraries of kube's base environment:
//!
//! - Kubernetes' lists library, version 1 (`k8s.io/apiserver/pkg/cel/library/lists.go`, and
//!   `IncludesOption` of 1.36): `isSorted`, `sum`, `max`, `min`, `indexOf`, `lastIndexOf`,
//!   `includes`. Cost (kube's `library/cost.go`): one traversal of the list, which the meter
//!   charges reading it;
//! - cel-go's lists extension, version 3 (`ext/lists.go`, `ext.Lists(ext.ListsVersion(3))`):
//!   `slice`, `flatten`, `distinct`, `reverse`, `sort`, `sortBy`, `lists.range`, the `cel`
//!   crate's implementation (`cel::extensions::lists`), their costs charged as cel-go's trackers
//!   do ([`super::prepare`]).

use std::cmp::Ordering;

use cel::common::types::{DYN_TYPE, LIST_TYPE};
use cel::common::value::CowVal;
use cel::{Env, ExecutionError, Value};

use super::values::{bool_out, int_out, list_arg, no_overload, value_arg, value_out};

/// Declares the libraries in `env`.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    cel::extensions::lists(env)?;
    env.add_member_overload("isSorted", "list_is_sorted_bool", LIST_TYPE, vec![], is_sorted)?;
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max)?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min)?;
    env.add_member_overload("indexOf", "list_a_index_of_int", LIST_TYPE, vec![DYN_TYPE], index_of)?;
    env.add_member_overload(
        "lastIndexOf",
        "list_a_last_index_of_int",
        LIST_TYPE,
        vec![DYN_TYPE],
        last_index_of,
    )?;
    env.add_member_overload("includes", "list_includes_dyn_dyn", DYN_TYPE, vec![DYN_TYPE], includes)
}

/// CEL's ordering of two comparable values (numbers across types, as kube's
/// `CrossTypeNumericComparisons`); `None` for values CEL does not order.
pub(super) fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Bytes(x), Value::Bytes(y)) => Some(x.cmp(y)),
        (Value::List(_) | Value::Map(_) | Value::Null | Value::Opaque(_), _) => None,
        _ => a.partial_cmp(b),
    }
}

fn compare_or_error(function: &str, a: &Value, b: &Value) -> Result<Ordering, ExecutionError> {
    compare(a, b).ok_or_else(|| no_overload(function))
}

/// `l.isSorted()`: whether no element is greater than the next.
fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = list_arg(&args, 0, "isSorted")?;
    for pair in list.windows(2) {
        if compare_or_error("isSorted", &pair[0], &pair[1])? == Ordering::Greater {
            return bool_out(false);
        }
    }
    if let [only] = list.as_slice() {
        compare_or_error("isSorted", only, only)?;
    }
    bool_out(true)
}

/// `l.sum()`: 0 for an empty list; the elements' sum, of their type.
fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = list_arg(&args, 0, "sum")?;
    let overflow = || ExecutionError::function_error("sum", "integer overflow");
    let mut acc = match list.first() {
        None => return int_out(0),
        Some(v @ (Value::Int(_) | Value::UInt(_) | Value::Float(_))) => v.clone(),
        Some(_) => return Err(no_overload("sum")),
    };
    for v in &list[1..] {
        acc = match (&acc, v) {
            (Value::Int(a), Value::Int(b)) => Value::Int(a.checked_add(*b).ok_or_else(overflow)?),
            (Value::UInt(a), Value::UInt(b)) => Value::UInt(a.checked_add(*b).ok_or_else(overflow)?),
            (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
            _ => return Err(no_overload("sum")),
        };
    }
    value_out(acc)
}

fn extreme<'b, 'v>(args: Vec<CowVal<'b, 'v>>, name: &str, prefer: Ordering) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = list_arg(&args, 0, name)?;
    let Some(mut best) = list.first() else {
        return Err(ExecutionError::function_error(
            name,
            format!("{name} called on empty list"),
        ));
    };
    compare_or_error(name, best, best)?;
    for v in &list[1..] {
        if compare_or_error(name, best, v)? == prefer {
            best = v;
        }
    }
    value_out(best.clone())
}

/// `l.max()`: the greatest element, the first of equals; an error for an empty list.
fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, "max", Ordering::Less)
}

/// `l.min()`: the least element, the first of equals; an error for an empty list.
fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, "min", Ordering::Greater)
}

/// `l.indexOf(x)`: the index of the first element equal to `x`, -1 if none.
fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = list_arg(&args, 0, "indexOf")?;
    let x = value_arg(&args, 1, "indexOf")?;
    int_out(list.iter().position(|v| *v == x).map_or(-1, |i| i as i64))
}

/// `l.lastIndexOf(x)`: the index of the last element equal to `x`, -1 if none.
fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = list_arg(&args, 0, "lastIndexOf")?;
    let x = value_arg(&args, 1, "lastIndexOf")?;
    int_out(list.iter().rposition(|v| *v == x).map_or(-1, |i| i as i64))
}

/// `l.includes(x)`: whether an element of the list (or a value that is not a list) equals `x`.
fn includes<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let target = value_arg(&args, 0, "includes")?;
    let x = value_arg(&args, 1, "includes")?;
    bool_out(match &target {
        Value::List(l) => l.contains(&x),
        other => *other == x,
    })
}
