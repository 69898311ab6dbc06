//! The fields of a node that every evaluation reads ([`NodeHot`], kept per snapshot) and the
//! summaries of the host ports in use that let most nodes be decided without their port lists.

use super::model::HostPort;

/// The fields of a node and its usage that every evaluation reads, packed so a pass over 5,000
/// nodes stays in cache; the rest (scalars, host ports, names) is read only when a pod needs it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeHot {
    /// Allocatable millicores.
    pub alloc_cpu: i64,
    /// Allocatable memory bytes.
    pub alloc_memory: i64,
    /// Allocatable ephemeral storage bytes.
    pub alloc_ephemeral: i64,
    /// Pods the node admits.
    pub allowed_pods: i64,
    /// Requested millicores.
    pub req_cpu: i64,
    /// Requested memory bytes.
    pub req_memory: i64,
    /// Requested ephemeral storage bytes.
    pub req_ephemeral: i64,
    /// Requested millicores with scoring defaults.
    pub non_zero_cpu: i64,
    /// Requested memory with scoring defaults.
    pub non_zero_memory: i64,
    /// Pods on the node.
    pub pod_count: i64,
    /// Hash of the node name (tie-breaks).
    pub name_hash: u64,
    /// [`port_bits`] of the host ports in use: a pod whose bits miss these conflicts with none.
    pub port_bits: u64,
    /// [`port_keys`] of the host ports in use: whether a pod's ports conflict with them, read
    /// without the node's port list when both sides have keys.
    pub port_keys: PortKeys,
    /// Node class.
    pub class: u32,
    /// The node has some extended resource allocatable: a pod requesting one fits no other node.
    pub has_scalars: bool,
}

/// The bits one host port sets in a [`port_bits`] summary: two, from a hash of its port and
/// protocol, which every port it conflicts with shares (the address is left out: `0.0.0.0`
/// conflicts with any). A summary missing either bit rules out a conflict with the port.
pub fn port_mask(port: &HostPort) -> u64 {
    let mut key = [0u8; 3];
    key[..2].copy_from_slice(&port.port.to_le_bytes());
    key[2] = port.protocol as u8;
    let h = xxhash_rust::xxh3::xxh3_64(&key);
    (1u64 << (h & 63)) | (1u64 << ((h >> 6) & 63))
}

/// A 64-bit summary of host ports in use (a Bloom filter of their [`port_mask`]s): a port whose
/// mask is not all in it conflicts with none of them. With `port % 64` as the summary, 80 and
/// 8080 shared a bit, and a pod asking for port 80 checked most nodes' port lists one by one.
pub fn port_bits(ports: &[HostPort]) -> u64 {
    ports.iter().fold(0, |bits, p| bits | port_mask(p))
}

/// The low bits of a [`port_key`] that hold the address.
const KEY_ADDRESS: u64 = (1 << 40) - 1;

/// A host port as one integer, exact for [`HostPort::conflicts`]: the port in bits 48–63, the
/// protocol in bits 40–47, the address in bits 0–39 (0 for `0.0.0.0`, else `1 << 32` plus the
/// IPv4 address). `None` for an address that is not an IPv4 address written in its one canonical
/// form (`HostPort::conflicts` compares addresses as strings; such a port is checked on the list).
pub fn port_key(port: &HostPort) -> Option<u64> {
    let ip: std::net::Ipv4Addr = port.ip.parse().ok()?;
    if ip.to_string() != *port.ip {
        return None;
    }
    let address = if ip.is_unspecified() {
        0
    } else {
        1 << 32 | u64::from(ip.to_bits())
    };
    Some(u64::from(port.port) << 48 | (port.protocol as u64) << 40 | address)
}

/// Whether two [`port_key`]s' ports conflict, as [`HostPort::conflicts`] has it: same port and
/// protocol, and the same address or either bound to every address. An empty slot (0) conflicts
/// with nothing (no port is 0).
#[inline(always)]
pub fn keys_conflict(a: u64, b: u64) -> bool {
    let (x, y) = (a & KEY_ADDRESS, b & KEY_ADDRESS);
    a >> 40 == b >> 40 && a != 0 && (x == y || x == 0 || y == 0)
}

/// The [`port_key`]s of the host ports in use on a node, when there are at most two and each has
/// one (the rest of the slots 0); otherwise [`PortKeys::UNKNOWN`] (the list decides).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortKeys(pub [u64; 2]);

impl PortKeys {
    /// The keys do not say: check the node's port list.
    pub const UNKNOWN: Self = Self([u64::MAX; 2]);

    /// The keys of `ports`.
    pub fn of(ports: &[HostPort]) -> Self {
        let mut keys = [0; 2];
        if ports.len() > keys.len() {
            return Self::UNKNOWN;
        }
        for (slot, port) in keys.iter_mut().zip(ports) {
            match port_key(port) {
                Some(key) => *slot = key,
                None => return Self::UNKNOWN,
            }
        }
        Self(keys)
    }

    /// Whether a pod whose ports have these `wanted` keys conflicts with the ports in use:
    /// `None` when the node's keys do not say.
    #[inline(always)]
    pub fn conflict(self, wanted: &[u64]) -> Option<bool> {
        if self == Self::UNKNOWN {
            return None;
        }
        Some(
            wanted
                .iter()
                .any(|&w| keys_conflict(w, self.0[0]) || keys_conflict(w, self.0[1])),
        )
    }
}
