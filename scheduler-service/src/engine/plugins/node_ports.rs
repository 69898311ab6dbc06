//! NodePorts: a pod's host ports must be free on the node.
//!
//! Mirrors kube-scheduler's `pkg/scheduler/framework/plugins/nodeports/node_ports.go`: Filter
//! (`fitsPorts`, each wanted port against the ports in use, with `HostPortInfo`'s wildcard rules
//! in [`HostPort::conflicts`]). The plugin has no score. The fast paths decide most nodes
//! without their port lists, from the summaries in [`crate::engine::hot`] (a Bloom summary that
//! rules a conflict out, exact keys for up to two ports), which answer as [`conflicts`] does
//! (`port_keys_answer_as_the_port_lists`, `the_plain_pass_checks_host_ports_as_the_general_one`).

use crate::engine::model::HostPort;

/// kube-scheduler's `ErrReason`.
pub const ERR_REASON: &str = "node(s) didn't have free ports for the requested pod ports";

/// Filter: whether one of the `wanted` host ports conflicts with one in `used` on the node (the
/// node does not fit).
#[inline]
pub fn conflicts(wanted: &[HostPort], used: &[HostPort]) -> bool {
    !wanted.is_empty() && wanted.iter().any(|w| used.iter().any(|u| w.conflicts(u)))
}

/// The plugin in the framework's contract: its input is whether the node's summary of the ports
/// in use leaves a conflict possible (see [`crate::engine::hot`]), and the pod's host ports;
/// [`conflicts`] decides where it does.
#[derive(Debug, Clone, Copy)]
pub struct NodePorts;

impl crate::engine::plugins::contract::Filter for NodePorts {
    type In<'a> = (bool, &'a [HostPort]);
    type Rejection = ();
    #[inline(always)]
    fn filter(
        (may_conflict, wanted): (bool, &[HostPort]),
        node: &crate::engine::snapshot::NodeView<'_>,
        reject: &mut impl FnMut(()),
    ) -> bool {
        if may_conflict && conflicts(wanted, &node.usage.host_ports) {
            reject(());
            return false;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::engine::model::Protocol;
    use crate::engine::plugins::testing::{node, pod, rank};
    use crate::engine::policy::FilterPlugin as F;
    use crate::engine::snapshot::Snapshot;

    fn hp(ip: &str, protocol: Protocol, port: u16) -> HostPort {
        HostPort {
            ip: Arc::from(ip),
            protocol,
            port,
        }
    }

    /// `node_ports_test.go`'s table: the pod's host ports against the ports in use on the node.
    #[test]
    fn filter_table() {
        use Protocol::{Tcp, Udp};
        let cases = [
            ("nothing wanted", vec![], vec![hp("0.0.0.0", Tcp, 8080)], false),
            ("nothing in use", vec![hp("127.0.0.1", Udp, 8080)], vec![], false),
            (
                "other ports",
                vec![hp("127.0.0.1", Udp, 8080)],
                vec![hp("127.0.0.1", Udp, 9090)],
                false,
            ),
            (
                "the same port",
                vec![hp("127.0.0.1", Udp, 8080)],
                vec![hp("127.0.0.1", Udp, 8080)],
                true,
            ),
            (
                "another protocol",
                vec![hp("127.0.0.1", Tcp, 8080)],
                vec![hp("127.0.0.1", Udp, 8080)],
                false,
            ),
            (
                "another address",
                vec![hp("127.0.0.2", Udp, 8080)],
                vec![hp("127.0.0.1", Udp, 8080)],
                false,
            ),
            (
                "in use on every address",
                vec![hp("127.0.0.1", Tcp, 8001)],
                vec![hp("0.0.0.0", Tcp, 8001)],
                true,
            ),
            (
                "wanted on every address",
                vec![hp("0.0.0.0", Tcp, 8001)],
                vec![hp("127.0.0.1", Tcp, 8001)],
                true,
            ),
            (
                "one of several",
                vec![hp("127.0.0.1", Tcp, 8001), hp("127.0.0.1", Udp, 8002)],
                vec![hp("127.0.0.2", Tcp, 8001), hp("0.0.0.0", Udp, 8002)],
                true,
            ),
        ];
        for (name, wanted, used, conflict) in cases {
            assert_eq!(conflicts(&wanted, &used), conflict, "{name}");
        }
    }

    #[test]
    fn node_ports_conflict_with_used_ports() {
        let n = node("n", 4000, 4000);
        let mut existing = pod("old", 0, 0);
        existing.node_name = Some("n".into());
        let hp = |ip: &str, port| HostPort {
            ip: Arc::from(ip),
            protocol: Protocol::Tcp,
            port,
        };
        existing.host_ports = vec![hp("0.0.0.0", 8080)];
        let snap = Snapshot::build(vec![n], vec![existing]).unwrap();
        let mut p = pod("p", 0, 0);
        p.host_ports = vec![hp("10.0.0.1", 8080)];
        let r = rank(&snap, &p);
        assert_eq!(r.rejected[0].plugin, F::NodePorts);
        assert_eq!(
            r.diagnosis.message(),
            "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
        );
        p.host_ports = vec![hp("10.0.0.1", 8081)];
        assert_eq!(rank(&snap, &p).feasible_count, 1);
    }
}
