//! The `device` variable of a selector (kube's `CompilationResult.DeviceMatches` in
//! `k8s.io/dynamic-resource-allocation/cel/compile.go`): its driver, attributes and capacity by
//! domain, and `allowMultipleAllocations`.

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::traits::{Container, Indexer, Iterable, Sizer};
use cel::common::types::MAP_TYPE;
use cel::common::types::{CelBool, CelMap, CelMapKey, CelString, Type};
use cel::common::value::{CowVal, Val};
use cel::{ExecutionError, Value};

use super::quantity::CelQuantity;
use super::semver::Semver;
use super::values::boxed;
use super::CelError;
use crate::engine::devices::{AttributeValue, Device};

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
pub(super) fn device_value(driver: &str, device: &Device) -> Result<Box<dyn Val>, CelError> {
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
