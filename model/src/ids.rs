//! Offsets, epochs and ids: one integer each, with Kafka's sentinels named.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Declares a newtype over Kafka's integer: ordered, hashable, printed as the integer, and
/// serialised as the integer alone.
macro_rules! integer_newtype {
    ($(#[$doc:meta])* $name:ident($int:ty)) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name($int);

        impl $name {
            pub const fn new(value: $int) -> Self {
                $name(value)
            }

            /// The integer Kafka's protocol and Laminar's files carry.
            pub const fn get(self) -> $int {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

integer_newtype!(
    /// A record's position in its partition's log (Kafka's offset): the first record is at 0.
    Offset(i64)
);

integer_newtype!(
    /// A broker's or controller's id (Kafka's `node.id`, `broker.id`).
    NodeId(i32)
);

integer_newtype!(
    /// The generation of a partition's leadership: the controller raises it at each new leader,
    /// and every batch a leader appends carries it (Kafka's `partitionLeaderEpoch`).
    LeaderEpoch(i32)
);

integer_newtype!(
    /// The version of a partition's state in the controller (ISR, replicas): raised at each
    /// change, named by AlterPartition so that a stale change is refused.
    PartitionEpoch(i32)
);

integer_newtype!(
    /// One registration of a broker with the controller: a restarted broker gets a new one,
    /// so that a stale heartbeat or ISR change from its previous life is refused.
    BrokerEpoch(i64)
);

integer_newtype!(
    /// An idempotent producer's id, allocated by the controller in blocks.
    ProducerId(i64)
);

integer_newtype!(
    /// An idempotent producer's epoch within its id.
    ProducerEpoch(i16)
);

impl Offset {
    /// The first offset of a partition's log, where a log never written starts and ends.
    pub const ZERO: Offset = Offset(0);

    /// The offset after this one.
    pub const fn next(self) -> Offset {
        Offset(self.0.saturating_add(1))
    }

    /// The offset before this one; `None` at zero and below, which nothing precedes (the last
    /// offset of a log that ends at zero).
    pub const fn previous(self) -> Option<Offset> {
        if self.0 > 0 {
            Some(Offset(self.0 - 1))
        } else {
            None
        }
    }
}

impl NodeId {
    /// Kafka's "no node" (a partition without a leader, an unknown coordinator).
    pub const NONE: NodeId = NodeId(-1);
}

impl LeaderEpoch {
    /// Kafka's "not given" (a request without a current leader epoch, a batch written by a
    /// producer before any leader stamped it).
    pub const UNKNOWN: LeaderEpoch = LeaderEpoch(-1);

    /// The epoch of a partition's first leader (Kafka's initial leader epoch): also that of
    /// every batch a log holds before any later election reached it.
    pub const FIRST: LeaderEpoch = LeaderEpoch(0);

    /// How this epoch, named by a request, stands against `current` (KIP-320): `None` when the
    /// request names none ([`UNKNOWN`](Self::UNKNOWN)) or names `current`; `Less` when it is older
    /// (the requester's metadata is stale: FENCED_LEADER_EPOCH), `Greater` when newer (this
    /// broker's is: UNKNOWN_LEADER_EPOCH).
    pub fn stale_or_ahead_of(self, current: LeaderEpoch) -> Option<std::cmp::Ordering> {
        (self != LeaderEpoch::UNKNOWN && self != current).then(|| self.cmp(&current))
    }

    /// The epoch the controller gives the partition's next leader (saturating: an epoch at
    /// the end of its range stays there rather than wrap to an older one).
    pub const fn next(self) -> LeaderEpoch {
        LeaderEpoch(self.0.saturating_add(1))
    }
}

impl PartitionEpoch {
    /// The state's next version (saturating, as [`LeaderEpoch::next`]).
    pub const fn next(self) -> PartitionEpoch {
        PartitionEpoch(self.0.saturating_add(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_as_the_bare_integer() {
        assert_eq!(serde_json::to_string(&Offset::new(42)).unwrap(), "42");
        assert_eq!(serde_json::to_string(&NodeId::NONE).unwrap(), "-1");
        let epoch: LeaderEpoch = serde_json::from_str("7").unwrap();
        assert_eq!(epoch, LeaderEpoch::new(7));
    }

    #[test]
    fn orders_and_advances_as_its_integer() {
        assert!(Offset::new(3) < Offset::new(4));
        assert_eq!(Offset::new(3).next(), Offset::new(4));
        assert_eq!(Offset::new(4).previous(), Some(Offset::new(3)));
        assert_eq!(Offset::ZERO.previous(), None);
        assert_eq!(LeaderEpoch::UNKNOWN.next(), LeaderEpoch::FIRST);
        assert_eq!(LeaderEpoch::FIRST.get(), 0);
        assert_eq!(PartitionEpoch::new(5).next().get(), 6);
        assert_eq!(BrokerEpoch::new(9).to_string(), "9");
    }
}
