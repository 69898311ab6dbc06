//! Kubernetes resource quantities (`250m`, `1Gi`, `1e3`), parsed exactly as
//! `k8s.io/apimachinery/pkg/api/resource.ParseQuantity` parses them, and converted to integers as
//! `Quantity.Value()` and `Quantity.MilliValue()` convert them.
//!
//! The grammar is the one documented on the Go `Quantity` type: an optional sign, a decimal number
//! (`1`, `1.5`, `.5`, `1.`), then a suffix that is a binary SI unit (`Ki Mi Gi Ti Pi Ei`, powers of
//! 1024), a decimal SI unit (`n u m "" k M G T P E`, powers of 1000) or a decimal exponent (`e3`,
//! `E-3`, `e+3`). The rules below are those of the Go source (`quantity.go`, `suffix.go`,
//! `math.go`, `amount.go`, `scale_int.go`) and of its tests (`quantity_test.go`,
//! `quantity_subnano_test.go`, `quantity_overflow_test.go`):
//!
//! - **Scanner.** The string is split by the same hand-written scanner as `parseQuantityString`:
//!   sign, digits, optional `.` and digits, letters from `eEinumkKMGTP`, optional sign, digits.
//!   Anything else (including an empty string and any whitespace: `" 1"` and `"1 "` are rejected;
//!   only Kubernetes' JSON/CBOR decoders trim) is [`QuantityError::FormatWrong`]. A suffix the
//!   scanner lets through but that is not a known unit (`1i`, `1e`, `0.1mi`, `1K`) is
//!   [`QuantityError::Suffix`]. There is no case folding.
//! - **Digit-less numbers.** Like `ParseQuantity`, a number with no digit at all is zero when
//!   Kubernetes takes its int64 fast path: `+`, `-`, `.`, `Gi`, `k`, `E`, `e5` all parse as 0.
//!   When the same digit-less number would go to its `inf.Dec` path (a binary suffix `Pi`/`Ei`,
//!   or a decimal scale below nano such as `e-10`), Kubernetes fails with `ErrNumeric`, and so
//!   does this parser ([`QuantityError::Numeric`]). Upstream keeps this as frozen behaviour
//!   (`quantity_exact_policy_test.go`, `parserLeniencyRef`).
//! - **Precision.** Amounts finer than a nano-unit are rounded away from zero to the next nano-unit
//!   (`0.9n` and `1e-100` give `1n`, `-1e-100` gives `-1n`, `3.001n` gives `4n`); zero stays zero
//!   whatever its exponent. This is `amount.Round(amount, Nano, inf.RoundUp)` in `ParseQuantity`.
//! - **Binary cap.** A binary-suffixed amount larger than 2^63-1 in magnitude is capped at it,
//!   keeping its sign (`8Ei` and `9Ei` give 9223372036854775807, `-8Ei` gives
//!   -9223372036854775807), as `ParseQuantity` caps at `maxAllowed`. Decimal amounts are not capped
//!   (`12E` is 1.2e19, `1e100` is 1e100).
//! - **Zero.** `-0`, `-0.0`, `-0Ki` are zero and not negative; a non-zero negative amount below a
//!   nano-unit rounds to `-1n` and is negative.
//! - **Exponents.** Kubernetes reads the exponent with `strconv.ParseInt(_, 10, 64)` (an exponent
//!   outside int64 is `ErrSuffix`) and then narrows it to int32: Kubernetes 1.37 and earlier wrap
//!   it modulo 2^32 (`1e4294967297` parsed as `1e1`), current upstream rejects exponents past
//!   int32 (#141203, #142395), and exponents near the int32 limits make its scale arithmetic
//!   wrap or hang (#141166). This parser rejects every exponent outside the int32 range with
//!   [`QuantityError::Suffix`] and values every exponent inside it exactly (`1e-2147483648` is
//!   `1n`, as the documented grammar and `quantity_subnano_test.go` say).
//! - **Representation and saturation.** A quantity is kept as an `i128` count of nano-units,
//!   saturated at ±(2^127-1) nano-units (about ±1.7e29 units). Every value whose [`Quantity::value`]
//!   or [`Quantity::milli_value`] fits an `i64` is exact; quantities beyond the saturation bound
//!   compare equal to it.
//! - **Integer accessors.** [`Quantity::value`] and [`Quantity::milli_value`] round up to the next
//!   integer away from zero (`0.1` has value 1, `1.5m` has milli-value 2, `-1.5` has value -2), as
//!   the Go doc of `Value` says and `int64Amount.AsScaledInt64` does (older releases' `inf.Dec`
//!   path in `scale_int.go` rounded some negative fractions toward +infinity instead; upstream
//!   now pins away from zero, e.g. `-9.5000000001Gi` has value -10200547329). A result outside
//!   `i64` saturates at `i64::MAX` or `i64::MIN`. The Go docs say an overflowing result "silently
//!   overflows" and is undefined (older code wraps or returns 0); the upstream overflow burndown
//!   (#141166, `quantity_overflow_test.go`) pins these accessors to the same int64 rails as here
//!   (`1E` has milli-value `MaxInt64`, `-8Ei` has value -9223372036854775807 and milli-value
//!   `MinInt64`).

use std::str::FromStr;

/// Nano-units in one unit.
const NANOS_PER_UNIT: u64 = 1_000_000_000;
/// Nano-units in one milli-unit.
const NANOS_PER_MILLI: u64 = 1_000_000;
/// Largest magnitude kept, in nano-units (2^127-1); larger magnitudes saturate to it.
const MAX_NANOS: u128 = i128::MAX.unsigned_abs();
/// The cap `ParseQuantity` puts on binary-suffixed amounts (2^63-1 units), in nano-units.
const BINARY_CAP_NANOS: u128 = i64::MAX.unsigned_abs() as u128 * NANOS_PER_UNIT as u128;
/// Exponent of the smallest power of ten `ParseQuantity` keeps on its int64 fast path (nano).
const FAST_PATH_MIN_SCALE: i32 = -9;
/// Largest binary exponent `ParseQuantity` keeps on its int64 fast path for a one-digit number (Ti).
const FAST_PATH_MAX_BINARY_EXPONENT: u32 = 40;
/// 10^0 ..= 10^38, every power of ten a `u128` holds.
const POW10: [u128; 39] = pow10_table();

/// Builds [`POW10`] at compile time.
const fn pow10_table() -> [u128; 39] {
    let mut table = [1u128; 39];
    let mut i = 1;
    while i < table.len() {
        table[i] = table[i - 1] * 10;
        i += 1;
    }
    table
}

/// Why a quantity string is not a valid Kubernetes quantity.
///
/// The variants and messages are Kubernetes' `ErrFormatWrong`, `ErrNumeric` and `ErrSuffix`, and
/// are returned for the same inputs (see the module documentation for the exponent range).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The string is empty or is not a number followed by a suffix (`1.2.3`, `1 Gi`, `abc`, `1Gb`).
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    FormatWrong,
    /// The number has no digit where Kubernetes needs its decimal parser (`Pi`, `Ei`, `e-10`).
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    /// The suffix is not a known unit or exponent, or the exponent is outside int32 (`1i`, `1e`).
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

/// A parsed Kubernetes quantity, kept exactly as a saturating `i128` count of nano-units.
///
/// Equality and ordering are by value: `1Gi` equals `1073741824` and `1000m` equals `1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Quantity {
    /// The amount in nano-units (10^-9), saturated at ±(2^127-1).
    nanos: i128,
}

impl FromStr for Quantity {
    type Err = QuantityError;

    /// Parses a quantity string exactly as Kubernetes' `ParseQuantity` (see [`Quantity::parse`]).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Quantity {
    /// The zero quantity.
    pub const ZERO: Quantity = Quantity { nanos: 0 };

    /// Parse a quantity string exactly as Kubernetes' `ParseQuantity`.
    ///
    /// Runs in one pass over the bytes without allocating.
    ///
    /// # Errors
    ///
    /// [`QuantityError::FormatWrong`] when the string is not a number followed by a suffix,
    /// [`QuantityError::Suffix`] when the suffix is unknown or its exponent is outside int32, and
    /// [`QuantityError::Numeric`] for the digit-less numbers Kubernetes also rejects (`Pi`, `e-10`).
    pub fn parse(s: &str) -> Result<Self, QuantityError> {
        parse_bytes(s.as_bytes())
    }

    /// Kubernetes' `Value()`: the integer value rounded up.
    ///
    /// Rounds away from zero (`0.1` gives 1, `-1.5` gives -2) and saturates at `i64::MIN`/`i64::MAX`.
    #[must_use]
    pub fn value(&self) -> i64 {
        scaled_ceil::<NANOS_PER_UNIT>(self.nanos)
    }

    /// Kubernetes' `MilliValue()`: the value in thousandths rounded up.
    ///
    /// Rounds away from zero (`1.5m` gives 2, `1n` gives 1) and saturates at `i64::MIN`/`i64::MAX`.
    #[must_use]
    pub fn milli_value(&self) -> i64 {
        scaled_ceil::<NANOS_PER_MILLI>(self.nanos)
    }

    /// True when the quantity is below zero.
    #[must_use]
    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// True when the quantity is zero (`0`, `-0`, `0Ki`, and the digit-less forms such as `+`).
    #[must_use]
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// The exact amount in nano-units (10^-9), saturated at ±(2^127-1).
    #[must_use]
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    /// The quantity of `nanos` nano-units.
    #[must_use]
    pub const fn from_nanos(nanos: i128) -> Self {
        Self { nanos }
    }
}

/// `ceil(|nanos| / PER)` with the sign of `nanos`, saturated to `i64`.
///
/// `PER` is a constant so that the common 64-bit division compiles to a multiplication.
fn scaled_ceil<const PER: u64>(nanos: i128) -> i64 {
    let magnitude = nanos.unsigned_abs();
    let rounded = match u64::try_from(magnitude) {
        Ok(m) => u128::from(m / PER + u64::from(!m.is_multiple_of(PER))),
        Err(_) => magnitude / u128::from(PER) + u128::from(!magnitude.is_multiple_of(u128::from(PER))),
    };
    let rounded = i128::try_from(rounded).unwrap_or(i128::MAX);
    if nanos < 0 {
        i64::try_from(-rounded).unwrap_or(i64::MIN)
    } else {
        i64::try_from(rounded).unwrap_or(i64::MAX)
    }
}

/// The pieces of a quantity string, as `parseQuantityString` splits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Parts<'a> {
    /// A leading `-` was present.
    negative: bool,
    /// The number has at least one digit (leading zeros included).
    has_digit: bool,
    /// Digits before the decimal point, without leading zeros (possibly empty).
    num: &'a [u8],
    /// Digits after the decimal point (possibly empty).
    denom: &'a [u8],
    /// Everything after the number: unit letters, then an optional sign and digits.
    suffix: &'a [u8],
}

/// Splits a quantity string like Kubernetes' `parseQuantityString`.
fn scan(s: &[u8]) -> Result<Parts<'_>, QuantityError> {
    let end = s.len();
    let mut pos = 0;
    let mut negative = false;
    match s.first() {
        Some(b'-') => {
            negative = true;
            pos = 1;
        }
        Some(b'+') => pos = 1,
        _ => {}
    }
    let sign_len = pos;
    while pos < end && s[pos] == b'0' {
        pos += 1;
    }
    let had_zeros = pos > sign_len;
    let num_start = pos;
    while pos < end && s[pos].is_ascii_digit() {
        pos += 1;
    }
    let num = &s[num_start..pos];
    let mut denom: &[u8] = &[];
    if pos < end && s[pos] == b'.' {
        pos += 1;
        let denom_start = pos;
        while pos < end && s[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[denom_start..pos];
    }
    let suffix_start = pos;
    while pos < end
        && matches!(
            s[pos],
            b'e' | b'E' | b'i' | b'n' | b'u' | b'm' | b'k' | b'K' | b'M' | b'G' | b'T' | b'P'
        )
    {
        pos += 1;
    }
    if pos < end && matches!(s[pos], b'-' | b'+') {
        pos += 1;
    }
    while pos < end && s[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityError::FormatWrong);
    }
    Ok(Parts {
        negative,
        has_digit: had_zeros || !num.is_empty() || !denom.is_empty(),
        num,
        denom,
        suffix: &s[suffix_start..],
    })
}

/// What a suffix multiplies the number by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Suffix {
    /// 10^exponent (decimal SI units and decimal exponents).
    Decimal(i32),
    /// 2^exponent (binary SI units; the exponent is 10, 20, ..., 60).
    Binary(u32),
}

/// Interprets a suffix like Kubernetes' `suffixer.interpret`, with exponents limited to int32.
fn interpret(suffix: &[u8]) -> Result<Suffix, QuantityError> {
    Ok(match suffix {
        b"" => Suffix::Decimal(0),
        b"n" => Suffix::Decimal(-9),
        b"u" => Suffix::Decimal(-6),
        b"m" => Suffix::Decimal(-3),
        b"k" => Suffix::Decimal(3),
        b"M" => Suffix::Decimal(6),
        b"G" => Suffix::Decimal(9),
        b"T" => Suffix::Decimal(12),
        b"P" => Suffix::Decimal(15),
        b"E" => Suffix::Decimal(18),
        b"Ki" => Suffix::Binary(10),
        b"Mi" => Suffix::Binary(20),
        b"Gi" => Suffix::Binary(30),
        b"Ti" => Suffix::Binary(40),
        b"Pi" => Suffix::Binary(50),
        b"Ei" => Suffix::Binary(60),
        [b'e' | b'E', rest @ ..] => Suffix::Decimal(parse_exponent(rest).ok_or(QuantityError::Suffix)?),
        _ => return Err(QuantityError::Suffix),
    })
}

/// Parses `[+-]?[0-9]+` like `strconv.ParseInt(_, 10, 64)`, accepting only values that fit `i32`.
fn parse_exponent(s: &[u8]) -> Option<i32> {
    let (negative, digits) = match s {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    let limit = i64::from(i32::MAX) + 1;
    let mut magnitude: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        magnitude = magnitude * 10 + i64::from(c - b'0');
        if magnitude > limit {
            return None;
        }
    }
    i32::try_from(if negative { -magnitude } else { magnitude }).ok()
}

/// Parses the bytes of a quantity string; the body of [`Quantity::parse`].
fn parse_bytes(s: &[u8]) -> Result<Quantity, QuantityError> {
    if s.is_empty() {
        return Err(QuantityError::FormatWrong);
    }
    let parts = scan(s)?;
    let suffix = interpret(parts.suffix)?;
    if !parts.has_digit {
        // ParseQuantity's int64 fast path reads a digit-less number as 0; its inf.Dec path
        // (binary exponent above 40, or decimal scale below nano) fails with ErrNumeric.
        let fast_path = match suffix {
            Suffix::Decimal(exponent) => exponent >= FAST_PATH_MIN_SCALE,
            Suffix::Binary(exponent) => exponent <= FAST_PATH_MAX_BINARY_EXPONENT,
        };
        return if fast_path {
            Ok(Quantity::ZERO)
        } else {
            Err(QuantityError::Numeric)
        };
    }
    let magnitude = match suffix {
        Suffix::Decimal(exponent) => decimal_nanos(parts.num, parts.denom, exponent),
        Suffix::Binary(exponent) => binary_nanos(parts.num, parts.denom, exponent),
    };
    let nanos = i128::try_from(magnitude).unwrap_or(i128::MAX);
    Ok(Quantity {
        nanos: if parts.negative { -nanos } else { nanos },
    })
}

/// The value of ASCII digit `c`.
fn digit(c: u8) -> u128 {
    u128::from(c.wrapping_sub(b'0'))
}

/// `ceil(num.denom * 10^exponent * 10^9)`, saturated at [`MAX_NANOS`].
fn decimal_nanos(num: &[u8], denom: &[u8], exponent: i32) -> u128 {
    // The digits num ++ denom form an integer D; the amount in nano-units is D * 10^shift.
    let fraction_len = i64::try_from(denom.len()).unwrap_or(i64::MAX);
    let shift = i64::from(exponent).saturating_add(9).saturating_sub(fraction_len);
    let digits = num.iter().chain(denom).map(|&c| digit(c));
    if shift >= 0 {
        let mut acc: u128 = 0;
        if num.len().saturating_add(denom.len()) <= 19 {
            // Fast path: at most 19 digits fit a u64 (10^19 - 1 < 2^64), so no overflow check.
            let mut small: u64 = 0;
            for &c in num.iter().chain(denom) {
                small = small * 10 + u64::from(c.wrapping_sub(b'0'));
            }
            acc = u128::from(small);
        } else {
            for d in digits {
                match acc.checked_mul(10).and_then(|a| a.checked_add(d)) {
                    Some(a) => acc = a,
                    None => return MAX_NANOS,
                }
            }
        }
        if acc == 0 {
            return 0;
        }
        let power = usize::try_from(shift).ok().and_then(|i| POW10.get(i));
        power
            .and_then(|&p| acc.checked_mul(p))
            .map_or(MAX_NANOS, |v| v.min(MAX_NANOS))
    } else {
        // The last -shift digits are below a nano-unit: keep the rest, round up if any is non-zero.
        let below_nano = usize::try_from(shift.unsigned_abs()).unwrap_or(usize::MAX);
        let whole_len = num.len().saturating_add(denom.len()).saturating_sub(below_nano);
        let mut acc: u128 = 0;
        let mut round_up = false;
        for (i, d) in digits.enumerate() {
            if i < whole_len {
                match acc.checked_mul(10).and_then(|a| a.checked_add(d)) {
                    Some(a) => acc = a,
                    None => return MAX_NANOS,
                }
            } else if d != 0 {
                round_up = true;
                break;
            }
        }
        acc.saturating_add(u128::from(round_up)).min(MAX_NANOS)
    }
}

/// `ceil(num.denom * 2^exponent * 10^9)`, capped at [`BINARY_CAP_NANOS`] (`exponent` <= 60).
fn binary_nanos(num: &[u8], denom: &[u8], exponent: u32) -> u128 {
    // Long multiplication of the decimal digits by 2^exponent, from the last digit to the first,
    // so that an arbitrarily long fraction is handled exactly without allocating. Each product
    // digit lands at the position of the input digit; the carry stays below 2^exponent.
    let multiplier: u128 = 1u128 << exponent.min(60);
    let mut carry: u128 = 0;
    let mut fraction_nanos: u128 = 0; // product digits 1..=9 after the point, as nano-units
    let mut round_up = false; // a non-zero product digit 10 or more places after the point
    for (i, &c) in denom.iter().enumerate().rev() {
        let t = digit(c) * multiplier + carry;
        carry = t / 10;
        let product_digit = t % 10;
        if i < 9 {
            fraction_nanos += product_digit * POW10[8 - i];
        } else {
            round_up |= product_digit != 0;
        }
    }
    let mut whole: u128 = 0;
    let mut place: Option<u128> = Some(1);
    for &c in num.iter().rev() {
        let t = digit(c) * multiplier + carry;
        carry = t / 10;
        let product_digit = t % 10;
        if product_digit != 0 {
            let Some(p) = place else { return BINARY_CAP_NANOS };
            whole = whole.saturating_add(product_digit.saturating_mul(p));
        }
        place = place.and_then(|p| p.checked_mul(10));
    }
    if carry != 0 {
        let Some(p) = place else { return BINARY_CAP_NANOS };
        whole = whole.saturating_add(carry.saturating_mul(p));
    }
    if whole > i64::MAX.unsigned_abs().into() {
        return BINARY_CAP_NANOS;
    }
    (whole * u128::from(NANOS_PER_UNIT) + fraction_nanos + u128::from(round_up)).min(BINARY_CAP_NANOS)
}

#[cfg(test)]
#[path = "quantity_tests.rs"]
mod tests;
