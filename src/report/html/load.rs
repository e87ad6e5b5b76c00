//! The report page of a load artifact (`load --json`, or a `merge` of
//! several): its latency and throughput (the profile's sections), and for
//! a merge the generators it was made from.

use super::latency::{latency_section, throughput_section};
use super::{card, caveats_box, page, table};
use crate::report::load::LoadReport;

/// The generators a merged artifact was made from, one row each.
fn sources_section(r: &LoadReport) -> String {
    let Some(m) = &r.merged else {
        return String::new();
    };
    let rows: Vec<Vec<String>> = m
        .sources
        .iter()
        .map(|s| {
            vec![
                s.file.clone(),
                s.host.clone().unwrap_or_default(),
                s.started_at.clone(),
                s.transactions.to_string(),
                format!("{:.2}", s.duration_s),
                s.offset_s.to_string(),
                format!("{:+.3}", s.misalignment_ms),
            ]
        })
        .collect();
    card(
        "merged",
        &format!("Merged from {} generators", m.sources.len()),
        &format!(
            "Histograms merged bucket by bucket; each source's second 0 is placed on the \
             merged timeline's second 'from second' (seconds aligned within {:.3} ms).",
            m.alignment.max_misalignment_ms
        ),
        &table(
            &[
                "file",
                "host",
                "started at",
                "transactions",
                "window (s)",
                "from second",
                "misalignment (ms)",
            ],
            &rows,
            &[3, 4, 5, 6],
        ),
    )
}

/// The page of one load artifact.
pub fn load_page(r: &LoadReport) -> String {
    let body = format!(
        "{}{}{}{}",
        caveats_box(&r.notes),
        sources_section(r),
        latency_section("", r),
        throughput_section("", r)
    );
    let what = if r.merged.is_some() {
        "sockscope merge"
    } else {
        "sockscope load"
    };
    page(
        what,
        &format!(
            "{} against {}: {} transactions in {:.2} s; {}",
            r.workload, r.target, r.transactions, r.duration_s, r.started_at
        ),
        &body,
    )
}
