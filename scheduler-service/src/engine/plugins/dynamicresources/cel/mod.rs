//! The CEL environment of DRA device selectors (`DeviceClass.spec.selectors[].cel` and
//! `DeviceRequest…selectors[].cel`), after kube's `k8s.io/dynamic-resource-allocation/cel`
//! (`compile.go`): one variable, `device`, with
//!
//! - `device.driver`: the driver's name;
//! - `device.attributes[domain].<id>`: the device's attributes by domain, an unqualified name in a
//!   slice belonging to the driver's domain (`parseQualifiedName`); a domain the device has no
//!   attribute in is an empty map, as kube's `newStringInterfaceMapWithDefault` makes it, so
//!   `device.attributes["other.example.com"].model` fails with `no such key: model` rather than
//!   on the domain;
//! - `device.capacity[domain].<id>`: the capacities, as quantities, likewise;
//! - `device.allowMultipleAllocations`: the device's flag.
//!
//! Attribute values are `int`, `bool`, `string` and, for versions, a semantic version
//! ([`Semver`]).
//!
//! The functions are those of kube's environment for these expressions (`newCompiler` over the
//! `StoredExpressions` environment of `k8s.io/apiserver/pkg/cel/environment/base.go` at 1.37),
//! one file each, naming the kube or cel-go file it mirrors:
//!
//! - CEL's standard library with optional values (`.?`, `[?…]`, `optional.of`, `orValue`, …,
//!   kube's `OptionalTypes()`; `optional.rs` adds `first`, `last`, `optional.unwrap` and
//!   `unwrapOpt`) and numbers compared across types (`CrossTypeNumericComparisons`), the `cel`
//!   crate's;
//! - `bind.rs`: `cel.bind` (cel-go `ext.Bindings`, which kube's DRA compiler adds) and the
//!   two-variable comprehensions (`ext.TwoVarComprehensions`);
//! - `strings.rs`: cel-go's strings extension at version 2;
//! - `lists.rs`: Kubernetes' lists library (version 1, with `includes`) and cel-go's lists
//!   extension at version 3;
//! - `sets.rs`: cel-go's sets extension;
//! - `regex.rs`: Kubernetes' `find` and `findAll`;
//! - `url.rs`: Kubernetes' URL library;
//! - `net.rs`: Kubernetes' IP and CIDR libraries;
//! - `format.rs`: Kubernetes' format library (`format.dns1123Label().validate(s)`, …);
//! - `quantity.rs`, `semver.rs`: Kubernetes' quantity and semver (version 1) libraries;
//! - `convert.rs`: `string(x)` as cel-go converts (a double as Go's `%g`);
//! - `format_string.rs`: `"…".format(args)` with the formatter of kube's strings version.
//!
//! Quantities, versions, IPs, CIDRs, URLs and formats are [`cel::Value::Opaque`] values.
//!
//! Limits: an expression is at most [`MAX_SELECTOR_BYTES`] long (kube's
//! `CELSelectorExpressionMaxLength`), and an evaluation spends at most [`SELECTOR_COST_LIMIT`]
//! units (kube's `CELSelectorExpressionMaxCost`), metered by [`crate::engine::rule_cost`]: each
//! library function costs what kube's `library/cost.go` (or cel-go's tracker for the function)
//! charges at run time, the work beyond reading its operands charged by the function itself or,
//! for the `cel` crate's extension functions, through `prepare.rs`.
//!
//! Left out:
//! - the `cel` crate has no type checker, so kube's compile-time checks happen when a selector is
//!   evaluated, or not at all: a selector of another type than bool fails then
//!   ([`CelError::NotBool`]), an invalid regex literal at its first use, and what kube's checker
//!   alone refuses (mixed-type list literals, a function on the wrong type) is refused by kube's
//!   API server before a scheduler sees it;
//! - durations and timestamps (`duration()`, `timestamp()` and their functions): the crate is
//!   built without its `chrono` feature, which the scheduler's `Cargo.toml` would have to enable;
//! - Kubernetes' authorizer libraries (`authz.go`): they act on the `authorizer` variable, which
//!   DRA selectors do not have;
//! - list-valued attributes (`DRAListTypeAttributes`, alpha in 1.37, off by default).
//!
//! Known differences within what is supported: a two-variable comprehension over a map visits
//! its entries in the crate's order (cel-go's is the map's insertion order); regular expressions
//! are the `regex` crate's (RE2 syntax, as Go's), their error texts after `Illegal regex:` the
//! crate's; the standard library's run-time errors are the crate's words (`Overflow from binary
//! operator 'add'` for cel-go's `integer overflow`); `"…".format(…)` writes a type inside a list
//! or a map as a string. `tests.rs` holds kube's own answers to 443 expressions
//! (`testdata/kube_answers.tsv`), costs at the limit included.

mod bind;
mod convert;
mod device;
mod error;
mod format;
mod format_string;
mod lists;
mod net;
mod optional;
mod prepare;
mod quantity;
mod regex;
mod semver;
mod sets;
mod strings;
mod url;
mod values;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr};
use cel::{Context, Env, ExecutionError, IdedExpr, Value};
use dashmap::DashMap;

pub use error::CelError;
pub use quantity::{CelQuantity, QUANTITY_TYPE_NAME};
pub use semver::{Semver, SEMVER_TYPE_NAME};

use crate::engine::devices::Device;
use crate::engine::rule_cost::{self, Metered, RunError};
use crate::engine::rules::{COMPILE_STACK_BYTES, MAX_NESTING};

/// Longest selector expression compiled, in bytes (kube's `CELSelectorExpressionMaxLength`).
pub const MAX_SELECTOR_BYTES: usize = 10 * 1024;
/// Cost units one evaluation of a selector may spend (kube's `CELSelectorExpressionMaxCost`).
pub const SELECTOR_COST_LIMIT: u64 = 1_000_000;

/// The DRA selector environment (kube's `newCompiler` over the base environment of
/// `k8s.io/apiserver/pkg/cel/environment/base.go`): the standard library, the cost meter's
/// functions, `cel.bind` and two-variable comprehensions, and the libraries of the module's doc.
fn selector_env() -> Result<Env, cel::DeclarationError> {
    let mut env = Env::stdlib();
    rule_cost::register(&mut env)?;
    prepare::register(&mut env)?;
    convert::register(&mut env)?;
    format_string::register(&mut env)?;
    optional::register(&mut env)?;
    bind::register(&mut env)?;
    quantity::register(&mut env)?;
    semver::register(&mut env)?;
    strings::register(&mut env)?;
    lists::register(&mut env)?;
    sets::register(&mut env)?;
    regex::register(&mut env)?;
    url::register(&mut env)?;
    net::register(&mut env)?;
    format::register(&mut env)?;
    Ok(env)
}

/// One compiled selector: the metered program, or why it does not compile (kube's
/// `CompilationResult`).
type Compiled = Result<Metered, CelError>;

/// Compiled DRA selectors, each expression compiled once (kube's `cel.Cache`; bounded by
/// [`MAX_KEPT_EXPRESSIONS`] instead of its LRU). Thread-safe; share one per scheduler.
pub struct SelectorCache {
    env: Result<Arc<Env>, CelError>,
    compiled: DashMap<Arc<str>, Arc<Compiled>>,
    /// Results by expression and device shape ([`SelectorCache::matches_shaped`]), at most
    /// [`MAX_KEPT_RESULTS`] per expression.
    results: DashMap<Arc<str>, Arc<ResultsByShape>>,
}

/// One expression's results by device shape.
type ResultsByShape = DashMap<u64, Result<bool, CelError>>;

/// Most results kept per expression (distinct device shapes); past it, results are computed
/// each time.
pub const MAX_KEPT_RESULTS: usize = 1 << 16;

/// Most expressions kept compiled (with their results); past it, the cache starts over.
pub const MAX_KEPT_EXPRESSIONS: usize = 4096;

impl std::fmt::Debug for SelectorCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelectorCache")
            .field("expressions", &self.compiled.len())
            .finish()
    }
}

impl Default for SelectorCache {
    fn default() -> Self {
        Self::new()
    }
}

impl SelectorCache {
    /// An empty cache over the DRA environment (kube's `cel.NewCache` with `GetCompiler`).
    pub fn new() -> Self {
        Self {
            env: selector_env()
                .map(Arc::new)
                .map_err(|e| CelError::Compile(format!("unexpected error loading CEL environment: {e}"))),
            compiled: DashMap::new(),
            results: DashMap::new(),
        }
    }

    /// The compiled expression, compiling it on first use (kube's `Cache.GetOrCompile`).
    fn get_or_compile(&self, expr: &str) -> Arc<Compiled> {
        if let Some(c) = self.compiled.get(expr) {
            return Arc::clone(c.value());
        }
        let compiled = Arc::new(self.compile(expr));
        if self.compiled.len() >= MAX_KEPT_EXPRESSIONS {
            // Snapshots bring the expressions; a stream of new ones must not grow the cache
            // without bound.
            self.compiled.clear();
            self.results.clear();
        }
        self.compiled.insert(Arc::from(expr), Arc::clone(&compiled));
        compiled
    }

    /// Whether `expr` compiles (kube's `CompileCELExpression`'s error).
    pub fn check(&self, expr: &str) -> Result<(), CelError> {
        match &*self.get_or_compile(expr) {
            Ok(_) => Ok(()),
            Err(e) => Err(e.clone()),
        }
    }

    fn compile(&self, expr: &str) -> Compiled {
        let env = self.env.as_ref().map_err(Clone::clone)?;
        if expr.len() > MAX_SELECTOR_BYTES {
            return Err(CelError::Compile(format!(
                "expression is {} bytes, over the limit of {MAX_SELECTOR_BYTES}",
                expr.len()
            )));
        }
        let syntax = |e: cel::ParseErrors| {
            let msg = match e.errors.first() {
                Some(first) if first.msg.contains("Recursion limit") => {
                    format!("expression nests deeper than the limit of {MAX_NESTING} levels")
                }
                Some(first) => format!(
                    "ERROR: <input>:{}:{}: {}",
                    first.pos.0,
                    first.pos.1,
                    first.msg.lines().next().unwrap_or_default()
                ),
                None => "invalid expression".to_string(),
            };
            CelError::Compile(msg)
        };
        // The parser recurses with large frames: compile on a thread with a stack that holds the
        // nesting limit, as the policies' rules are compiled.
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("dra-cel-compile".into())
                .stack_size(COMPILE_STACK_BYTES)
                .spawn_scoped(s, || {
                    env.parser()
                        .max_recursion_depth(MAX_NESTING)
                        .parse(expr)
                        .map_err(syntax)?;
                    let program = env.compile(expr).map_err(syntax)?;
                    let prepared = prepare::prepare(program.expression(), &mut Vec::new());
                    if let Some(name) = undeclared(&prepared, &mut Vec::new()) {
                        return Err(CelError::Compile(format!(
                            "ERROR: <input>: undeclared reference to '{name}' (in container '')"
                        )));
                    }
                    Ok(Metered::new(&prepared))
                })
                .map_err(|e| CelError::Compile(format!("cannot start the compiler thread: {e}")))?
                .join()
                .unwrap_or_else(|_| Err(CelError::Compile("the expression compiler failed".into())))
        })
    }

    /// [`SelectorCache::matches`] for a device of known `shape` (a hash of its driver and all a
    /// selector can read of it, `engine::devices::SliceIndex::shape`): devices of one shape get
    /// one evaluation. The evaluation is deterministic (its cost included), so a kept result is
    /// the one a new evaluation would give.
    pub fn matches_shaped(
        &self,
        expr: &str,
        driver: &str,
        device: &Device,
        shape: Option<u64>,
    ) -> Result<bool, CelError> {
        let Some(shape) = shape else {
            return self.matches(expr, driver, device);
        };
        let kept = match self.results.get(expr) {
            Some(k) => Arc::clone(k.value()),
            None if self.results.len() >= MAX_KEPT_EXPRESSIONS => return self.matches(expr, driver, device),
            None => Arc::clone(self.results.entry(Arc::from(expr)).or_default().value()),
        };
        if let Some(r) = kept.get(&shape) {
            return r.value().clone();
        }
        let r = self.matches(expr, driver, device);
        if kept.len() < MAX_KEPT_RESULTS {
            kept.insert(shape, r.clone());
        }
        r
    }

    /// Whether `device` of `driver` matches the selector `expr` (kube's
    /// `CompilationResult.DeviceMatches`), compiling `expr` on first use.
    pub fn matches(&self, expr: &str, driver: &str, device: &Device) -> Result<bool, CelError> {
        let compiled = self.get_or_compile(expr);
        let program = match &*compiled {
            Ok(p) => p,
            Err(e) => return Err(e.clone()),
        };
        let env = self.env.as_ref().map_err(Clone::clone)?;
        let mut context = Context::with_env(Arc::clone(env));
        context.add_variable_as_val("device", device::device_value(driver, device)?);
        let (result, _) = program.execute_within(&context, SELECTOR_COST_LIMIT);
        match result {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(CelError::NotBool(values::type_name(&other).to_string())),
            Err(RunError::Cost(e)) => Err(CelError::Runtime(e.to_string())),
            Err(RunError::Eval(e)) => Err(CelError::runtime(runtime_message(&e))),
        }
    }
}

/// Identifiers an expression may use besides `device` and its comprehensions' variables: type
/// names (`type(x) == int`) and the namespaces of qualified names.
const DECLARED: &[&str] = &[
    "device",
    "bool",
    "bytes",
    "double",
    "dyn",
    "int",
    "list",
    "map",
    "null_type",
    "string",
    "type",
    "uint",
    "optional",
    "kubernetes",
    "net",
];

/// The first identifier of `e` that is neither declared nor bound by an enclosing
/// comprehension: what cel-go's checker refuses as `undeclared reference`.
fn undeclared(e: &IdedExpr, bound: &mut Vec<String>) -> Option<String> {
    match &e.expr {
        Expr::Unspecified | Expr::Literal(_) => None,
        Expr::Ident(name) => {
            (!DECLARED.contains(&name.as_str()) && !bound.iter().any(|b| b == name)).then(|| name.clone())
        }
        Expr::Call(c) => c
            .target
            .as_deref()
            .and_then(|t| undeclared(t, bound))
            .or_else(|| c.args.iter().find_map(|a| undeclared(a, bound))),
        Expr::Comprehension(c) => {
            if let Some(n) = undeclared(&c.iter_range, bound).or_else(|| undeclared(&c.accu_init, bound)) {
                return Some(n);
            }
            let before = bound.len();
            bound.push(c.iter_var.clone());
            if let Some(v2) = &c.iter_var2 {
                bound.push(v2.clone());
            }
            bound.push(c.accu_var.clone());
            let found = [&c.loop_cond, &c.loop_step, &c.result]
                .into_iter()
                .find_map(|part| undeclared(part, bound));
            bound.truncate(before);
            found
        }
        Expr::List(l) => l.elements.iter().find_map(|x| undeclared(x, bound)),
        Expr::Map(m) => m.entries.iter().find_map(|en| entry_undeclared(&en.expr, bound)),
        Expr::Struct(st) => st.entries.iter().find_map(|en| entry_undeclared(&en.expr, bound)),
        Expr::Select(sel) => undeclared(&sel.operand, bound),
    }
}

fn entry_undeclared(e: &EntryExpr, bound: &mut Vec<String>) -> Option<String> {
    match e {
        EntryExpr::StructField(f) => undeclared(&f.value, bound),
        EntryExpr::MapEntry(m) => undeclared(&m.key, bound).or_else(|| undeclared(&m.value, bound)),
    }
}

/// cel-go's words for the errors a selector meets most.
fn runtime_message(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::FunctionError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}
