//! `laminar acl create | list | delete`: ACLs, through CreateAcls, DescribeAcls and DeleteAcls,
//! with the names of Kafka's `kafka-acls` (principals `User:alice`, operations READ, WRITE, ...,
//! resources by topic, group, transactional id or the cluster, literal or prefixed).

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use laminar_security::acl::{AclBinding, AclFilter, PatternFilter, CLUSTER_NAME, WILDCARD};
use laminar_security::{Operation, PatternType, Permission, Principal, ResourceType};

use super::{print_table, BrokerArgs};

#[derive(Subcommand, Debug)]
pub enum AclCommand {
    /// Allow (or deny) principals operations on one resource.
    ///
    /// Example:
    ///   laminar acl create --allow-principal User:alice --operation read,write --topic orders- --prefixed
    Create {
        /// Principals allowed (`User:alice`; `User:*` is everyone).
        #[arg(long, value_delimiter = ',')]
        allow_principal: Vec<Principal>,
        /// Principals denied (a deny wins over every allow).
        #[arg(long, value_delimiter = ',')]
        deny_principal: Vec<Principal>,
        /// READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
        /// ALTER_CONFIGS, IDEMPOTENT_WRITE or ALL.
        #[arg(long, value_delimiter = ',', required = true)]
        operation: Vec<Operation>,
        /// The client address the ACLs apply from (`*`: any).
        #[arg(long, default_value = WILDCARD)]
        host: String,
        #[command(flatten)]
        resource: ResourceArgs,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// The ACLs of a resource (every one without a resource), optionally of one principal.
    List {
        #[command(flatten)]
        resource: ResourceArgs,
        #[arg(long)]
        principal: Option<Principal>,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// Delete the ACLs of a resource (of one principal, or with one operation).
    Delete {
        #[command(flatten)]
        resource: ResourceArgs,
        #[arg(long)]
        principal: Option<Principal>,
        #[arg(long)]
        operation: Option<Operation>,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
}

/// Which resource: one of --topic, --group, --transactional-id, --cluster.
#[derive(Args, Debug)]
pub struct ResourceArgs {
    #[arg(long)]
    topic: Option<String>,
    #[arg(long)]
    group: Option<String>,
    #[arg(long)]
    transactional_id: Option<String>,
    #[arg(long)]
    cluster: bool,
    /// The name is a prefix (PREFIXED) rather than the name itself (LITERAL).
    #[arg(long)]
    prefixed: bool,
}

impl ResourceArgs {
    /// The resource named, if any.
    fn resource(&self) -> anyhow::Result<Option<(ResourceType, String, PatternType)>> {
        let named: Vec<(ResourceType, String)> = [
            self.topic.clone().map(|t| (ResourceType::Topic, t)),
            self.group.clone().map(|g| (ResourceType::Group, g)),
            self.transactional_id
                .clone()
                .map(|t| (ResourceType::TransactionalId, t)),
            self.cluster
                .then(|| (ResourceType::Cluster, CLUSTER_NAME.to_string())),
        ]
        .into_iter()
        .flatten()
        .collect();
        let pattern = if self.prefixed {
            PatternType::Prefixed
        } else {
            PatternType::Literal
        };
        match named.as_slice() {
            [] => Ok(None),
            [(kind, name)] => Ok(Some((*kind, name.clone(), pattern))),
            _ => bail!("name one resource: --topic, --group, --transactional-id or --cluster"),
        }
    }

    fn filter(&self) -> anyhow::Result<AclFilter> {
        let resource = self.resource()?;
        Ok(AclFilter {
            resource_type: resource.as_ref().map(|r| r.0),
            resource_name: resource.as_ref().map(|r| r.1.clone()),
            pattern_type: resource
                .as_ref()
                .map_or(PatternFilter::Any, |r| PatternFilter::Exactly(r.2)),
            ..AclFilter::default()
        })
    }
}

pub fn run(command: AclCommand) -> anyhow::Result<()> {
    match command {
        AclCommand::Create {
            allow_principal,
            deny_principal,
            operation,
            host,
            resource,
            brokers,
        } => {
            let principals = allow_principal
                .into_iter()
                .map(|p| (p, Permission::Allow))
                .chain(deny_principal.into_iter().map(|p| (p, Permission::Deny)));
            let acls = bindings(&resource, principals, &operation, &host)?;
            brokers
                .connect()?
                .create_acls(&acls)
                .context("cannot create the ACLs")?;
            print_acls(&acls);
        }
        AclCommand::List {
            resource,
            principal,
            brokers,
        } => {
            let filter = AclFilter {
                principal,
                ..resource.filter()?
            };
            let acls = brokers
                .connect()?
                .describe_acls(&filter)
                .context("cannot list the ACLs")?;
            print_acls(&acls);
        }
        AclCommand::Delete {
            resource,
            principal,
            operation,
            brokers,
        } => {
            let filter = AclFilter {
                principal,
                operation,
                ..resource.filter()?
            };
            let deleted = brokers
                .connect()?
                .delete_acls(&filter)
                .context("cannot delete the ACLs")?;
            print_acls(&deleted);
        }
    }
    Ok(())
}

/// One ACL per principal and operation on the resource named.
fn bindings(
    resource: &ResourceArgs,
    principals: impl Iterator<Item = (Principal, Permission)>,
    operations: &[Operation],
    host: &str,
) -> anyhow::Result<Vec<AclBinding>> {
    let Some((resource_type, resource_name, pattern_type)) = resource.resource()? else {
        bail!("name the resource: --topic, --group, --transactional-id or --cluster");
    };
    let mut acls = Vec::new();
    for (principal, permission) in principals {
        for operation in operations {
            acls.push(AclBinding {
                resource_type,
                resource_name: resource_name.clone(),
                pattern_type,
                principal: principal.clone(),
                host: host.to_string(),
                operation: *operation,
                permission,
            });
        }
    }
    if acls.is_empty() {
        bail!("name at least one --allow-principal or --deny-principal");
    }
    Ok(acls)
}

fn print_acls(acls: &[AclBinding]) {
    let rows: Vec<Vec<String>> = acls
        .iter()
        .map(|acl| {
            vec![
                acl.principal.to_string(),
                acl.host.clone(),
                acl.resource_type.to_string(),
                acl.resource_name.clone(),
                acl.pattern_type.to_string(),
                acl.operation.to_string(),
                acl.permission.to_string(),
            ]
        })
        .collect();
    print_table(
        &[
            "PRINCIPAL",
            "HOST",
            "RESOURCE-TYPE",
            "RESOURCE-NAME",
            "PATTERN",
            "OPERATION",
            "PERMISSION",
        ],
        &rows,
    );
}
