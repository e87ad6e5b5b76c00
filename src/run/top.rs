//! `sockscope top`: the request anatomy of a target, live. The same BPF
//! programs and costs as `trace --requests-only` (socket tracepoints
//! only, no syscall tracer), read once per anatomy interval (1 s) and
//! drawn with ratatui on the alternate screen; `q`, Esc or Ctrl-C quits
//! and leaves the terminal as it was (raw mode, the alternate screen and
//! the cursor are restored on every way out, a panic included). `--once`
//! prints one screen after the first interval, for scripts.
//!
//! With `--stacks`, the stack sampler runs beside (as `trace --stacks`)
//! and each interval's hottest on-CPU functions are listed under the
//! table.
//!
//! The target exiting, or a port going away, keeps the last figures on
//! screen with a status line saying so; only the user (or `--duration`,
//! or a signal) ends it.

use std::io::{IsTerminal, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::mpsc::{Receiver, sync_channel};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::{cursor, execute, terminal};

use crate::anatomy::{Counts, Session};
use crate::error;
use crate::probe::TargetSpec;
use crate::signals::Signals;
use crate::stacks::live::HotFunctions;
use crate::top::model::{self, SortKey};
use crate::top::view::{self, Screen};

/// One `sockscope top` run, validated.
#[derive(Clone, Debug)]
pub struct TopSpec {
    /// A pid or a scope.
    pub target: TargetSpec,
    /// Print one screen after the first interval and exit.
    pub once: bool,
    /// The first sort.
    pub sort: SortKey,
    /// Sample the window (`--requests-duty`) instead of following all of it.
    pub duty: Option<crate::anatomy::Duty>,
    /// How requests are read (`--max-endpoints`, `--tls-plaintext`).
    pub reading: crate::anatomy::Reading,
    /// Colours (off with NO_COLOR).
    pub color: bool,
    /// Sample stacks at this rate (Hz per CPU) and list the hottest
    /// functions (None: no stacks).
    pub stacks_hz: Option<u32>,
}

/// Readings the channel holds before the anatomy drops the newest (the
/// screen is slow to draw): a later reading carries everything.
const BACKLOG: usize = 4;

/// How long `--once` waits for its first reading past the interval.
const ONCE_GRACE: Duration = Duration::from_secs(10);

/// Restores the terminal when dropped: raw mode off, the main screen
/// back, the cursor shown.
struct TerminalGuard;

impl TerminalGuard {
    fn enter() -> Result<Self> {
        terminal::enable_raw_mode().context("putting the terminal in raw mode")?;
        let guard = TerminalGuard;
        execute!(
            std::io::stdout(),
            terminal::EnterAlternateScreen,
            cursor::Hide
        )
        .context("entering the alternate screen")?;
        Ok(guard)
    }
}

/// The terminal as it was: the main screen, the cursor, cooked mode.
fn restore() {
    let _ = execute!(
        std::io::stdout(),
        terminal::LeaveAlternateScreen,
        cursor::Show
    );
    let _ = terminal::disable_raw_mode();
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Who is watched, for the title line.
fn target_name(target: &TargetSpec) -> String {
    crate::top::shown_name(&match target {
        TargetSpec::Attach { pid, .. } => {
            let comm = crate::procfs::comm(*pid).unwrap_or_default();
            format!("pid {pid} ({comm})")
        }
        TargetSpec::Scope { scope, .. } => scope.describe(),
        TargetSpec::Launch { argv, .. } => argv
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" "),
    })
}

/// Where the readings come from: the anatomy's, and the stack
/// sampler's when stacks are on.
struct Feeds {
    counts: Receiver<(f64, Counts)>,
    hot: Option<Receiver<HotFunctions>>,
}

/// The latest pair of readings (the figures between them) and the latest
/// interval's hottest functions.
struct Readings {
    earlier: (f64, Counts),
    later: Option<(f64, Counts)>,
    hot: Option<HotFunctions>,
}

impl Readings {
    fn new() -> Self {
        Readings {
            earlier: (0.0, Counts::empty()),
            later: None,
            hot: None,
        }
    }

    /// Takes every reading waiting; true when there was one.
    fn drain(&mut self, feeds: &Feeds) -> bool {
        let mut got = false;
        while let Ok(r) = feeds.counts.try_recv() {
            if let Some(prev) = self.later.take() {
                self.earlier = prev;
            }
            self.later = Some(r);
            got = true;
        }
        if let Some(rx) = &feeds.hot {
            while let Ok(h) = rx.try_recv() {
                self.hot = Some(h);
                got = true;
            }
        }
        got
    }

    /// Whether every feed has given its first reading.
    fn complete(&self, feeds: &Feeds) -> bool {
        self.later.is_some() && (feeds.hot.is_none() || self.hot.is_some())
    }

    fn screen(&self, base: &Screen) -> Screen {
        let mut s = base.clone();
        if let Some((t, now)) = &self.later {
            let secs = t - self.earlier.0;
            s.elapsed_s = *t;
            s.interval_s = secs;
            s.groups = model::groups(&now.since(&self.earlier.1), secs, s.sort);
        }
        s.functions.clone_from(&self.hot);
        s
    }
}

/// Runs `sockscope top`; returns the exit status.
pub fn run(spec: &TopSpec) -> Result<u8> {
    let interactive = !spec.once;
    if interactive && !(std::io::stdout().is_terminal() && std::io::stdin().is_terminal()) {
        return Err(error::usage(
            "sockscope top draws on a terminal, and stdin or stdout is not one; \
             --once prints one screen for scripts",
        ));
    }
    crate::probe::preflight::check()?;
    let mut signals = Signals::block(&[Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP])?;
    let (root, pidfd) = super::trace::requests_only::attach_root(&spec.target)?;
    let mut cfg = super::trace::requests::config_for(&spec.target, root, spec.reading)?;
    cfg.duty = spec.duty;
    let (tx, counts) = sync_channel(BACKLOG);
    cfg.progress = Some(tx);
    let interval = cfg.interval;
    let duration = super::trace::requests_only::alone_duration(&spec.target, "requests")?;
    let base = Screen {
        target: target_name(&spec.target),
        sort: spec.sort,
        color: spec.color && interactive,
        status: Some("waiting for the first interval".into()),
        stacks: spec.stacks_hz.is_some(),
        ..Screen::default()
    };
    let session = Session::start(cfg)?;
    let (stacks, hot) = match start_stacks(spec, root, interval) {
        Ok(s) => s,
        Err(e) => {
            let _ = session.finish();
            return Err(e);
        }
    };
    let feeds = Feeds { counts, hot };
    let started = Instant::now();
    let out = if interactive {
        live(
            &mut signals,
            pidfd.as_ref(),
            &feeds,
            base,
            duration.map(|d| started + d),
        )
    } else {
        once(&mut signals, pidfd.as_ref(), &feeds, base, interval)
    };
    // Detach whatever happened on screen.
    let sampled = stacks.map(crate::stacks::Session::finish);
    let finished = session.finish();
    let code = out?;
    finished?;
    if let Some(s) = sampled {
        s.context("the stack sampler")?;
    }
    Ok(code)
}

/// Starts the stack sampler when `--stacks` asks for it, its hottest
/// functions sent every `interval`.
fn start_stacks(
    spec: &TopSpec,
    root: i32,
    interval: Duration,
) -> Result<(
    Option<crate::stacks::Session>,
    Option<Receiver<HotFunctions>>,
)> {
    let Some(hz) = spec.stacks_hz else {
        return Ok((None, None));
    };
    let options = crate::stacks::StacksOptions {
        hz,
        ..Default::default()
    };
    let mut cfg = super::trace::stacks::config_for(&spec.target, root, &options)?;
    let (tx, rx) = sync_channel(BACKLOG);
    cfg.hot = Some((tx, interval));
    let session = crate::stacks::Session::start(cfg).context("starting the stack sampler")?;
    Ok((Some(session), Some(rx)))
}

/// What stdin had within `wait`: its poll events, or None when nothing
/// (or the wait was interrupted).
fn stdin_events(wait: Duration) -> Option<PollFlags> {
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
    let ms = u16::try_from(wait.as_millis()).unwrap_or(u16::MAX);
    match poll(&mut fds, PollTimeout::from(ms)) {
        Ok(n) if n > 0 => fds[0].revents(),
        _ => None,
    }
}

/// True when the events say the terminal hung up (its emulator or tmux
/// went away): crossterm's poll then never returns (measured: a top left
/// behind by a killed tmux spun a CPU for 18 min), so the loop asks the
/// kernel itself before it hands the terminal to crossterm.
fn hung_up(events: PollFlags) -> bool {
    events.intersects(PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL)
}

/// True when `fd` (the target's pidfd) is readable: the target exited.
fn exited(fd: Option<&OwnedFd>) -> bool {
    let Some(fd) = fd else {
        return false;
    };
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
}

fn once(
    signals: &mut Signals,
    pidfd: Option<&OwnedFd>,
    feeds: &Feeds,
    base: Screen,
    interval: Duration,
) -> Result<u8> {
    let deadline = Instant::now() + interval + ONCE_GRACE;
    let mut r = Readings::new();
    loop {
        r.drain(feeds);
        if r.complete(feeds) {
            break;
        }
        if let Some(si) = signals.pending() {
            return Err(error::with_code(
                1,
                format!(
                    "stopped by {} before the first interval ended",
                    crate::signals::signal_name(si.ssi_signo)
                ),
            ));
        }
        if exited(pidfd) {
            return Err(error::with_code(
                1,
                "the target exited before the first interval ended; nothing to show",
            ));
        }
        if Instant::now() >= deadline {
            let what = if r.later.is_none() {
                "the request anatomy"
            } else {
                "the stack sampler"
            };
            return Err(anyhow!(
                "no reading from {what} within {:.0} s",
                (interval + ONCE_GRACE).as_secs_f64()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut s = r.screen(&base);
    s.status = None;
    s.selected = 0;
    let width = terminal::size().map_or(120, |(w, _)| w.max(100));
    let text = view::text(&s, width);
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing the screen to stdout")?;
    Ok(0)
}

fn live(
    signals: &mut Signals,
    pidfd: Option<&OwnedFd>,
    feeds: &Feeds,
    base: Screen,
    deadline: Option<Instant>,
) -> Result<u8> {
    let guard = TerminalGuard::enter()?;
    // A panic restores the terminal before its message is printed.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        hook(info);
    }));
    let mut term =
        Terminal::new(CrosstermBackend::new(std::io::stdout())).context("opening the terminal")?;
    let mut r = Readings::new();
    let mut state = base;
    let mut gone = false;
    let mut dirty = true;
    loop {
        if r.drain(feeds) {
            if r.later.is_some() {
                state.status = None;
            }
            dirty = true;
        }
        if !gone && exited(pidfd) {
            gone = true;
            dirty = true;
        }
        if gone {
            state.status =
                Some("the target exited: the last figures are kept; q quits".to_string());
        }
        if dirty {
            let s = r.screen(&state);
            state.selected = state.selected.min(s.rows().len().saturating_sub(1));
            let s = Screen {
                selected: state.selected,
                ..s
            };
            term.draw(|f| view::draw(&s, f.area(), f.buffer_mut()))
                .context("drawing the screen")?;
            dirty = false;
        }
        if signals.pending().is_some() || deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        // Wait for input with the kernel's poll, one call per turn, not
        // crossterm's: once the terminal hangs up, crossterm's poll never
        // returns.
        let Some(events) = stdin_events(Duration::from_millis(100)) else {
            continue;
        };
        if hung_up(events) {
            break;
        }
        if !event::poll(Duration::ZERO).context("reading the terminal")? {
            continue;
        }
        match event::read().context("reading the terminal")? {
            Event::Key(k) if k.kind != KeyEventKind::Release => match k.code {
                KeyCode::Char('q') | KeyCode::Char('Q') | KeyCode::Esc => break,
                KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => break,
                KeyCode::Char('s') => {
                    state.sort = state.sort.next();
                    dirty = true;
                }
                KeyCode::Down | KeyCode::Char('j') => {
                    state.selected = state.selected.saturating_add(1);
                    dirty = true;
                }
                KeyCode::Up | KeyCode::Char('k') => {
                    state.selected = state.selected.saturating_sub(1);
                    dirty = true;
                }
                _ => {}
            },
            Event::Resize(..) => dirty = true,
            _ => {}
        }
    }
    drop(term);
    drop(guard);
    Ok(0)
}
