//! Several batches decided at once, on different decision replicas, without overcommitting.
//!
//! With `--batches-in-flight N` (N ≥ 2) the nodes are split into N partitions by a stable hash
//! of their names, and every node the binder sends carries its partition in the label
//! [`PARTITION_LABEL`]. A batch decided while others are in flight takes a free partition and
//! its pods are sent with a node selector on that label, so each replica only places pods on
//! its own partition's nodes. Two batches in flight therefore never place pods on the same node:
//! the node-local rules (resources, pod count, host ports, volume limits and restrictions) cannot
//! conflict between them, whatever snapshot each replica decided on.
//!
//! What spans nodes is kept out of partitions: a pod with required inter-pod affinity or
//! anti-affinity, a `DoNotSchedule` topology spread constraint, a claim (or an extended resource
//! a DeviceClass backs: its special claim), a gang, a waiting
//! preemptor, and a pod sent back by a partition before is decided alone, with no other batch in
//! flight, on the whole cluster (see [`whole_cluster_reason`]). A pod that fits no node of its partition
//! is not reported unschedulable: it is decided again alone, where kube-scheduler's verdict,
//! message and preemption apply.

use placement_scheduler::proto;
use std::collections::HashSet;

pub use placement_scheduler::partition::{partition_of, PARTITION_LABEL};

/// One partition of the nodes, as a decision in flight uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    /// This partition, `0..count`.
    pub index: u32,
    /// How many partitions the nodes are split into.
    pub count: u32,
}

impl Partition {
    /// Whether node `name` lies in this partition.
    pub fn holds(&self, name: &str) -> bool {
        partition_of(name, self.count) == self.index
    }

    /// `pod` restricted to this partition's nodes (a node selector on [`PARTITION_LABEL`]).
    pub fn restrict(&self, pod: &proto::Pod) -> proto::Pod {
        let mut pod = pod.clone();
        pod.node_selector
            .insert(PARTITION_LABEL.to_string(), self.index.to_string());
        pod
    }
}

/// Why a pod must be decided alone on the whole cluster rather than in a partition, or `None`
/// when a partition is enough. Each reason is a rule that reads pods on other nodes, or state
/// that two batches could both take: decided in two partitions at once, two pods could each
/// satisfy it without seeing the other.
pub fn whole_cluster_reason(pod: &proto::Pod) -> Option<&'static str> {
    if pod.gang.is_some() || !pod.scheduling_group.is_empty() {
        return Some("gang");
    }
    if pod.pod_affinity.as_ref().is_some_and(|a| !a.required.is_empty()) {
        return Some("pod_affinity");
    }
    if pod.pod_anti_affinity.as_ref().is_some_and(|a| !a.required.is_empty()) {
        return Some("pod_anti_affinity");
    }
    if pod
        .topology_spread_constraints
        .iter()
        .any(|c| c.when_unsatisfiable != "ScheduleAnyway")
    {
        return Some("topology_spread");
    }
    if pod.volumes.iter().any(|v| !v.claim_name.is_empty()) {
        return Some("claim");
    }
    // Devices shared by several nodes (a node selector, all nodes) may be allocated from two
    // partitions at once.
    if !pod.resource_claims.is_empty() {
        return Some("resource_claim");
    }
    None
}

/// Takes out of a partitioned decision the placements that do not hold for the whole cluster,
/// with why: `no_fit`, a pod that fits no node of the partition (it may fit another; an error,
/// such as an extender's, is the pod's own and stays), and `outside`, a node outside the
/// partition (a replica that ignored the partition's selector is never trusted). Their outcome
/// and claim bindings are cleared; the caller decides them again alone.
pub fn send_back(partition: Partition, response: &mut proto::ScheduleResponse) -> Vec<(String, &'static str)> {
    use proto::placement::Outcome;
    let mut out = Vec::new();
    for placement in &mut response.placements {
        let why = match &placement.outcome {
            Some(Outcome::NodeName(node)) if !partition.holds(node) => "outside",
            Some(Outcome::Unschedulable(u)) if !u.error => "no_fit",
            _ => continue,
        };
        placement.outcome = None;
        placement.claim_bindings.clear();
        out.push((placement.pod_uid.clone(), why));
    }
    out
}

/// The partitions free to take, and how many decisions are in flight.
#[derive(Debug)]
pub struct PartitionSlots {
    /// Which partitions a decision in flight holds.
    taken: Vec<bool>,
    /// The partition whose turn it is: partitions are taken strictly in turn, so each decides
    /// as many batches as the others (±1) and is filled alike, whatever their decisions take.
    next: usize,
    /// Most decisions in flight at once so far.
    most: usize,
}

impl PartitionSlots {
    /// `count` partitions, none taken.
    pub fn new(count: u32) -> Self {
        Self {
            taken: vec![false; count.max(1) as usize],
            next: 0,
            most: 0,
        }
    }

    /// Decisions in flight.
    pub fn in_flight(&self) -> usize {
        self.taken.iter().filter(|t| **t).count()
    }

    /// Whether [`PartitionSlots::take`] would give a partition now.
    pub fn can_take(&self, limit: usize) -> bool {
        self.in_flight() < limit && !self.taken[self.next]
    }

    /// Takes the partition whose turn it is, unless it is still being decided or `limit`
    /// decisions are in flight already.
    pub fn take(&mut self, limit: usize) -> Option<Partition> {
        if !self.can_take(limit) {
            return None;
        }
        let count = self.taken.len();
        let index = self.next;
        self.taken[index] = true;
        self.next = (index + 1) % count;
        self.most = self.most.max(self.in_flight());
        Some(Partition {
            index: index as u32,
            count: count as u32,
        })
    }

    /// Most decisions in flight at once so far.
    pub fn most_in_flight(&self) -> usize {
        self.most
    }

    /// Gives a partition back.
    pub fn give_back(&mut self, p: Partition) {
        if let Some(t) = self.taken.get_mut(p.index as usize) {
            *t = false;
        }
    }
}

/// The extended resources DeviceClasses back (kube's DRAExtendedResource): each class's
/// `extendedResourceName` and its implicit `deviceclass.resource.kubernetes.io/<class>`.
pub fn dra_extended_resources<'a>(classes: impl Iterator<Item = &'a proto::DeviceClass>) -> HashSet<String> {
    let mut out = HashSet::new();
    for c in classes {
        out.insert(format!("deviceclass.resource.kubernetes.io/{}", c.name));
        if !c.extended_resource_name.is_empty() {
            out.insert(c.extended_resource_name.clone());
        }
    }
    out
}

/// Whether `pod` requests one of `backed` (see [`dra_extended_resources`]): its special claim's
/// devices may be shared by nodes (a node selector, all nodes), so, as a pod with claims, it is
/// decided alone on the whole cluster.
pub fn asks_dra_extended(pod: &proto::Pod, backed: &HashSet<String>) -> bool {
    !backed.is_empty()
        && pod
            .init_containers
            .iter()
            .chain(&pod.containers)
            .any(|c| c.requests.keys().any(|n| backed.contains(n)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_asking_for_an_extended_resource_a_class_backs_is_decided_on_the_whole_cluster() {
        let backed = dra_extended_resources(
            [proto::DeviceClass {
                name: "gpu".into(),
                extended_resource_name: "example.com/gpu".into(),
                ..Default::default()
            }]
            .iter(),
        );
        let asking = |name: &str| proto::Pod {
            containers: vec![proto::Container {
                requests: [(name.to_string(), "1".to_string())].into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert!(asks_dra_extended(&asking("example.com/gpu"), &backed));
        assert!(asks_dra_extended(
            &asking("deviceclass.resource.kubernetes.io/gpu"),
            &backed
        ));
        assert!(!asks_dra_extended(&asking("nvidia.com/gpu"), &backed));
        assert!(!asks_dra_extended(&asking("example.com/gpu"), &HashSet::new()));
    }

    #[test]
    fn partitions_split_nodes_stably_and_about_evenly() {
        let mut sizes = [0usize; 3];
        for i in 0..3000 {
            let name = format!("node-{i}");
            let p = partition_of(&name, 3);
            assert_eq!(p, partition_of(&name, 3), "stable");
            sizes[p as usize] += 1;
        }
        for s in sizes {
            assert!((800..1200).contains(&s), "uneven split {sizes:?}");
        }
        assert_eq!(partition_of("node-1", 1), 0);
        assert_eq!(partition_of("node-1", 0), 0, "no partitions is one");
    }

    #[test]
    fn a_restricted_pod_selects_its_partition_and_keeps_its_own_selector() {
        let pod = proto::Pod {
            uid: "u".into(),
            node_selector: [("disk".to_string(), "ssd".to_string())].into(),
            ..Default::default()
        };
        let p = Partition { index: 2, count: 4 };
        let r = p.restrict(&pod);
        assert_eq!(r.node_selector.get(PARTITION_LABEL).map(String::as_str), Some("2"));
        assert_eq!(r.node_selector.get("disk").map(String::as_str), Some("ssd"));
        let node = (0..100)
            .map(|i| format!("n{i}"))
            .find(|n| partition_of(n, 4) == 2)
            .unwrap();
        assert!(p.holds(&node));
        assert!(!Partition { index: 1, count: 4 }.holds(&node));
    }

    #[test]
    fn rules_spanning_nodes_are_decided_on_the_whole_cluster() {
        let term = proto::PodAffinityTerm {
            topology_key: "zone".into(),
            ..Default::default()
        };
        let plain = proto::Pod::default();
        assert_eq!(whole_cluster_reason(&plain), None);
        let cases: Vec<(proto::Pod, Option<&str>)> = vec![
            (
                proto::Pod {
                    gang: Some(proto::Gang::default()),
                    ..Default::default()
                },
                Some("gang"),
            ),
            (
                proto::Pod {
                    pod_affinity: Some(proto::PodAffinity {
                        required: vec![term.clone()],
                        preferred: vec![],
                    }),
                    ..Default::default()
                },
                Some("pod_affinity"),
            ),
            (
                proto::Pod {
                    pod_anti_affinity: Some(proto::PodAffinity {
                        required: vec![term.clone()],
                        preferred: vec![],
                    }),
                    ..Default::default()
                },
                Some("pod_anti_affinity"),
            ),
            (
                // Preferred terms only score: a partition is enough.
                proto::Pod {
                    pod_anti_affinity: Some(proto::PodAffinity {
                        required: vec![],
                        preferred: vec![proto::WeightedPodAffinityTerm {
                            weight: 1,
                            term: Some(term.clone()),
                        }],
                    }),
                    ..Default::default()
                },
                None,
            ),
            (
                proto::Pod {
                    topology_spread_constraints: vec![proto::TopologySpreadConstraint {
                        when_unsatisfiable: "DoNotSchedule".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                Some("topology_spread"),
            ),
            (
                proto::Pod {
                    topology_spread_constraints: vec![proto::TopologySpreadConstraint {
                        when_unsatisfiable: "ScheduleAnyway".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                None,
            ),
            (
                proto::Pod {
                    volumes: vec![proto::Volume {
                        name: "data".into(),
                        claim_name: "data-0".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                Some("claim"),
            ),
        ];
        for (pod, want) in cases {
            assert_eq!(whole_cluster_reason(&pod), want, "{pod:?}");
        }
    }

    #[test]
    fn a_partition_waits_for_its_turn_even_when_another_is_free() {
        let mut s = PartitionSlots::new(2);
        let a = s.take(2).unwrap();
        let b = s.take(2).unwrap();
        s.give_back(b);
        // Partition 1 is free, but it is partition 0's turn, still being decided.
        assert!(!s.can_take(2));
        assert_eq!(s.take(2), None);
        s.give_back(a);
        assert!(s.can_take(2));
        assert_eq!(s.take(2).map(|p| p.index), Some(0));
        assert_eq!(s.take(2).map(|p| p.index), Some(1));
    }

    #[test]
    fn slots_hand_out_each_partition_in_turn_up_to_the_limit() {
        let mut s = PartitionSlots::new(3);
        let a = s.take(2).unwrap();
        let b = s.take(2).unwrap();
        assert_eq!((a.index, b.index, a.count), (0, 1, 3));
        assert_eq!(s.take(2), None, "limit reached");
        assert_eq!(s.in_flight(), 2);
        s.give_back(a);
        // The next in turn is 2, not the one just given back.
        assert_eq!(s.take(2).map(|p| p.index), Some(2));
        s.give_back(b);
        assert_eq!(s.take(3).map(|p| p.index), Some(0));
        assert_eq!(s.take(3).map(|p| p.index), Some(1));
        assert_eq!(s.take(3), None, "every partition taken");
        assert_eq!(s.most_in_flight(), 3);
    }

    #[test]
    fn a_partition_sends_back_what_does_not_hold_for_the_whole_cluster() {
        use proto::placement::Outcome;
        let p = Partition { index: 0, count: 2 };
        let inside = (0..100).map(|i| format!("n{i}")).find(|n| p.holds(n)).unwrap();
        let outside = (0..100).map(|i| format!("n{i}")).find(|n| !p.holds(n)).unwrap();
        let placement = |uid: &str, outcome: Outcome| proto::Placement {
            pod_uid: uid.into(),
            outcome: Some(outcome),
            claim_bindings: vec![proto::ClaimBinding::default()],
            ..Default::default()
        };
        let unschedulable = |error: bool| {
            Outcome::Unschedulable(proto::Unschedulable {
                message: "0/2 nodes are available".into(),
                error,
                ..Default::default()
            })
        };
        let mut response = proto::ScheduleResponse {
            placements: vec![
                placement("in", Outcome::NodeName(inside.clone())),
                placement("out", Outcome::NodeName(outside)),
                placement("nofit", unschedulable(false)),
                placement("error", unschedulable(true)),
            ],
            ..Default::default()
        };
        let back = send_back(p, &mut response);
        assert_eq!(
            back,
            vec![("out".to_string(), "outside"), ("nofit".to_string(), "no_fit")]
        );
        let outcomes: Vec<bool> = response.placements.iter().map(|x| x.outcome.is_some()).collect();
        assert_eq!(outcomes, [true, false, false, true]);
        assert_eq!(response.placements[0].outcome, Some(Outcome::NodeName(inside)));
        assert!(response.placements[1].claim_bindings.is_empty());
        assert_eq!(response.placements[3].claim_bindings.len(), 1);
    }
}
