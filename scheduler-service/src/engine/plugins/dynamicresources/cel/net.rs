//! Kubernetes' IP and CIDR libraries (`k8s.io/apiserver/pkg/cel/library/ip.go` and
//! `cidr.go`, kube's base environment from 1.30), over Go's `net/netip` semantics:
//!
//! - `ip(s)`, `isIP(s)`, `ip.isCanonical(s)`, `string(ip)`, and on an IP `family()`,
//!   `isUnspecified()`, `isLoopback()`, `isLinkLocalMulticast()`, `isLinkLocalUnicast()`,
//!   `isGlobalUnicast()`; an address with a zone or an IPv4-mapped IPv6 address is refused, as
//!   kube's `parseIPAddr` refuses it;
//! - `cidr(s)`, `isCIDR(s)`, `string(cidr)`, and on a CIDR `containsIP(ip or string)`,
//!   `containsCIDR(cidr or string)`, `ip()`, `masked()`, `prefixLength()`.
//!
//! Cost (kube's `library/cost.go`): parsing is a traversal of the text (the meter's reading of
//! the operand); `ip.isCanonical` two; the accessors 1.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use cel::common::types::{Type, STRING_TYPE};
use cel::common::value::CowVal;
use cel::objects::Opaque;
use cel::{Env, ExecutionError};

use super::values::{bool_out, charge, int_out, opaque_arg, opaque_out, string_arg, string_out, text_units};

/// The CEL type name of IP addresses (kube's `apiservercel.IPType`).
pub const IP_TYPE_NAME: &str = "net.IP";
/// The CEL type name of CIDRs (kube's `apiservercel.CIDRType`).
pub const CIDR_TYPE_NAME: &str = "net.CIDR";

/// An IP address (kube's `apiservercel.IP`, a `netip.Addr` without zone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ip(pub IpAddr);

impl Ip {
    /// `netip.Addr.String`.
    pub fn text(&self) -> String {
        addr_string(&self.0)
    }
}

impl Opaque for Ip {
    fn runtime_type_name(&self) -> &str {
        IP_TYPE_NAME
    }
}

/// A CIDR (kube's `apiservercel.CIDR`, a `netip.Prefix`): the address as written and the
/// prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// The address, host bits as written.
    pub addr: IpAddr,
    /// The prefix length.
    pub bits: u8,
}

impl Cidr {
    /// `netip.Prefix.String`.
    pub fn text(&self) -> String {
        format!("{}/{}", addr_string(&self.addr), self.bits)
    }
}

impl Opaque for Cidr {
    fn runtime_type_name(&self) -> &str {
        CIDR_TYPE_NAME
    }
}

fn ip_type() -> Type {
    Type::new_opaque_type(IP_TYPE_NAME)
}

fn cidr_type() -> Type {
    Type::new_opaque_type(CIDR_TYPE_NAME)
}

/// Declares the libraries in `env`.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    env.add_type(ip_type())?;
    env.add_type(cidr_type())?;
    let (ip, cidr) = (ip_type, cidr_type);
    env.add_overload("ip", "string_to_ip", vec![STRING_TYPE], string_to_ip)?;
    env.add_overload("isIP", "is_ip", vec![STRING_TYPE], is_ip)?;
    env.add_overload("ip.isCanonical", "ip_is_canonical", vec![STRING_TYPE], ip_is_canonical)?;
    env.add_overload("string", "ip_to_string", vec![ip()], ip_to_string)?;
    env.add_member_overload("family", "ip_family", ip(), vec![], family)?;
    for (name, id, f) in [
        (
            "isUnspecified",
            "ip_is_unspecified",
            is_unspecified as cel::common::functions::Function,
        ),
        ("isLoopback", "ip_is_loopback", is_loopback),
        (
            "isLinkLocalMulticast",
            "ip_is_link_local_multicast",
            is_link_local_multicast,
        ),
        ("isLinkLocalUnicast", "ip_is_link_local_unicast", is_link_local_unicast),
        ("isGlobalUnicast", "ip_is_global_unicast", is_global_unicast),
    ] {
        env.add_member_overload(name, id, ip(), vec![], f)?;
    }
    env.add_overload("cidr", "string_to_cidr", vec![STRING_TYPE], string_to_cidr)?;
    env.add_overload("isCIDR", "is_cidr", vec![STRING_TYPE], is_cidr)?;
    env.add_overload("string", "cidr_to_string", vec![cidr()], cidr_to_string)?;
    env.add_member_overload("containsIP", "cidr_contains_ip_ip", cidr(), vec![ip()], contains_ip)?;
    env.add_member_overload(
        "containsIP",
        "cidr_contains_ip_string",
        cidr(),
        vec![STRING_TYPE],
        contains_ip,
    )?;
    env.add_member_overload(
        "containsCIDR",
        "cidr_contains_cidr",
        cidr(),
        vec![cidr()],
        contains_cidr,
    )?;
    env.add_member_overload(
        "containsCIDR",
        "cidr_contains_cidr_string",
        cidr(),
        vec![STRING_TYPE],
        contains_cidr,
    )?;
    env.add_member_overload("ip", "cidr_ip", cidr(), vec![], cidr_ip)?;
    env.add_member_overload("masked", "cidr_masked", cidr(), vec![], masked)?;
    env.add_member_overload("prefixLength", "cidr_prefix_length", cidr(), vec![], prefix_length)
}

/// Go's `netip.ParseAddr` (dotted IPv4 without leading zeros, IPv6 with an optional zone), then
/// kube's `parseIPAddr` (no zone, no IPv4-mapped IPv6).
pub(super) fn parse_ip(raw: &str) -> Result<IpAddr, String> {
    let fail =
        |why: &str| format!("IP Address {raw:?} parse error during conversion from string: ParseAddr({raw:?}): {why}");
    if raw.is_empty() {
        return Err(fail("unable to parse IP"));
    }
    if raw.contains(':') {
        let (addr, zone) = match raw.split_once('%') {
            Some((a, z)) => (a, Some(z)),
            None => (raw, None),
        };
        let v6: Ipv6Addr = addr.parse().map_err(|_| fail("unable to parse IP"))?;
        match zone {
            Some("") => return Err(fail("zone must be a non-empty string")),
            Some(_) => return Err(format!("IP address {raw:?} with zone value is not allowed")),
            None => {}
        }
        if v6.to_ipv4_mapped().is_some() {
            return Err(format!("IPv4-mapped IPv6 address {raw:?} is not allowed"));
        }
        return Ok(IpAddr::V6(v6));
    }
    if raw.contains('.') {
        let v4 = parse_v4(raw).map_err(|why| fail(&why))?;
        return Ok(IpAddr::V4(v4));
    }
    Err(fail("unable to parse IP"))
}

/// Go's `parseIPv4`: four decimal fields of at most 255, no leading zeros.
fn parse_v4(s: &str) -> Result<Ipv4Addr, String> {
    let fields: Vec<&str> = s.split('.').collect();
    if fields.len() != 4 {
        return Err(if fields.len() < 4 {
            "IPv4 address too short"
        } else {
            "IPv4 address too long"
        }
        .into());
    }
    let mut octets = [0u8; 4];
    for (i, f) in fields.iter().enumerate() {
        if f.is_empty() || !f.bytes().all(|b| b.is_ascii_digit()) {
            return Err(if f.is_empty() {
                "IPv4 field must have at least one digit"
            } else {
                "unexpected character"
            }
            .into());
        }
        if f.len() > 1 && f.starts_with('0') {
            return Err("IPv4 field has octet with leading zero".into());
        }
        octets[i] = f.parse::<u8>().map_err(|_| "IPv4 field has value >255".to_string())?;
    }
    Ok(Ipv4Addr::from(octets))
}

/// Go's `netip.Prefix.String`-style text of an address (RFC 5952 for IPv6).
fn addr_string(a: &IpAddr) -> String {
    a.to_string()
}

/// Go's `netip.ParsePrefix` then kube's `parseCIDR`.
pub(super) fn parse_cidr(raw: &str) -> Result<Cidr, String> {
    let fail = |why: &str| {
        format!(
            "network address parse error during conversion from string: network address parse error during \
             conversion from string: netip.ParsePrefix({raw:?}): {why}"
        )
    };
    let Some((addr, bits)) = raw.rsplit_once('/') else {
        return Err(fail("no '/'"));
    };
    if addr.contains('%') {
        return Err(fail("IPv6 zones cannot be present in a prefix"));
    }
    let ip = if addr.contains(':') {
        IpAddr::V6(
            addr.parse::<Ipv6Addr>()
                .map_err(|_| fail(&format!("ParseAddr({addr:?}): unable to parse IP")))?,
        )
    } else {
        IpAddr::V4(parse_v4(addr).map_err(|why| fail(&format!("ParseAddr({addr:?}): {why}")))?)
    };
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let bad_bits = || fail(&format!("bad bits after slash: {bits:?}"));
    if bits.is_empty() || !bits.bytes().all(|b| b.is_ascii_digit()) || (bits.len() > 1 && bits.starts_with('0')) {
        return Err(bad_bits());
    }
    let n: u32 = bits.parse().map_err(|_| bad_bits())?;
    if n > max {
        return Err(fail("prefix length out of range"));
    }
    if let IpAddr::V6(v6) = ip {
        if v6.to_ipv4_mapped().is_some() {
            return Err(format!(
                "network address parse error during conversion from string: IPv4-mapped IPv6 address {raw:?} is not allowed"
            ));
        }
    }
    Ok(Cidr {
        addr: ip,
        bits: n as u8,
    })
}

fn bits_of(a: &IpAddr) -> u128 {
    match a {
        IpAddr::V4(v4) => u128::from(u32::from(*v4)),
        IpAddr::V6(v6) => u128::from(*v6),
    }
}

impl Cidr {
    fn width(&self) -> u32 {
        if self.addr.is_ipv4() {
            32
        } else {
            128
        }
    }

    fn mask(&self) -> u128 {
        let w = self.width();
        let host = w - u32::from(self.bits);
        let all = if w == 32 { u128::from(u32::MAX) } else { u128::MAX };
        if host >= 128 {
            0
        } else {
            all & !((1u128 << host).wrapping_sub(1))
        }
    }

    /// `netip.Prefix.Masked`.
    pub fn masked(&self) -> Cidr {
        let v = bits_of(&self.addr) & self.mask();
        let addr = match self.addr {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(v as u32)),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(v)),
        };
        Cidr { addr, bits: self.bits }
    }

    /// `netip.Prefix.Contains`: same family, and the network bits equal.
    pub fn contains(&self, ip: &IpAddr) -> bool {
        self.addr.is_ipv4() == ip.is_ipv4() && (bits_of(ip) & self.mask()) == (bits_of(&self.addr) & self.mask())
    }

    /// kube's `containsCIDR`: `Overlaps` and no longer a prefix than `other`.
    pub fn contains_cidr(&self, other: &Cidr) -> bool {
        self.addr.is_ipv4() == other.addr.is_ipv4() && self.bits <= other.bits && self.contains(&other.addr)
    }
}

fn ip_arg(args: &[CowVal<'_, '_>], i: usize, f: &str) -> Result<IpAddr, ExecutionError> {
    opaque_arg::<Ip>(args, i, f).map(|ip| ip.0)
}

fn cidr_arg(args: &[CowVal<'_, '_>], i: usize, f: &str) -> Result<Cidr, ExecutionError> {
    opaque_arg::<Cidr>(args, i, f)
}

fn string_to_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let s = string_arg(&args, 0, "ip")?;
    opaque_out(Ip(parse_ip(&s).map_err(|e| ExecutionError::function_error("ip", e))?))
}

fn is_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    bool_out(parse_ip(&string_arg(&args, 0, "isIP")?).is_ok())
}

/// `ip.isCanonical(s)`: whether `s` is the address's canonical text; an error if it is none.
fn ip_is_canonical<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let s = string_arg(&args, 0, "ip.isCanonical")?;
    // Parsed and printed again: a second traversal (kube's `2 × len × 0.1`).
    charge(text_units(s.len()))?;
    let ip = parse_ip(&s).map_err(|e| ExecutionError::function_error("ip.isCanonical", e))?;
    bool_out(addr_string(&ip) == s)
}

fn ip_to_string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string_out(addr_string(&ip_arg(&args, 0, "string")?))
}

fn family<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    int_out(if ip_arg(&args, 0, "family")?.is_ipv4() { 4 } else { 6 })
}

fn is_unspecified<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    bool_out(ip_arg(&args, 0, "isUnspecified")?.is_unspecified())
}

fn is_loopback<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    bool_out(ip_arg(&args, 0, "isLoopback")?.is_loopback())
}

/// `netip.Addr.IsLinkLocalMulticast`: 224.0.0.0/24, ff02::/16.
fn link_local_multicast(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => v6.octets()[0] == 0xff && v6.octets()[1] & 0x0f == 0x02,
    }
}

/// `netip.Addr.IsLinkLocalUnicast`: 169.254.0.0/16, fe80::/10.
fn link_local_unicast(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[..2] == [169, 254],
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

fn is_link_local_multicast<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    bool_out(link_local_multicast(&ip_arg(&args, 0, "isLinkLocalMulticast")?))
}

fn is_link_local_unicast<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    bool_out(link_local_unicast(&ip_arg(&args, 0, "isLinkLocalUnicast")?))
}

/// `netip.Addr.IsGlobalUnicast`: not unspecified, the IPv4 broadcast, loopback, multicast or
/// link-local unicast (private addresses are global unicast).
fn is_global_unicast<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let ip = ip_arg(&args, 0, "isGlobalUnicast")?;
    let broadcast = matches!(ip, IpAddr::V4(v4) if v4 == Ipv4Addr::BROADCAST);
    bool_out(!ip.is_unspecified() && !broadcast && !ip.is_loopback() && !ip.is_multicast() && !link_local_unicast(&ip))
}

fn string_to_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let s = string_arg(&args, 0, "cidr")?;
    opaque_out(parse_cidr(&s).map_err(|e| ExecutionError::function_error("cidr", e))?)
}

fn is_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    bool_out(parse_cidr(&string_arg(&args, 0, "isCIDR")?).is_ok())
}

fn cidr_to_string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let c = cidr_arg(&args, 0, "string")?;
    string_out(format!("{}/{}", addr_string(&c.addr), c.bits))
}

fn contains_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let c = cidr_arg(&args, 0, "containsIP")?;
    let ip = match string_arg(&args, 1, "containsIP") {
        Ok(s) => parse_ip(&s).map_err(|e| ExecutionError::function_error("containsIP", e))?,
        Err(_) => ip_arg(&args, 1, "containsIP")?,
    };
    bool_out(c.contains(&ip))
}

fn contains_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let c = cidr_arg(&args, 0, "containsCIDR")?;
    let other = match string_arg(&args, 1, "containsCIDR") {
        Ok(s) => parse_cidr(&s).map_err(|e| ExecutionError::function_error("containsCIDR", e))?,
        Err(_) => cidr_arg(&args, 1, "containsCIDR")?,
    };
    bool_out(c.contains_cidr(&other))
}

fn cidr_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    opaque_out(Ip(cidr_arg(&args, 0, "ip")?.addr))
}

fn masked<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    opaque_out(cidr_arg(&args, 0, "masked")?.masked())
}

fn prefix_length<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    int_out(i64::from(cidr_arg(&args, 0, "prefixLength")?.bits))
}
