//! The optional values' functions of cel-go's `OptionalTypes()` (`cel/library.go`, the optional
//! library at its latest version, as kube's base environment enables it) that the `cel` crate
//! lacks: `<list>.first()`, `<list>.last()`, `optional.unwrap(<list>)` and
//! `<list>.unwrapOpt()`.
//!
//! Cost: cel-go charges 1 for each; the meter charges reading the list.

use cel::common::types::{CelList, CelOptional, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{Env, ExecutionError};

use super::values::no_overload;

/// Declares the functions.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    env.add_member_overload("first", "list_first", LIST_TYPE, vec![], first)?;
    env.add_member_overload("last", "list_last", LIST_TYPE, vec![], last)?;
    env.add_overload("optional.unwrap", "optional_unwrap", vec![LIST_TYPE], unwrap)?;
    env.add_member_overload("unwrapOpt", "optional_unwrapOpt", LIST_TYPE, vec![], unwrap)
}

/// The list's elements, in order.
fn elements<'b, 'v>(args: &'b [CowVal<'_, 'v>], function: &str) -> Result<Vec<&'b (dyn Val + 'v)>, ExecutionError> {
    let list = args.first().ok_or_else(|| no_overload(function))?;
    let iterable = list.as_iterable().ok_or_else(|| no_overload(function))?;
    let mut items = Vec::new();
    let mut it = iterable.iter();
    while let Some(x) = it.next() {
        items.push(x);
    }
    Ok(items)
}

fn optional_of<'b, 'v>(item: Option<&(dyn Val + 'v)>) -> CowVal<'b, 'v> {
    CowVal::owned(match item {
        Some(x) => CelOptional::of(x.clone_as_boxed()),
        None => CelOptional::none(),
    })
}

/// `l.first()`: `optional.of(l[0])`, `optional.none()` for an empty list.
fn first<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = elements(&args, "first")?;
    Ok(optional_of(items.first().copied()))
}

/// `l.last()`: `optional.of(l[size(l) - 1])`, `optional.none()` for an empty list.
fn last<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = elements(&args, "last")?;
    Ok(optional_of(items.last().copied()))
}

/// `optional.unwrap(l)`, `l.unwrapOpt()`: the values of the list's optionals that have one.
fn unwrap<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = elements(&args, "optional.unwrap")?;
    let mut out: Vec<Box<dyn Val + 'v>> = Vec::with_capacity(items.len());
    for x in items {
        let Some(o) = x.downcast_ref::<CelOptional>() else {
            return Err(no_overload("optional.unwrap"));
        };
        if let Some(v) = o.option() {
            out.push(v.clone_as_boxed());
        }
    }
    Ok(CowVal::owned(CelList::from(out)))
}
