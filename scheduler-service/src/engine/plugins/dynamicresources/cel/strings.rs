//! cel-go's strings extension at the version kube's base environment sets
//! (`ext/strings.go`, `ext.Strings(ext.StringsVersion(2))`, from 1.29): `charAt`, `indexOf`,
//! `lastIndexOf`, `lowerAscii`, `upperAscii`, `replace`, `split`, `substring`, `trim`, `join`,
//! `format` and `strings.quote`: the `cel` crate's implementation
//! (`cel::extensions::strings`), which follows cel-go's (code-point indices, cel-go's error
//! texts).
//!
//! Cost (kube's `library/cost.go`; version 2 has no trackers of its own): one traversal of the
//! string for `lowerAscii`, `upperAscii`, `substring`, `trim`, `indexOf` and `lastIndexOf`
//! (the meter's reading of the operands), two for `split` and `replace`, two of the text for
//! `join` ([`super::prepare`]).
//!
//! The crate also declares `reverse` on strings (version 3), which kube's environment does not
//! have: an expression using it is one kube's API server refuses, never one it accepts.

use cel::Env;

/// Declares the library in `env`.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    cel::extensions::strings(env)
}
