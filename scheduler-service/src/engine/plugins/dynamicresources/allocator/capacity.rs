//! Consumable capacity, as kube 1.37's incubating allocator computes it with
//! `DRAConsumableCapacity` and `DRAFractionalCapacityRange` on
//! (`k8s.io/dynamic-resource-allocation/structured/internal/incubating/consumable_capacity.go`):
//! what a request consumes of a device's capacity (its `requestPolicy`'s default, valid values
//! and valid range rounding the request up), whether it violates the policy, and whether it fits
//! beside what the device's other shares consume.
//!
//! Quantities are compared by value. kube compares a consumed amount with the policy's default
//! as Go structs (`requestedVal == *policy.Default`), which also compares how each was written;
//! here the values are compared. Requests name capacities as the slice wrote them (kube
//! compares the names as written); for a device that neither allows multiple allocations nor has
//! a policy the engine keeps only the qualified name, and a request's name matches it qualified
//! or not. A rounded-up amount is written in the canonical form of the
//! step's format (binary suffixes when the step has one, decimal otherwise), as Go serializes
//! `resource.NewQuantity(v, step.Format)`.

use std::collections::BTreeMap;

use crate::engine::devices::{Amount, CapacityPolicy, CapacityRange, Consumed, Device};
use crate::engine::quantity::Quantity;

const NANOS_PER_MILLI: i128 = 1_000_000;
const NANOS_PER_UNIT: i128 = 1_000_000_000;

/// kube's `errCapacityRequestNotRepresentable`.
const NOT_REPRESENTABLE: &str = "capacity request cannot be represented in the device's range arithmetic";

/// A device's capacity as the policy code reads it: value and policy.
#[derive(Debug, Clone, Copy)]
struct Cap<'a> {
    /// The name as the slice wrote it (the qualified name when unknown).
    name: &'a str,
    /// The qualified name.
    qualified: &'a str,
    value: Quantity,
    /// The value as written (`None`: the device has no policy entry; written canonically).
    text: Option<&'a str>,
    policy: Option<&'a CapacityPolicy>,
}

impl<'a> Cap<'a> {
    fn of(device: &'a Device, name: &'a str, value: Quantity) -> Self {
        match device.capacity_policies.get(name) {
            Some(p) => Cap {
                name: p.name.as_str(),
                qualified: name,
                value,
                text: Some(p.value.text.as_str()),
                policy: p.has_policy.then_some(p),
            },
            None => Cap {
                name,
                qualified: name,
                value,
                text: None,
                policy: None,
            },
        }
    }

    /// Whether a request's capacity name `key` names this capacity.
    fn named(&self, key: &str) -> bool {
        if self.text.is_some() {
            return key == self.name;
        }
        key == self.qualified || self.qualified.rsplit_once('/').is_some_and(|(_, id)| id == key)
    }

    /// The request's amount for this capacity.
    fn requested<'r>(&self, requests: &'r BTreeMap<String, Amount>) -> Option<&'r Amount> {
        if self.text.is_some() {
            return requests.get(self.name);
        }
        requests.iter().find(|(k, _)| self.named(k)).map(|(_, a)| a)
    }

    fn value_amount(&self) -> Amount {
        Amount {
            value: self.value,
            text: self.text.map_or_else(|| canonical(self.value, false), str::to_string),
        }
    }
}

/// Go's `MilliValue()` when lossless (kube's `safeMilliValue`).
fn safe_milli(q: Quantity) -> Option<i64> {
    let n = q.nanos();
    if n % NANOS_PER_MILLI != 0 {
        return None;
    }
    i64::try_from(n / NANOS_PER_MILLI).ok()
}

/// kube's `useMilli` with `fractionalCapacityRange` on.
fn use_milli(range: &CapacityRange) -> bool {
    for (i, q) in [&range.min, &range.max, &range.step].into_iter().enumerate() {
        let Some(q) = q else { continue };
        let Some(m) = safe_milli(q.value) else {
            return false;
        };
        if i == 2 && m < 1 {
            return false;
        }
    }
    true
}

fn is_binary(text: &str) -> bool {
    text.trim_end().ends_with('i')
}

/// The canonical text Go writes for `q` in a binary (`BinarySI`) or decimal (`DecimalSI`) format.
pub fn canonical(q: Quantity, binary: bool) -> String {
    let n = q.nanos();
    if binary && n % NANOS_PER_UNIT == 0 && (n / NANOS_PER_UNIT).abs() >= 1024 {
        let mut v = n / NANOS_PER_UNIT;
        let mut e = 0;
        while e < 6 && v % 1024 == 0 {
            v /= 1024;
            e += 1;
        }
        let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][e];
        return format!("{v}{suffix}");
    }
    if n == 0 {
        return "0".into();
    }
    let (mut m, mut e) = (n, -9i32);
    while e < 18 && m % 1000 == 0 {
        m /= 1000;
        e += 3;
    }
    let suffix = match e {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        0 => "",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        _ => "E",
    };
    format!("{m}{suffix}")
}

/// kube's `roundUpRange`.
fn round_up_range(requested: &Amount, range: &CapacityRange, min: &Amount) -> Result<Amount, String> {
    if requested.value < min.value {
        return Ok(min.clone());
    }
    let Some(step) = &range.step else {
        return Ok(requested.clone());
    };
    let binary = is_binary(&step.text);
    if use_milli(range) {
        let Some(req) = safe_milli(requested.value) else {
            return Err(format!(
                "{NOT_REPRESENTABLE}: request {} is not a representable milli value",
                requested.text
            ));
        };
        let step_m = step.value.milli_value();
        let min_m = min.value.milli_value();
        let added = req - min_m;
        let mut n = added / step_m;
        if added % step_m != 0 {
            n += 1;
        }
        if n > (i64::MAX - min_m) / step_m {
            return Err(format!(
                "{NOT_REPRESENTABLE}: rounding request {} up to the next step passes the milli-value range",
                requested.text
            ));
        }
        let v = Quantity::from_nanos(i128::from(min_m + step_m * n) * NANOS_PER_MILLI);
        return Ok(Amount {
            value: v,
            text: canonical(v, binary),
        });
    }
    if requested.value.nanos() > i128::from(i64::MAX) * NANOS_PER_UNIT {
        return Err(format!(
            "{NOT_REPRESENTABLE}: request {} exceeds MaxInt64",
            requested.text
        ));
    }
    let req = requested.value.value();
    let step_i = step.value.value();
    let min_i = min.value.value();
    if step_i == 0 {
        // Go divides by zero here (refused by API validation).
        return Ok(requested.clone());
    }
    let added = req - min_i;
    let mut n = added / step_i;
    if added % step_i != 0 {
        n += 1;
    }
    if min_i >= 0 && n > (i64::MAX - min_i) / step_i {
        return Err(format!(
            "{NOT_REPRESENTABLE}: rounding request {} up to the next step passes MaxInt64",
            requested.text
        ));
    }
    let v = Quantity::from_nanos(i128::from(min_i.wrapping_add(step_i.wrapping_mul(n))) * NANOS_PER_UNIT);
    Ok(Amount {
        value: v,
        text: canonical(v, binary),
    })
}

/// kube's `calculateConsumedCapacity`.
fn calculate_consumed(requested: Option<&Amount>, cap: Cap<'_>) -> Result<Amount, String> {
    let Some(requested) = requested else {
        // fillEmptyRequest.
        return Ok(match cap.policy.and_then(|p| p.default.as_ref()) {
            Some(d) => d.clone(),
            None => cap.value_amount(),
        });
    };
    let Some(policy) = cap.policy else {
        return Ok(requested.clone());
    };
    if let Some(min) = policy.valid_range.as_ref().and_then(|r| r.min.as_ref().map(|m| (r, m))) {
        return round_up_range(requested, min.0, min.1);
    }
    if !policy.valid_values.is_empty() {
        // roundUpValidValues.
        return Ok(policy
            .valid_values
            .iter()
            .find(|v| requested.value <= v.value)
            .unwrap_or(requested)
            .clone());
    }
    Ok(requested.clone())
}

/// kube's `violatesPolicy`.
fn violates_policy(consumed: Quantity, policy: Option<&CapacityPolicy>) -> bool {
    let Some(policy) = policy else { return false };
    if policy.default.as_ref().is_some_and(|d| d.value == consumed) {
        return false;
    }
    if let Some(range) = &policy.valid_range {
        if range.max.as_ref().is_some_and(|m| consumed > m.value) {
            return true;
        }
        if let Some(step) = &range.step {
            let min = range.min.as_ref().map_or(Quantity::ZERO, |m| m.value);
            let (requested, step, min) = if use_milli(range) {
                let Some(r) = safe_milli(consumed) else { return true };
                (r, step.value.milli_value(), min.milli_value())
            } else {
                (consumed.value(), step.value.value(), min.value())
            };
            if step != 0 && (requested.wrapping_sub(min)) % step != 0 {
                return true;
            }
        }
        return false;
    }
    if !policy.valid_values.is_empty() {
        return !policy.valid_values.iter().any(|v| v.value == consumed);
    }
    false
}

/// What each capacity of the device is consumed by `requests`, in the device's capacity order,
/// or a fatal error (kube's `capacity %q: ...`).
fn resolve<'d>(requests: &BTreeMap<String, Amount>, device: &'d Device) -> Result<Vec<(Cap<'d>, Amount)>, String> {
    let mut out = Vec::with_capacity(device.capacity.len());
    for (name, value) in &device.capacity {
        let cap = Cap::of(device, name, *value);
        let shown = cap.name;
        let consumed =
            calculate_consumed(cap.requested(requests), cap).map_err(|e| format!("capacity {shown:?}: {e}"))?;
        if consumed.value.is_negative() {
            return Err(format!("capacity {shown:?}: capacity value is negative"));
        }
        out.push((cap, consumed));
    }
    Ok(out)
}

/// kube's `CmpRequestOverCapacity`: whether `requests` fit on `device` beside what its shares
/// consume (`current`, allocated; `allocating`, being allocated), within the policies. `Err`
/// is fatal (an unrepresentable request, a negative amount).
pub fn fits(
    current: Option<&Consumed>,
    requests: &BTreeMap<String, Amount>,
    device: &Device,
    allocating: Option<&Consumed>,
) -> Result<bool, String> {
    let caps: Vec<Cap<'_>> = device.capacity.iter().map(|(n, v)| Cap::of(device, n, *v)).collect();
    if requests.keys().any(|k| !caps.iter().any(|c| c.named(k))) {
        return Ok(false);
    }
    let consumed = resolve(requests, device)?;
    for (cap, amount) in &consumed {
        // Shares record capacity by the name the slice wrote.
        let name = cap.name;
        if violates_policy(amount.value, cap.policy) {
            return Ok(false);
        }
        let mut total = amount.value.nanos();
        if let Some(c) = current.and_then(|c| c.get(name)) {
            total = total.saturating_add(c.nanos());
        }
        if let Some(a) = allocating.and_then(|a| a.get(name)) {
            total = total.saturating_add(a.nanos());
        }
        if total > cap.value.nanos() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// kube's `GetConsumedCapacityFromRequest`: what a share of `device` consumes for `requests`.
pub fn consumed_by(requests: &BTreeMap<String, Amount>, device: &Device) -> Result<BTreeMap<String, Amount>, String> {
    Ok(resolve(requests, device)?
        .into_iter()
        .map(|(cap, amount)| (cap.name.to_string(), amount))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Amount {
        Amount::parse(s).expect("quantity")
    }

    fn range(min: &str, max: Option<&str>, step: Option<&str>) -> CapacityPolicy {
        CapacityPolicy {
            name: "memory".into(),
            value: q("0"),
            default: None,
            valid_values: Vec::new(),
            valid_range: Some(CapacityRange {
                min: Some(q(min)),
                max: max.map(q),
                step: step.map(q),
            }),
            has_policy: true,
        }
    }

    fn cap<'a>(p: &'a CapacityPolicy, value: &str) -> Cap<'a> {
        Cap {
            name: "memory",
            qualified: "dra.example.com/memory",
            value: q(value).value,
            text: Some("cap"),
            policy: Some(p),
        }
    }

    // consumable_capacity_test.go TestCalculateConsumedCapacity / TestViolatesPolicy (the cases
    // that do not depend on how a quantity was written).
    #[test]
    fn rounding_up_follows_kube() {
        let p = range("1Gi", Some("10Gi"), Some("1Gi"));
        let c = cap(&p, "40Gi");
        assert_eq!(calculate_consumed(Some(&q("512Mi")), c).unwrap().value, q("1Gi").value);
        assert_eq!(calculate_consumed(Some(&q("1500Mi")), c).unwrap().text, "2Gi");
        assert_eq!(calculate_consumed(Some(&q("3Gi")), c).unwrap().value, q("3Gi").value);
        assert!(violates_policy(q("11Gi").value, Some(&p)));
        assert!(!violates_policy(q("10Gi").value, Some(&p)));
        // Fractional range: milli arithmetic.
        let p = range("500m", Some("4"), Some("250m"));
        let c = cap(&p, "4");
        assert_eq!(calculate_consumed(Some(&q("600m")), c).unwrap().text, "750m");
        assert_eq!(calculate_consumed(Some(&q("1.9")), c).unwrap().text, "2");
        assert!(violates_policy(q("600m").value, Some(&p)));
        assert!(!violates_policy(q("750m").value, Some(&p)));
        // Not representable in milli: fatal.
        let e = calculate_consumed(Some(&q("700500u")), c).unwrap_err();
        assert!(e.starts_with(NOT_REPRESENTABLE), "{e}");
        // No step: the request itself.
        let p = range("1Gi", None, None);
        assert_eq!(
            calculate_consumed(Some(&q("1500Mi")), cap(&p, "4Gi")).unwrap().text,
            "1500Mi"
        );
        // Valid values: the first at least the request, else the request.
        let p = CapacityPolicy {
            valid_values: vec![q("1Gi"), q("4Gi"), q("8Gi")],
            has_policy: true,
            ..CapacityPolicy::default()
        };
        let c = cap(&p, "8Gi");
        assert_eq!(calculate_consumed(Some(&q("2Gi")), c).unwrap().text, "4Gi");
        assert_eq!(calculate_consumed(Some(&q("9Gi")), c).unwrap().text, "9Gi");
        assert!(violates_policy(q("9Gi").value, Some(&p)));
        assert!(!violates_policy(q("4Gi").value, Some(&p)));
        // No request: the default, else the capacity's value.
        let p = CapacityPolicy {
            default: Some(q("1Gi")),
            has_policy: true,
            ..range("1Gi", None, Some("1Gi"))
        };
        assert_eq!(calculate_consumed(None, cap(&p, "8Gi")).unwrap().text, "1Gi");
        let none = Cap {
            name: "memory",
            qualified: "dra.example.com/memory",
            value: q("8Gi").value,
            text: Some("8Gi"),
            policy: None,
        };
        assert_eq!(calculate_consumed(None, none).unwrap().text, "8Gi");
    }

    #[test]
    fn canonical_forms_are_gos() {
        assert_eq!(canonical(q("2Gi").value, true), "2Gi");
        assert_eq!(canonical(q("1536Mi").value, true), "1536Mi");
        assert_eq!(canonical(q("1000").value, true), "1k");
        assert_eq!(canonical(q("2000").value, false), "2k");
        assert_eq!(canonical(q("1.5").value, false), "1500m");
        assert_eq!(canonical(q("0").value, false), "0");
    }
}
