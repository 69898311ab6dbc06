//! The run-time cost of a CEL rule's evaluation, bounded as Kubernetes bounds CEL: every
//! evaluation has a budget of [`PER_CALL_LIMIT`] cost units, and one that spends it stops with
//! `operation cancelled: actual cost limit exceeded` ([`CostError::LimitExceeded`]), the words
//! of Kubernetes' CEL runtime (`k8s.io/apiserver/pkg/cel`, cel-go's `ActualCostLimit`).
//!
//! The `cel` crate (0.15) has no cost tracker, step counter or interpreter hook, so the
//! expression itself is made to pay: when a rule compiles, [`Metered::new`] rewrites its syntax
//! tree so that the operations whose work grows with the data call charging functions first,
//! and the evaluation counts the charges in a thread-local meter:
//!
//! - every node of the expression outside comprehension loops: 1, charged before the evaluation;
//! - every iteration of a comprehension (`all`, `exists`, `exists_one`, `map`, `filter`): the
//!   nodes of its loop condition and step, and the size of the element it copies into the loop
//!   variable ([`read_cost`]); the loop stops at the first iteration past the budget;
//! - the operands of the operations that read or copy them whole: `+` (concatenation), `==`, `!=`
//!   and the ordering operators when neither operand is a literal (comparing with a literal costs
//!   at most the literal's length), the key of a map index and the left operand of `in`, the
//!   list right of `in`, the target and arguments of every function (`contains`, `startsWith`,
//!   `endsWith`, conversions, …; `size` the text of a string only), and the elements of list and
//!   map literals (which copy them): each its [`read_cost`];
//! - `matches`: `(1 + ⌈text/10⌉) × (1 + ⌈pattern/4⌉)`, Kubernetes' formula; its patterns are
//!   compiled once into a shared cache ([`REGEX_CACHE_ENTRIES`]) within
//!   [`MAX_REGEX_PATTERN_BYTES`] and [`REGEX_SIZE_LIMIT`].
//!
//! A string or bytes value costs 1 per 10 bytes (Kubernetes' string traversal factor, 0.1), a list
//! or map 1 plus its elements (keys and values), anything else 1. The cost depends only on the
//! expression and the values, never on timing or on what a cache holds, so an evaluation's outcome
//! (within the budget or not) is the same wherever and whenever it runs.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use cel::common::ast::{operators, CallExpr, ComprehensionExpr, EntryExpr, Expr, ListExpr, LiteralValue};
use cel::common::types::{CelBool, CelBytes, CelInt, CelList, CelMap, CelMapKey, CelOptional, CelString};
use cel::common::types::{DYN_TYPE, INT_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{Context, Env, ExecutionError, IdedExpr, Value};

/// Cost units one evaluation of a rule may spend (Kubernetes' `PerCallLimit` for validation
/// rules).
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// Bytes of a string or bytes value per cost unit (Kubernetes' `StringTraversalCostFactor`, 0.1).
pub const TEXT_BYTES_PER_UNIT: u64 = 10;
/// Bytes of a `matches` pattern per cost unit (Kubernetes' `RegexStringLengthCostFactor`, 0.25).
pub const PATTERN_BYTES_PER_UNIT: u64 = 4;
/// Longest `matches` pattern compiled, in bytes.
pub const MAX_REGEX_PATTERN_BYTES: usize = 4096;
/// Largest compiled `matches` pattern, in bytes (`regex::RegexBuilder::size_limit`; also the
/// limit of each of its lazy DFA caches).
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Compiled `matches` patterns kept, the least recently used dropped first.
pub const REGEX_CACHE_ENTRIES: usize = 64;

/// Functions whose names start with this charge their own work with [`charge`]: the rewrite
/// charges nothing for reading their operands (the DRA selectors' helper functions, which no
/// expression can spell either).
pub const SELF_CHARGED_PREFIX: &str = "@@";

/// Why an evaluation stopped short of a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CostError {
    /// It spent its budget of [`PER_CALL_LIMIT`] units.
    #[error("operation cancelled: actual cost limit exceeded")]
    LimitExceeded,
}

/// Why a metered evaluation gave no value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RunError {
    /// The budget ran out (whatever the expression did after).
    #[error(transparent)]
    Cost(#[from] CostError),
    /// The expression failed: a missing key, a wrong type, an overflow, …
    #[error(transparent)]
    Eval(#[from] ExecutionError),
}

/// The charging functions, added to the environment rules are evaluated in. Their names start
/// with `@`, which no expression can spell: only the rewritten syntax calls them.
mod names {
    /// `@cost(x, mode)`: charges `x`'s cost for `mode` and returns `x`.
    pub const COST: &str = "@cost";
    /// `@cost_iter(k, item)`: charges `k` and `item`'s cost and returns `true`.
    pub const ITER: &str = "@cost_iter";
    /// `@cost_live(c)`: `c`, or the cost error once the budget is spent.
    pub const LIVE: &str = "@cost_live";
    /// `@matches(text, pattern, member)`: `matches`, its pattern compiled once.
    pub const MATCHES: &str = "@matches";
}

/// What `@cost` charges for its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i64)]
enum Mode {
    /// Reading or copying all of it: [`read_cost`].
    Read = 0,
    /// The right operand of `in`: a list is read whole ([`read_cost`]), a map looked up (1).
    In = 1,
    /// The argument of `size`: a string's or bytes' text (counted), 1 for anything else.
    Size = 2,
}

impl Mode {
    fn of(n: i64) -> Self {
        match n {
            1 => Self::In,
            2 => Self::Size,
            _ => Self::Read,
        }
    }
}

/// Adds the charging functions to `env` (before rules compiled in it are evaluated).
pub fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    env.add_overload(names::COST, "cost_dyn_int", vec![DYN_TYPE, INT_TYPE], cost)?;
    env.add_overload(names::ITER, "cost_iter_int_dyn", vec![INT_TYPE, DYN_TYPE], cost_iter)?;
    env.add_overload(names::LIVE, "cost_live_dyn", vec![DYN_TYPE], cost_live)?;
    env.add_overload(
        names::MATCHES,
        "matches_dyn_dyn_dyn",
        vec![DYN_TYPE, DYN_TYPE, DYN_TYPE],
        matches,
    )
}

/// A rule's expression rewritten to charge its cost as it evaluates (see the module's doc).
#[derive(Debug, Clone)]
pub struct Metered {
    expr: IdedExpr,
    /// The nodes evaluated at most once per evaluation, charged up front.
    fixed: u64,
}

impl Metered {
    /// `expr` (as compiled with the standard macros) rewritten to charge.
    pub fn new(expr: &IdedExpr) -> Self {
        Self {
            expr: rewrite(expr),
            fixed: own_nodes(expr),
        }
    }

    /// Evaluates the expression in `context` within [`PER_CALL_LIMIT`].
    pub fn execute(&self, context: &Context<'_, '_>) -> Result<Value, RunError> {
        self.execute_within(context, PER_CALL_LIMIT).0
    }

    /// Evaluates the expression in `context` within `limit` units: the value or why there is
    /// none, and the units charged (past `limit` when it ran out).
    pub fn execute_within(&self, context: &Context<'_, '_>, limit: u64) -> (Result<Value, RunError>, u64) {
        let meter = MeterScope::enter(Meter {
            used: self.fixed,
            limit,
        });
        let value = if self.fixed > limit {
            None
        } else {
            Some(Value::resolve(&self.expr, context))
        };
        let spent = meter.exit();
        // Past the budget, whatever the expression made of the charging functions' errors (an
        // `||` may have absorbed one) is discarded.
        let out = match value {
            _ if spent.used > spent.limit => Err(RunError::Cost(CostError::LimitExceeded)),
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => Err(RunError::Eval(e)),
            None => Err(RunError::Cost(CostError::LimitExceeded)),
        };
        (out, spent.used)
    }
}

/// The units charged and the budget of the evaluation running on this thread.
#[derive(Debug, Clone, Copy)]
struct Meter {
    used: u64,
    limit: u64,
}

thread_local! {
    /// Outside an evaluation nothing is counted against anything.
    static METER: Cell<Meter> = const { Cell::new(Meter { used: 0, limit: u64::MAX }) };
}

/// The meter of one evaluation on this thread; the previous one is back when it ends (or
/// unwinds).
struct MeterScope {
    previous: Option<Meter>,
}

impl MeterScope {
    fn enter(meter: Meter) -> Self {
        Self {
            previous: Some(METER.replace(meter)),
        }
    }

    fn exit(mut self) -> Meter {
        let previous = self.previous.take().unwrap_or(Meter {
            used: 0,
            limit: u64::MAX,
        });
        METER.replace(previous)
    }
}

impl Drop for MeterScope {
    fn drop(&mut self) {
        if let Some(previous) = self.previous.take() {
            METER.set(previous);
        }
    }
}

/// The error the charging functions fail with once the budget is spent. The evaluation reports
/// [`CostError::LimitExceeded`] itself, whatever becomes of this one.
fn exceeded() -> ExecutionError {
    ExecutionError::function_error("cost", CostError::LimitExceeded)
}

/// Adds `units` to this evaluation's cost: an error once past its budget. Functions whose work
/// the rewrite cannot see (the DRA selectors' libraries) charge theirs with it.
pub fn charge(units: u64) -> Result<(), ExecutionError> {
    let mut m = METER.get();
    m.used = m.used.saturating_add(units);
    METER.set(m);
    if m.used > m.limit {
        Err(exceeded())
    } else {
        Ok(())
    }
}

/// The units this evaluation may still charge.
fn remaining() -> u64 {
    let m = METER.get();
    m.limit.saturating_sub(m.used)
}

/// Units of `len` bytes of text.
fn text_cost(len: usize) -> u64 {
    (len as u64).div_ceil(TEXT_BYTES_PER_UNIT)
}

/// The cost of reading (or copying) all of `v`: 1, plus a string's or bytes' text
/// ([`TEXT_BYTES_PER_UNIT`]), plus a list's elements or a map's keys and values, each so
/// counted. The walk stops once past `cap`, so it does no more work than the units it returns.
pub fn read_cost(v: &dyn Val, cap: u64) -> u64 {
    fn walk(v: &dyn Val, cap: u64, cost: &mut u64) {
        *cost = cost.saturating_add(1);
        if *cost > cap {
            return;
        }
        if let Some(s) = v.downcast_ref::<CelString>() {
            *cost = cost.saturating_add(text_cost(s.inner().len()));
        } else if let Some(b) = v.downcast_ref::<CelBytes>() {
            *cost = cost.saturating_add(text_cost(b.inner().len()));
        } else if let Some(list) = v.downcast_ref::<CelList>() {
            for x in list.inner() {
                walk(x.as_ref(), cap, cost);
                if *cost > cap {
                    return;
                }
            }
        } else if let Some(map) = v.downcast_ref::<CelMap>() {
            for (k, x) in map.inner() {
                *cost = cost.saturating_add(match k {
                    CelMapKey::String(s) => 1 + text_cost(s.inner().len()),
                    _ => 1,
                });
                walk(x.as_ref(), cap, cost);
                if *cost > cap {
                    return;
                }
            }
        } else if let Some(x) = v.downcast_ref::<CelOptional>().and_then(CelOptional::option) {
            walk(x, cap, cost);
        }
    }
    let mut cost = 0;
    walk(v, cap, &mut cost);
    cost
}

/// Charges the cost of `v` for `mode`.
fn charge_value(v: &dyn Val, mode: Mode) -> Result<(), ExecutionError> {
    // One past what is left is enough to know the budget is spent.
    let cap = remaining().saturating_add(1);
    let units = match mode {
        Mode::Read => read_cost(v, cap),
        Mode::In if v.downcast_ref::<CelList>().is_some() => read_cost(v, cap),
        Mode::In => 1,
        Mode::Size => match (v.downcast_ref::<CelString>(), v.downcast_ref::<CelBytes>()) {
            (Some(s), _) => 1 + text_cost(s.inner().len()),
            (_, Some(b)) => 1 + text_cost(b.inner().len()),
            _ => 1,
        },
    };
    charge(units)
}

fn internal(function: &str) -> ExecutionError {
    ExecutionError::function_error(function, "called with the wrong arguments")
}

fn int_arg(v: Option<&CowVal<'_, '_>>) -> Option<i64> {
    v.and_then(|v| v.downcast_ref::<CelInt>()).map(|n| *n.inner())
}

static TRUE: CelBool = CelBool::TRUE;
static FALSE: CelBool = CelBool::FALSE;

fn bool_val<'b, 'v>(b: bool) -> CowVal<'b, 'v> {
    CowVal::Borrowed(if b { &TRUE } else { &FALSE })
}

/// `@cost(x, mode)`: charges `x` and hands it back as it came (no copy).
fn cost<'b, 'v>(mut args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let mode = int_arg(args.get(1))
        .map(Mode::of)
        .ok_or_else(|| internal(names::COST))?;
    args.truncate(1);
    let x = args.pop().ok_or_else(|| internal(names::COST))?;
    charge_value(x.as_ref(), mode)?;
    Ok(x)
}

/// `@cost_iter(k, item)`: one iteration of a comprehension, whose condition and step have `k`
/// nodes and which copied `item` into its variable.
fn cost_iter<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let k = int_arg(args.first()).ok_or_else(|| internal(names::ITER))?;
    charge(k.unsigned_abs())?;
    if let Some(item) = args.get(1) {
        charge_value(item.as_ref(), Mode::Read)?;
    }
    Ok(bool_val(true))
}

/// `@cost_live(c)`: a loop condition that stops the loop once the budget is spent.
fn cost_live<'b, 'v>(mut args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    charge(0)?;
    args.pop().ok_or_else(|| internal(names::LIVE))
}

/// `@matches(text, pattern, member)`: CEL's `matches` (an unanchored RE2-syntax search, as the
/// standard library's), charged `(1 + ⌈text/10⌉) × (1 + ⌈pattern/4⌉)`, with patterns over
/// [`MAX_REGEX_PATTERN_BYTES`] refused and the others compiled once ([`compiled`]).
fn matches<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [text, pattern, member] = args.as_slice() else {
        return Err(internal("matches"));
    };
    let (Some(text), Some(pattern)) = (text.downcast_ref::<CelString>(), pattern.downcast_ref::<CelString>()) else {
        let types = vec![text.get_type().name().to_owned(), pattern.get_type().name().to_owned()];
        return Err(match member.downcast_ref::<CelBool>().is_some_and(|m| *m.inner()) {
            true => ExecutionError::no_such_member_overload("matches", types),
            false => ExecutionError::no_such_overload("matches", types),
        });
    };
    let (text, pattern) = (text.inner(), pattern.inner());
    let units = (1 + text_cost(text.len())).saturating_mul(1 + (pattern.len() as u64).div_ceil(PATTERN_BYTES_PER_UNIT));
    charge(units)?;
    let regex = compiled(pattern).map_err(|e| ExecutionError::function_error("matches", e))?;
    Ok(bool_val(regex.is_match(text)))
}

/// A pattern compiled, or why it cannot be.
pub type Compiled = Result<Arc<regex::Regex>, Arc<str>>;

/// Compiled patterns, shared by every evaluation, with when each was last used.
struct RegexCache {
    entries: HashMap<Box<str>, (Compiled, u64)>,
    clock: u64,
}

static REGEXES: LazyLock<parking_lot::Mutex<RegexCache>> = LazyLock::new(|| {
    parking_lot::Mutex::new(RegexCache {
        entries: HashMap::new(),
        clock: 0,
    })
});

/// `pattern` compiled (or why it cannot be): from the cache, else compiled (outside the lock) and
/// kept, dropping the least recently used of [`REGEX_CACHE_ENTRIES`]. A pattern over
/// [`MAX_REGEX_PATTERN_BYTES`] is refused before anything else.
pub fn compiled(pattern: &str) -> Compiled {
    if pattern.len() > MAX_REGEX_PATTERN_BYTES {
        return Err(Arc::from(format!(
            "the pattern is {} bytes, over the limit of {MAX_REGEX_PATTERN_BYTES}",
            pattern.len()
        )));
    }
    {
        let mut cache = REGEXES.lock();
        cache.clock += 1;
        let now = cache.clock;
        if let Some((regex, used)) = cache.entries.get_mut(pattern) {
            *used = now;
            return regex.clone();
        }
    }
    let regex = regex::RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map(Arc::new)
        .map_err(|e| Arc::from(regex_error(&e)));
    let mut cache = REGEXES.lock();
    if cache.entries.len() >= REGEX_CACHE_ENTRIES {
        let oldest = cache
            .entries
            .iter()
            .min_by_key(|(_, (_, used))| *used)
            .map(|(k, _)| k.clone());
        if let Some(oldest) = oldest {
            cache.entries.remove(&oldest);
        }
    }
    let now = cache.clock;
    cache.entries.insert(Box::from(pattern), (regex.clone(), now));
    regex
}

/// A regex error in one line: the parser's own message without the pattern it quotes (which may
/// be kilobytes long).
fn regex_error(e: &regex::Error) -> String {
    match e {
        regex::Error::CompiledTooBig(limit) => {
            format!("the compiled pattern is over the limit of {limit} bytes")
        }
        other => {
            let text = other.to_string();
            let last = text
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid pattern");
            format!("invalid pattern: {}", last.trim().trim_start_matches("error: "))
        }
    }
}

// The rewrite.

/// The nodes of `e` evaluated once each time `e` is: all of them but the loop conditions and
/// steps of its comprehensions, which each iteration charges.
fn own_nodes(e: &IdedExpr) -> u64 {
    let entries = |entries: &mut dyn Iterator<Item = &EntryExpr>| -> u64 {
        entries
            .map(|e| match e {
                EntryExpr::StructField(f) => own_nodes(&f.value),
                EntryExpr::MapEntry(m) => own_nodes(&m.key) + own_nodes(&m.value),
            })
            .sum()
    };
    1 + match &e.expr {
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => 0,
        Expr::Select(s) => own_nodes(&s.operand),
        Expr::Call(c) => c.target.as_deref().map_or(0, own_nodes) + c.args.iter().map(own_nodes).sum::<u64>(),
        Expr::List(l) => l.elements.iter().map(own_nodes).sum(),
        Expr::Map(m) => entries(&mut m.entries.iter().map(|e| &e.expr)),
        Expr::Struct(s) => entries(&mut s.entries.iter().map(|e| &e.expr)),
        Expr::Comprehension(c) => own_nodes(&c.iter_range) + own_nodes(&c.accu_init) + own_nodes(&c.result),
    }
}

fn node(expr: Expr) -> IdedExpr {
    IdedExpr { id: 0, expr }
}

fn call(name: &str, args: Vec<IdedExpr>) -> IdedExpr {
    node(Expr::Call(CallExpr {
        func_name: name.to_string(),
        target: None,
        args,
    }))
}

fn int(n: i64) -> IdedExpr {
    node(Expr::Literal(LiteralValue::Int(n.into())))
}

fn is_literal(e: &IdedExpr) -> bool {
    matches!(e.expr, Expr::Literal(_))
}

fn is_number(e: &IdedExpr) -> bool {
    matches!(
        e.expr,
        Expr::Literal(LiteralValue::Int(_) | LiteralValue::UInt(_) | LiteralValue::Double(_))
    )
}

/// `e` (rewritten) charged for `mode` before its value is used; a literal as it is (its cost is
/// the expression's, bounded by its length).
fn charged(e: &IdedExpr, mode: Mode) -> IdedExpr {
    if is_literal(e) {
        return e.clone();
    }
    call(names::COST, vec![rewrite(e), int(mode as i64)])
}

/// `e` with the charging calls in (see the module's doc).
fn rewrite(e: &IdedExpr) -> IdedExpr {
    let expr = match &e.expr {
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => e.expr.clone(),
        Expr::Select(s) => {
            let mut s = s.clone();
            s.operand = Box::new(rewrite(&s.operand));
            Expr::Select(s)
        }
        Expr::List(l) => Expr::List(ListExpr {
            elements: l.elements.iter().map(|x| charged(x, Mode::Read)).collect(),
            optional_indices: l.optional_indices.clone(),
        }),
        Expr::Map(m) => {
            let mut m = m.clone();
            for entry in &mut m.entries {
                entry_charged(&mut entry.expr);
            }
            Expr::Map(m)
        }
        Expr::Struct(s) => {
            let mut s = s.clone();
            for entry in &mut s.entries {
                entry_charged(&mut entry.expr);
            }
            Expr::Struct(s)
        }
        Expr::Call(c) => Expr::Call(rewrite_call(c)),
        Expr::Comprehension(c) => Expr::Comprehension(Box::new(rewrite_comprehension(c))),
    };
    IdedExpr { id: e.id, expr }
}

fn entry_charged(entry: &mut EntryExpr) {
    match entry {
        EntryExpr::StructField(f) => f.value = charged(&f.value, Mode::Read),
        EntryExpr::MapEntry(m) => {
            m.key = charged(&m.key, Mode::Read);
            m.value = charged(&m.value, Mode::Read);
        }
    }
}

/// A call with its operands charged as its operation reads them.
fn rewrite_call(c: &CallExpr) -> CallExpr {
    let plain = |c: &CallExpr| CallExpr {
        func_name: c.func_name.clone(),
        target: c.target.as_deref().map(|t| Box::new(rewrite(t))),
        args: c.args.iter().map(rewrite).collect(),
    };
    let name = c.func_name.as_str();
    match (name, c.target.as_deref(), c.args.as_slice()) {
        // Constant work on what their operands already are.
        (
            operators::LOGICAL_AND
            | operators::LOGICAL_OR
            | operators::CONDITIONAL
            | operators::LOGICAL_NOT
            | operators::NEGATE
            | operators::NOT_STRICTLY_FALSE
            | operators::SUBSTRACT
            | operators::MULTIPLY
            | operators::DIVIDE
            | operators::MODULO
            | operators::OPT_SELECT,
            None,
            _,
        ) => plain(c),
        // A list's element or a map's value by its key: the key is hashed or compared.
        (operators::INDEX | operators::OPT_INDEX, None, [m, k]) => CallExpr {
            func_name: c.func_name.clone(),
            target: None,
            args: vec![rewrite(m), charged(k, Mode::Read)],
        },
        (operators::IN, None, [x, container]) => CallExpr {
            func_name: c.func_name.clone(),
            target: None,
            args: vec![charged(x, Mode::Read), charged(container, Mode::In)],
        },
        // Comparing with a literal reads at most the literal's length of the other operand.
        (
            operators::EQUALS
            | operators::NOT_EQUALS
            | operators::LESS
            | operators::LESS_EQUALS
            | operators::GREATER
            | operators::GREATER_EQUALS,
            None,
            [a, b],
        ) if is_literal(a) || is_literal(b) => plain(c),
        // Arithmetic with a number is constant work (or a type error).
        (operators::ADD, None, [a, b]) if is_number(a) || is_number(b) => plain(c),
        ("matches", Some(text), [pattern]) => CallExpr {
            func_name: names::MATCHES.to_string(),
            target: None,
            args: vec![
                rewrite(text),
                rewrite(pattern),
                node(Expr::Literal(LiteralValue::Boolean(true.into()))),
            ],
        },
        ("matches", None, [text, pattern]) => CallExpr {
            func_name: names::MATCHES.to_string(),
            target: None,
            args: vec![
                rewrite(text),
                rewrite(pattern),
                node(Expr::Literal(LiteralValue::Boolean(false.into()))),
            ],
        },
        ("size", target, args) => CallExpr {
            func_name: c.func_name.clone(),
            target: target.map(|t| Box::new(charged(t, Mode::Size))),
            args: args.iter().map(|a| charged(a, Mode::Size)).collect(),
        },
        // `optional.of(x)`: `optional` names the functions' namespace, not a value (the
        // interpreter calls these functions whatever a variable of that name holds).
        ("of" | "none" | "ofNonZeroValue", Some(t), args) if matches!(&t.expr, Expr::Ident(n) if n == "optional") => {
            CallExpr {
                func_name: c.func_name.clone(),
                target: Some(Box::new(t.clone())),
                args: args.iter().map(|a| charged(a, Mode::Read)).collect(),
            }
        }
        // A function that charges its own work (see [`SELF_CHARGED_PREFIX`]).
        (name, _, _) if name.starts_with(SELF_CHARGED_PREFIX) => plain(c),
        // Every other operator and function reads its operands at most whole.
        (_, target, args) => CallExpr {
            func_name: c.func_name.clone(),
            target: target.map(|t| Box::new(charged(t, Mode::Read))),
            args: args.iter().map(|a| charged(a, Mode::Read)).collect(),
        },
    }
}

/// A comprehension (as the standard macros expand them) charging each iteration: its loop
/// condition and step's nodes and the element copied, before the step's own work; its condition
/// stops the loop once the budget is spent. The shapes the interpreter runs faster (`map` and
/// `filter` appending to a list, `all` and `exists` folding with `&&` and `||`) are kept.
fn rewrite_comprehension(c: &ComprehensionExpr) -> ComprehensionExpr {
    let per_iteration = own_nodes(&c.loop_cond) + own_nodes(&c.loop_step);
    let accu = c.accu_var.as_str();
    let is_accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(n) if n == accu);
    // `e` evaluated once this iteration is paid for.
    let paid = |e: IdedExpr| {
        let bill = call(
            names::ITER,
            vec![
                int(i64::try_from(per_iteration).unwrap_or(i64::MAX)),
                node(Expr::Ident(c.iter_var.clone())),
            ],
        );
        call(
            operators::CONDITIONAL,
            vec![bill, e, node(Expr::Literal(LiteralValue::Boolean(false.into())))],
        )
    };
    // `@result + [e]`: the element's copy charged too.
    let append = |step: &IdedExpr, pay: bool| -> Option<IdedExpr> {
        let Expr::Call(add) = &step.expr else {
            return None;
        };
        let [a, b] = add.args.as_slice() else {
            return None;
        };
        let Expr::List(items) = &b.expr else {
            return None;
        };
        if add.func_name != operators::ADD || add.target.is_some() || !is_accu(a) {
            return None;
        }
        let elements = items
            .elements
            .iter()
            .map(|x| {
                let x = rewrite(x);
                let x = if pay { paid(x) } else { x };
                call(names::COST, vec![x, int(Mode::Read as i64)])
            })
            .collect();
        let list = IdedExpr {
            id: b.id,
            expr: Expr::List(ListExpr {
                elements,
                optional_indices: items.optional_indices.clone(),
            }),
        };
        Some(IdedExpr {
            id: step.id,
            expr: Expr::Call(CallExpr {
                func_name: add.func_name.clone(),
                target: None,
                args: vec![a.clone(), list],
            }),
        })
    };
    let step = &c.loop_step;
    let loop_step = match &step.expr {
        // all, exists: `@result && p`, `@result || p`.
        Expr::Call(f)
            if f.target.is_none()
                && matches!(f.func_name.as_str(), operators::LOGICAL_AND | operators::LOGICAL_OR)
                && f.args.len() == 2
                && is_accu(&f.args[0]) =>
        {
            IdedExpr {
                id: step.id,
                expr: Expr::Call(CallExpr {
                    func_name: f.func_name.clone(),
                    target: None,
                    args: vec![f.args[0].clone(), paid(rewrite(&f.args[1]))],
                }),
            }
        }
        // filter, map with a filter, exists_one: `cond ? <step> : @result`.
        Expr::Call(f) if f.target.is_none() && f.func_name == operators::CONDITIONAL && f.args.len() == 3 => {
            let then = append(&f.args[1], false).unwrap_or_else(|| rewrite(&f.args[1]));
            IdedExpr {
                id: step.id,
                expr: Expr::Call(CallExpr {
                    func_name: f.func_name.clone(),
                    target: None,
                    args: vec![paid(rewrite(&f.args[0])), then, rewrite(&f.args[2])],
                }),
            }
        }
        // map: `@result + [f]`.
        _ => append(step, true).unwrap_or_else(|| paid(rewrite(step))),
    };
    // A literal condition (map, filter, exists_one) is kept: the interpreter appends in place
    // only then; their steps' charges stop the loop.
    let loop_cond = if is_literal(&c.loop_cond) {
        c.loop_cond.clone()
    } else {
        call(names::LIVE, vec![rewrite(&c.loop_cond)])
    };
    ComprehensionExpr {
        iter_range: rewrite(&c.iter_range),
        iter_var: c.iter_var.clone(),
        iter_var2: c.iter_var2.clone(),
        accu_var: c.accu_var.clone(),
        accu_init: rewrite(&c.accu_init),
        loop_cond,
        loop_step,
        result: rewrite(&c.result),
    }
}
