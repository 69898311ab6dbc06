//! Kubernetes' quantity library (`k8s.io/apiserver/pkg/cel/library/quantity.go`): `quantity()`,
//! `isQuantity()`, `compareTo`, `isGreaterThan`, `isLessThan`, `asInteger`,
//! `asApproximateFloat`, `isInteger`, `add`, `sub`, `sign`. Each costs 1 beyond reading its
//! operands (kube's `library/cost.go`), `quantity` and `isQuantity` their text.

use cel::common::types::{CelDouble, Type};
use cel::common::types::{INT_TYPE, STRING_TYPE};
use cel::common::value::CowVal;
use cel::objects::Opaque;
use cel::{Env, ExecutionError};

use super::values::{bool_out, int_arg, int_out, opaque_arg, opaque_out, ord_int, string_arg};
use crate::engine::quantity::Quantity;

/// The CEL type name of quantities (kube's `apiservercel.QuantityType`).
pub const QUANTITY_TYPE_NAME: &str = "kubernetes.Quantity";

const NANOS_PER_UNIT: i128 = 1_000_000_000;

fn quantity_type() -> Type {
    Type::new_opaque_type(QUANTITY_TYPE_NAME)
}

fn quantity_of(args: &[CowVal<'_, '_>], i: usize, f: &str) -> Result<CelQuantity, ExecutionError> {
    opaque_arg::<CelQuantity>(args, i, f)
}

/// Declares the library in `env`.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    env.add_type(quantity_type())?;
    let q = quantity_type;
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
    Ok(())
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
