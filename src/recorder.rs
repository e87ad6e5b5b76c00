//! A recording thread beside a command's own loop, as the request anatomy
//! and the stack sampler each run one: it loads and attaches its programs,
//! says when its window is open (or why it cannot be), records until told
//! to stop, and hands back what it recorded. [`Beside`] starts one when
//! another's window opens (the tracer's, for `trace --requests/--stacks`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};

/// The longest a recorder may take to open its window.
const START_LIMIT: Duration = Duration::from_secs(30);

/// A running recorder; stopped and joined when finished or dropped.
pub struct Recorder<T> {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Result<T>>>,
    /// The thread's short name in messages ("anatomy", "stacks").
    thread: &'static str,
}

impl<T: Send + 'static> Recorder<T> {
    /// Runs `body(stop, ready)` on a thread named `ss-{thread}` with every
    /// signal blocked; returns once `body` sent Ok on `ready`, or with the
    /// error it sent or returned. `what` names the recorder when it does
    /// not start within 30 s (it is then told to stop).
    pub fn start(
        thread: &'static str,
        what: &str,
        body: impl FnOnce(Arc<AtomicBool>, mpsc::Sender<Result<()>>) -> Result<T> + Send + 'static,
    ) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel::<Result<()>>();
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name(format!("ss-{thread}"))
            .spawn(move || {
                block_signals();
                body(flag, tx)
            })
            .with_context(|| format!("starting the {thread} thread"))?;
        match rx.recv_timeout(START_LIMIT) {
            Ok(Ok(())) => Ok(Recorder {
                stop,
                handle: Some(handle),
                thread,
            }),
            Ok(Err(e)) => {
                let _ = handle.join();
                Err(e)
            }
            Err(_) => {
                stop.store(true, Ordering::Relaxed);
                match handle.join() {
                    Ok(Err(e)) => Err(e),
                    _ => Err(anyhow!(
                        "the {what} did not start within {} s",
                        START_LIMIT.as_secs()
                    )),
                }
            }
        }
    }

    /// Whether the thread has ended on its own (an error: a recorder
    /// records until told to stop), so a long window need not wait for its
    /// end to say so.
    pub fn ended(&self) -> bool {
        self.handle.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Stops the recorder and returns what it recorded.
    pub fn finish(mut self) -> Result<T> {
        self.stop.store(true, Ordering::Relaxed);
        let h = self.handle.take().expect("finish is called once");
        h.join()
            .map_err(|_| anyhow!("the {} thread panicked", self.thread))?
    }
}

impl<T> Drop for Recorder<T> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Keeps every signal off the calling thread. The recorders' threads may
/// start before the command's loop blocks the signals it reads from a
/// signalfd (trace's tracer does so only once loaded): a SIGINT delivered
/// here would kill the process instead of ending the window, and a SIGCHLD
/// would be lost to launch mode's reaper.
pub fn block_signals() {
    crate::signals::keep_off_this_thread();
}

/// A session started beside another's window: a thread waits for that
/// window's root pid, then starts it; finished after that window closed.
/// A failure to start is kept for `finish`, so the caller loses nothing
/// else it measured.
pub struct Beside<S> {
    handle: JoinHandle<Result<Option<S>>>,
    /// The thread's short name in messages ("anatomy", "stacks").
    thread: &'static str,
}

impl<S: Send + 'static> Beside<S> {
    /// Waits on `opened` on a thread named `ss-{thread}-wait`, with every
    /// signal blocked (the session's own thread inherits the mask), then
    /// runs `start` with the window's root pid. When `opened` closes first
    /// (the window never opened: its owner says why), nothing starts.
    pub fn when_open(
        opened: mpsc::Receiver<i32>,
        thread: &'static str,
        start: impl FnOnce(i32) -> Result<S> + Send + 'static,
    ) -> Result<Self> {
        let handle = std::thread::Builder::new()
            .name(format!("ss-{thread}-wait"))
            .spawn(move || {
                block_signals();
                match opened.recv() {
                    Ok(root) => start(root).map(Some),
                    Err(_) => Ok(None),
                }
            })
            .with_context(|| format!("starting the {thread} thread"))?;
        Ok(Beside { handle, thread })
    }

    /// Waits for the session to have started (or not), then ends it with
    /// `finish`; None when the window never opened.
    pub fn finish<T>(self, finish: impl FnOnce(S) -> Result<T>) -> Result<Option<T>> {
        let session = self
            .handle
            .join()
            .map_err(|_| anyhow!("the {} thread panicked", self.thread))??;
        session.map(finish).transpose()
    }
}
