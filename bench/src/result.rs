//! What a run produced: its measured sections, settings and limits. `output` prints and
//! writes it, `report` draws it.

use serde_json::Value;

use crate::limits::Limits;
use crate::stats::Measurement;
use crate::transactions::TransactionFigures;

/// One measured side of a run (produce, consume or end-to-end).
pub struct Section {
    /// "produce", "consume" or "e2e".
    pub name: &'static str,
    /// Verb of the summary line ("sent", "consumed", "received").
    pub verb: &'static str,
    /// What the latency measures.
    pub latency_kind: &'static str,
    /// What the bytes count.
    pub bytes_kind: &'static str,
    /// The numbers.
    pub measurement: Measurement,
}

/// Everything a run produced.
pub struct RunResult {
    /// "produce", "consume" or "e2e".
    pub kind: &'static str,
    /// The arguments, for the record.
    pub settings: Value,
    /// The first section's figures are also the top-level JSON fields.
    pub sections: Vec<Section>,
    /// This machine's limits, measured in the same run.
    pub limits: Option<Limits>,
    /// A transactional producer's transactions.
    pub transactions: Option<TransactionFigures>,
}
