use super::*;

/// Nano-units of `mantissa * 10^exponent`, for `exponent >= -9` (Kubernetes' `decQuantity`).
fn dec(mantissa: i128, exponent: i32) -> i128 {
    let power = u32::try_from(exponent + 9).expect("exponent >= -9");
    mantissa * 10i128.pow(power)
}

/// Parses `s` or fails the test with the input in the message.
fn q(s: &str) -> Quantity {
    Quantity::parse(s).unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
}

/// Parses `s` and returns its error, failing the test if it parses.
fn err(s: &str) -> QuantityError {
    match Quantity::parse(s) {
        Ok(v) => panic!("{s:?} should not parse, got {v:?}"),
        Err(e) => e,
    }
}

const MAX: i64 = i64::MAX;
const MIN: i64 = i64::MIN;

/// quantity_test.go TestQuantityParse: the `table` of accepted inputs and their exact values,
/// as `decQuantity(mantissa, exponent)`; `maxAllowed` is 2^63-1.
const PARSE_TABLE: &[(&str, i128, i32)] = &[
    ("0", 0, 0),
    ("0n", 0, 0),
    ("0u", 0, 0),
    ("0m", 0, 0),
    ("0Ki", 0, 0),
    ("0k", 0, 0),
    ("0Mi", 0, 0),
    ("0M", 0, 0),
    ("0Gi", 0, 0),
    ("0G", 0, 0),
    ("0Ti", 0, 0),
    ("0T", 0, 0),
    // Quantity less numbers are allowed
    ("1", 1, 0),
    // Binary suffixes
    ("1Ki", 1024, 0),
    ("8Ki", 8 * 1024, 0),
    ("7Mi", 7 * 1024 * 1024, 0),
    ("6Gi", 6 * 1024 * 1024 * 1024, 0),
    ("5Ti", 5 * 1024 * 1024 * 1024 * 1024, 0),
    ("4Pi", 4 * 1024 * 1024 * 1024 * 1024 * 1024, 0),
    ("3Ei", 3 * 1024 * 1024 * 1024 * 1024 * 1024 * 1024, 0),
    ("10Ti", 10 * 1024 * 1024 * 1024 * 1024, 0),
    ("100Ti", 100 * 1024 * 1024 * 1024 * 1024, 0),
    // Decimal suffixes
    ("5n", 5, -9),
    ("4u", 4, -6),
    ("3m", 3, -3),
    ("9", 9, 0),
    ("8k", 8, 3),
    ("50k", 5, 4),
    ("7M", 7, 6),
    ("6G", 6, 9),
    ("5T", 5, 12),
    ("40T", 4, 13),
    ("300T", 3, 14),
    ("2P", 2, 15),
    ("1E", 1, 18),
    // Decimal exponents
    ("1E-3", 1, -3),
    ("1e3", 1, 3),
    ("1E6", 1, 6),
    ("1e9", 1, 9),
    ("1E12", 1, 12),
    ("1e15", 1, 15),
    ("1E18", 1, 18),
    // Nonstandard but still parsable
    ("1e14", 1, 14),
    ("1e13", 1, 13),
    ("1e3", 1, 3),
    ("100.035k", 100035, 0),
    // Things that look like floating point
    ("0.001", 1, -3),
    ("0.0005k", 5, -1),
    ("0.005", 5, -3),
    ("0.05", 5, -2),
    ("0.5", 5, -1),
    ("0.00050k", 5, -1),
    ("0.00500", 5, -3),
    ("0.05000", 5, -2),
    ("0.50000", 5, -1),
    ("0.5e0", 5, -1),
    ("0.5e-1", 5, -2),
    ("0.5e-2", 5, -3),
    ("0.5e0", 5, -1),
    ("10.035M", 10035, 3),
    ("1.2e3", 12, 2),
    ("1.3E+6", 13, 5),
    ("1.40e9", 14, 8),
    ("1.53E12", 153, 10),
    ("1.6e15", 16, 14),
    ("1.7E18", 17, 17),
    ("9.01", 901, -2),
    ("8.1k", 81, 2),
    ("7.123456M", 7123456, 0),
    ("6.987654321G", 6987654321, 0),
    ("5.444T", 5444, 9),
    ("40.1T", 401, 11),
    ("300.2T", 3002, 11),
    ("2.5P", 25, 14),
    ("1.01E", 101, 16),
    // Things that saturate/round
    ("3.001n", 4, -9),
    ("1.1E-9", 2, -9),
    ("0.0000000001", 1, -9),
    ("0.0000000005", 1, -9),
    ("0.00000000050", 1, -9),
    ("0.5e-9", 1, -9),
    ("0.9n", 1, -9),
    ("0.00000012345", 124, -9),
    ("0.00000012354", 124, -9),
    ("9Ei", i64::MAX as i128, 0),
    ("9223372036854775807Ki", i64::MAX as i128, 0),
    ("12E", 12, 18),
    // We'll accept fractional binary stuff, too.
    ("100.035Ki", 10243584, -2),
    ("0.5Mi", 512 * 1024, 0),
    ("0.05Gi", 536870912, -1),
    ("0.025Ti", 274877906944, -1),
    // Things written by trolls
    ("0.000000000001Ki", 2, -9), // rounds up, changes format
    (".001", 1, -3),
    (".0001k", 100, -3),
    ("1.", 1, 0),
    ("1.G", 1, 9),
];

#[test]
fn parses_the_kubernetes_parse_table() {
    for &(input, mantissa, exponent) in PARSE_TABLE {
        assert_eq!(q(input).nanos(), dec(mantissa, exponent), "{input}");
    }
}

#[test]
fn negated_and_plus_signed_table_entries_parse_to_negation_and_same_value() {
    // quantity_test.go TestQuantityParse: "Try the negative version of everything" and
    // "Try everything with an explicit +".
    for &(input, mantissa, exponent) in PARSE_TABLE {
        assert_eq!(q(&format!("-{input}")).nanos(), -dec(mantissa, exponent), "-{input}");
        assert_eq!(q(&format!("+{input}")).nanos(), dec(mantissa, exponent), "+{input}");
    }
}

#[test]
fn rejects_the_kubernetes_invalid_table() {
    // quantity_test.go TestQuantityParse: `invalid`, with the error ParseQuantity returns.
    let cases = [
        ("1.1.M", QuantityError::FormatWrong),
        ("1+1.0M", QuantityError::FormatWrong),
        ("0.1mi", QuantityError::Suffix),
        ("0.1am", QuantityError::FormatWrong),
        ("aoeu", QuantityError::FormatWrong),
        (".5i", QuantityError::Suffix),
        ("1i", QuantityError::Suffix),
        ("-3.01i", QuantityError::Suffix),
        ("-3.01e-", QuantityError::Suffix),
        // trailing whitespace is forbidden
        (" 1", QuantityError::FormatWrong),
        ("1 ", QuantityError::FormatWrong),
    ];
    for (input, expected) in cases {
        assert_eq!(err(input), expected, "{input:?}");
    }
    // quantity_test.go TestQuantityParse: "expected empty string to return error".
    assert_eq!(err(""), QuantityError::FormatWrong);
    // quantity_test.go TestQuantityParseNonNumericPanic and TestQuantityValueSet.
    assert_eq!(err("Non-Numeric"), QuantityError::FormatWrong);
    assert_eq!(err("invalid"), QuantityError::FormatWrong);
}

#[test]
fn rejects_malformed_strings() {
    // What parseQuantityString (FormatWrong) and suffixer.interpret (Suffix) say about them.
    // Note that `.`, `+` and `Gi` are not here: Kubernetes accepts them as 0 (see
    // digitless_numbers_follow_parse_quantity).
    let cases = [
        ("1.2.3", QuantityError::FormatWrong),
        ("abc", QuantityError::FormatWrong),
        ("1Gb", QuantityError::FormatWrong),
        ("1 Gi", QuantityError::FormatWrong),
        ("1\tGi", QuantityError::FormatWrong),
        ("1Gi ", QuantityError::FormatWrong),
        ("\n1", QuantityError::FormatWrong),
        ("--1", QuantityError::Suffix),
        ("+-1", QuantityError::Suffix),
        ("1-", QuantityError::Suffix),
        ("1e+-3", QuantityError::FormatWrong),
        ("1e3.5", QuantityError::FormatWrong),
        ("1,5", QuantityError::FormatWrong),
        ("1_000", QuantityError::FormatWrong),
        ("0x10", QuantityError::FormatWrong),
        ("1µ", QuantityError::FormatWrong),
        ("١", QuantityError::FormatWrong),
        ("1e", QuantityError::Suffix),
        ("1E+", QuantityError::Suffix),
        ("1i", QuantityError::Suffix),
        ("1K", QuantityError::Suffix),
        ("1gi", QuantityError::FormatWrong),
        ("1KI", QuantityError::FormatWrong),
        ("1Kii", QuantityError::Suffix),
        ("1mm", QuantityError::Suffix),
        ("1ee3", QuantityError::Suffix),
        ("1Ki3", QuantityError::Suffix),
        ("1m3", QuantityError::Suffix),
        ("e", QuantityError::Suffix),
        ("i", QuantityError::Suffix),
        ("K", QuantityError::Suffix),
    ];
    for (input, expected) in cases {
        assert_eq!(err(input), expected, "{input:?}");
    }
}

#[test]
fn error_messages_are_the_kubernetes_ones() {
    // quantity.go: ErrFormatWrong, ErrNumeric, ErrSuffix.
    assert_eq!(
        QuantityError::FormatWrong.to_string(),
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    );
    assert_eq!(
        QuantityError::Numeric.to_string(),
        "unable to parse numeric part of quantity"
    );
    assert_eq!(QuantityError::Suffix.to_string(), "unable to parse quantity's suffix");
}

#[test]
fn scanner_splits_like_parse_quantity_string() {
    // quantity_test.go TestParseQuantityString (Go reports an empty numerator as "0").
    let parts = |negative, has_digit, num: &'static str, denom: &'static str, suffix: &'static str| Parts {
        negative,
        has_digit,
        num: num.as_bytes(),
        denom: denom.as_bytes(),
        suffix: suffix.as_bytes(),
    };
    assert_eq!(scan(b"0.025Ti"), Ok(parts(false, true, "", "025", "Ti")));
    assert_eq!(scan(b"1.025Ti"), Ok(parts(false, true, "1", "025", "Ti")));
    assert_eq!(scan(b"-1.025Ti"), Ok(parts(true, true, "1", "025", "Ti")));
    assert_eq!(scan(b"."), Ok(parts(false, false, "", "", "")));
    assert_eq!(scan(b"-."), Ok(parts(true, false, "", "", "")));
    assert_eq!(scan(b"1E-3"), Ok(parts(false, true, "1", "", "E-3")));
    assert_eq!(scan(b"+007.50e+12"), Ok(parts(false, true, "7", "50", "e+12")));
    assert_eq!(scan(b"1.2.3"), Err(QuantityError::FormatWrong));
}

#[test]
fn digitless_numbers_follow_parse_quantity() {
    // ParseQuantity's int64 fast path reads a number without digits as 0 (upstream
    // quantity_exact_policy_test.go, parserLeniencyRef: "bare sign, dot, or exponent marker").
    for input in [
        "+",
        "-",
        ".",
        "-.",
        "+.",
        "Gi",
        "Ki",
        "Mi",
        "Ti",
        "-Ti",
        ".Ki",
        "k",
        "M",
        "G",
        "T",
        "P",
        "E",
        "-.G",
        "n",
        "u",
        "m",
        "e5",
        "E+18",
        "e-9",
        "e2147483647",
    ] {
        let v = q(input);
        assert!(v.is_zero() && !v.is_negative(), "{input:?}");
        assert_eq!((v.value(), v.milli_value()), (0, 0), "{input:?}");
    }
    // ... and its inf.Dec path (binary above Ti, decimal scale below nano) fails with ErrNumeric.
    for input in [
        "Pi",
        "Ei",
        "-Ei",
        "+Pi",
        ".Pi",
        "e-10",
        "E-10",
        ".e-10",
        "-e-2147483648",
    ] {
        assert_eq!(err(input), QuantityError::Numeric, "{input:?}");
    }
    // A zero digit is a digit: these take the inf.Dec path and parse as 0.
    for input in ["0.e-10", "00Pi", "0Ei", "-0.0e-100", "0.Ei"] {
        assert!(q(input).is_zero(), "{input:?}");
    }
    // Suffix errors come before numeric ones, as in ParseQuantity.
    for input in ["e", "i", "K", "-e", ".i", "e2147483648"] {
        assert_eq!(err(input), QuantityError::Suffix, "{input:?}");
    }
}

#[test]
fn value_and_milli_value_round_up_away_from_zero() {
    // quantity.go: Value is "rounded up to the nearest integer away from 0"; MilliValue is
    // ScaledValue(Milli), which rounds the same way (int64Amount.AsScaledInt64).
    let cases: &[(&str, i64, i64)] = &[
        ("0.1", 1, 100),
        ("0.5", 1, 500),
        ("1.5m", 1, 2),
        ("1.0001m", 1, 2),
        ("1n", 1, 1),
        ("1u", 1, 1),
        ("1m", 1, 1),
        ("1", 1, 1000),
        ("100m", 1, 100),
        ("250m", 1, 250),
        ("2.0000000001", 3, 2001),
        ("9.01", 10, 9010),
        ("-9.01", -10, -9010),
        ("-1.5", -2, -1500),
        ("-0.1", -1, -100),
        ("-1n", -1, -1),
        ("-0.1Ki", -103, -102400),
        ("1Gi", 1 << 30, 1000 << 30),
        ("+1.5Ki", 1536, 1_536_000),
        ("100M", 100_000_000, 100_000_000_000),
        ("1e3", 1000, 1_000_000),
        ("1E", 1_000_000_000_000_000_000, MAX),
        ("12E", MAX, MAX),
    ];
    for &(input, value, milli) in cases {
        let v = q(input);
        assert_eq!((v.value(), v.milli_value()), (value, milli), "{input}");
    }
}

#[test]
fn scaled_value_table() {
    // quantity_test.go TestScaledValue (toScale 0 and Milli) and TestNewScaledSet.
    let cases: &[(&str, i128, i64, i64)] = &[
        ("1n", 1, 1, 1),
        ("1000n", 1000, 1, 1),
        ("1u", 1000, 1, 1),
        ("1000u", 1_000_000, 1, 1),
        ("1m", 1_000_000, 1, 1),
        ("1", 1_000_000_000, 1, 1000),
        ("1e2", 100_000_000_000, 100, 100_000),
        ("0", 0, 0, 0),
    ];
    for &(input, nanos, value, milli) in cases {
        let v = q(input);
        assert_eq!(
            (v.nanos(), v.value(), v.milli_value()),
            (nanos, value, milli),
            "{input}"
        );
    }
}

#[test]
fn new_set_round_trips() {
    // quantity_test.go TestNewSet (Value of the canonical string) and TestMilliNewSet (MilliValue).
    for (input, value) in [
        ("1", 1),
        ("1k", 1000),
        ("1234k", 1_234_000),
        ("1Ki", 1024),
        ("1e6", 1_000_000),
    ] {
        assert_eq!(q(input).value(), value, "{input}");
    }
    assert_eq!(q("1Mi").value(), 1024 * 1024);
    for (input, milli) in [("1m", 1), ("1", 1000), ("1234", 1_234_000), ("1e3", 1_000_000)] {
        assert_eq!(q(input).milli_value(), milli, "{input}");
    }
    // quantity_test.go TestQuantityValueSet.
    assert_eq!(q("1Mi").value(), 1024 * 1024);
}

#[test]
fn overflow_accessor_baseline() {
    // quantity_overflow_test.go quantityAccessorCases (parsed rows): Value and MilliValue
    // saturate at the int64 rails; BinarySI is capped at 2^63-1 when parsed.
    let cases: &[(&str, i64, i64)] = &[
        ("9223372036854775807", MAX, MAX),
        ("1E", 1_000_000_000_000_000_000, MAX),
        ("8Ei", MAX, MAX),
        ("-8Ei", -MAX, MIN),
        ("20Ei", MAX, MAX),
        ("-20Ei", -MAX, MIN),
        ("9223372036854775808", MAX, MAX),
        ("18446744073709551616", MAX, MAX),
        ("100E", MAX, MAX),
        ("1000E", MAX, MAX),
        ("5000E", MAX, MAX),
        ("1e100", MAX, MAX),
        ("-9223372036854775808", MIN, MIN),
        ("-9223372036854775807", MIN + 1, MIN),
        ("-1e30", MIN, MIN),
        ("-100E", MIN, MIN),
        ("-1000E", MIN, MIN),
        ("-9.5Gi", -10_200_547_328, -10_200_547_328_000),
        ("-9.5000000001Gi", -10_200_547_329, -10_200_547_328_108),
        ("1e19", MAX, MAX),
    ];
    for &(input, value, milli) in cases {
        let v = q(input);
        assert_eq!((v.value(), v.milli_value()), (value, milli), "{input}");
    }
}

#[test]
fn parse_quantity_digit_boundaries() {
    // quantity_test.go TestParseQuantity (18 to 20 digits around the int64 limits): the exact
    // value (wantAsDec), in nano-units.
    let cases: &[(&str, i128)] = &[
        ("-999999999999999999", -999_999_999_999_999_999_000_000_000),
        ("999999999999999999.0", 999_999_999_999_999_999_000_000_000),
        ("999999999999999999.1", 999_999_999_999_999_999_100_000_000),
        ("-9999999999999999999", -9_999_999_999_999_999_999_000_000_000),
        ("9999999999999999999000m", 9_999_999_999_999_999_999_000_000_000),
        ("-1E", -1_000_000_000_000_000_000_000_000_000),
        ("1.0E", 1_000_000_000_000_000_000_000_000_000),
        ("1000000000000000000", 1_000_000_000_000_000_000_000_000_000),
        ("-1.0000000000000000001E", -1_000_000_000_000_000_000_100_000_000),
        ("1.000000000000000001E", 1_000_000_000_000_000_001_000_000_000),
        ("10E", 10_000_000_000_000_000_000_000_000_000),
        ("10.0000000000000000001E", 10_000_000_000_000_000_000_100_000_000),
        ("-10000000000000000000000m", -10_000_000_000_000_000_000_000_000_000),
        ("-10.000000000000000001E", -10_000_000_000_000_000_001_000_000_000),
        ("9223372036854775806.1", 9_223_372_036_854_775_806_100_000_000),
        ("-9223372036854775809000m", -9_223_372_036_854_775_809_000_000_000),
        ("-9223372036854775808", -9_223_372_036_854_775_808_000_000_000),
        ("9223372036854775807.0", 9_223_372_036_854_775_807_000_000_000),
        ("9223372036854775808.1", 9_223_372_036_854_775_808_100_000_000),
    ];
    for &(input, nanos) in cases {
        assert_eq!(q(input).nanos(), nanos, "{input}");
    }
    let values: &[(&str, i64)] = &[
        ("999999999999999999", 999_999_999_999_999_999),
        ("999999999999999999.1", 1_000_000_000_000_000_000),
        ("-9223372036854775809", MIN),
        ("9223372036854775807.0", MAX),
        ("9223372036854775807.1", MAX),
        ("-9223372036854775807.1", MIN),
        ("-9223372036854775808.1", MIN),
    ];
    for &(input, value) in values {
        assert_eq!(q(input).value(), value, "{input}");
    }
}

#[test]
fn int64_rails_are_exact_at_the_boundary() {
    let v = q("9223372036854775807001m");
    assert_eq!(
        v.value(),
        MAX,
        "9223372036854775807.001 rounds up past MaxInt64 and saturates"
    );
    assert_eq!(q("9223372036854775.807").milli_value(), MAX);
    assert_eq!(q("9223372036854775.8071").milli_value(), MAX);
    assert_eq!(q("-9223372036854775.808").milli_value(), MIN);
    assert_eq!(q("-9223372036854775.809").milli_value(), MIN);
    assert_eq!(q("-9223372036854775.807").milli_value(), MIN + 1);
    assert_eq!(q("9223372036854775.806").milli_value(), MAX - 1);
}

#[test]
fn sub_nano_amounts_round_away_from_zero() {
    // quantity_subnano_test.go TestParseQuantitySubNanoRoundsUp.
    let cases: &[(&str, i128)] = &[
        ("1e-2147483647", 1),
        ("-1e-2147483647", -1),
        ("1e-100", 1),
        ("-1e-100", -1),
        ("1e-10", 1),
        ("9e-10", 1),
        ("-9e-10", -1),
        ("1e-9", 1),
        ("-1e-9", -1),
        ("2e-9", 2),
        ("15e-10", 2),
        ("1000000000000000000000e-30", 1),
        ("1000000000000000000001e-30", 2),
        ("999999999999999999999e-30", 1),
        ("0e-2147483647", 0),
        ("0.0e-100", 0),
        ("0.00000000000000000000001Ki", 1),
        // TestParseQuantitySubNanoMatchesRound.
        ("0.0000000000001", 1),
        ("-0.0000000000001", -1),
        // An exponent of MinInt32 is valued by the grammar (Kubernetes 1.38 will reject it).
        ("1e-2147483648", 1),
        ("-7e-2147483648", -1),
    ];
    for &(input, nanos) in cases {
        assert_eq!(q(input).nanos(), nanos, "{input}");
    }
    assert_eq!(q("1e-100"), q("9e-10"));
    assert_eq!(q("-1e-2147483647"), q("-9e-10"));
}

#[test]
fn parse_emit_values() {
    // quantity_test.go TestQuantityParseEmit (values of the canonical forms), and their negations.
    let cases: &[(&str, &str)] = &[
        ("1Ki", "1024"),
        ("1Mi", "1048576"),
        ("1Gi", "1073741824"),
        ("1024Mi", "1Gi"),
        ("1000M", "1G"),
        (".001Ki", "1024m"),
        (".000001Ki", "1024u"),
        (".000000001Ki", "1024n"),
        (".000000000001Ki", "2n"),
    ];
    for &(input, canonical) in cases {
        assert_eq!(q(input), q(canonical), "{input}");
        assert_eq!(q(&format!("-{input}")), q(&format!("-{canonical}")), "-{input}");
    }
}

#[test]
fn binary_amounts_are_capped_at_max_int64() {
    // quantity.go ParseQuantity: "The max is just a simple cap", for BinarySI only.
    let cap = i128::from(i64::MAX) * 1_000_000_000;
    for input in [
        "8Ei",
        "9Ei",
        "20Ei",
        "9223372036854775807Ki",
        "7.99999999999999999999Ei",
        "99999999999999999999Ki",
    ] {
        assert_eq!(q(input).nanos(), cap, "{input}");
        assert_eq!(q(&format!("-{input}")).nanos(), -cap, "-{input}");
    }
    // Just below the cap: 8Ei - 1e-17 * 2^60 is 9223372036854775796.47078495393153024.
    assert_eq!(
        q("7.99999999999999999Ei").nanos(),
        9_223_372_036_854_775_796_470_784_954
    );
    assert_eq!(q("7Ei").nanos(), 7 * (1i128 << 60) * 1_000_000_000);
    assert_eq!(q("1.5Gi").value(), 1_610_612_736);
    assert_eq!(q("0.1Ki").nanos(), 102_400_000_000);
    assert_eq!(q("1.000000000001Ki").nanos(), 1_024_000_000_002);
    assert_eq!(q("0.3Ti").nanos(), 329_853_488_332_800_000_000);
    // Decimal amounts are not capped.
    assert_eq!(q("9223372036854775808").nanos(), 9_223_372_036_854_775_808_000_000_000);
    assert_eq!(q("12E").nanos(), 12_000_000_000_000_000_000_000_000_000);
}

#[test]
fn exponent_forms_and_range() {
    let cases: &[(&str, i128)] = &[
        ("1e3", 1_000_000_000_000),
        ("1E3", 1_000_000_000_000),
        ("1e+3", 1_000_000_000_000),
        ("1e003", 1_000_000_000_000),
        ("1e000000000000000000000000003", 1_000_000_000_000),
        ("1e-0", 1_000_000_000),
        ("1e+0", 1_000_000_000),
        ("1E0", 1_000_000_000),
        ("1.5e1", 15_000_000_000),
        ("15e-1", 1_500_000_000),
        (".5E-3", 500_000),
        ("1e29", 10i128.pow(38)),
        ("0e2147483647", 0),
    ];
    for &(input, nanos) in cases {
        assert_eq!(q(input).nanos(), nanos, "{input}");
    }
    // Exponents at the int32 limits are valued exactly, saturating the representation.
    assert_eq!(q("1e2147483647").nanos(), i128::MAX);
    assert_eq!((q("1e2147483647").value(), q("1e2147483647").milli_value()), (MAX, MAX));
    assert_eq!(
        (q("-1e2147483647").value(), q("-1e2147483647").milli_value()),
        (MIN, MIN)
    );
    // Past int32: ParseInt fails past int64 (ErrSuffix); past int32 upstream rejects (#141203)
    // where Kubernetes 1.37 wrapped modulo 2^32 (quantity_overflow_test.go "exponent-over-int32").
    for input in [
        "1e2147483648",
        "1e-2147483649",
        "1e4294967297",
        "0e2147483648",
        "-0e-2147483649",
        "1e9223372036854775807",
        "1e99999999999999999999",
    ] {
        assert_eq!(err(input), QuantityError::Suffix, "{input}");
    }
}

#[test]
fn saturation_bound_of_the_representation() {
    assert_eq!(q("1e30").nanos(), i128::MAX);
    assert_eq!(q("170141183460469231731687303715884105727n").nanos(), i128::MAX);
    assert_eq!(q("170141183460469231731687303715884105728n").nanos(), i128::MAX);
    assert_eq!(q("-170141183460469231731687303715884105728n").nanos(), -i128::MAX);
    assert_eq!(q("170141183460469231731687303715884105726n").nanos(), i128::MAX - 1);
    assert_eq!(q("1e100"), q("1e101"), "beyond the bound, quantities compare equal");
    assert!(q("1e29") < q("1e30"));
}

#[test]
fn negative_zero_is_zero_and_tiny_negatives_are_negative() {
    for input in ["-0", "-0.0", "-0n", "-0Ki", "-0e5", "+0", "-000.000", "-0E", "-.0"] {
        let v = q(input);
        assert!(v.is_zero() && !v.is_negative(), "{input}");
        assert_eq!(v, Quantity::ZERO, "{input}");
    }
    for input in ["-0.0000000001", "-1e-100", "-1n", "-0.0000000000001Ki"] {
        let v = q(input);
        assert!(v.is_negative(), "{input}");
        assert_eq!((v.nanos(), v.value(), v.milli_value()), (-1, -1, -1), "{input}");
    }
    assert!(!q("1n").is_negative());
}

#[test]
fn long_mantissas_are_exact_or_saturate() {
    let zeros = "0".repeat(1000);
    assert_eq!(q(&format!("1{zeros}")).nanos(), i128::MAX);
    assert_eq!(q(&format!("1{zeros}")).value(), MAX);
    assert_eq!(q(&format!("-1{zeros}")).value(), MIN);
    assert_eq!(q(&format!("{zeros}1")).nanos(), 1_000_000_000);
    assert_eq!(q(&format!("0.{zeros}1")).nanos(), 1);
    assert_eq!(q(&format!("1{}e-100", &zeros[..100])).nanos(), 1_000_000_000);
    assert_eq!(q(&format!("5.{zeros}1")).nanos(), 5_000_000_001);
    assert_eq!(q(&format!("5.{zeros}1")).value(), 6);
    assert_eq!(
        q(&format!("1{}Ki", &zeros[..100])).nanos(),
        i128::from(i64::MAX) * 1_000_000_000
    );
    assert_eq!(q(&format!("0.{}1Ki", &zeros[..500])).nanos(), 1);
    assert_eq!(q(&format!("1.{zeros}Ki")).nanos(), 1_024_000_000_000);
    assert_eq!(q(&format!("{zeros}.{zeros}")).nanos(), 0);
}

#[test]
fn ordering_and_equality_are_by_value() {
    // quantity_test.go TestQuantityCmp.
    assert_eq!(q("0").cmp(&q("0")), std::cmp::Ordering::Equal);
    assert!(q("100m") > q("50m"));
    assert!(q("50m") < q("100m"));
    assert!(q("10000T") > q("100Gi"));
    assert_eq!(q("1000m"), q("1"));
    assert_eq!(q("1Gi"), q("1073741824"));
    assert!(q("1Ki") > q("1k"));
    assert!(q("-1") < Quantity::ZERO);
    let mut sorted = ["1Gi", "-1", "500m", "1G", "0", "2"].map(q);
    sorted.sort();
    assert_eq!(sorted, ["-1", "0", "500m", "2", "1G", "1Gi"].map(q));
}

#[test]
fn from_str_default_and_zero_agree_with_parse() {
    assert_eq!("250m".parse::<Quantity>(), Quantity::parse("250m"));
    assert_eq!("1.2.3".parse::<Quantity>(), Err(QuantityError::FormatWrong));
    assert_eq!(Quantity::default(), Quantity::ZERO);
    assert_eq!(q("0"), Quantity::ZERO);
    assert!(Quantity::ZERO.is_zero());
}

/// A small deterministic PRNG (xorshift64*), so the fuzz tests need no extra crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// `ceil(|nanos| / per)` with the sign of `nanos`, clamped to `i64`, computed independently.
fn reference_scaled(nanos: i128, per: i128) -> i64 {
    let (quotient, remainder) = (nanos / per, nanos % per);
    let rounded = match remainder.signum() {
        0 => quotient,
        1 => quotient + 1,
        _ => quotient - 1,
    };
    rounded.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

#[test]
fn fuzz_random_bytes_never_panic() {
    const ALPHABET: &[u8] = b"0123456789012345.+-eEinumkKMGTPi \t.0";
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut buf = Vec::with_capacity(512);
    let mut accepted = 0;
    for round in 0..200_000 {
        buf.clear();
        let len = if round % 100 == 0 {
            rng.below(400)
        } else {
            rng.below(24)
        };
        for _ in 0..len {
            let byte = if rng.below(16) == 0 {
                rng.next() as u8
            } else {
                ALPHABET[rng.below(ALPHABET.len())]
            };
            buf.push(byte);
        }
        let result = parse_bytes(&buf);
        if let Ok(text) = std::str::from_utf8(&buf) {
            assert_eq!(Quantity::parse(text), result, "{text:?}");
        }
        // quantity_test.go TestQuantityParse: a leading "-" negates, a leading "+" changes nothing.
        if !matches!(buf.first(), None | Some(b'-' | b'+')) {
            let mut signed = Vec::with_capacity(buf.len() + 1);
            signed.push(b'-');
            signed.extend_from_slice(&buf);
            assert_eq!(
                parse_bytes(&signed),
                result.clone().map(|v| Quantity { nanos: -v.nanos }),
                "{signed:?}"
            );
            signed[0] = b'+';
            assert_eq!(parse_bytes(&signed), result, "{signed:?}");
        }
        if let Ok(v) = result {
            accepted += 1;
            assert_eq!(v.value(), reference_scaled(v.nanos(), 1_000_000_000), "{buf:?}");
            assert_eq!(v.milli_value(), reference_scaled(v.nanos(), 1_000_000), "{buf:?}");
            assert_eq!(v.is_negative(), v.nanos() < 0);
            assert_ne!(v.nanos(), i128::MIN);
        }
    }
    assert!(
        accepted > 10_000,
        "the generator should produce many valid quantities, got {accepted}"
    );
}

/// Nano-units of a generated quantity, computed with plain integer arithmetic on small inputs.
fn reference_nanos(negative: bool, digits: u128, fraction_len: u32, suffix: Suffix) -> i128 {
    let max = i128::MAX as u128;
    let magnitude = match suffix {
        _ if digits == 0 => 0,
        Suffix::Decimal(exponent) => {
            let shift = i64::from(exponent) + 9 - i64::from(fraction_len);
            if shift >= 0 {
                if shift > 38 {
                    max
                } else {
                    digits.checked_mul(10u128.pow(shift as u32)).map_or(max, |v| v.min(max))
                }
            } else if -shift > 38 {
                1
            } else {
                digits.div_ceil(10u128.pow((-shift) as u32))
            }
        }
        Suffix::Binary(exponent) => {
            let cap = i64::MAX as u128 * 1_000_000_000;
            let scaled = digits << exponent;
            let nanos = if fraction_len <= 9 {
                scaled.saturating_mul(10u128.pow(9 - fraction_len))
            } else {
                scaled.div_ceil(10u128.pow(fraction_len - 9))
            };
            nanos.min(cap)
        }
    };
    let magnitude = magnitude as i128;
    if negative {
        -magnitude
    } else {
        magnitude
    }
}

#[test]
fn fuzz_structured_quantities_match_a_reference() {
    const UNITS: &[(&str, Suffix)] = &[
        ("", Suffix::Decimal(0)),
        ("n", Suffix::Decimal(-9)),
        ("u", Suffix::Decimal(-6)),
        ("m", Suffix::Decimal(-3)),
        ("k", Suffix::Decimal(3)),
        ("M", Suffix::Decimal(6)),
        ("G", Suffix::Decimal(9)),
        ("T", Suffix::Decimal(12)),
        ("P", Suffix::Decimal(15)),
        ("E", Suffix::Decimal(18)),
        ("Ki", Suffix::Binary(10)),
        ("Mi", Suffix::Binary(20)),
        ("Gi", Suffix::Binary(30)),
        ("Ti", Suffix::Binary(40)),
        ("Pi", Suffix::Binary(50)),
        ("Ei", Suffix::Binary(60)),
    ];
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    let mut checked = 0;
    for _ in 0..100_000 {
        let negative = rng.below(3) == 0;
        let sign = if negative { "-" } else { ["", "+"][rng.below(2)] };
        let num: String = (0..rng.below(9))
            .map(|_| char::from(b'0' + rng.below(10) as u8))
            .collect();
        let dot = rng.below(2) == 0;
        let denom: String = if dot {
            (0..rng.below(13))
                .map(|_| char::from(b'0' + rng.below(10) as u8))
                .collect()
        } else {
            String::new()
        };
        let (suffix_text, suffix) = if rng.below(4) == 0 {
            let exponent = rng.below(91) as i32 - 45;
            let marker = ["e", "E"][rng.below(2)];
            let text = match (exponent < 0, rng.below(3)) {
                (true, _) => format!("{marker}{exponent}"),
                (false, 0) => format!("{marker}+{exponent}"),
                (false, 1) => format!("{marker}0{exponent}"),
                (false, _) => format!("{marker}{exponent}"),
            };
            (text, Suffix::Decimal(exponent))
        } else {
            let (text, suffix) = UNITS[rng.below(UNITS.len())];
            (text.to_string(), suffix)
        };
        if num.is_empty() && denom.is_empty() {
            continue; // digit-less numbers are covered by digitless_numbers_follow_parse_quantity
        }
        let input = format!("{sign}{num}{}{denom}{suffix_text}", if dot { "." } else { "" });
        let digits: u128 = format!("{num}{denom}").parse().expect("generated digits");
        let expected = reference_nanos(negative, digits, denom.len() as u32, suffix);
        let v = q(&input);
        assert_eq!(v.nanos(), expected, "{input}");
        assert_eq!(v.value(), reference_scaled(expected, 1_000_000_000), "{input}");
        assert_eq!(v.milli_value(), reference_scaled(expected, 1_000_000), "{input}");
        checked += 1;
    }
    assert!(checked > 90_000);
}
