//! How one member moves toward its target assignment (KIP-848's reconciliation): partitions
//! leave a member before any new ones arrive, and a partition reaches its new owner only once
//! its old owner has said it let go of it. At every moment each partition has at most one
//! owner, which is what lets every other member keep consuming through a rebalance.
//!
//! Pure logic, run on the group's coordinator shard.

use uuid::Uuid;

use super::records::{MemberState, TopicPartitions};

/// Where a member's assignment stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberAssignment {
    pub epoch: i32,
    pub previous_epoch: i32,
    pub state: MemberState,
    /// Partitions the member owns and may consume.
    pub assigned: TopicPartitions,
    /// Partitions the member still owns but must give up before it gets anything new.
    pub pending_revocation: TopicPartitions,
}

impl MemberAssignment {
    /// A member that just joined: epoch 0, owning nothing.
    pub fn joining() -> Self {
        MemberAssignment {
            epoch: 0,
            previous_epoch: 0,
            state: MemberState::Stable,
            assigned: TopicPartitions::new(),
            pending_revocation: TopicPartitions::new(),
        }
    }

    /// Every partition the member holds: assigned and pending revocation.
    pub fn owned(&self) -> impl Iterator<Item = (Uuid, i32)> + '_ {
        partitions_of(&self.assigned).chain(partitions_of(&self.pending_revocation))
    }
}

/// Each (topic, partition) of `partitions`.
pub fn partitions_of(partitions: &TopicPartitions) -> impl Iterator<Item = (Uuid, i32)> + '_ {
    partitions
        .iter()
        .flat_map(|(topic, set)| set.iter().map(move |p| (*topic, *p)))
}

/// Whether `reported` (what the client says it owns) holds any of `partitions`.
fn holds_any(reported: &TopicPartitions, partitions: &TopicPartitions) -> bool {
    partitions_of(partitions).any(|(t, p)| reported.get(&t).is_some_and(|s| s.contains(&p)))
}

/// The member's next step toward `target` (the group's target assignment for it, made at
/// `target_epoch`). `reported` is what the member said it owns in this heartbeat (`None`: not
/// said). `is_free` says whether no other member holds a partition.
pub fn reconcile(
    current: &MemberAssignment,
    target: &TopicPartitions,
    target_epoch: i32,
    reported: Option<&TopicPartitions>,
    is_free: impl Fn(Uuid, i32) -> bool,
) -> MemberAssignment {
    let revoked = |pending: &TopicPartitions| reported.is_some_and(|owned| !holds_any(owned, pending));
    if current.state == MemberState::UnrevokedPartitions && !revoked(&current.pending_revocation) {
        return current.clone();
    }
    let revoke = difference(&current.assigned, target);
    if !revoke.is_empty() && !revoked(&revoke) {
        return MemberAssignment {
            epoch: current.epoch,
            previous_epoch: current.previous_epoch,
            state: MemberState::UnrevokedPartitions,
            assigned: intersection(&current.assigned, target),
            pending_revocation: revoke,
        };
    }
    let mut assigned = intersection(&current.assigned, target);
    let mut unreleased = false;
    for (topic, partition) in partitions_of(&difference(target, &current.assigned)) {
        if is_free(topic, partition) {
            assigned.entry(topic).or_default().insert(partition);
        } else {
            unreleased = true;
        }
    }
    let epoch_changes = current.epoch != target_epoch;
    MemberAssignment {
        epoch: target_epoch,
        previous_epoch: if epoch_changes {
            current.epoch
        } else {
            current.previous_epoch
        },
        state: if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        },
        assigned,
        pending_revocation: TopicPartitions::new(),
    }
}

/// `a` without the partitions of `b`, with no empty topics.
pub fn difference(a: &TopicPartitions, b: &TopicPartitions) -> TopicPartitions {
    a.iter()
        .filter_map(|(topic, set)| {
            let left: std::collections::BTreeSet<i32> = match b.get(topic) {
                Some(other) => set.difference(other).copied().collect(),
                None => set.clone(),
            };
            (!left.is_empty()).then_some((*topic, left))
        })
        .collect()
}

/// The partitions in both, with no empty topics.
pub fn intersection(a: &TopicPartitions, b: &TopicPartitions) -> TopicPartitions {
    a.iter()
        .filter_map(|(topic, set)| {
            let both: std::collections::BTreeSet<i32> = set.intersection(b.get(topic)?).copied().collect();
            (!both.is_empty()).then_some((*topic, both))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(parts: &[(u128, &[i32])]) -> TopicPartitions {
        parts
            .iter()
            .map(|(t, ps)| (Uuid::from_u128(*t), ps.iter().copied().collect()))
            .collect()
    }

    fn stable(epoch: i32, assigned: TopicPartitions) -> MemberAssignment {
        MemberAssignment {
            epoch,
            previous_epoch: epoch - 1,
            state: MemberState::Stable,
            assigned,
            pending_revocation: TopicPartitions::new(),
        }
    }

    #[test]
    fn revokes_before_it_assigns() {
        let current = stable(3, tp(&[(1, &[0, 1, 2])]));
        let target = tp(&[(1, &[0, 3])]);
        let next = reconcile(&current, &target, 4, None, |_, _| true);
        assert_eq!(next.state, MemberState::UnrevokedPartitions);
        assert_eq!(next.epoch, 3, "the epoch stays until the member revokes");
        assert_eq!(next.assigned, tp(&[(1, &[0])]));
        assert_eq!(next.pending_revocation, tp(&[(1, &[1, 2])]));
        // Still holding partition 2: nothing moves.
        let still = reconcile(&next, &target, 4, Some(&tp(&[(1, &[0, 2])])), |_, _| true);
        assert_eq!(still, next);
        // Let go of both: the member reaches the target epoch with the new partition.
        let done = reconcile(&next, &target, 4, Some(&tp(&[(1, &[0])])), |_, _| true);
        assert_eq!(done.state, MemberState::Stable);
        assert_eq!((done.epoch, done.previous_epoch), (4, 3));
        assert_eq!(done.assigned, target);
        assert!(done.pending_revocation.is_empty());
    }

    #[test]
    fn waits_for_partitions_another_member_holds() {
        let current = stable(3, tp(&[(1, &[0])]));
        let target = tp(&[(1, &[0, 1])]);
        let held = reconcile(&current, &target, 4, None, |_, p| p != 1);
        assert_eq!(held.state, MemberState::UnreleasedPartitions);
        assert_eq!(held.epoch, 4);
        assert_eq!(held.assigned, tp(&[(1, &[0])]));
        let released = reconcile(&held, &target, 4, None, |_, _| true);
        assert_eq!(released.state, MemberState::Stable);
        assert_eq!(released.assigned, target);
        assert_eq!(released.previous_epoch, 3, "the epoch did not change again");
    }

    #[test]
    fn a_member_that_already_let_go_skips_revocation() {
        let current = stable(3, tp(&[(1, &[0, 1])]));
        let target = tp(&[(2, &[0])]);
        let next = reconcile(&current, &target, 5, Some(&TopicPartitions::new()), |_, _| true);
        assert_eq!(next.state, MemberState::Stable);
        assert_eq!((next.epoch, next.assigned.clone()), (5, target));
    }

    #[test]
    fn a_stable_member_at_its_target_is_unchanged() {
        let current = stable(4, tp(&[(1, &[0, 1])]));
        let next = reconcile(&current, &current.assigned.clone(), 4, None, |_, _| false);
        assert_eq!(next, current);
    }
}
