//! A controller node: its thread, its tokio runtime, and what runs on it (openraft, the
//! listener, the active-controller loop). [`ControllerNode`] is owned by whoever started it
//! (the broker's main thread); dropping it stops the node and joins its thread.

use std::sync::Arc;

use openraft::Raft;
use tokio::sync::{mpsc, oneshot, watch};

use crate::active::ActiveController;
use crate::command::COMMANDS_QUEUED_MAX;
use crate::config::{raft_id, ControllerConfig, ControllerError};
use crate::handle::ControllerHandle;
use crate::log_store::LogStore;
use crate::metadata::MetadataImage;
use crate::network::NetworkFactory;
use crate::server::{serve, RpcHandler};
use crate::state_machine::MetadataStateMachine;
use crate::TypeConfig;

/// A running controller node. Dropping it shuts the node down.
pub struct ControllerNode {
    handle: ControllerHandle,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ControllerNode {
    /// Starts the node on a new thread and returns once its storage is open and its listener
    /// bound.
    pub fn start(config: ControllerConfig) -> Result<Self, ControllerError> {
        if config.bootstrap_records.len() > crate::config::BOOTSTRAP_RECORDS_MAX {
            let max = crate::config::BOOTSTRAP_RECORDS_MAX;
            return Err(ControllerError::Config(format!(
                "at most {max} bootstrap SCRAM users"
            )));
        }
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
        let (shutdown_tx, shutdown_rx) = oneshot::channel();
        let name = format!("controller-{}", config.node_id);
        let thread = std::thread::Builder::new().name(name).spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
            match runtime {
                Ok(runtime) => runtime.block_on(run(config, ready_tx, shutdown_rx)),
                Err(e) => drop(ready_tx.send(Err(ControllerError::Io(e)))),
            }
        })?;
        let ready = ready_rx
            .recv()
            .map_err(|_| ControllerError::Raft("controller thread ended".into()));
        match ready.and_then(|r| r) {
            Ok(handle) => Ok(ControllerNode {
                handle,
                shutdown: Some(shutdown_tx),
                thread: Some(thread),
            }),
            Err(e) => {
                let _ = thread.join();
                Err(e)
            }
        }
    }

    pub fn handle(&self) -> ControllerHandle {
        self.handle.clone()
    }

    /// Stops openraft, the listener and the loop, and joins the thread.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ControllerNode {
    fn drop(&mut self) {
        self.stop();
    }
}

type Ready = std::sync::mpsc::SyncSender<Result<ControllerHandle, ControllerError>>;

async fn run(config: ControllerConfig, ready: Ready, shutdown: oneshot::Receiver<()>) {
    let started = start_parts(&config).await;
    let (raft, handle, tasks) = match started {
        Ok(parts) => parts,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(Ok(handle));
    let _ = shutdown.await;
    if let Err(e) = raft.shutdown().await {
        tracing::warn!(error = %e, "controller: raft shutdown");
    }
    for task in tasks {
        task.abort();
    }
}

async fn start_parts(
    config: &ControllerConfig,
) -> Result<
    (
        Raft<TypeConfig>,
        ControllerHandle,
        Vec<tokio::task::JoinHandle<()>>,
    ),
    ControllerError,
> {
    let members = config.members()?;
    let node_id = raft_id(config.node_id)?;
    let (images_tx, images_rx) = watch::channel(Arc::new(MetadataImage::default()));
    let log_store = LogStore::open(&config.metadata_dir)?;
    let fault = crate::fault::stop_the_process();
    let state_machine = MetadataStateMachine::open(&config.metadata_dir, images_tx, fault)?;
    let listener = tokio::net::TcpListener::bind(config.listen_addr).await?;
    let listen_addr = listener.local_addr()?;
    let raft = Raft::new(
        node_id,
        config.raft_config()?,
        NetworkFactory {
            security: config.transport_security.clone(),
        },
        log_store,
        state_machine,
    )
    .await
    .map_err(|e| ControllerError::Raft(e.to_string()))?;
    let is_initialized = raft
        .is_initialized()
        .await
        .map_err(|e| ControllerError::Raft(e.to_string()))?;
    if !is_initialized && config.observer_address.is_none() {
        // Every voter bootstraps the same static membership (controller.quorum.voters);
        // openraft accepts that, and refuses it once a log exists. An observer waits to be
        // added (`observers::join`).
        if let Err(e) = raft.initialize(members.clone()).await {
            tracing::debug!(error = %e, "controller: initialize");
        }
    }
    let (commands_tx, commands_rx) = mpsc::channel(COMMANDS_QUEUED_MAX);
    let handler = RpcHandler {
        raft: raft.clone(),
        commands: commands_tx.clone(),
    };
    let active = ActiveController::new(node_id, config, raft.clone(), images_rx.clone(), members);
    let mut tasks = vec![
        tokio::spawn(serve(listener, handler, config.transport_security.clone())),
        tokio::spawn(active.run(commands_rx)),
        tokio::spawn(crate::fault::stop_the_process_if_raft_stops(raft.metrics())),
    ];
    if let Some(address) = config.observer_address.clone() {
        tasks.push(tokio::spawn(crate::observers::join(config.clone(), address)));
    }
    let handle = ControllerHandle::new(node_id, listen_addr, commands_tx, images_rx, raft.metrics());
    Ok((raft, handle, tasks))
}
