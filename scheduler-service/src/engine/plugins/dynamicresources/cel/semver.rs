//! Kubernetes' semver library (`k8s.io/apiserver/pkg/cel/library/semverlib.go`, version 1):
//! `semver()`, `isSemver()`, with their normalizing `(string, bool)` forms, `major`, `minor`,
//! `patch`, `compareTo`, `isGreaterThan`, `isLessThan`. Each costs 1 beyond reading its operands
//! (kube's `library/cost.go`), `semver` and `isSemver` their text.

use std::cmp::Ordering;

use cel::common::types::Type;
use cel::common::types::{BOOL_TYPE, STRING_TYPE};
use cel::common::value::CowVal;
use cel::objects::Opaque;
use cel::{Env, ExecutionError};

use super::values::{bool_arg, bool_out, int_out, opaque_arg, opaque_out, ord_int, string_arg};

/// The CEL type name of semantic versions (kube's `apiservercel.SemverType`).
pub const SEMVER_TYPE_NAME: &str = "kubernetes.Semver";

fn semver_type() -> Type {
    Type::new_opaque_type(SEMVER_TYPE_NAME)
}

fn semver_of(args: &[CowVal<'_, '_>], i: usize, f: &str) -> Result<Semver, ExecutionError> {
    opaque_arg::<Semver>(args, i, f)
}

/// Declares the library in `env`.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    env.add_type(semver_type())?;
    let s = semver_type;
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
    Ok(())
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
