//! Wall-clock time as Kafka records it: milliseconds since the Unix epoch.

/// Now, in milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> i64 {
    laminar_model::UnixMillis::now().get()
}
