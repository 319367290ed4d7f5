//! `laminar bench`: load generator and reports for any Kafka-compatible broker, speaking Kafka
//! through `laminar_client`.
//!
//! - `produce`: batches built into reused buffers, several produce requests in flight per
//!   connection (one connection per producer thread), optional fixed rate with latency measured
//!   from each record's intended send time.
//! - `consume`: large fetches, records counted from batch headers.
//! - `e2e`: both at once; latency from the timestamp each record carries in its key.
//! - `limits`: the disk and loopback limits every result is read against.
//! - `sink`: a measurement tool for the harness's own ceiling (never a broker result).
//! - `scale`: starts a broker, gives it N partitions and measures what they cost against the goals of decision 0029.
//! - `replication`: starts a cluster and compares acks=all produce at replication factor 3
//!   with replication factor 1 in alternated rounds (decision 0014).
//! - `commits`: pipelined offset commits against the disk's fdatasync latency.

#![forbid(unsafe_code)]

mod accumulator;
mod batch_builder;
mod cli;
mod commits;
mod consume;
mod layout;
pub mod limits;
mod output;
pub mod pacing;
mod produce;
mod produce_request;
mod progress;
mod replication;
mod report;
mod result;
mod run;
mod scale;
mod setup;
pub mod sink;
mod stats;
mod transactions;

pub use cli::{
    BenchCommand, CommitsArgs, CompressionArg, ConsumeArgs, E2eArgs, LimitsArgs, ProduceArgs,
    ReplicationArgs, ScaleArgs, SinkArgs,
};
pub use produce::{payload, BatchBuilder, ProducerFields};

/// Runs a `laminar bench` command.
pub fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Produce(args) => run::produce(args),
        BenchCommand::Consume(args) => run::consume(args),
        BenchCommand::E2e(args) => run::end_to_end(args),
        BenchCommand::Limits(args) => {
            let limits = limits::measure(&args.dir, &limits::Budget::default())?;
            println!("{}", limits.describe());
            if let Some(path) = args.json {
                std::fs::write(&path, serde_json::to_string_pretty(&limits)?)?;
            }
            Ok(())
        }
        BenchCommand::Sink(args) => sink::serve_forever(&args.listen, args.record_size),
        BenchCommand::Scale(args) => scale::run(args),
        BenchCommand::Replication(args) => replication::run(args),
        BenchCommand::Commits(args) => commits::run(args),
    }
}
