//! The labels and annotations of placement's API on Kubernetes objects, in one place: what users
//! write on their pods (gangs, pinned experiment arms) and what the binder writes (the policy,
//! experiment and arm behind a binding, the node partitions it decides on). Both crates read these.

/// Prefix of every annotation placement reads or writes on a pod.
pub const ANNOTATION_PREFIX: &str = "placement.dev/";

/// The label naming a pod's gang (all-or-nothing group).
pub const GANG_LABEL: &str = "placement.dev/gang";
/// The annotation giving a gang's minimum member count.
pub const GANG_MIN_MEMBERS_ANNOTATION: &str = "placement.dev/gang-min-members";

/// Annotation written on a bound pod: the policy that placed it.
pub const POLICY_ANNOTATION: &str = "placement.dev/policy";
/// Annotation written on a bound pod: the experiment that selected it.
pub const EXPERIMENT_ANNOTATION: &str = "placement.dev/experiment";
/// Annotation written on a bound pod: its arm.
pub const ARM_ANNOTATION: &str = "placement.dev/arm";
/// Annotation written on a bound pod: `hash` or `pin`, how its arm was chosen.
pub const ASSIGNMENT_ANNOTATION: &str = "placement.dev/assignment";
/// Annotation a pod may carry to pin its arm, where the experiment allows it.
pub const PIN_ANNOTATION: &str = "placement.dev/pin-arm";

/// Node label with the node's partition, `0..N` (added by the binder to the nodes it sends when
/// it decides several batches at once).
pub const PARTITION_LABEL: &str = "binder.placement.io/partition";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pod_annotation_carries_the_prefix() {
        for key in [
            GANG_MIN_MEMBERS_ANNOTATION,
            POLICY_ANNOTATION,
            EXPERIMENT_ANNOTATION,
            ARM_ANNOTATION,
            ASSIGNMENT_ANNOTATION,
            PIN_ANNOTATION,
        ] {
            assert!(key.starts_with(ANNOTATION_PREFIX), "{key}");
        }
    }
}
