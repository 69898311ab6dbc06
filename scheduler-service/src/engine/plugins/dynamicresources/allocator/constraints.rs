//! Claim constraints while devices are picked (kube's `constraint.go`): `matchAttribute` and
//! `distinctAttribute`.

use super::Constraint;
use crate::engine::devices::{AttributeValue, ConstraintKind, Device, DeviceConstraint};

/// kube's `lookupAttribute`: by fully qualified name, or by id within the driver's domain.
pub(super) fn lookup_attribute<'a>(device: &'a Device, driver: &str, name: &str) -> Option<&'a AttributeValue> {
    if let Some(v) = device.attributes.get(name) {
        return Some(v);
    }
    let (domain, id) = name.split_once('/')?;
    if domain != driver {
        return None;
    }
    device.attributes.get(id)
}

pub(super) fn same_kind_equal(a: &AttributeValue, b: &AttributeValue) -> bool {
    a == b
}

impl<'a> Constraint<'a> {
    pub(super) fn new(c: &'a DeviceConstraint) -> Self {
        let (attribute, distinct) = match &c.kind {
            ConstraintKind::MatchAttribute(a) => (a.as_str(), false),
            ConstraintKind::DistinctAttribute(a) => (a.as_str(), true),
        };
        Self {
            requests: &c.requests,
            attribute,
            distinct,
            values: Vec::new(),
        }
    }

    /// Whether the constraint names the request (or its subrequest).
    pub(super) fn applies(&self, request: &str, sub: Option<&str>) -> bool {
        if self.requests.is_empty() {
            return true;
        }
        self.requests.iter().any(|r| {
            r == request || sub.is_some_and(|s| r.strip_prefix(request).and_then(|x| x.strip_prefix('/')) == Some(s))
        })
    }

    pub(super) fn add(&mut self, request: &str, sub: Option<&str>, device: &'a Device, driver: &str) -> bool {
        if !self.applies(request, sub) {
            return true;
        }
        let Some(value) = lookup_attribute(device, driver, self.attribute) else {
            return false;
        };
        if self.distinct {
            if self.values.iter().any(|v| same_kind_equal(v, value)) {
                return false;
            }
        } else if let Some(first) = self.values.first() {
            if !same_kind_equal(first, value) {
                return false;
            }
        }
        self.values.push(value);
        true
    }

    pub(super) fn remove(&mut self, request: &str, sub: Option<&str>) {
        if self.applies(request, sub) {
            self.values.pop();
        }
    }
}
