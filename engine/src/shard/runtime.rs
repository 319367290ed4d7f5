//! Starts one pinned glommio executor per shard and connects them with a message mesh.
//!
//! Cross-shard work travels as closures over bounded channels (`submit_to`), in the spirit of
//! Seastar's `smp::submit_to`: the closure runs on the target shard with that shard's context,
//! and its result comes back over a oneshot channel. Nothing on the data path takes a lock.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use glommio::{LocalExecutorBuilder, Placement};

/// A shard's index, `0..shard_count`. One shard per core.
pub type ShardId = usize;

/// Jobs queued per shard before senders wait: cross-shard traffic is bounded (invariant 9).
const JOB_QUEUE_DEPTH: usize = 1024;

type LocalFuture = Pin<Box<dyn Future<Output = ()>>>;
type Job<S> = Box<dyn FnOnce(Rc<ShardContext<S>>) -> LocalFuture + Send>;

/// The target shard no longer accepts work (it is shutting down or has stopped).
#[derive(Debug, thiserror::Error)]
#[error("shard {0} has stopped")]
pub struct ShardGone(pub ShardId);

/// What a shard knows about itself and how it reaches the others.
///
/// Owned by one shard; not Send. `state` is the per-shard state of the layer above (for the
/// broker: its open partitions and connections).
pub struct ShardContext<S> {
    id: ShardId,
    senders: Arc<Vec<async_channel::Sender<Job<S>>>>,
    pub state: S,
}

impl<S: 'static> ShardContext<S> {
    pub fn id(&self) -> ShardId {
        self.id
    }

    pub fn shard_count(&self) -> usize {
        self.senders.len()
    }

    /// Runs `work` on `shard` with that shard's context and returns its result. Work for the
    /// current shard runs inline, without a hop. The work runs to its end even if the caller
    /// stops waiting (an append must not stop half-way).
    pub async fn submit_to<R, F, Fut>(self: &Rc<Self>, shard: ShardId, work: F) -> Result<R, ShardGone>
    where
        F: FnOnce(Rc<ShardContext<S>>) -> Fut + Send + 'static,
        Fut: Future<Output = R> + 'static,
        R: Send + 'static,
    {
        self.submit(shard, work, WhenAbandoned::Finish).await
    }

    /// As [`Self::submit_to`], for work that only waits for something (a long-poll fetch): once
    /// the caller drops the returned future, the work on the other shard is dropped at its next
    /// await, so an abandoned wait leaves nothing behind there.
    pub async fn submit_wait_to<R, F, Fut>(self: &Rc<Self>, shard: ShardId, work: F) -> Result<R, ShardGone>
    where
        F: FnOnce(Rc<ShardContext<S>>) -> Fut + Send + 'static,
        Fut: Future<Output = R> + 'static,
        R: Send + 'static,
    {
        self.submit(shard, work, WhenAbandoned::Drop).await
    }

    async fn submit<R, F, Fut>(
        self: &Rc<Self>,
        shard: ShardId,
        work: F,
        when_abandoned: WhenAbandoned,
    ) -> Result<R, ShardGone>
    where
        F: FnOnce(Rc<ShardContext<S>>) -> Fut + Send + 'static,
        Fut: Future<Output = R> + 'static,
        R: Send + 'static,
    {
        assert!(shard < self.shard_count(), "shard {shard} out of range");
        if shard == self.id {
            return Ok(work(self.clone()).await);
        }
        let (mut reply_tx, reply_rx) = futures::channel::oneshot::channel();
        let job: Job<S> = Box::new(move |ctx| {
            Box::pin(async move {
                let result = match when_abandoned {
                    WhenAbandoned::Finish => Some(work(ctx).await),
                    WhenAbandoned::Drop => {
                        let work = std::pin::pin!(work(ctx));
                        let abandoned = std::pin::pin!(reply_tx.cancellation());
                        match futures::future::select(work, abandoned).await {
                            futures::future::Either::Left((result, _)) => Some(result),
                            futures::future::Either::Right(_) => None,
                        }
                    }
                };
                if let Some(result) = result {
                    let _ = reply_tx.send(result);
                }
            })
        });
        self.senders[shard]
            .send(job)
            .await
            .map_err(|_| ShardGone(shard))?;
        reply_rx.await.map_err(|_| ShardGone(shard))
    }
}

/// What cross-shard work does when its caller stops waiting for the result.
#[derive(Debug, Clone, Copy)]
enum WhenAbandoned {
    /// Run to the end (work with effects).
    Finish,
    /// Stop at the next await (work that only waits).
    Drop,
}

/// How to start the shards.
#[derive(Debug, Clone)]
pub struct ShardRuntimeConfig {
    pub shard_count: usize,
    /// Pin each shard to its own CPU (round-robin over the online CPUs).
    pub pin: bool,
    /// Busy-poll this long before the executor sleeps: lower cross-shard latency, more CPU.
    pub spin_before_park: Option<Duration>,
}

/// The running shards. Dropping it does not stop them; call [`ShardRuntime::join`].
pub struct ShardRuntime<S> {
    handles: Vec<glommio::ExecutorJoinHandle<()>>,
    senders: Arc<Vec<async_channel::Sender<Job<S>>>>,
}

impl<S: 'static> ShardRuntime<S> {
    /// Starts `config.shard_count` executors. On each, `init(id)` builds the shard state (on that
    /// shard's own thread, so it need not be Send), then `main(ctx)` runs. A shard whose `main`
    /// returns keeps serving other shards' jobs until every shard's `main` has returned, so a
    /// shutdown on one shard never strands a request forwarded from another.
    pub fn start<Init, Main, Fut>(config: ShardRuntimeConfig, init: Init, main: Main) -> std::io::Result<Self>
    where
        S: 'static,
        Init: Fn(ShardId) -> S + Send + Sync + 'static,
        Main: Fn(Rc<ShardContext<S>>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        assert!(config.shard_count > 0, "a broker runs at least one shard");
        install_shard_panic_hook();
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..config.shard_count)
            .map(|_| async_channel::bounded::<Job<S>>(JOB_QUEUE_DEPTH))
            .unzip();
        let senders = Arc::new(senders);
        let init = Arc::new(init);
        let main = Arc::new(main);
        let running_mains = Arc::new(AtomicUsize::new(config.shard_count));
        let cpus = online_cpus();
        let mut handles = Vec::with_capacity(config.shard_count);
        for (id, jobs) in receivers.into_iter().enumerate() {
            let placement = if config.pin && !cpus.is_empty() {
                Placement::Fixed(cpus[id % cpus.len()])
            } else {
                Placement::Unbound
            };
            let mut builder = LocalExecutorBuilder::new(placement).name(&format!("laminar-shard-{id}"));
            if let Some(spin) = config.spin_before_park {
                builder = builder.spin_before_park(spin);
            }
            let (senders, init, main, running_mains) =
                (senders.clone(), init.clone(), main.clone(), running_mains.clone());
            let handle = builder
                .spawn(move || async move {
                    let ctx = Rc::new(ShardContext {
                        id,
                        senders,
                        state: init(id),
                    });
                    let job_loop = glommio::spawn_local(serve_jobs(ctx.clone(), jobs));
                    main(ctx).await;
                    running_mains.fetch_sub(1, Ordering::AcqRel);
                    // Shutdown only: a bounded wait, polled, while this shard keeps serving jobs.
                    while running_mains.load(Ordering::Acquire) > 0 {
                        glommio::timer::sleep(Duration::from_millis(5)).await;
                    }
                    drop(job_loop);
                })
                .map_err(|e| std::io::Error::other(format!("cannot start shard {id}: {e}")))?;
            handles.push(handle);
        }
        Ok(Self { handles, senders })
    }

    /// Runs `work` on `shard` with its context, from a thread that is not a shard, and blocks
    /// until it returns. For tools that drive a shard without a socket (the fuzzer feeds request
    /// frames to the handlers this way); the request path never uses it.
    pub fn run_on<R, F, Fut>(&self, shard: ShardId, work: F) -> Result<R, ShardGone>
    where
        F: FnOnce(Rc<ShardContext<S>>) -> Fut + Send + 'static,
        Fut: Future<Output = R> + 'static,
        R: Send + 'static,
    {
        assert!(shard < self.senders.len(), "shard {shard} out of range");
        let (reply_tx, reply_rx) = futures::channel::oneshot::channel();
        let job: Job<S> = Box::new(move |ctx| {
            Box::pin(async move {
                let _ = reply_tx.send(work(ctx).await);
            })
        });
        self.senders[shard]
            .send_blocking(job)
            .map_err(|_| ShardGone(shard))?;
        futures::executor::block_on(reply_rx).map_err(|_| ShardGone(shard))
    }

    /// Waits for every shard to stop.
    pub fn join(self) -> Result<(), String> {
        for (id, handle) in self.handles.into_iter().enumerate() {
            handle.join().map_err(|e| format!("shard {id} failed: {e}"))?;
        }
        Ok(())
    }
}

async fn serve_jobs<S: 'static>(ctx: Rc<ShardContext<S>>, jobs: async_channel::Receiver<Job<S>>) {
    while let Ok(job) = jobs.recv().await {
        glommio::spawn_local(job(ctx.clone())).detach();
    }
}

fn online_cpus() -> Vec<usize> {
    core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|core| core.id)
        .collect()
}

/// A panic is a bug. One shard dead while the others serve would silently lose its partitions,
/// so a panic on any shard thread ends the whole process, loudly, after the default report.
fn install_shard_panic_hook() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            default_hook(info);
            let on_shard = std::thread::current()
                .name()
                .is_some_and(|name| name.starts_with("laminar-shard-"));
            if on_shard {
                eprintln!("laminar: a shard panicked (a bug); stopping the process");
                std::process::exit(70);
            }
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn work_run_from_outside_runs_on_the_shard_named_with_its_state() {
        let (stop_tx, stop_rx) = async_channel::bounded::<()>(1);
        let config = ShardRuntimeConfig {
            shard_count: 2,
            pin: false,
            spin_before_park: None,
        };
        let runtime = ShardRuntime::start(
            config,
            |id| Cell::new(id * 100),
            move |_ctx: Rc<ShardContext<Cell<usize>>>| {
                let stop = stop_rx.clone();
                async move { while stop.recv().await.is_ok() {} }
            },
        )
        .unwrap();
        let bump = |ctx: Rc<ShardContext<Cell<usize>>>| async move {
            ctx.state.set(ctx.state.get() + 1);
            (ctx.id(), ctx.state.get())
        };
        assert_eq!(runtime.run_on(1, bump).unwrap(), (1, 101));
        assert_eq!(runtime.run_on(1, bump).unwrap(), (1, 102));
        assert_eq!(runtime.run_on(0, bump).unwrap(), (0, 1));
        stop_tx.close();
        runtime.join().unwrap();
    }

    #[test]
    fn work_submitted_to_another_shard_runs_there_with_its_state() {
        let config = ShardRuntimeConfig {
            shard_count: 2,
            pin: false,
            spin_before_park: None,
        };
        let answers = Arc::new(std::sync::Mutex::new(Vec::new()));
        let answers_in = answers.clone();
        let runtime = ShardRuntime::start(
            config,
            |id| Cell::new(id * 100),
            move |ctx: Rc<ShardContext<Cell<usize>>>| {
                let answers = answers_in.clone();
                async move {
                    let other = (ctx.id() + 1) % ctx.shard_count();
                    for _ in 0..50 {
                        let seen = ctx
                            .submit_to(other, |there| async move {
                                there.state.set(there.state.get() + 1);
                                (there.id(), there.state.get())
                            })
                            .await
                            .expect("the other shard is alive until every main returns");
                        assert_eq!(seen.0, other);
                    }
                    let local = ctx
                        .submit_to(ctx.id(), |here| async move { here.id() })
                        .await
                        .unwrap();
                    answers.lock().unwrap().push((ctx.id(), local));
                }
            },
        )
        .unwrap();
        runtime.join().unwrap();
        let mut answers = answers.lock().unwrap().clone();
        answers.sort_unstable();
        assert_eq!(answers, vec![(0, 0), (1, 1)]);
    }

    /// Sets its flag when dropped: tells whether a wait on another shard was let go.
    struct DropFlag(Arc<std::sync::atomic::AtomicBool>);

    impl Drop for DropFlag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn an_abandoned_wait_on_another_shard_ends_there_and_finishing_work_does_not() {
        let config = ShardRuntimeConfig {
            shard_count: 2,
            pin: false,
            spin_before_park: None,
        };
        let runtime = ShardRuntime::start(
            config,
            |_| (),
            |ctx: Rc<ShardContext<()>>| async move {
                if ctx.id() != 0 {
                    return;
                }
                let ended = |submit_wait: bool| {
                    let ctx = ctx.clone();
                    async move {
                        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
                        let flag = DropFlag(dropped.clone());
                        let forever = move |_there| async move {
                            let _flag = flag;
                            glommio::timer::sleep(Duration::from_millis(300)).await;
                        };
                        let wait: LocalFuture = if submit_wait {
                            Box::pin(async move { ctx.submit_wait_to(1, forever).await.unwrap() })
                        } else {
                            Box::pin(async move { ctx.submit_to(1, forever).await.unwrap() })
                        };
                        let abandoned = glommio::timer::sleep(Duration::from_millis(20));
                        futures::future::select(wait, Box::pin(abandoned)).await;
                        glommio::timer::sleep(Duration::from_millis(50)).await;
                        dropped.load(Ordering::SeqCst)
                    }
                };
                assert!(
                    ended(true).await,
                    "submit_wait_to: the work ended with its caller"
                );
                assert!(!ended(false).await, "submit_to: the work runs to its end");
            },
        )
        .unwrap();
        runtime.join().unwrap();
    }
}
