//! Macros of cel-go's extensions that kube's base environment enables:
//!
//! - `cel.bind(name, init, expr)` (cel-go `ext/bindings.go`, `ext.Bindings(BindingsVersion(0))`,
//!   which kube's DRA compiler adds in `k8s.io/dynamic-resource-allocation/cel/compile.go`):
//!   `expr` with `name` bound to the value of `init`, expanded as cel-go expands it, into a
//!   comprehension over an empty list whose accumulator is `name`;
//! - two-variable comprehensions (cel-go `ext/comprehensions.go`, `ext.TwoVarComprehensions()`,
//!   kube's base environment from 1.32): `all(i, v, p)`, `exists(i, v, p)`,
//!   `existsOne(i, v, p)`, `transformList(i, v, [filter,] f)`, `transformMap(k, v, [filter,] f)`
//!   and `transformMapEntry(k, v, [filter,] f)` over a list (index, element) or a map (key,
//!   value). The `cel` crate's interpreter binds one variable per iteration, so each expands into a
//!   one-variable comprehension over the `[i, v]` pairs of its range ([`PAIRS`]), its body under
//!   `cel.bind`s of `i` and `v`.
//!
//! Costs: the comprehensions are metered as the standard macros are
//! ([`crate::engine::rule_cost`]), each iteration charged its nodes (the bindings' included, so
//! a two-variable comprehension costs a few units per iteration more than cel-go's).

use cel::common::ast::{operators, CallExpr, ComprehensionExpr, Expr, ListExpr, LiteralValue};
use cel::common::types::{CelMap, CelMapKey};
use cel::common::types::{DYN_TYPE, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::parser::{Macro, MacroExprHelper};
use cel::{Env, ExecutionError, IdedExpr, ParseError, Value};

use super::values::{boxed, charge, no_overload, value_out};

/// `@@pairs(range)`: the `[index, element]` pairs of a list, the `[key, value]` pairs of a map.
pub(super) const PAIRS: &str = "@@pairs";
/// `@@toMap(pairs)`: the map of `[key, value]` pairs (`transformMap`); a key twice fails with
/// cel-go's `insert failed: key … already exists`.
const TO_MAP: &str = "@@toMap";
/// `@@mergeMaps(maps)`: the entries of all `maps` (`transformMapEntry`), each a new key.
const MERGE_MAPS: &str = "@@mergeMaps";
/// The loop variable holding each pair.
const PAIR_VAR: &str = "@kv";
/// The accumulator of the expanded comprehensions, as the standard macros name it.
const RESULT: &str = "@result";

/// Declares the macros and their helper functions in `env`.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    env.add_macro(Macro::receiver("bind", 3, bind))?;
    env.add_macro(Macro::receiver("all", 3, |h, t, a| two_var(h, t, a, Kind::All)))?;
    env.add_macro(Macro::receiver("exists", 3, |h, t, a| two_var(h, t, a, Kind::Exists)))?;
    for name in ["existsOne", "exists_one"] {
        env.add_macro(Macro::receiver(name, 3, |h, t, a| two_var(h, t, a, Kind::ExistsOne)))?;
    }
    for (name, kind) in [
        ("transformList", Kind::List),
        ("transformMap", Kind::Map),
        ("transformMapEntry", Kind::MapEntry),
    ] {
        env.add_macro(Macro::receiver(name, 3, move |h, t, a| two_var(h, t, a, kind)))?;
        env.add_macro(Macro::receiver(name, 4, move |h, t, a| two_var(h, t, a, kind)))?;
    }
    env.add_overload(PAIRS, "pairs_dyn", vec![DYN_TYPE], pairs)?;
    env.add_overload(TO_MAP, "to_map_list", vec![LIST_TYPE], to_map)?;
    env.add_overload(MERGE_MAPS, "merge_maps_list", vec![LIST_TYPE], merge_maps)?;
    Ok(())
}

fn ident(h: &mut MacroExprHelper<'_>, name: &str) -> IdedExpr {
    h.next_expr(Expr::Ident(name.to_string()))
}

fn call(h: &mut MacroExprHelper<'_>, name: &str, args: Vec<IdedExpr>) -> IdedExpr {
    h.next_expr(Expr::Call(CallExpr {
        func_name: name.to_string(),
        target: None,
        args,
    }))
}

fn boolean(h: &mut MacroExprHelper<'_>, b: bool) -> IdedExpr {
    h.next_expr(Expr::Literal(LiteralValue::Boolean(b.into())))
}

fn int(h: &mut MacroExprHelper<'_>, i: i64) -> IdedExpr {
    h.next_expr(Expr::Literal(LiteralValue::Int(i.into())))
}

#[allow(clippy::too_many_arguments)]
fn fold(
    h: &mut MacroExprHelper<'_>,
    range: IdedExpr,
    iter_var: &str,
    accu_var: &str,
    init: IdedExpr,
    cond: IdedExpr,
    step: IdedExpr,
    result: IdedExpr,
) -> IdedExpr {
    h.next_expr(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range: range,
        iter_var: iter_var.to_string(),
        iter_var2: None,
        accu_var: accu_var.to_string(),
        accu_init: init,
        loop_cond: cond,
        loop_step: step,
        result,
    })))
}

/// `expr` with `name` bound to `init`: cel-go's expansion of `cel.bind`.
fn let_in(h: &mut MacroExprHelper<'_>, name: &str, init: IdedExpr, expr: IdedExpr) -> IdedExpr {
    let range = h.next_expr(Expr::List(ListExpr::new(Vec::new())));
    let cond = boolean(h, false);
    let step = ident(h, name);
    fold(h, range, "#unused", name, init, cond, step, expr)
}

fn var_name(h: &MacroExprHelper<'_>, e: &IdedExpr, message: &str) -> Result<String, ParseError> {
    match &e.expr {
        Expr::Ident(name) => Ok(name.clone()),
        _ => Err(h.new_error(e.id, message)),
    }
}

/// `cel.bind(name, init, expr)`; a `bind` on anything but `cel` is left as written.
fn bind(
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<Option<IdedExpr>, ParseError> {
    if !matches!(target.as_ref().map(|t| &t.expr), Some(Expr::Ident(n)) if n == "cel") {
        return Ok(None);
    }
    let [var, init, expr] = std::mem::take(args)
        .try_into()
        .map_err(|_| h.new_error(0, "cel.bind needs three arguments"))?;
    let name = var_name(h, &var, "cel.bind() variable names must be simple identifiers")?;
    target.take();
    Ok(Some(let_in(h, &name, init, expr)))
}

/// A two-variable comprehension.
#[derive(Debug, Clone, Copy)]
enum Kind {
    All,
    Exists,
    ExistsOne,
    List,
    Map,
    MapEntry,
}

fn two_var(
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
    kind: Kind,
) -> Result<Option<IdedExpr>, ParseError> {
    let Some(range) = target.take() else {
        return Ok(None);
    };
    let mut taken = std::mem::take(args);
    let body = taken.pop().ok_or_else(|| h.new_error(range.id, "missing argument"))?;
    let filter = if taken.len() == 3 { taken.pop() } else { None };
    let (Some(v2), Some(v1)) = (taken.pop(), taken.pop()) else {
        return Err(h.new_error(range.id, "missing argument"));
    };
    let first = var_name(h, &v1, "argument must be a simple name")?;
    let second = var_name(h, &v2, "argument must be a simple name")?;
    if first == RESULT || second == RESULT {
        return Err(h.new_error(v1.id, "iteration variable overwrites accumulator variable"));
    }
    if first == second {
        return Err(h.new_error(v2.id, "duplicate variable name"));
    }
    // `e` with `first` and `second` bound to this iteration's pair.
    let bound = |h: &mut MacroExprHelper<'_>, e: IdedExpr| {
        let pair = ident(h, PAIR_VAR);
        let one = int(h, 1);
        let second_init = call(h, operators::INDEX, vec![pair, one]);
        let inner = let_in(h, &second, second_init, e);
        let pair = ident(h, PAIR_VAR);
        let zero = int(h, 0);
        let first_init = call(h, operators::INDEX, vec![pair, zero]);
        let_in(h, &first, first_init, inner)
    };
    let pairs = call(h, PAIRS, vec![range]);
    let accu = |h: &mut MacroExprHelper<'_>| ident(h, RESULT);
    let expanded = match kind {
        Kind::All | Kind::Exists => {
            let all = matches!(kind, Kind::All);
            let init = boolean(h, all);
            let acc = accu(h);
            let cond_arg = if all {
                acc
            } else {
                call(h, operators::LOGICAL_NOT, vec![acc])
            };
            let cond = call(h, operators::NOT_STRICTLY_FALSE, vec![cond_arg]);
            let body = bound(h, body);
            let acc = accu(h);
            let op = if all {
                operators::LOGICAL_AND
            } else {
                operators::LOGICAL_OR
            };
            let step = call(h, op, vec![acc, body]);
            let result = accu(h);
            fold(h, pairs, PAIR_VAR, RESULT, init, cond, step, result)
        }
        Kind::ExistsOne => {
            let init = int(h, 0);
            let cond = boolean(h, true);
            let body = bound(h, body);
            let acc = accu(h);
            let one = int(h, 1);
            let plus = call(h, operators::ADD, vec![acc, one]);
            let acc = accu(h);
            let step = call(h, operators::CONDITIONAL, vec![body, plus, acc]);
            let acc = accu(h);
            let one = int(h, 1);
            let result = call(h, operators::EQUALS, vec![acc, one]);
            fold(h, pairs, PAIR_VAR, RESULT, init, cond, step, result)
        }
        Kind::List | Kind::Map | Kind::MapEntry => {
            // `@result + [e]` (guarded by the filter), the bindings inside `e`: the shape the
            // crate's interpreter appends in place (and the meter charges per element); a map
            // is made of the `[k, f]` pairs (or `f`'s entries) once the list is complete.
            let element = match kind {
                Kind::Map => {
                    let key = ident(h, &first);
                    let pair = h.next_expr(Expr::List(ListExpr::new(vec![key, body])));
                    bound(h, pair)
                }
                _ => bound(h, body),
            };
            let init = h.next_expr(Expr::List(ListExpr::new(Vec::new())));
            let cond = boolean(h, true);
            let acc = accu(h);
            let item = h.next_expr(Expr::List(ListExpr::new(vec![element])));
            let add = call(h, operators::ADD, vec![acc, item]);
            let step = match filter {
                Some(f) => {
                    let guard = bound(h, f);
                    let acc = accu(h);
                    call(h, operators::CONDITIONAL, vec![guard, add, acc])
                }
                None => add,
            };
            let result = accu(h);
            let list = fold(h, pairs, PAIR_VAR, RESULT, init, cond, step, result);
            match kind {
                Kind::Map => call(h, TO_MAP, vec![list]),
                Kind::MapEntry => call(h, MERGE_MAPS, vec![list]),
                _ => list,
            }
        }
    };
    Ok(Some(expanded))
}

/// `@@pairs(range)`: charged 1 per pair beyond the comprehension's own iterations.
fn pairs<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let arg = args.first().ok_or_else(|| no_overload("comprehension"))?;
    let items: Vec<Value> = match Value::try_from(arg.as_ref()) {
        Ok(range) => range_pairs(range)?,
        // A map of the crate's traits only (the outer `device.attributes`): its keys and what
        // it indexes them to.
        Err(_) => {
            let (Some(keys), Some(indexer)) = (arg.as_iterable(), arg.as_indexer()) else {
                return Err(no_overload("comprehension"));
            };
            let mut items = Vec::new();
            let mut it = keys.iter();
            while let Some(k) = it.next() {
                let v = indexer.get(k)?;
                items.push(Value::List(
                    vec![Value::try_from(k)?, Value::try_from(v.as_ref())?].into(),
                ));
            }
            items
        }
    };
    charge(items.len() as u64 + 1)?;
    value_out(Value::List(items.into()))
}

fn range_pairs(range: Value) -> Result<Vec<Value>, ExecutionError> {
    Ok(match range {
        Value::List(l) => l
            .iter()
            .enumerate()
            .map(|(i, v)| Value::List(vec![Value::Int(i as i64), v.clone()].into()))
            .collect(),
        Value::Map(m) => m
            .map
            .iter()
            .map(|(k, v)| Value::List(vec![Value::from(k), v.clone()].into()))
            .collect(),
        _ => return Err(no_overload("comprehension")),
    })
}

fn map_key(k: &dyn Val) -> Result<CelMapKey<'static>, ExecutionError> {
    CelMapKey::try_from(k.clone_as_boxed()).map(CelMapKey::into_static)
}

/// A map's entries as the accumulator holds them.
type Entries<'v> = std::collections::HashMap<CelMapKey<'static>, Box<dyn Val + 'v>>;

/// `key` set to `value` in `entries`; a key it has (as CEL compares keys: `0` and `0u` are one)
/// fails with cel-go's `insert failed: key … already exists`.
fn insert(entries: &mut Entries<'_>, key: &dyn Val, value: &dyn Val) -> Result<(), ExecutionError> {
    let key_value = Value::try_from(key)?;
    let taken = entries
        .keys()
        .any(|k| Value::try_from(k.inner()).is_ok_and(|k| k == key_value));
    if taken {
        let shown = match &key_value {
            Value::Int(i) => i.to_string(),
            Value::UInt(u) => u.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::String(s) => s.to_string(),
            other => format!("{other:?}"),
        };
        return Err(ExecutionError::function_error(
            "transformMapEntry",
            format!("insert failed: key {shown} already exists"),
        ));
    }
    entries.insert(map_key(key)?, boxed(Value::try_from(value)?)?);
    Ok(())
}

/// The elements of the list argument.
fn list_items<'b, 'v>(args: &'b [CowVal<'_, 'v>], function: &str) -> Result<Vec<&'b (dyn Val + 'v)>, ExecutionError> {
    let list = args.first().ok_or_else(|| no_overload(function))?;
    let iterable = list.as_iterable().ok_or_else(|| no_overload(function))?;
    let mut items = Vec::new();
    let mut it = iterable.iter();
    while let Some(x) = it.next() {
        items.push(x);
    }
    charge(1 + items.len() as u64)?;
    Ok(items)
}

/// `@@toMap(pairs)`.
fn to_map<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let mut entries = Entries::new();
    for pair in list_items(&args, "transformMap")? {
        let (Some(k), Some(v)) = (
            pair.as_indexer()
                .and_then(|i| i.get(&cel::common::types::CelInt::from(0)).ok()),
            pair.as_indexer()
                .and_then(|i| i.get(&cel::common::types::CelInt::from(1)).ok()),
        ) else {
            return Err(no_overload("transformMap"));
        };
        insert(&mut entries, k.as_ref(), v.as_ref())?;
    }
    Ok(CowVal::owned(CelMap::from(entries)))
}

/// `@@mergeMaps(maps)`.
fn merge_maps<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let mut entries = Entries::new();
    for map in list_items(&args, "transformMapEntry")? {
        let Some(m) = map.downcast_ref::<CelMap>() else {
            return Err(no_overload("transformMapEntry"));
        };
        for (k, v) in m.inner() {
            let k = boxed(Value::try_from(k.inner())?)?;
            insert(&mut entries, k.as_ref(), v.as_ref())?;
        }
    }
    Ok(CowVal::owned(CelMap::from(entries)))
}
