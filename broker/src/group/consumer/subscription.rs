//! What a member's subscription means in topics: its topic names and its regular expression,
//! resolved against the broker's topics. A regular expression is evaluated on the broker in
//! RE2's syntax (the `regex` crate implements it, in time linear in the name) and must match a
//! whole topic name, as Kafka's does; Kafka's internal topics never match one.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use regex::Regex;
use uuid::Uuid;

use super::assignor::AssignorTopic;

/// The topics the coordinator resolves subscriptions against.
pub trait TopicLookup {
    /// A topic's id and partition count, by name.
    fn by_name(&self, name: &str) -> Option<(Uuid, i32)>;
    /// A topic's name and partition count, by id.
    fn by_id(&self, id: Uuid) -> Option<(String, i32)>;
    /// Every topic's name, in order.
    fn names(&self) -> Vec<String>;
    /// The racks of each partition's replicas (empty sets where unknown).
    fn partition_racks(&self, id: Uuid) -> Vec<BTreeSet<String>>;
}

/// Topics a regular expression never matches.
const INTERNAL_TOPICS: [&str; 2] = ["__consumer_offsets", "__transaction_state"];

/// Compiled expressions are bounded in memory: a client's pattern cannot make the broker build
/// a huge automaton.
const REGEX_BYTES_MAX: usize = 1 << 20;

/// Longest expression accepted, in bytes.
pub const REGEX_LEN_MAX: usize = 4096;

/// Compiles a subscription's expression to match whole topic names; `None` if it is not valid
/// (INVALID_REGULAR_EXPRESSION).
pub fn compile(expression: &str) -> Option<Regex> {
    if expression.is_empty() || expression.len() > REGEX_LEN_MAX {
        return None;
    }
    regex::RegexBuilder::new(&format!("^(?:{expression})$"))
        .size_limit(REGEX_BYTES_MAX)
        .dfa_size_limit(REGEX_BYTES_MAX)
        .build()
        .ok()
}

/// The topics `regex` matches now.
pub fn matching(regex: &Regex, topics: &dyn TopicLookup) -> BTreeSet<String> {
    topics
        .names()
        .into_iter()
        .filter(|name| !INTERNAL_TOPICS.contains(&name.as_str()) && regex.is_match(name))
        .collect()
}

/// The ids of the existing topics among `names`.
pub fn ids_of<'a>(names: impl IntoIterator<Item = &'a String>, topics: &dyn TopicLookup) -> BTreeSet<Uuid> {
    names
        .into_iter()
        .filter_map(|name| topics.by_name(name).map(|(id, _)| id))
        .collect()
}

/// The assignor's view of `ids` (`with_racks`: with the racks of their partitions' replicas,
/// which only members that name their rack use).
pub fn assignor_topics(
    ids: &BTreeSet<Uuid>,
    topics: &dyn TopicLookup,
    with_racks: bool,
) -> BTreeMap<Uuid, AssignorTopic> {
    let described = |id: &Uuid| {
        let (name, partition_count) = topics.by_id(*id)?;
        let partition_racks = match with_racks {
            true => topics.partition_racks(*id),
            false => Vec::new(),
        };
        let topic = AssignorTopic {
            name,
            partition_count,
            partition_racks,
        };
        Some((*id, topic))
    };
    ids.iter().filter_map(described).collect()
}

/// A digest of what the assignment of `ids` depends on (ids, partition counts, and with
/// `with_racks` the replicas' racks): when it changes, the group needs a new target assignment.
pub fn fingerprint(ids: &BTreeSet<Uuid>, topics: &dyn TopicLookup, with_racks: bool) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for id in ids {
        id.hash(&mut hasher);
        topics.by_id(*id).map(|(_, count)| count).hash(&mut hasher);
        if with_racks {
            topics.partition_racks(*id).hash(&mut hasher);
        }
    }
    hasher.finish()
}

/// The broker's topics as consumer groups see them: the topic table, and in a cluster the
/// metadata image, for the racks of each partition's replicas.
pub struct BrokerTopics {
    pub table: std::sync::Arc<laminar_engine::metadata::TopicTable>,
    pub image: Option<std::sync::Arc<laminar_controller::MetadataImage>>,
}

impl BrokerTopics {
    pub fn of(shared: &crate::broker::BrokerShared) -> Self {
        BrokerTopics {
            table: shared.metadata.current(),
            image: shared.cluster.as_ref().map(|link| link.image()),
        }
    }
}

impl TopicLookup for BrokerTopics {
    fn by_name(&self, name: &str) -> Option<(Uuid, i32)> {
        self.table.by_name(name)
    }

    fn by_id(&self, id: Uuid) -> Option<(String, i32)> {
        self.table.by_id(id)
    }

    fn names(&self) -> Vec<String> {
        self.table.names()
    }

    fn partition_racks(&self, id: Uuid) -> Vec<BTreeSet<String>> {
        let Some(image) = &self.image else {
            return Vec::new();
        };
        let md = &image.metadata;
        let Some(topic) = md.topics.get(id.as_bytes()) else {
            return Vec::new();
        };
        let rack_of = |node| md.brokers.get(node).and_then(|b| b.rack.clone());
        let racks = topic
            .partitions
            .values()
            .map(|p| p.replicas.iter().filter_map(rack_of).collect());
        racks.collect()
    }
}

/// The broker's topics. Partition racks are not known to a single node's table.
impl TopicLookup for laminar_engine::metadata::TopicTable {
    fn by_name(&self, name: &str) -> Option<(Uuid, i32)> {
        self.get(name)
            .map(|t| (Uuid::from_bytes(t.id), t.partition_count))
    }

    fn by_id(&self, id: Uuid) -> Option<(String, i32)> {
        self.get_by_id(id.as_bytes())
            .map(|t| (t.name.clone(), t.partition_count))
    }

    fn names(&self) -> Vec<String> {
        self.topics.keys().cloned().collect()
    }

    fn partition_racks(&self, _id: Uuid) -> Vec<BTreeSet<String>> {
        Vec::new()
    }
}

/// Topics held in memory, for tests and tools.
#[derive(Debug, Clone, Default)]
pub struct TopicList {
    /// Name → (id, partition count).
    pub topics: BTreeMap<String, (Uuid, i32)>,
    /// The racks of each partition's replicas, where set.
    pub racks: BTreeMap<Uuid, Vec<BTreeSet<String>>>,
}

impl TopicLookup for TopicList {
    fn by_name(&self, name: &str) -> Option<(Uuid, i32)> {
        self.topics.get(name).copied()
    }

    fn by_id(&self, id: Uuid) -> Option<(String, i32)> {
        let found = self.topics.iter().find(|(_, (topic_id, _))| *topic_id == id);
        found.map(|(name, (_, count))| (name.clone(), *count))
    }

    fn names(&self) -> Vec<String> {
        self.topics.keys().cloned().collect()
    }

    fn partition_racks(&self, id: Uuid) -> Vec<BTreeSet<String>> {
        self.racks.get(&id).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_match_whole_names_and_skip_internal_topics() {
        let mut list = TopicList::default();
        for (i, name) in ["orders", "orders-eu", "my-orders", "__consumer_offsets"]
            .iter()
            .enumerate()
        {
            list.topics
                .insert(name.to_string(), (Uuid::from_u128(i as u128 + 1), 1));
        }
        let names = |e: &str| matching(&compile(e).expect("valid"), &list);
        assert_eq!(
            names("orders.*"),
            ["orders", "orders-eu"].map(String::from).into()
        );
        assert_eq!(
            names(".*"),
            ["my-orders", "orders", "orders-eu"].map(String::from).into()
        );
        assert_eq!(names("orders|x"), ["orders"].map(String::from).into());
        assert!(compile("(unclosed").is_none());
        assert!(compile("").is_none());
        assert!(compile(&"a".repeat(REGEX_LEN_MAX + 1)).is_none());
        // An expression whose automaton would pass the bound is refused, not built.
        assert!(compile("(\\w{100}){100}").is_none());
    }
}
