//! The udp-rcvbuf experiment's section: loss per receive buffer size and
//! trial, beside the kernel's own RcvbufErrors count.

use super::card;
use crate::report::bench::UdpRcvbufResult;
use crate::report::bench_table;
use crate::report::svg::{self, BarChart, Scale};
use crate::report::units;

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
    let tbl = bench_table::udp_rcvbuf(u).to_html();
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
