//! `laminar user create | delete | list`: SCRAM users, through AlterUserScramCredentials and
//! DescribeUserScramCredentials. The password is salted and hashed here (PBKDF2, as the
//! mechanism says): only the salted password reaches the broker, which keeps keys derived
//! from it, never the password.

use anyhow::{bail, Context};
use clap::Subcommand;
use laminar_security::{Mechanism, ScramCredential};

use super::{print_table, BrokerArgs};

#[derive(Subcommand, Debug)]
pub enum UserCommand {
    /// Create a SCRAM user, or give an existing one a new password. The password comes from
    /// --password, else LAMINAR_USER_PASSWORD, else the first line of stdin.
    ///
    /// Example:
    ///   LAMINAR_USER_PASSWORD=s3cret laminar user create alice --mechanism SCRAM-SHA-512
    Create {
        name: String,
        #[arg(long, default_value = "SCRAM-SHA-512")]
        mechanism: Mechanism,
        /// PBKDF2 iterations (4096 to 16384, as Kafka).
        #[arg(long, default_value_t = 8192)]
        iterations: u32,
        #[arg(long)]
        password: Option<String>,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// Delete a user's credential for one mechanism.
    ///
    /// Example:
    ///   laminar user delete alice --mechanism SCRAM-SHA-512
    Delete {
        name: String,
        #[arg(long, default_value = "SCRAM-SHA-512")]
        mechanism: Mechanism,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// Every SCRAM user with its mechanisms and iterations (never a salt or key).
    List {
        #[command(flatten)]
        brokers: BrokerArgs,
    },
}

pub fn run(command: UserCommand) -> anyhow::Result<()> {
    match command {
        UserCommand::Create {
            name,
            mechanism,
            iterations,
            password,
            brokers,
        } => {
            let password = password_from(password)?;
            let salt = ScramCredential::random_salt()?;
            let salted = ScramCredential::salted_password(mechanism, &password, &salt, iterations)?;
            let iterations_i32 = i32::try_from(iterations).context("iterations")?;
            brokers
                .connect()?
                .upsert_scram_user(&name, mechanism, (salt, salted, iterations_i32))?;
            println!("user {name}: {mechanism} credential set ({iterations} iterations)");
        }
        UserCommand::Delete {
            name,
            mechanism,
            brokers,
        } => {
            brokers.connect()?.delete_scram_user(&name, mechanism)?;
            println!("user {name}: {mechanism} credential deleted");
        }
        UserCommand::List { brokers } => list(&brokers)?,
    }
    Ok(())
}

fn password_from(given: Option<String>) -> anyhow::Result<String> {
    if let Some(password) = given.or_else(|| std::env::var("LAMINAR_USER_PASSWORD").ok()) {
        return Ok(password);
    }
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .context("reading the password from stdin")?;
    let password = line.trim_end_matches(['\r', '\n']).to_string();
    if password.is_empty() {
        bail!("no password: give --password, LAMINAR_USER_PASSWORD or a line on stdin");
    }
    Ok(password)
}

fn list(brokers: &BrokerArgs) -> anyhow::Result<()> {
    let rows: Vec<Vec<String>> = brokers
        .connect()?
        .scram_users()?
        .into_iter()
        .map(|u| {
            let mechanism = u.mechanism.map_or("?".to_string(), |m| m.to_string());
            vec![u.user, mechanism, u.iterations.to_string()]
        })
        .collect();
    print_table(&["USER", "MECHANISM", "ITERATIONS"], &rows);
    Ok(())
}
