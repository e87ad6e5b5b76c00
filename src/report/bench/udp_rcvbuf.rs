//! `bench udp-rcvbuf`'s results: the schema (`"udp_rcvbuf"` in
//! bench.json), the table of every trial, and the page's section: loss per
//! receive buffer size and trial, beside the kernel's own RcvbufErrors
//! count.

use serde::{Deserialize, Serialize};

use super::Section;
use crate::report::html::card;
use crate::report::svg::{self, BarChart, Scale};
use crate::report::table::{Align::Left, Align::Right, Column, Table};
use crate::report::units;

/// The UDP receive-buffer sweep.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct UdpRcvbufResult {
    /// Datagrams per burst.
    pub burst: u64,
    /// Datagram size, bytes.
    pub datagram_bytes: u32,
    /// net.core.rmem_default.
    pub rmem_default: Option<u64>,
    /// net.core.rmem_max (caps what SO_RCVBUF can get: twice this).
    pub rmem_max: Option<u64>,
    /// Every trial, in the order run.
    pub trials: Vec<UdpTrial>,
}

/// One burst into one sink.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct UdpTrial {
    /// `small`, `default` or `large`.
    pub buffer: String,
    /// Trial number (1-based) within the buffer size.
    pub trial: u32,
    /// SO_RCVBUF asked for (None: the default).
    pub requested: Option<u64>,
    /// What the kernel granted (getsockopt).
    pub granted: u64,
    /// Datagrams sent.
    pub published: u64,
    /// Datagrams the sink received.
    pub received: u64,
    /// published - received (tail drops included).
    pub lost: u64,
    /// lost / published, percent.
    pub loss_pct: f64,
    /// Holes below the highest sequence received.
    pub interior_gaps: u64,
    /// Increase of the kernel's Udp RcvbufErrors over the trial (machine
    /// wide).
    pub kernel_rcvbuf_errors_delta: Option<u64>,
}

/// Every trial of the UDP receive-buffer sweep.
pub fn table(u: &UdpRcvbufResult) -> Table {
    let columns = vec![
        Column::both("buffer", "buffer", 8, Left),
        Column::both("trial", "trial", 5, Right),
        Column::both("SO_RCVBUF asked", "asked", 10, Right),
        Column::both("granted", "granted", 9, Right),
        Column::both("published", "published", 9, Right),
        Column::both("received", "received", 9, Right),
        Column::both("lost (tail incl.)", "lost", 8, Right),
        Column::both("loss", "loss", 8, Right),
        Column::both("interior gaps", "gaps", 8, Right),
        Column::both("kernel RcvbufErrors +", "RcvbufErrors+", 13, Right),
    ];
    let rows = u
        .trials
        .iter()
        .map(|t| {
            vec![
                t.buffer.clone(),
                t.trial.to_string(),
                t.requested.map_or("(default)".into(), |r| r.to_string()),
                t.granted.to_string(),
                t.published.to_string(),
                t.received.to_string(),
                t.lost.to_string(),
                format!("{:.2}%", t.loss_pct),
                t.interior_gaps.to_string(),
                // Unknown: the counter could not be read.
                t.kernel_rcvbuf_errors_delta
                    .map_or("?".into(), |d| d.to_string()),
            ]
        })
        .collect();
    Table { columns, rows }
}

impl Section for UdpRcvbufResult {
    fn table(&self) -> Table {
        table(self)
    }
    fn html(&self, p: &str) -> String {
        udp_body(p, self)
    }
}

/// The UDP receive-buffer sweep.
pub fn udp_body(p: &str, u: &UdpRcvbufResult) -> String {
    let mut buffers: Vec<String> = Vec::new();
    for t in &u.trials {
        if !buffers.contains(&t.buffer) {
            buffers.push(t.buffer.clone());
        }
    }
    let ntrials = u.trials.iter().map(|t| t.trial).max().unwrap_or(0);
    let categories: Vec<String> = buffers
        .iter()
        .map(|b| {
            let g = u
                .trials
                .iter()
                .find(|t| &t.buffer == b)
                .map_or(0, |t| t.granted);
            format!("{b} ({} KiB granted)", g / 1024)
        })
        .collect();
    let series = (1..=ntrials)
        .map(|n| {
            (
                format!("trial {n}"),
                buffers
                    .iter()
                    .map(|b| {
                        u.trials
                            .iter()
                            .find(|t| &t.buffer == b && t.trial == n)
                            .map(|t| t.loss_pct)
                    })
                    .collect(),
            )
        })
        .collect();
    let chart = svg::bar_chart(&BarChart {
        id: &format!("{p}chart-udp-loss"),
        title: "UDP loss per receive buffer size",
        y_label: "datagrams lost (%)",
        x_label: "receive buffer",
        categories,
        series,
        scale: Scale::Linear,
        fmt: units::fmt_pct,
        compact: false,
    });
    let tbl = table(u).to_html();
    card(
        &format!("{p}udp-rcvbuf"),
        "UDP receive buffer sweep",
        &format!(
            "Bursts of {} datagrams of {} B into serve udp-sink. Loss is published minus \
             received, so drops at the tail of a burst count although they leave no sequence \
             gap; the kernel's own RcvbufErrors increase is beside it. rmem_default {}, \
             rmem_max {} (SO_RCVBUF is doubled by the kernel and capped at twice rmem_max).",
            u.burst,
            u.datagram_bytes,
            u.rmem_default.map_or("?".into(), |v| v.to_string()),
            u.rmem_max.map_or("?".into(), |v| v.to_string())
        ),
        &(chart + &tbl),
    )
}
