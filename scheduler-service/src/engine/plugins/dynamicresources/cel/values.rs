//! Helpers of the libraries' functions: their arguments and results as the `cel` crate passes
//! them, and the charges of their cost through [`crate::engine::rule_cost`].

use std::cmp::Ordering;
use std::sync::Arc;

use cel::common::types::{CelBool, CelInt, CelOptional, CelString};
use cel::common::value::{CowVal, Val};
use cel::objects::Opaque;
use cel::{ExecutionError, Value};

/// `value` as the crate's dynamic value.
pub(super) fn boxed(value: Value) -> Result<Box<dyn Val>, ExecutionError> {
    Box::<dyn Val>::try_from(value)
}

/// cel-go's `no such overload` for `function`.
pub(super) fn no_overload(function: &str) -> ExecutionError {
    ExecutionError::function_error(function, "no such overload")
}

/// Argument `i` as a [`Value`].
pub(super) fn value_arg(args: &[CowVal<'_, '_>], i: usize, function: &str) -> Result<Value, ExecutionError> {
    let arg = args.get(i).ok_or_else(|| no_overload(function))?;
    Value::try_from(arg.as_ref())
}

/// Argument `i`, a list, as its elements.
pub(super) fn list_arg(args: &[CowVal<'_, '_>], i: usize, function: &str) -> Result<Arc<Vec<Value>>, ExecutionError> {
    match value_arg(args, i, function)? {
        Value::List(l) => Ok(l),
        _ => Err(no_overload(function)),
    }
}

/// Argument `i`, an opaque value of type `T`.
pub(super) fn opaque_arg<T: Opaque + Clone>(
    args: &[CowVal<'_, '_>],
    i: usize,
    function: &str,
) -> Result<T, ExecutionError> {
    match value_arg(args, i, function)? {
        Value::Opaque(o) => o.downcast_ref::<T>().cloned().ok_or_else(|| no_overload(function)),
        _ => Err(no_overload(function)),
    }
}

/// Argument `i`, a string.
pub(super) fn string_arg(args: &[CowVal<'_, '_>], i: usize, function: &str) -> Result<String, ExecutionError> {
    let arg = args.get(i).ok_or_else(|| no_overload(function))?;
    arg.downcast_ref::<CelString>()
        .map(|s| s.inner().to_string())
        .ok_or_else(|| no_overload(function))
}

/// Argument `i`, an int.
pub(super) fn int_arg(args: &[CowVal<'_, '_>], i: usize, function: &str) -> Result<i64, ExecutionError> {
    let arg = args.get(i).ok_or_else(|| no_overload(function))?;
    arg.downcast_ref::<CelInt>()
        .map(|i| *i.inner())
        .ok_or_else(|| no_overload(function))
}

/// Argument `i`, a bool.
pub(super) fn bool_arg(args: &[CowVal<'_, '_>], i: usize, function: &str) -> Result<bool, ExecutionError> {
    let arg = args.get(i).ok_or_else(|| no_overload(function))?;
    arg.downcast_ref::<CelBool>()
        .map(|b| *b.inner())
        .ok_or_else(|| no_overload(function))
}

/// `value` as a function's result.
pub(super) fn value_out<'b, 'v>(value: Value) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let b: Box<dyn Val + 'v> = boxed(value)?;
    Ok(CowVal::from(b))
}

/// An opaque value as a function's result.
pub(super) fn opaque_out<'b, 'v>(o: impl Opaque) -> Result<CowVal<'b, 'v>, ExecutionError> {
    value_out(Value::Opaque(Arc::new(o)))
}

/// A bool as a function's result.
pub(super) fn bool_out<'b, 'v>(b: bool) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Ok(CowVal::owned(CelBool::from(b)))
}

/// An int as a function's result.
pub(super) fn int_out<'b, 'v>(i: i64) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Ok(CowVal::owned(CelInt::from(i)))
}

/// A string as a function's result.
pub(super) fn string_out<'b, 'v>(s: String) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Ok(CowVal::owned(CelString::from(s)))
}

/// A list of strings as a function's result.
pub(super) fn strings_out<'b, 'v>(items: Vec<String>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    value_out(Value::List(Arc::new(items.into_iter().map(Value::from).collect())))
}

/// `optional.of(value)`, or `optional.none()`, as a function's result.
pub(super) fn optional_out<'b, 'v>(value: Option<Value>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let opt = match value {
        Some(v) => CelOptional::of(boxed(v)?),
        None => CelOptional::none(),
    };
    Ok(CowVal::owned(opt))
}

/// -1, 0 or 1.
pub(super) fn ord_int(o: Ordering) -> i64 {
    match o {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }
}

/// Cost units of reading `len` bytes of text: kube's `StringTraversalCostFactor` (0.1), rounded
/// up.
pub(super) fn text_units(len: usize) -> u64 {
    (len as u64).div_ceil(crate::engine::rule_cost::TEXT_BYTES_PER_UNIT)
}

/// Charges `units` to the evaluation's meter ([`crate::engine::rule_cost::charge`]): an error
/// once past its budget.
pub(super) fn charge(units: u64) -> Result<(), ExecutionError> {
    crate::engine::rule_cost::charge(units)
}

/// CEL's name of a value's type, as cel-go's errors write it.
pub(super) fn type_name(v: &Value) -> &str {
    match v {
        Value::Int(_) => "int",
        Value::UInt(_) => "uint",
        Value::Float(_) => "double",
        Value::String(_) => "string",
        Value::Bytes(_) => "bytes",
        Value::Bool(_) => "bool",
        Value::Null => "null_type",
        Value::List(_) => "list",
        Value::Map(_) => "map",
        Value::Opaque(o) => o.runtime_type_name(),
        _ => "dyn",
    }
}
