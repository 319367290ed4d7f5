//! A one-way signal every shard can wait on: it stops them, and as the start gate it lets them
//! serve. It holds no broker state, so it stands apart from the state that holds it.

/// A one-way signal to every shard (stop, or start serving): closing the channel wakes every
/// waiter on every thread.
#[derive(Clone)]
pub struct ShutdownSignal {
    closed: async_channel::Receiver<()>,
    _keep_open: async_channel::Sender<()>,
}

impl Default for ShutdownSignal {
    fn default() -> Self {
        let (sender, receiver) = async_channel::bounded(1);
        Self {
            closed: receiver,
            _keep_open: sender,
        }
    }
}

impl ShutdownSignal {
    pub fn trigger(&self) {
        self.closed.close();
    }

    pub fn is_triggered(&self) -> bool {
        self.closed.is_closed()
    }

    /// Resolves once [`ShutdownSignal::trigger`] has been called (on any thread).
    pub async fn wait(&self) {
        while self.closed.recv().await.is_ok() {}
    }
}
