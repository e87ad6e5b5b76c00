//! The emulated path (`--path`) in a profile's insights: how much of the
//! load's median latency the path's round trips account for.

use super::load::LoadReport;
use super::path::PathRecord;

/// Accounts for an emulated path in the median: "p50 20.4 ms of which
/// 20 ms is the emulated RTT". A connection per transaction (tcp-crr) pays
/// two round trips (the handshake, then the request).
pub fn emulated_path_sentence(load: &LoadReport, path: &PathRecord) -> String {
    let rtts: f64 = if load.workload == "tcp-crr" { 2.0 } else { 1.0 };
    let what = if rtts > 1.0 {
        format!(
            "2 emulated RTTs of {} ms (a connection per transaction: the handshake, then the \
             request)",
            path.rtt_ms
        )
    } else {
        "the emulated RTT".to_string()
    };
    let Some(p50) = load.latency.as_ref().map(|l| l.summary.p50_ns as f64 / 1e6) else {
        return format!(
            "The load crossed an emulated path ({}); this workload records no round-trip \
             latency to account for it in.",
            path.spec
        );
    };
    let path_ms = path.rtt_ms * rtts;
    let rest = p50 - path_ms;
    let mut s = format!(
        "p50 {} ms of which {} ms is {what}",
        fmt_ms(p50),
        fmt_ms(path_ms)
    );
    if rest >= 0.0 {
        s.push_str(&format!(
            "; the other {} ms is the server, both kernels and the path's own overhead.",
            fmt_ms(rest)
        ));
    } else {
        s.push_str(&format!(
            "; the median is {} ms below it, which only jitter can explain (rtt {} ms, \
             jitter +-{} ms per direction).",
            fmt_ms(-rest),
            path.rtt_ms,
            path.jitter_ms
        ));
    }
    s
}

/// Milliseconds with three significant digits for these sentences.
fn fmt_ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}
