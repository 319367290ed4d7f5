//! `GET /v1/overview` (the broker at a glance) and `GET /v1/history` (the charts' samples).

use std::rc::Rc;

use kafka_protocol::messages::MetadataRequest;
use serde_json::json;

use super::{ok, ApiResult, Query};
use crate::admin_http::history::{self, quantile_ms, SAMPLES_MAX, SAMPLE_EVERY, WATCHED_FOR};
use crate::admin_http::AdminState;
use crate::broker::BrokerCtx;
use crate::handlers::metadata;
use crate::kafka_listener::ListenerId;
use crate::metrics::histogram::HistogramSnapshot;
use crate::metrics::{self, api_name, SnapshotDetail};

/// `GET /v1/overview`: brokers, topics and partitions, traffic totals and the latest rates,
/// request latency per API since start, each log dir's disk, open descriptors, transactions.
pub async fn get(ctx: &Rc<BrokerCtx>, admin: &Rc<AdminState>, query: &Query) -> ApiResult {
    query.only(&[])?;
    history::watched(ctx, admin);
    let shared = &ctx.state.shared;
    let snapshot = metrics::gather(ctx, SnapshotDetail::Totals).await;
    let cluster = metadata::handle(
        ctx,
        (&crate::authorization::Access::unrestricted(), ListenerId(0)),
        MetadataRequest::default().with_topics(Some(Vec::new())),
        9,
    )
    .await;
    let brokers: Vec<serde_json::Value> = cluster
        .brokers
        .iter()
        .map(|b| json!({ "node_id": b.node_id.0, "host": b.host.as_str(), "port": b.port }))
        .collect();
    let table = shared.metadata.current();
    let topics = snapshot.topics();
    let latency: Vec<serde_json::Value> = snapshot
        .requests()
        .iter()
        .map(|(key, r)| {
            json!({
                "request": api_name(*key),
                "count": r.served,
                "errors": r.failed,
                "p50_ms": quantile_ms(&r.latency, &HistogramSnapshot::default(), 0.5),
                "p99_ms": quantile_ms(&r.latency, &HistogramSnapshot::default(), 0.99),
            })
        })
        .collect();
    let latest = admin.history.borrow().samples().last().copied();
    ok(&json!({
        "version": env!("CARGO_PKG_VERSION"),
        "node_id": shared.node_id(),
        "cluster_id": shared.cluster_id,
        "controller_id": cluster.controller_id.0,
        "uptime_seconds": admin.started.elapsed().as_secs(),
        "ready": snapshot.all_shards_serving() && !shared.shutdown.is_triggered(),
        "shards": snapshot.shards.len(),
        "brokers": brokers,
        "topics": table.topics.len(),
        "partitions": table.partition_total(),
        "connections": snapshot.shards.iter().map(|s| s.connections_active).sum::<usize>(),
        // Partitions this broker leads whose ISR lacks a replica (0 outside a cluster).
        "under_replicated_partitions": snapshot.shards.iter().map(|s| s.replicas.under_replicated).sum::<usize>(),
        "partitions_led": snapshot.shards.iter().map(|s| s.replicas.led).sum::<usize>(),
        "log_bytes": snapshot.shards.iter().map(|s| s.log_bytes).sum::<u64>(),
        "bytes_in_total": topics.values().map(|t| t.bytes_in).sum::<u64>(),
        "bytes_out_total": topics.values().map(|t| t.bytes_out).sum::<u64>(),
        "bytes_in_per_second": latest.map(|s| s.bytes_in_per_second),
        "bytes_out_per_second": latest.map(|s| s.bytes_out_per_second),
        "request_latency": latency,
        "fdatasync_p99_ms": quantile_ms(&snapshot.fdatasync(), &HistogramSnapshot::default(), 0.99),
        "log_dirs": log_dirs(&shared.config.log_dirs),
        "descriptors": descriptors(&snapshot.descriptors),
        "transactions": transactions(&snapshot),
    }))
}

/// The transaction figures `/metrics` exports, added up over the shards.
fn transactions(snapshot: &metrics::BrokerSnapshot) -> serde_json::Value {
    let each = || snapshot.shards.iter().map(|s| s.transactions);
    json!({
        "ongoing": each().map(|t| t.ongoing).sum::<u64>(),
        "committed_total": each().map(|t| t.committed).sum::<u64>(),
        "aborted_total": each().map(|t| t.aborted).sum::<u64>(),
        "last_stable_offset_lag": each().map(|t| t.last_stable_offset_lag).sum::<u64>(),
    })
}

/// Each log dir with its file system's size and free space (statvfs).
fn log_dirs(dirs: &[std::path::PathBuf]) -> Vec<serde_json::Value> {
    dirs.iter()
        .map(|dir| match laminar_engine::io::file_system_space(dir) {
            Ok((total, free)) => json!({
                "path": dir.display().to_string(),
                "total_bytes": total,
                "free_bytes": free,
                "used_bytes": total.saturating_sub(free),
            }),
            Err(e) => json!({ "path": dir.display().to_string(), "error": e.to_string() }),
        })
        .collect()
}

/// Descriptors open in the process (`/proc/self/fd`) and its limit, next to the broker's shares.
fn descriptors(shares: &metrics::DescriptorsSnapshot) -> serde_json::Value {
    // The entry count is bounded by the process's own descriptor limit.
    let open = std::fs::read_dir("/proc/self/fd").map(|d| d.count()).ok();
    let limit = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("Max open files"))?;
            line.split_whitespace().nth(3)?.parse::<u64>().ok()
        });
    json!({
        "open": open,
        "limit": limit,
        "storage_used": shares.storage_used,
        "storage_max": shares.storage_max,
        "connections_used": shares.connections_used,
        "connections_max": shares.connections_max,
    })
}

/// `GET /v1/history`: the samples of the last minutes (see [`history`]); asking keeps the
/// sampler running.
pub fn history(ctx: &Rc<BrokerCtx>, admin: &Rc<AdminState>, query: &Query) -> ApiResult {
    query.only(&[])?;
    history::watched(ctx, admin);
    let history = admin.history.borrow();
    let samples: Vec<&history::Sample> = history.samples().collect();
    ok(&json!({
        "sample_every_seconds": SAMPLE_EVERY.as_secs(),
        "samples_max": SAMPLES_MAX,
        "sampling_stops_after_seconds_unwatched": WATCHED_FOR.as_secs(),
        "samples": samples,
    }))
}
