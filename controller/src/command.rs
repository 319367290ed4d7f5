//! What handles and forwarding peers hand the active-controller loop.

use tokio::sync::oneshot;

use crate::api::{ControllerRequest, ControllerResponse};

/// Requests queued for the active-controller loop, from handles and forwarding peers: past
/// this, senders wait (back-pressure), they are not dropped.
pub const COMMANDS_QUEUED_MAX: usize = 1024;

/// A request on its way to the active-controller loop, with where to send the answer.
pub struct Command {
    pub request: ControllerRequest,
    /// Came from another node: serve it here or answer NOT_CONTROLLER, never forward again.
    pub forwarded: bool,
    pub reply: oneshot::Sender<ControllerResponse>,
}
