//! The compiled selector made ready for the meter ([`crate::engine::rule_cost`]), before it is
//! checked for undeclared names and metered:
//!
//! - a call of a namespaced function (`sets.contains(a, b)`, `lists.range(n)`,
//!   `format.dns1123Label()`, `ip.isCanonical(s)`, `strings.quote(s)`, `format.named(s)`) becomes
//!   the call of the function by its qualified name, as cel-go's checker resolves it, so that the
//!   namespace is never read as a variable;
//! - the operand of a `cel` crate extension function whose cost kube counts beyond one reading of
//!   its operands is passed through `@@cost(operand, kind)`, which charges that cost: `split` and
//!   `replace` (a second traversal of the string, cel-go's `2 × len × 0.1`), `join` (twice the
//!   text), `sort`, `distinct` and `sortBy` (cel-go's `trackListSelfCompare`: `2 × n²`, `2.1 × n²`
//!   for strings, plus the list's allocation), `lists.range(n)`, `slice`, `reverse` and `flatten`
//!   (`trackListOutputSize`: the list allocated, 10 units);
//! - `find`, `findAll`, `<format>.validate` and `sets.*`, which charge kube's whole cost
//!   (their operands' traversal included), are called by names whose operands the meter does not
//!   charge for reading ([`SELF_CHARGED`]);
//! - `s.indexOf(sub, offset)` and `s.lastIndexOf(sub, offset)` call cel-go's versions
//!   ([`super::strings`]), `string(x)` cel-go's conversion ([`super::convert`]), `s.format(args)` kube's formatter
//!   ([`super::format_string`]).

use cel::common::ast::{CallExpr, EntryExpr, Expr, LiteralValue};
use cel::common::types::{CelInt, DYN_TYPE, INT_TYPE};
use cel::common::value::CowVal;
use cel::{Env, ExecutionError, IdedExpr, Value};

use super::values::{charge, no_overload};
use super::{convert, format_string, strings};
use crate::engine::rule_cost::read_cost;

/// The functions called by a qualified name.
pub(super) const QUALIFIED: &[&str] = &[
    "sets.contains",
    "sets.equivalent",
    "sets.intersects",
    "lists.range",
    "optional.unwrap",
    "strings.quote",
    "ip.isCanonical",
    "format.named",
    "format.dns1123Label",
    "format.dns1123Subdomain",
    "format.dns1035Label",
    "format.qualifiedName",
    "format.dns1123LabelPrefix",
    "format.dns1123SubdomainPrefix",
    "format.dns1035LabelPrefix",
    "format.labelValue",
    "format.uri",
    "format.uuid",
    "format.byte",
    "format.date",
    "format.datetime",
];

/// Library functions charged kube's whole cost by themselves, and the names they are called by
/// (which no expression can spell, and whose operands the meter does not charge for reading).
pub(super) const SELF_CHARGED: &[(&str, &str)] = &[
    ("find", "@@find"),
    ("findAll", "@@findAll"),
    ("validate", "@@validate"),
    ("sets.contains", "@@sets_contains"),
    ("sets.equivalent", "@@sets_equivalent"),
    ("sets.intersects", "@@sets_intersects"),
];

/// `@@cost(x, kind)`: charges `kind`'s cost of `x` and returns `x`.
const COST: &str = "@@cost";

/// What `@@cost` charges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i64)]
enum Kind {
    /// Reading all of it once more.
    Reread = 0,
    /// Comparing each element with each (cel-go's `trackListSelfCompare`).
    SelfCompare = 1,
    /// A list of `x` elements allocated (`lists.range`).
    Range = 2,
    /// A list allocated as large as `x`.
    Alloc = 3,
}

/// cel-go's `defaultMaxRangeSize`: the longest `lists.range`.
const MAX_RANGE_SIZE: i64 = 1_000_000;

/// cel-go's `common.ListCreateBaseCost`.
const LIST_CREATE_BASE_COST: u64 = 10;

/// Declares `@@cost` in `env`.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    env.add_overload(COST, "dra_cost_dyn_int", vec![DYN_TYPE, INT_TYPE], cost)
}

fn cost<'b, 'v>(mut args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let kind = args
        .get(1)
        .and_then(|k| k.downcast_ref::<CelInt>())
        .map(|k| *k.inner())
        .ok_or_else(|| no_overload(COST))?;
    args.truncate(1);
    let x = args.pop().ok_or_else(|| no_overload(COST))?;
    let units = match kind {
        0 => read_cost(x.as_ref(), u64::MAX),
        1 => match Value::try_from(x.as_ref())? {
            Value::List(l) => {
                let n = l.len() as u64;
                let factor = match l.first() {
                    Some(Value::String(_) | Value::Bytes(_)) => 2.1,
                    _ => 2.0,
                };
                ((n.saturating_mul(n)) as f64 * factor) as u64 + 1 + LIST_CREATE_BASE_COST
            }
            _ => 1,
        },
        2 => match Value::try_from(x.as_ref())? {
            // cel-go's `genRange` refuses more than `defaultMaxRangeSize` elements.
            Value::Int(n) if n > MAX_RANGE_SIZE => {
                return Err(ExecutionError::function_error(
                    "lists.range",
                    format!("lists.range: size {n} exceeds maximum allowed ({MAX_RANGE_SIZE})"),
                ))
            }
            Value::Int(n) => n.max(0).unsigned_abs() + 1 + LIST_CREATE_BASE_COST,
            _ => 1,
        },
        _ => LIST_CREATE_BASE_COST,
    };
    charge(units)?;
    Ok(x)
}

fn node(expr: Expr) -> IdedExpr {
    IdedExpr { id: 0, expr }
}

/// `e` passed through `@@cost(e, kind)`.
fn costed(e: IdedExpr, kind: Kind) -> IdedExpr {
    node(Expr::Call(CallExpr {
        func_name: COST.to_string(),
        target: None,
        args: vec![e, node(Expr::Literal(LiteralValue::Int((kind as i64).into())))],
    }))
}

/// `e` made ready for the meter (see the module's doc); `bound` are the comprehension variables
/// in scope (a variable named as a namespace shadows it).
pub(super) fn prepare(e: &IdedExpr, bound: &mut Vec<String>) -> IdedExpr {
    let expr = match &e.expr {
        Expr::Call(c) => {
            let qualified = match c.target.as_deref().map(|t| &t.expr) {
                Some(Expr::Ident(ns)) if !bound.iter().any(|b| b == ns) => {
                    let name = format!("{ns}.{}", c.func_name);
                    QUALIFIED.contains(&name.as_str()).then_some(name)
                }
                _ => None,
            };
            let mut call = CallExpr {
                func_name: c.func_name.clone(),
                target: c.target.as_deref().map(|t| Box::new(prepare(t, bound))),
                args: c.args.iter().map(|a| prepare(a, bound)).collect(),
            };
            if let Some(name) = qualified {
                call.func_name = name;
                call.target = None;
            }
            // cel-go's string search from an offset in place of the crate's.
            let offset_search = match call.func_name.as_str() {
                "indexOf" => Some(strings::INDEX_OF_OFFSET),
                "lastIndexOf" => Some(strings::LAST_INDEX_OF_OFFSET),
                _ => None,
            };
            if let (Some(name), 2) = (offset_search, call.args.len()) {
                if let Some(target) = call.target.take() {
                    call.func_name = name.to_string();
                    call.args.insert(0, *target);
                }
            }
            let kind = match (call.func_name.as_str(), call.target.is_some(), call.args.len()) {
                ("split" | "replace" | "join", true, _) => Some(Kind::Reread),
                ("sort" | "distinct", true, 0) => Some(Kind::SelfCompare),
                ("slice" | "reverse" | "flatten", true, _) => Some(Kind::Alloc),
                _ => None,
            };
            if let Some(kind) = kind {
                call.target = call.target.map(|t| Box::new(costed(*t, kind)));
            }
            if call.func_name == "@sortByAssociatedKeys" {
                call.args = call.args.into_iter().map(|a| costed(a, Kind::SelfCompare)).collect();
            }
            // Functions charged kube's whole cost (their operands' traversal included) by
            // themselves: called by names the meter charges no operand for.
            if let Some((_, internal)) = SELF_CHARGED.iter().find(|(name, _)| *name == call.func_name) {
                call.func_name = internal.to_string();
                if let Some(target) = call.target.take() {
                    call.args.insert(0, *target);
                }
            }
            if call.func_name == "format" && call.args.len() == 1 {
                if let Some(target) = call.target.take() {
                    call.func_name = format_string::FORMAT.to_string();
                    call.args.insert(0, *target);
                }
            }
            if call.func_name == "string" && call.target.is_none() && call.args.len() == 1 {
                call.func_name = convert::STRING.to_string();
            }
            if call.func_name == "lists.range" && call.target.is_none() {
                call.args = call.args.into_iter().map(|a| costed(a, Kind::Range)).collect();
            }
            Expr::Call(call)
        }
        Expr::Comprehension(c) => {
            let mut c = c.clone();
            c.iter_range = prepare(&c.iter_range, bound);
            c.accu_init = prepare(&c.accu_init, bound);
            let before = bound.len();
            bound.push(c.iter_var.clone());
            bound.push(c.accu_var.clone());
            c.loop_cond = prepare(&c.loop_cond, bound);
            c.loop_step = prepare(&c.loop_step, bound);
            c.result = prepare(&c.result, bound);
            bound.truncate(before);
            Expr::Comprehension(c)
        }
        Expr::List(l) => {
            let mut l = l.clone();
            l.elements = l.elements.iter().map(|x| prepare(x, bound)).collect();
            Expr::List(l)
        }
        Expr::Map(m) => {
            let mut m = m.clone();
            for entry in &mut m.entries {
                prepare_entry(&mut entry.expr, bound);
            }
            Expr::Map(m)
        }
        Expr::Struct(s) => {
            let mut s = s.clone();
            for entry in &mut s.entries {
                prepare_entry(&mut entry.expr, bound);
            }
            Expr::Struct(s)
        }
        Expr::Select(s) => {
            let mut s = s.clone();
            s.operand = Box::new(prepare(&s.operand, bound));
            Expr::Select(s)
        }
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => e.expr.clone(),
    };
    IdedExpr { id: e.id, expr }
}

fn prepare_entry(entry: &mut EntryExpr, bound: &mut Vec<String>) {
    match entry {
        EntryExpr::StructField(f) => f.value = prepare(&f.value, bound),
        EntryExpr::MapEntry(m) => {
            m.key = prepare(&m.key, bound);
            m.value = prepare(&m.value, bound);
        }
    }
}
