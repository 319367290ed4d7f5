//! What deciding a controller request comes to: the records to write, and the answer to give
//! once they are committed. Its own module, so that each file of decisions (`decisions.rs`,
//! `topic_decisions.rs`, `reassignment.rs`) depends on it and none on another.

use crate::api::ControllerResponse;
use crate::records::MetadataRecord;

/// The records to write and the answer to give once they are committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub records: Vec<MetadataRecord>,
    pub response: ControllerResponse,
}

impl Decision {
    /// An answer that writes nothing.
    pub(crate) fn answer(response: ControllerResponse) -> Self {
        Decision {
            records: Vec::new(),
            response,
        }
    }
}
