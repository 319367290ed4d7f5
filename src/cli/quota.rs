//! `laminar quota set | remove | list`: client quotas, through AlterClientQuotas and
//! DescribeClientQuotas, with Kafka's names (`kafka-configs --entity-type users|clients|ips`):
//! an entity is a user, a client id, both, or an IP address, each named or the default.

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use laminar_security::quota::{EntityFilter, NameMatch, ENTITY_CLIENT_ID, ENTITY_IP, ENTITY_USER};
use laminar_security::{QuotaEntity, QuotaKey};

use super::{print_table, BrokerArgs};

#[derive(Subcommand, Debug)]
pub enum QuotaCommand {
    /// Set quotas of one entity.
    ///
    /// Example:
    ///   laminar quota set --client-id app --quota producer_byte_rate=1048576,consumer_byte_rate=2097152
    Set {
        #[command(flatten)]
        entity: EntityArgs,
        /// `key=value` pairs: producer_byte_rate, consumer_byte_rate (bytes a second),
        /// request_percentage (percent of one request thread), controller_mutation_rate
        /// (partitions created or deleted a second), connection_creation_rate (an --ip's).
        #[arg(long, value_delimiter = ',', required = true)]
        quota: Vec<String>,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// Remove quotas of one entity.
    Remove {
        #[command(flatten)]
        entity: EntityArgs,
        /// Quota keys to remove.
        #[arg(long, value_delimiter = ',', required = true)]
        key: Vec<String>,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// The quotas of the entities named (of every entity without one).
    List {
        #[command(flatten)]
        entity: EntityArgs,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
}

/// Which entity: a user and/or a client id, or an IP address; each by name or the default.
#[derive(Args, Debug)]
pub struct EntityArgs {
    #[arg(long)]
    user: Option<String>,
    /// The default user (Kafka's `<default>`): every user without a quota of its own.
    #[arg(long, conflicts_with = "user")]
    user_default: bool,
    #[arg(long)]
    client_id: Option<String>,
    /// The default client id.
    #[arg(long, conflicts_with = "client_id")]
    client_id_default: bool,
    #[arg(long)]
    ip: Option<String>,
    /// The default IP address.
    #[arg(long, conflicts_with = "ip")]
    ip_default: bool,
}

impl EntityArgs {
    /// `(entity type, Some(name) | None for the default)` of each part named.
    fn parts(&self) -> Vec<(&'static str, Option<&str>)> {
        fn part<'a>(
            kind: &'static str,
            name: &'a Option<String>,
            default: bool,
        ) -> Option<(&'static str, Option<&'a str>)> {
            match (name, default) {
                (Some(name), _) => Some((kind, Some(name.as_str()))),
                (None, true) => Some((kind, None)),
                (None, false) => None,
            }
        }
        [
            part(ENTITY_USER, &self.user, self.user_default),
            part(ENTITY_CLIENT_ID, &self.client_id, self.client_id_default),
            part(ENTITY_IP, &self.ip, self.ip_default),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    fn entity(&self) -> anyhow::Result<QuotaEntity> {
        QuotaEntity::from_parts(self.parts()).context("name the entity: --user, --client-id or --ip")
    }

    fn filter(&self) -> Vec<EntityFilter> {
        filter_of(self.parts())
    }
}

pub fn run(command: QuotaCommand) -> anyhow::Result<()> {
    match command {
        QuotaCommand::Set {
            entity,
            quota,
            brokers,
        } => {
            let ops = quota
                .iter()
                .map(|pair| set_op(pair))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let entity = entity.entity()?;
            let mut connection = brokers.connect()?;
            connection
                .alter_client_quotas(&entity, &ops)
                .with_context(|| format!("cannot set the quotas of {entity}"))?;
            print_quotas(connection.describe_client_quotas(&exactly(&entity), true)?);
        }
        QuotaCommand::Remove { entity, key, brokers } => {
            let ops = key
                .iter()
                .map(|k| Ok((key_of(k)?, None)))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let entity = entity.entity()?;
            brokers
                .connect()?
                .alter_client_quotas(&entity, &ops)
                .with_context(|| format!("cannot remove quotas of {entity}"))?;
        }
        QuotaCommand::List { entity, brokers } => {
            let listed = brokers
                .connect()?
                .describe_client_quotas(&entity.filter(), false)
                .context("cannot list the quotas")?;
            print_quotas(listed);
        }
    }
    Ok(())
}

fn exactly(entity: &QuotaEntity) -> Vec<EntityFilter> {
    filter_of(entity.parts())
}

/// A filter matching each part exactly: its name, or the default.
fn filter_of(parts: Vec<(&str, Option<&str>)>) -> Vec<EntityFilter> {
    let component = |(kind, name): (&str, Option<&str>)| EntityFilter {
        entity_type: kind.to_string(),
        matched: name.map_or(NameMatch::Default, |n| NameMatch::Exact(n.to_string())),
    };
    parts.into_iter().map(component).collect()
}

fn key_of(name: &str) -> anyhow::Result<QuotaKey> {
    QuotaKey::from_name(name.trim()).with_context(|| format!("{name:?} is not a quota key"))
}

fn set_op(pair: &str) -> anyhow::Result<(QuotaKey, Option<f64>)> {
    let Some((key, value)) = pair.split_once('=') else {
        bail!("{pair:?} is not key=value");
    };
    let value: f64 = value
        .trim()
        .parse()
        .with_context(|| format!("{value:?} is not a number"))?;
    Ok((key_of(key)?, Some(value)))
}

fn print_quotas(listed: Vec<(QuotaEntity, laminar_client::QuotaValues)>) {
    let rows: Vec<Vec<String>> = listed
        .into_iter()
        .flat_map(|(entity, values)| {
            values
                .into_iter()
                .map(move |(key, value)| vec![entity.to_string(), key, value.to_string()])
        })
        .collect();
    print_table(&["ENTITY", "QUOTA", "VALUE"], &rows);
}
