//! `trace --requests-only --interval SPAN`: one short line per interval on
//! stderr while the window is open (the turns that ended in it, their rate,
//! the server time's p50 and p99, and the part that made up most of the
//! p99's turns). The lines are read from the anatomy's own intervals
//! ([`super::requests::INTERVAL`], 1 s), so SPAN is rounded up to whole
//! intervals: `500ms` prints a line a second, `1.5s` one every two. Each
//! line is the difference of two readings of the window's cumulative
//! counts, so nothing falls between lines; the time after the last whole
//! line is in the final table only. The artifact is the same with or
//! without them.

use std::io::Write;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::anatomy::Counts;
use crate::anatomy::summary::{compositions, interval_row};
use crate::report::anatomy::{AnatomyInterval, Composition};
use crate::report::units::{fmt_ns, fmt_pct};

/// Readings the channel holds before the anatomy drops the newest (a
/// stalled stderr): a later reading carries everything a dropped one had.
const BACKLOG: usize = 4;

/// The line printer, on a thread of its own until the anatomy's window
/// closes (its sender goes with the anatomy's configuration).
pub struct Live {
    handle: JoinHandle<()>,
}

impl Live {
    /// Starts the printer for lines every `span`, over anatomy intervals of
    /// `tick`; returns it and the sender for `AnatomyConfig::progress`.
    pub fn start(span: Duration, tick: Duration) -> Result<(Live, SyncSender<(f64, Counts)>)> {
        let (tx, rx) = sync_channel(BACKLOG);
        let every = tick.as_secs_f64() * f64::from(intervals_per_line(span, tick));
        let handle = std::thread::Builder::new()
            .name("ss-requests-live".into())
            .spawn(move || {
                crate::signals::keep_off_this_thread();
                print_lines(&rx, every)
            })
            .context("starting the interval lines' thread")?;
        Ok((Live { handle }, tx))
    }

    /// Waits for the last line (the anatomy's window is closed, so its
    /// sender is gone), before the final table is written.
    pub fn finish(self) {
        let _ = self.handle.join();
    }
}

/// How many anatomy intervals of `tick` one line of `span` covers: `span`
/// rounded up to a whole number of them, at least one.
pub fn intervals_per_line(span: Duration, tick: Duration) -> u32 {
    let n = span.as_nanos().div_ceil(tick.as_nanos().max(1));
    n.clamp(1, u128::from(u32::MAX)) as u32
}

/// What the opening line adds when `span` is not a whole number of
/// anatomy intervals; None when it is.
pub fn rounding_note(span: Duration, tick: Duration) -> Option<String> {
    let n = intervals_per_line(span, tick);
    let every = tick * n;
    (every != span).then(|| {
        format!(
            "--interval {:.3} s: a line every {} s (the anatomy's intervals are {} s)",
            span.as_secs_f64(),
            every.as_secs_f64(),
            tick.as_secs_f64()
        )
    })
}

fn print_lines(rx: &Receiver<(f64, Counts)>, every: f64) {
    let mut printed = Counts::empty();
    let (mut from_s, mut next_s, mut n) = (0.0, every, 0u64);
    while let Ok((t_s, so_far)) = rx.recv() {
        // The anatomy reads an interval's end at or just after it (never
        // before), so a reading short of the line's end is within the line.
        if t_s < next_s {
            continue;
        }
        while next_s <= t_s {
            next_s += every;
        }
        n += 1;
        let d = so_far.since(&printed);
        let total = d.total();
        let row = interval_row(t_s, &d);
        let p99 = compositions(&total)
            .into_iter()
            .find(|c| c.percentile == "p99");
        let text = line(n, from_s, &row, p99.as_ref());
        let _ = writeln!(std::io::stderr().lock(), "{text}");
        printed = so_far;
        from_s = t_s;
    }
}

/// One interval's line: `--- requests 2: 1.0-2.0 s, 8420 turns (8420/s),
/// server time p50 208us p99 234us, its p99 mostly service (51%)`.
pub fn line(n: u64, from_s: f64, row: &AnatomyInterval, p99: Option<&Composition>) -> String {
    let head = format!("--- requests {n}: {from_s:.1}-{:.1} s", row.t_s);
    if row.turns == 0 {
        return format!("{head}, 0 turns");
    }
    let span = row.t_s - from_s;
    let rate = if span > 0.0 {
        format!("{:.0}/s", row.turns as f64 / span)
    } else {
        "-".into()
    };
    let mut out = format!(
        "{head}, {} turns ({rate}), server time p50 {} p99 {}",
        row.turns,
        fmt_ns(row.server_p50_ns as f64),
        fmt_ns(row.server_p99_ns as f64)
    );
    if let Some(c) = p99.filter(|c| c.server_ns > 0)
        && let Some((part, ns)) = c.parts().into_iter().max_by_key(|(_, ns)| *ns)
    {
        let share = ns as f64 / c.server_ns as f64 * 100.0;
        out.push_str(&format!(", its p99 mostly {part} ({})", fmt_pct(share)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn a_span_is_rounded_up_to_whole_anatomy_intervals() {
        assert_eq!(intervals_per_line(Duration::from_millis(100), S), 1);
        assert_eq!(intervals_per_line(Duration::from_millis(500), S), 1);
        assert_eq!(intervals_per_line(S, S), 1);
        assert_eq!(intervals_per_line(Duration::from_millis(1500), S), 2);
        assert_eq!(intervals_per_line(Duration::from_secs(10), S), 10);
        assert_eq!(rounding_note(Duration::from_secs(10), S), None);
        assert_eq!(
            rounding_note(Duration::from_millis(500), S).as_deref(),
            Some("--interval 0.500 s: a line every 1 s (the anatomy's intervals are 1 s)")
        );
    }

    #[test]
    fn a_line_names_the_turns_their_rate_the_percentiles_and_the_p99s_main_part() {
        let row = AnatomyInterval {
            t_s: 3.0,
            turns: 8420,
            server_p50_ns: 208_000,
            server_p99_ns: 234_000,
            ..Default::default()
        };
        let c = Composition {
            percentile: "p99".into(),
            turns: 80,
            server_ns: 234_000,
            queue_wait_ns: 114_000,
            cpu_wait_ns: 0,
            service_ns: 120_000,
            send_ns: 0,
        };
        assert_eq!(
            line(2, 1.0, &row, Some(&c)),
            "--- requests 2: 1.0-3.0 s, 8420 turns (4210/s), server time p50 208us p99 234us, \
             its p99 mostly service (51%)"
        );
        let idle = AnatomyInterval {
            t_s: 4.0,
            ..Default::default()
        };
        assert_eq!(
            line(3, 3.0, &idle, None),
            "--- requests 3: 3.0-4.0 s, 0 turns"
        );
    }
}
