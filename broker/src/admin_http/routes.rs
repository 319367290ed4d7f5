//! What each admin path answers. Routing is pure (see [`route`]); the answers that need the
//! shards' state take a [`BrokerSnapshot`] gathered once per request.

use serde_json::json;

use super::request::RequestHead;
use crate::config::WriteBehindChoice;
use crate::metrics::families::{render, RenderContext};
use crate::metrics::{BrokerSnapshot, DescriptorsSnapshot, SnapshotDetail};

pub const METRICS_PATH: &str = "/metrics";
pub const STATUS_PATH: &str = "/v1/status";
/// Redpanda's readiness path: 200 when serving, 503 otherwise (for load balancers).
pub const READY_PATH: &str = "/v1/status/ready";

/// A served path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Metrics,
    Status,
    Ready,
}

/// An HTTP response; always sent with `Connection: close`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
    /// The methods a 405 names in its `Allow` header (GET when empty).
    pub allow: &'static str,
}

impl Response {
    pub fn text(status: u16, body: impl Into<String>) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
            allow: "",
        }
    }

    pub fn json(status: u16, value: &serde_json::Value) -> Response {
        let mut body = serde_json::to_string_pretty(value).expect("a JSON value always serializes");
        body.push('\n');
        Response {
            status,
            content_type: "application/json",
            body,
            allow: "",
        }
    }

    /// The whole response: status line, headers and body.
    pub fn encode(&self) -> Vec<u8> {
        let reason = match self.status {
            200 => "OK",
            201 => "Created",
            400 => "Bad Request",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "Not Found",
            405 => "Method Not Allowed",
            409 => "Conflict",
            411 => "Length Required",
            413 => "Content Too Large",
            415 => "Unsupported Media Type",
            422 => "Unprocessable Content",
            431 => "Request Header Fields Too Large",
            500 => "Internal Server Error",
            503 => "Service Unavailable",
            505 => "HTTP Version Not Supported",
            _ => "Error",
        };
        let allow = match (self.status, self.allow) {
            (405, "") => "Allow: GET\r\n".to_string(),
            (405, methods) => format!("Allow: {methods}\r\n"),
            (401, _) => "WWW-Authenticate: Bearer realm=\"laminar\"\r\n".to_string(),
            _ => String::new(),
        };
        // nosniff and no framing: the console's pages are only ever shown as themselves.
        let mut out = format!(
            "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{allow}\
             X-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\n\
             Cache-Control: no-store\r\nConnection: close\r\n\r\n",
            self.status,
            self.content_type,
            self.body.len()
        )
        .into_bytes();
        out.extend_from_slice(self.body.as_bytes());
        out
    }

    pub fn error(status: u16, message: &str) -> Response {
        Response::text(status, format!("{message}\n"))
    }
}

/// How much per-partition detail a request asks for: `?partitions=true` adds a series (or a JSON
/// entry) per partition; by default answers carry totals, so that their size does not grow with
/// the partition count.
pub fn detail(head: &RequestHead) -> SnapshotDetail {
    let wants_partitions = head.query.split('&').any(|pair| pair == "partitions=true");
    if wants_partitions {
        SnapshotDetail::Partitions
    } else {
        SnapshotDetail::Totals
    }
}

/// The route for a request, or the error response to send instead.
pub fn route(head: &RequestHead) -> Result<Route, Response> {
    let route = match head.path.as_str() {
        METRICS_PATH => Route::Metrics,
        STATUS_PATH => Route::Status,
        READY_PATH => Route::Ready,
        other => return Err(Response::error(404, &format!("no such path: {other}"))),
    };
    if head.method != "GET" {
        return Err(Response::error(405, &format!("{} only serves GET", head.path)));
    }
    Ok(route)
}

/// Facts about the broker that do not come from the shards.
#[derive(Debug, Clone)]
pub struct BrokerFacts {
    pub version: &'static str,
    pub node_id: i32,
    pub cluster_id: String,
    pub kafka_listener: String,
    pub uptime_seconds: f64,
    pub shutting_down: bool,
    /// Write-behind as configured, and where each setting came from.
    pub write_behind: WriteBehindChoice,
    /// Why configured write-behind does not run, if it does not.
    pub write_behind_unavailable: Option<String>,
}

impl BrokerFacts {
    fn ready(&self, snapshot: &BrokerSnapshot) -> bool {
        !self.shutting_down && snapshot.all_shards_serving()
    }
}

pub fn answer(route: Route, snapshot: &BrokerSnapshot, facts: &BrokerFacts) -> Response {
    match route {
        Route::Metrics => Response {
            status: 200,
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            body: render(
                snapshot,
                &RenderContext {
                    version: facts.version,
                    uptime_seconds: facts.uptime_seconds,
                    detail: snapshot.detail,
                },
            ),
            allow: "",
        },
        Route::Status => Response::json(200, &status_json(snapshot, facts)),
        Route::Ready => {
            let (status, state) = match (facts.ready(snapshot), facts.shutting_down) {
                (true, _) => (200, "ready"),
                (false, true) => (503, "stopping"),
                (false, false) => (503, "starting"),
            };
            Response::json(status, &json!({ "status": state }))
        }
    }
}

fn status_json(snapshot: &BrokerSnapshot, facts: &BrokerFacts) -> serde_json::Value {
    let shards: Vec<serde_json::Value> = snapshot
        .shards
        .iter()
        .map(|shard| {
            let partitions: Vec<serde_json::Value> = shard
                .partitions
                .iter()
                .map(|p| {
                    json!({
                        "topic": p.topic,
                        "partition": p.partition,
                        "open": p.open,
                        "log_start_offset": p.log_start_offset,
                        "log_end_offset": p.log_end_offset,
                        "size_bytes": p.size_bytes,
                    })
                })
                .collect();
            let write_behind = shard.write_behind.map(|s| {
                json!({
                    "ranges_submitted": s.ranges_submitted,
                    "ranges_completed": s.ranges_completed,
                    "ranges_failed": s.ranges_failed,
                    "ranges_deferred": s.ranges_deferred,
                    "bytes_submitted": s.bytes_submitted,
                    "bytes_written_back": s.bytes_written_back,
                    "in_flight": s.in_flight,
                    "in_flight_max": s.in_flight_max,
                    "files_without_descriptor": s.files_without_descriptor,
                })
            });
            json!({
                "shard": shard.shard,
                "serving": shard.kafka_listener_bound,
                "connections_active": shard.connections_active,
                "partition_count": shard.partition_count,
                "log_bytes": shard.log_bytes,
                // One entry per partition only with ?partitions=true.
                "partitions": partitions,
                "write_behind": write_behind,
                "files": {
                    "held": shard.files.files,
                    "parked": shard.files.parked,
                    "parks": shard.files.parks,
                    "reopens": shard.files.reopens,
                    "refusals": shard.files.refusals,
                },
            })
        })
        .collect();
    json!({
        "version": facts.version,
        "node_id": facts.node_id,
        "cluster_id": facts.cluster_id,
        "kafka_listener": facts.kafka_listener,
        "uptime_seconds": facts.uptime_seconds,
        "ready": facts.ready(snapshot),
        "shutting_down": facts.shutting_down,
        "write_behind": write_behind_json(facts),
        "descriptors": descriptors_json(&snapshot.descriptors),
        "shards": shards,
        "shards_not_answering": snapshot.shards_missing,
        "cluster": snapshot.cluster.as_ref().map(cluster_json),
    })
}

/// Cluster mode's section: this broker's membership and the quorum as its voter sees it
/// (voters' lags only on the active controller's node). Absent (null) in single-node mode.
fn cluster_json(cluster: &crate::quorum::ClusterStatus) -> serde_json::Value {
    let quorum = &cluster.quorum;
    let voters: Vec<serde_json::Value> = quorum
        .voters
        .iter()
        .map(|v| json!({ "node_id": v.node_id, "matched_index": v.matched_index, "lag": v.lag }))
        .collect();
    json!({
        "node_id": cluster.node_id,
        "role": quorum.role,
        "fenced": cluster.fenced,
        "broker_epoch": cluster.broker_epoch,
        "partitions_led": cluster.partitions_led,
        "quorum": {
            "leader_id": quorum.leader_id,
            "term": quorum.term,
            "last_log_index": quorum.last_log_index,
            "last_applied_index": quorum.last_applied_index,
            "snapshot_index": quorum.snapshot_index,
            "voters": voters,
        },
    })
}

fn descriptors_json(descriptors: &DescriptorsSnapshot) -> serde_json::Value {
    json!({
        "storage_max": descriptors.storage_max,
        "storage_used": descriptors.storage_used,
        "connections_max": descriptors.connections_max,
        "connections_used": descriptors.connections_used,
        "connections_refused_total": descriptors.connections_refused_total,
    })
}

fn write_behind_json(facts: &BrokerFacts) -> serde_json::Value {
    let choice = &facts.write_behind;
    json!({
        "active": choice.settings.is_enabled() && facts.write_behind_unavailable.is_none(),
        "write_batch_bytes": choice.settings.write_batch_bytes,
        "write_batch_bytes_source": choice.write_batch_bytes_source.to_string(),
        "io_depth": choice.settings.io_depth,
        "io_depth_source": choice.io_depth_source.to_string(),
        "unavailable": facts.write_behind_unavailable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::ShardSnapshot;

    fn head(method: &str, path: &str) -> RequestHead {
        RequestHead {
            method: method.into(),
            path: path.into(),
            ..RequestHead::default()
        }
    }

    #[test]
    fn per_partition_detail_only_when_asked() {
        let with_query = |query: &str| RequestHead {
            query: query.into(),
            ..head("GET", METRICS_PATH)
        };
        assert_eq!(detail(&head("GET", METRICS_PATH)), SnapshotDetail::Totals);
        assert_eq!(detail(&with_query("partitions=true")), SnapshotDetail::Partitions);
        assert_eq!(
            detail(&with_query("a=1&partitions=true")),
            SnapshotDetail::Partitions
        );
        assert_eq!(detail(&with_query("partitions=false")), SnapshotDetail::Totals);
    }

    fn facts(shutting_down: bool) -> BrokerFacts {
        BrokerFacts {
            version: "9.9.9",
            node_id: 3,
            cluster_id: "c".into(),
            kafka_listener: "127.0.0.1:9092".into(),
            uptime_seconds: 2.0,
            shutting_down,
            write_behind: crate::config::BrokerConfig::default().write_behind,
            write_behind_unavailable: None,
        }
    }

    #[test]
    fn routes_paths_and_methods() {
        assert_eq!(route(&head("GET", "/metrics")), Ok(Route::Metrics));
        assert_eq!(route(&head("GET", "/v1/status")), Ok(Route::Status));
        assert_eq!(route(&head("GET", "/v1/status/ready")), Ok(Route::Ready));
        assert_eq!(route(&head("GET", "/nope")).unwrap_err().status, 404);
        let refused = route(&head("POST", "/metrics")).unwrap_err();
        assert_eq!(refused.status, 405);
        let encoded = String::from_utf8(refused.encode()).unwrap();
        assert!(
            encoded.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
            "{encoded}"
        );
        assert!(encoded.contains("\r\nAllow: GET\r\n"));
        assert!(encoded.contains("\r\nConnection: close\r\n"));
    }

    #[test]
    fn readiness_needs_every_shard_serving_and_no_shutdown() {
        let serving = ShardSnapshot {
            kafka_listener_bound: true,
            ..ShardSnapshot::default()
        };
        let mut snapshot = BrokerSnapshot {
            shards: vec![serving.clone(), ShardSnapshot { shard: 1, ..serving }],
            ..BrokerSnapshot::default()
        };
        assert_eq!(answer(Route::Ready, &snapshot, &facts(false)).status, 200);
        assert_eq!(answer(Route::Ready, &snapshot, &facts(true)).status, 503);
        snapshot.shards[1].kafka_listener_bound = false;
        let starting = answer(Route::Ready, &snapshot, &facts(false));
        assert_eq!((starting.status, starting.body.contains("starting")), (503, true));
        snapshot.shards[1].kafka_listener_bound = true;
        snapshot.shards_missing.push(2);
        assert_eq!(answer(Route::Ready, &snapshot, &facts(false)).status, 503);
    }

    #[test]
    fn status_names_version_node_and_shards() {
        let snapshot = BrokerSnapshot {
            shards: vec![ShardSnapshot {
                kafka_listener_bound: true,
                ..ShardSnapshot::default()
            }],
            ..BrokerSnapshot::default()
        };
        let response = answer(Route::Status, &snapshot, &facts(false));
        let value: serde_json::Value = serde_json::from_str(&response.body).unwrap();
        assert_eq!(value["version"], "9.9.9");
        assert_eq!(value["node_id"], 3);
        assert_eq!(value["ready"], true);
        assert_eq!(value["shards"][0]["shard"], 0);
        assert_eq!(value["shards"][0]["write_behind"], serde_json::Value::Null);
        assert_eq!(value["write_behind"]["active"], false);
        assert_eq!(value["write_behind"]["write_batch_bytes_source"], "default");
    }
}
