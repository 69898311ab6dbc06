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
//! ([`Semver`]). Besides CEL's standard library, the environment has Kubernetes' quantity library
//! (`k8s.io/apiserver/pkg/cel/library/quantity.go`: `quantity()`, `isQuantity()`, `compareTo`,
//! `isGreaterThan`, `isLessThan`, `asInteger`, `asApproximateFloat`, `isInteger`, `add`, `sub`,
//! `sign`) and semver library (`semverlib.go`: `semver()`, `isSemver()`, with their normalizing
//! `(string, bool)` forms, `major`, `minor`, `patch`, `compareTo`, `isGreaterThan`,
//! `isLessThan`). Quantities and versions are [`cel::Value::Opaque`] values.
//!
//! Limits: an expression is at most [`MAX_SELECTOR_BYTES`] long (kube's
//! `CELSelectorExpressionMaxLength`), and an evaluation spends at most [`SELECTOR_COST_LIMIT`]
//! units (kube's `CELSelectorExpressionMaxCost`), metered by [`crate::engine::rule_cost`].
//!
//! Left out: the `cel` crate has no type checker, so kube's compile-time check that a selector
//! is of type bool (`must evaluate to bool or the unknown type, not …`) happens when it is
//! evaluated ([`CelError::NotBool`]); cel-go's `cel.bind` (ext.Bindings) and the other
//! Kubernetes libraries of the base environment (lists, regex, URLs, IP, CIDR, format) are not
//! declared.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr};
use cel::common::traits::{Container, Indexer, Iterable, Sizer};
use cel::common::types::{CelBool, CelDouble, CelInt, CelMap, CelMapKey, CelString, Type};
use cel::common::types::{BOOL_TYPE, INT_TYPE, MAP_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::objects::Opaque;
use cel::{Context, Env, ExecutionError, IdedExpr, Value};
use dashmap::DashMap;

use crate::engine::devices::{AttributeValue, Device};
use crate::engine::quantity::Quantity;
use crate::engine::rule_cost::{self, Metered, RunError};
use crate::engine::rules::{COMPILE_STACK_BYTES, MAX_NESTING};

/// Longest selector expression compiled, in bytes (kube's `CELSelectorExpressionMaxLength`).
pub const MAX_SELECTOR_BYTES: usize = 10 * 1024;
/// Cost units one evaluation of a selector may spend (kube's `CELSelectorExpressionMaxCost`).
pub const SELECTOR_COST_LIMIT: u64 = 1_000_000;
/// The CEL type name of quantities (kube's `apiservercel.QuantityType`).
pub const QUANTITY_TYPE_NAME: &str = "kubernetes.Quantity";
/// The CEL type name of semantic versions (kube's `apiservercel.SemverType`).
pub const SEMVER_TYPE_NAME: &str = "kubernetes.Semver";

const NANOS_PER_UNIT: i128 = 1_000_000_000;

/// Why a selector could not be compiled or evaluated. The messages are kube's: a compile error
/// is `compilation failed: …` (`CompileCELExpression`), a runtime error is cel-go's text with
/// kube's hint after a missing key (`EnhanceRuntimeError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CelError {
    /// The expression does not compile (or is over the limits).
    #[error("compilation failed: {0}")]
    Compile(String),
    /// The evaluation failed.
    #[error("{0}")]
    Runtime(String),
    /// The expression evaluated to something else than a bool (kube's `DeviceMatches`).
    #[error("CEL result of type {0} could not be converted to bool: unsupported type conversion from '{0}' to bool")]
    NotBool(String),
    /// A version attribute is not a semantic version (kube's `DeviceMatches`).
    #[error("attribute {name}: parse semantic version: {message}")]
    Attribute {
        /// The attribute's qualified name.
        name: String,
        /// The parser's complaint.
        message: String,
    },
}

impl CelError {
    /// kube's `cel.EnhanceRuntimeError`: a missing key gets a hint about optional chaining.
    fn runtime(message: String) -> Self {
        if message.contains("no such key:") {
            Self::Runtime(format!(
                "{message}. consider using CEL optional chaining (.? followed by orValue()) or guarding the check \
                 with has() for optional fields"
            ))
        } else {
            Self::Runtime(message)
        }
    }
}

/// A quantity as CEL sees it (kube's `apiservercel.Quantity`): exact, in nano-units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct CelQuantity {
    /// The amount in nano-units (10^-9).
    pub nanos: i128,
}

impl Opaque for CelQuantity {
    fn runtime_type_name(&self) -> &str {
        QUANTITY_TYPE_NAME
    }
}

impl From<&Quantity> for CelQuantity {
    fn from(q: &Quantity) -> Self {
        Self { nanos: q.nanos() }
    }
}

impl CelQuantity {
    /// `resource.Quantity.AsInt64`: the value when it is a whole number within `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        if self.nanos % NANOS_PER_UNIT != 0 {
            return None;
        }
        i64::try_from(self.nanos / NANOS_PER_UNIT).ok()
    }

    /// `resource.Quantity.AsApproximateFloat64`.
    pub fn as_f64(&self) -> f64 {
        // Whole units and the fraction apart, so that large values keep their precision.
        let whole = (self.nanos / NANOS_PER_UNIT) as f64;
        let frac = (self.nanos % NANOS_PER_UNIT) as f64 / 1e9;
        whole + frac
    }
}

/// A semantic version 2.0.0 (kube's `apiservercel.Semver`, blang/semver's `Version`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Semver {
    /// Major.
    pub major: u64,
    /// Minor.
    pub minor: u64,
    /// Patch.
    pub patch: u64,
    /// Pre-release identifiers.
    pub pre: Vec<String>,
    /// Build metadata identifiers (ignored in comparisons).
    pub build: Vec<String>,
}

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        SEMVER_TYPE_NAME
    }
}

fn is_numeric(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn parse_component(s: &str, what: &str) -> Result<u64, String> {
    if !is_numeric(s) {
        return Err(format!("Invalid character(s) found in {what} number {s:?}"));
    }
    if s.len() > 1 && s.starts_with('0') {
        let cap = format!("{}{}", what[..1].to_uppercase(), &what[1..]);
        return Err(format!("{cap} number must not contain leading zeroes {s:?}"));
    }
    s.parse::<u64>().map_err(|e| e.to_string())
}

impl Semver {
    /// blang/semver's `Parse`: strict semantic versioning 2.0.0 (`1.2.3`, `1.2.3-rc.1+build`).
    pub fn parse(s: &str) -> Result<Self, String> {
        if s.is_empty() {
            return Err("Version string empty".into());
        }
        let parts: Vec<&str> = s.splitn(3, '.').collect();
        let [major, minor, rest] = parts.as_slice() else {
            return Err("No Major.Minor.Patch elements found".into());
        };
        let major = parse_component(major, "major")?;
        let minor = parse_component(minor, "minor")?;
        let (rest, build) = match rest.split_once('+') {
            Some((r, b)) => (r, Some(b)),
            None => (*rest, None),
        };
        let (patch, pre) = match rest.split_once('-') {
            Some((p, pre)) => (p, Some(pre)),
            None => (rest, None),
        };
        let patch = parse_component(patch, "patch")?;
        let ident_ok = |id: &str| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        let mut pre_ids = Vec::new();
        if let Some(pre) = pre {
            for id in pre.split('.') {
                if !ident_ok(id) {
                    return Err(format!("Invalid character(s) found in prerelease {id:?}"));
                }
                if is_numeric(id) && id.len() > 1 && id.starts_with('0') {
                    return Err(format!(
                        "Numeric PreRelease version must not contain leading zeroes {id:?}"
                    ));
                }
                pre_ids.push(id.to_string());
            }
        }
        let mut build_ids = Vec::new();
        if let Some(build) = build {
            for id in build.split('.') {
                if !ident_ok(id) {
                    return Err(format!("Invalid character(s) found in build meta data {id:?}"));
                }
                build_ids.push(id.to_string());
            }
        }
        Ok(Self {
            major,
            minor,
            patch,
            pre: pre_ids,
            build: build_ids,
        })
    }

    /// kube's `normalizeAndParse` (`semver(s, true)`): a leading `v` dropped, leading zeros
    /// dropped, missing minor and patch as 0.
    pub fn parse_normalized(s: &str) -> Result<Self, String> {
        let s = s.strip_prefix('v').unwrap_or(s);
        let mut parts: Vec<String> = s.splitn(3, '.').map(str::to_string).collect();
        for p in &mut parts {
            if p.len() > 1 {
                let trimmed = p.trim_start_matches('0');
                *p = if trimmed.is_empty() || !trimmed.as_bytes()[0].is_ascii_digit() {
                    format!("0{trimmed}")
                } else {
                    trimmed.to_string()
                };
            }
        }
        if parts.len() < 3 {
            if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
                return Err("short version cannot contain PreRelease/Build meta data".into());
            }
            while parts.len() < 3 {
                parts.push("0".into());
            }
        }
        Self::parse(&parts.join("."))
    }

    /// blang/semver's `Compare`: -1, 0 or 1; build metadata ignored.
    pub fn compare(&self, other: &Self) -> Ordering {
        let core = (self.major, self.minor, self.patch).cmp(&(other.major, other.minor, other.patch));
        if core != Ordering::Equal {
            return core;
        }
        match (self.pre.is_empty(), other.pre.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Greater,
            (false, true) => return Ordering::Less,
            (false, false) => {}
        }
        for (a, b) in self.pre.iter().zip(&other.pre) {
            let ord = match (is_numeric(a), is_numeric(b)) {
                (true, true) => {
                    let (x, y) = (
                        a.parse::<u64>().unwrap_or(u64::MAX),
                        b.parse::<u64>().unwrap_or(u64::MAX),
                    );
                    x.cmp(&y)
                }
                (true, false) => Ordering::Less,
                (false, true) => Ordering::Greater,
                (false, false) => a.cmp(b),
            };
            if ord != Ordering::Equal {
                return ord;
            }
        }
        self.pre.len().cmp(&other.pre.len())
    }
}

fn ord_int(o: Ordering) -> i64 {
    match o {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }
}

/// A map whose missing keys are empty maps (kube's `newStringInterfaceMapWithDefault`): the
/// outer `device.attributes` and `device.capacity`.
#[derive(Debug, Clone)]
struct DefaultingMap {
    inner: CelMap<'static>,
    empty: CelMap<'static>,
}

impl Val for DefaultingMap {
    fn get_type(&self) -> &Type {
        &MAP_TYPE
    }

    fn cel_type() -> &'static Type {
        &MAP_TYPE
    }

    fn as_container(&self) -> Option<&dyn Container> {
        self.inner.as_container()
    }

    fn as_indexer<'b, 'w>(&'b self) -> Option<&'b (dyn Indexer + 'w)>
    where
        Self: 'w,
    {
        Some(self)
    }

    fn as_iterable<'b, 'w>(&'b self) -> Option<&'b (dyn Iterable + 'w)>
    where
        Self: 'w,
    {
        self.inner.as_iterable()
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        self.inner.as_sizer()
    }

    fn equals(&self, other: &dyn Val) -> bool {
        match other.downcast_ref::<DefaultingMap>() {
            Some(other) => self.inner.equals(&other.inner),
            None => self.inner.equals(other),
        }
    }

    fn clone_as_boxed<'w>(&self) -> Box<dyn Val + 'w>
    where
        Self: 'w,
    {
        Box::new(self.clone())
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

impl cel::common::value::StaticVal for DefaultingMap {}

impl Indexer for DefaultingMap {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        match Indexer::get(&self.inner, idx) {
            Err(ExecutionError::NoSuchKey(_)) => Ok(CowVal::Borrowed(&self.empty)),
            other => other,
        }
    }

    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}

/// `(domain, id)` of a qualified name, the driver's domain for an unqualified one (kube's
/// `parseQualifiedName`).
fn split_name<'a>(name: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    match name.split_once('/') {
        Some((domain, id)) => (domain, id),
        None => (driver, name),
    }
}

fn boxed(value: Value) -> Result<Box<dyn Val>, ExecutionError> {
    Box::<dyn Val>::try_from(value)
}

fn domain_map(domains: HashMap<String, HashMap<String, Value>>) -> Result<Box<dyn Val>, ExecutionError> {
    let mut outer: HashMap<CelMapKey<'static>, Box<dyn Val>> = HashMap::with_capacity(domains.len());
    for (domain, ids) in domains {
        let mut inner: HashMap<CelMapKey<'static>, Box<dyn Val>> = HashMap::with_capacity(ids.len());
        for (id, v) in ids {
            inner.insert(CelMapKey::String(CelString::from(id)), boxed(v)?);
        }
        outer.insert(
            CelMapKey::String(CelString::from(domain)),
            Box::new(CelMap::from(inner)),
        );
    }
    Ok(Box::new(DefaultingMap {
        inner: CelMap::from(outer),
        empty: CelMap::default(),
    }))
}

/// The `device` variable (kube's `DeviceMatches` input).
fn device_value(driver: &str, device: &Device) -> Result<Box<dyn Val>, CelError> {
    let internal = |e: ExecutionError| CelError::Runtime(e.to_string());
    let mut attributes: HashMap<String, HashMap<String, Value>> = HashMap::new();
    for (name, attr) in &device.attributes {
        let value = match attr {
            AttributeValue::Int(i) => Value::Int(*i),
            AttributeValue::Bool(b) => Value::Bool(*b),
            AttributeValue::String(s) => Value::from(s.clone()),
            AttributeValue::Version(v) => {
                let parsed = Semver::parse(v).map_err(|message| CelError::Attribute {
                    name: name.clone(),
                    message,
                })?;
                Value::Opaque(Arc::new(parsed))
            }
        };
        let (domain, id) = split_name(name, driver);
        attributes
            .entry(domain.to_string())
            .or_default()
            .insert(id.to_string(), value);
    }
    let mut capacity: HashMap<String, HashMap<String, Value>> = HashMap::new();
    for (name, q) in &device.capacity {
        let (domain, id) = split_name(name, driver);
        capacity
            .entry(domain.to_string())
            .or_default()
            .insert(id.to_string(), Value::Opaque(Arc::new(CelQuantity::from(q))));
    }
    let mut fields: HashMap<CelMapKey<'static>, Box<dyn Val>> = HashMap::with_capacity(4);
    fields.insert(
        CelMapKey::String(CelString::from("driver".to_string())),
        Box::new(CelString::from(driver.to_string())),
    );
    fields.insert(
        CelMapKey::String(CelString::from("allowMultipleAllocations".to_string())),
        Box::new(CelBool::from(device.allow_multiple_allocations)),
    );
    fields.insert(
        CelMapKey::String(CelString::from("attributes".to_string())),
        domain_map(attributes).map_err(internal)?,
    );
    fields.insert(
        CelMapKey::String(CelString::from("capacity".to_string())),
        domain_map(capacity).map_err(internal)?,
    );
    Ok(Box::new(CelMap::from(fields)))
}

// ---- the quantity and semver libraries ----

fn quantity_type() -> Type {
    Type::new_opaque_type(QUANTITY_TYPE_NAME)
}

fn semver_type() -> Type {
    Type::new_opaque_type(SEMVER_TYPE_NAME)
}

fn no_overload(function: &str) -> ExecutionError {
    ExecutionError::function_error(function, "no such overload")
}

fn opaque_arg<T: Opaque + Clone>(args: &[CowVal<'_, '_>], i: usize, function: &str) -> Result<T, ExecutionError> {
    let arg = args.get(i).ok_or_else(|| no_overload(function))?;
    match Value::try_from(arg.as_ref())? {
        Value::Opaque(o) => o.downcast_ref::<T>().cloned().ok_or_else(|| no_overload(function)),
        _ => Err(no_overload(function)),
    }
}

fn string_arg(args: &[CowVal<'_, '_>], i: usize, function: &str) -> Result<String, ExecutionError> {
    let arg = args.get(i).ok_or_else(|| no_overload(function))?;
    match Value::try_from(arg.as_ref())? {
        Value::String(s) => Ok(s.to_string()),
        _ => Err(no_overload(function)),
    }
}

fn int_arg(args: &[CowVal<'_, '_>], i: usize, function: &str) -> Result<i64, ExecutionError> {
    let arg = args.get(i).ok_or_else(|| no_overload(function))?;
    arg.downcast_ref::<CelInt>()
        .map(|i| *i.inner())
        .ok_or_else(|| no_overload(function))
}

fn bool_arg(args: &[CowVal<'_, '_>], i: usize, function: &str) -> Result<bool, ExecutionError> {
    let arg = args.get(i).ok_or_else(|| no_overload(function))?;
    arg.downcast_ref::<CelBool>()
        .map(|b| *b.inner())
        .ok_or_else(|| no_overload(function))
}

fn opaque_out<'b, 'v>(o: impl Opaque) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let b: Box<dyn Val + 'v> = boxed(Value::Opaque(Arc::new(o)))?;
    Ok(CowVal::from(b))
}

fn bool_out<'b, 'v>(b: bool) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Ok(CowVal::owned(CelBool::from(b)))
}

fn int_out<'b, 'v>(i: i64) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Ok(CowVal::owned(CelInt::from(i)))
}

fn quantity_of(args: &[CowVal<'_, '_>], i: usize, f: &str) -> Result<CelQuantity, ExecutionError> {
    opaque_arg::<CelQuantity>(args, i, f)
}

fn semver_of(args: &[CowVal<'_, '_>], i: usize, f: &str) -> Result<Semver, ExecutionError> {
    opaque_arg::<Semver>(args, i, f)
}

fn q_string_to_quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let s = string_arg(&args, 0, "quantity")?;
    let q = Quantity::parse(&s).map_err(|e| ExecutionError::function_error("quantity", e))?;
    opaque_out(CelQuantity::from(&q))
}

fn q_is_quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let s = string_arg(&args, 0, "isQuantity")?;
    bool_out(Quantity::parse(&s).is_ok())
}

fn q_sign<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let q = quantity_of(&args, 0, "sign")?;
    int_out(ord_int(q.nanos.cmp(&0)))
}

fn q_is_greater_than<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = (
        quantity_of(&args, 0, "isGreaterThan")?,
        quantity_of(&args, 1, "isGreaterThan")?,
    );
    bool_out(a > b)
}

fn q_is_less_than<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = (
        quantity_of(&args, 0, "isLessThan")?,
        quantity_of(&args, 1, "isLessThan")?,
    );
    bool_out(a < b)
}

fn q_compare_to<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = (quantity_of(&args, 0, "compareTo")?, quantity_of(&args, 1, "compareTo")?);
    int_out(ord_int(a.cmp(&b)))
}

fn q_as_float<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let q = quantity_of(&args, 0, "asApproximateFloat")?;
    Ok(CowVal::owned(CelDouble::from(q.as_f64())))
}

fn q_as_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let q = quantity_of(&args, 0, "asInteger")?;
    match q.as_i64() {
        Some(v) => int_out(v),
        None => Err(ExecutionError::function_error(
            "asInteger",
            "cannot convert value to integer",
        )),
    }
}

fn q_is_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let q = quantity_of(&args, 0, "isInteger")?;
    bool_out(q.as_i64().is_some())
}

fn q_add<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = (quantity_of(&args, 0, "add")?, quantity_of(&args, 1, "add")?);
    opaque_out(CelQuantity {
        nanos: a.nanos.saturating_add(b.nanos),
    })
}

fn q_add_int<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = (quantity_of(&args, 0, "add")?, int_arg(&args, 1, "add")?);
    opaque_out(CelQuantity {
        nanos: a.nanos.saturating_add(i128::from(b).saturating_mul(NANOS_PER_UNIT)),
    })
}

fn q_sub<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = (quantity_of(&args, 0, "sub")?, quantity_of(&args, 1, "sub")?);
    opaque_out(CelQuantity {
        nanos: a.nanos.saturating_sub(b.nanos),
    })
}

fn q_sub_int<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = (quantity_of(&args, 0, "sub")?, int_arg(&args, 1, "sub")?);
    opaque_out(CelQuantity {
        nanos: a.nanos.saturating_sub(i128::from(b).saturating_mul(NANOS_PER_UNIT)),
    })
}

fn s_string_to_semver<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let s = string_arg(&args, 0, "semver")?;
    let v = Semver::parse(&s).map_err(|e| ExecutionError::function_error("semver", e))?;
    opaque_out(v)
}

fn s_string_bool_to_semver<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let s = string_arg(&args, 0, "semver")?;
    let normalize = bool_arg(&args, 1, "semver")?;
    let v = if normalize {
        Semver::parse_normalized(&s)
    } else {
        Semver::parse(&s)
    };
    opaque_out(v.map_err(|e| ExecutionError::function_error("semver", e))?)
}

fn s_is_semver<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let s = string_arg(&args, 0, "isSemver")?;
    bool_out(Semver::parse(&s).is_ok())
}

fn s_is_semver_bool<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let s = string_arg(&args, 0, "isSemver")?;
    let normalize = bool_arg(&args, 1, "isSemver")?;
    bool_out(if normalize {
        Semver::parse_normalized(&s).is_ok()
    } else {
        Semver::parse(&s).is_ok()
    })
}

fn s_is_greater_than<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = (
        semver_of(&args, 0, "isGreaterThan")?,
        semver_of(&args, 1, "isGreaterThan")?,
    );
    bool_out(a.compare(&b) == Ordering::Greater)
}

fn s_is_less_than<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = (semver_of(&args, 0, "isLessThan")?, semver_of(&args, 1, "isLessThan")?);
    bool_out(a.compare(&b) == Ordering::Less)
}

fn s_compare_to<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = (semver_of(&args, 0, "compareTo")?, semver_of(&args, 1, "compareTo")?);
    int_out(ord_int(a.compare(&b)))
}

fn s_major<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    int_out(i64::try_from(semver_of(&args, 0, "major")?.major).unwrap_or(i64::MAX))
}

fn s_minor<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    int_out(i64::try_from(semver_of(&args, 0, "minor")?.minor).unwrap_or(i64::MAX))
}

fn s_patch<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    int_out(i64::try_from(semver_of(&args, 0, "patch")?.patch).unwrap_or(i64::MAX))
}

/// The DRA selector environment: the standard library, the cost meter's functions, and
/// Kubernetes' quantity and semver libraries (kube's `newCompiler`).
fn selector_env() -> Result<Env, cel::DeclarationError> {
    let mut env = Env::stdlib();
    rule_cost::register(&mut env)?;
    env.add_type(quantity_type())?;
    env.add_type(semver_type())?;
    let q = quantity_type;
    let s = semver_type;
    env.add_overload(
        "quantity",
        "string_to_quantity",
        vec![STRING_TYPE],
        q_string_to_quantity,
    )?;
    env.add_overload("isQuantity", "is_quantity_string", vec![STRING_TYPE], q_is_quantity)?;
    env.add_overload("sign", "quantity_sign", vec![q()], q_sign)?;
    // kube documents `<Quantity>.sign()` too; cel-go accepts the receiver form of a global
    // function of one argument only through the member declaration, so both are declared.
    env.add_member_overload("sign", "quantity_sign_member", q(), vec![], q_sign)?;
    env.add_member_overload(
        "isGreaterThan",
        "quantity_is_greater_than",
        q(),
        vec![q()],
        q_is_greater_than,
    )?;
    env.add_member_overload("isLessThan", "quantity_is_less_than", q(), vec![q()], q_is_less_than)?;
    env.add_member_overload("compareTo", "quantity_compare_to", q(), vec![q()], q_compare_to)?;
    env.add_member_overload("asApproximateFloat", "quantity_get_float", q(), vec![], q_as_float)?;
    env.add_member_overload("asInteger", "quantity_get_int", q(), vec![], q_as_integer)?;
    env.add_member_overload("isInteger", "quantity_is_integer", q(), vec![], q_is_integer)?;
    env.add_member_overload("add", "quantity_add", q(), vec![q()], q_add)?;
    env.add_member_overload("add", "quantity_add_int", q(), vec![INT_TYPE], q_add_int)?;
    env.add_member_overload("sub", "quantity_sub", q(), vec![q()], q_sub)?;
    env.add_member_overload("sub", "quantity_sub_int", q(), vec![INT_TYPE], q_sub_int)?;
    env.add_overload("semver", "string_to_semver", vec![STRING_TYPE], s_string_to_semver)?;
    env.add_overload(
        "semver",
        "string_bool_to_semver",
        vec![STRING_TYPE, BOOL_TYPE],
        s_string_bool_to_semver,
    )?;
    env.add_overload("isSemver", "is_semver_string", vec![STRING_TYPE], s_is_semver)?;
    env.add_overload(
        "isSemver",
        "is_semver_string_bool",
        vec![STRING_TYPE, BOOL_TYPE],
        s_is_semver_bool,
    )?;
    env.add_member_overload(
        "isGreaterThan",
        "semver_is_greater_than",
        s(),
        vec![s()],
        s_is_greater_than,
    )?;
    env.add_member_overload("isLessThan", "semver_is_less_than", s(), vec![s()], s_is_less_than)?;
    env.add_member_overload("compareTo", "semver_compare_to", s(), vec![s()], s_compare_to)?;
    env.add_member_overload("major", "semver_major", s(), vec![], s_major)?;
    env.add_member_overload("minor", "semver_minor", s(), vec![], s_minor)?;
    env.add_member_overload("patch", "semver_patch", s(), vec![], s_patch)?;
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
                    cel::parser::Parser::new()
                        .max_recursion_depth(MAX_NESTING)
                        .parse(expr)
                        .map_err(syntax)?;
                    let program = env.compile(expr).map_err(syntax)?;
                    if let Some(name) = undeclared(program.expression(), &mut Vec::new()) {
                        return Err(CelError::Compile(format!(
                            "ERROR: <input>: undeclared reference to '{name}' (in container '')"
                        )));
                    }
                    Ok(Metered::new(program.expression()))
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
        context.add_variable_as_val("device", device_value(driver, device)?);
        let (result, _) = program.execute_within(&context, SELECTOR_COST_LIMIT);
        match result {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(CelError::NotBool(type_name(&other).to_string())),
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

/// CEL's name of a value's type.
fn type_name(v: &Value) -> &str {
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
