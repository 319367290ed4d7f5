//! `laminar cluster config`: the dynamic broker configs (Kafka's `kafka-configs --entity-type
//! brokers`), of one broker (`--broker ID`) or of every broker (`--entity-default`): shown
//! without `--set`/`--delete`, changed with them.

use anyhow::{anyhow, Context};
use clap::Args;
use laminar_client::{ConfigChange, Connection, BROKER_RESOURCE};

use super::{connect_to, parse_key_value, print_table, BrokerArgs};

/// Kafka's ConfigSource codes, as DescribeConfigs answers them.
const SOURCE_NAMES: [(i8, &str); 4] = [
    (2, "dynamic (this broker)"),
    (3, "dynamic (every broker)"),
    (4, "static (server.properties)"),
    (5, "default"),
];

#[derive(Args, Debug)]
pub struct ConfigArgs {
    /// The broker (`node.id`) whose own values to show or change.
    #[arg(
        long,
        required_unless_present = "entity_default",
        conflicts_with = "entity_default"
    )]
    pub broker: Option<i32>,
    /// Every broker's default (Kafka's `--entity-default`).
    #[arg(long)]
    pub entity_default: bool,
    /// `key=value` to set, repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Key to delete (back to the default or static value), repeatable.
    #[arg(long = "delete", value_name = "KEY")]
    pub delete: Vec<String>,
    #[command(flatten)]
    pub brokers: BrokerArgs,
}

pub fn run(args: &ConfigArgs) -> anyhow::Result<()> {
    let name = args.broker.map(|id| id.to_string()).unwrap_or_default();
    let whose = args
        .broker
        .map_or("every broker".to_string(), |id| format!("broker {id}"));
    let mut connection = connection(args)?;
    let mut changes = Vec::new();
    for pair in &args.set {
        let (key, value) = parse_key_value(pair)?;
        changes.push(ConfigChange::Set(key, value));
    }
    changes.extend(args.delete.iter().cloned().map(ConfigChange::Delete));
    if changes.is_empty() {
        return describe(&mut connection, &name);
    }
    connection
        .alter_configs(BROKER_RESOURCE, &name, &changes)
        .with_context(|| format!("cannot alter the configs of {whose}"))?;
    println!("altered {} config(s) of {whose}", changes.len());
    Ok(())
}

/// A connection to the broker named (it answers for its own configs), else to any.
fn connection(args: &ConfigArgs) -> anyhow::Result<Connection> {
    let mut any = args.brokers.connect()?;
    let Some(id) = args.broker else {
        return Ok(any);
    };
    let metadata = any
        .metadata(Some(&[]), false)
        .context("cannot read cluster metadata")?;
    let address = metadata
        .broker_address(id)
        .ok_or_else(|| anyhow!("no broker {id} in the cluster"))?;
    connect_to(&address, &args.brokers.client_config()?)
        .with_context(|| format!("cannot reach broker {id} at {address}"))
}

/// Every value not at its default, with where it comes from.
fn describe(connection: &mut Connection, name: &str) -> anyhow::Result<()> {
    let entries = connection
        .describe_configs(BROKER_RESOURCE, name, None)
        .context("cannot describe the broker configs")?;
    let source = |code: i8| {
        let known = SOURCE_NAMES.iter().find(|(c, _)| *c == code);
        known.map_or_else(|| code.to_string(), |(_, n)| (*n).to_string())
    };
    let rows: Vec<Vec<String>> = entries
        .iter()
        .filter(|e| e.source != 5)
        .map(|e| {
            let value = e.value.clone().unwrap_or_else(|| "(sensitive)".into());
            vec![
                e.name.clone(),
                value,
                source(e.source),
                if e.read_only { "no" } else { "yes" }.into(),
            ]
        })
        .collect();
    print_table(&["KEY", "VALUE", "SOURCE", "DYNAMIC"], &rows);
    Ok(())
}
