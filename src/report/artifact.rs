//! What every artifact is, whatever the command that made it: a JSON file
//! (run.json, bench.json, demo.json), a summary for a terminal (printed,
//! and saved as summary.txt) and a self-contained page (report.html).
//!
//! The profile, experiment, demo, load and requests reports implement
//! [`Artifact`] (a profile with stacks has its folded stacks too);
//! `process::publish` writes any of them as one set, and `sockscope report`
//! reads one back with [`from_value`] to render it again.

use anyhow::{Context, Result};
use serde::Serialize;

use super::bench::{self, BenchReport, DemoReport};
use super::load::{self, LoadReport};
use super::pprof;
use super::profile::{self, ProfileReport};
use super::requests::{self, RequestsReport};
use super::stacks::folded_text;
use super::{html, load_text, sections};

/// The summary's file name in an artifact directory.
pub const SUMMARY_FILE: &str = "summary.txt";
/// The page's file name in an artifact directory.
pub const PAGE_FILE: &str = "report.html";
/// The on-CPU folded stacks' file name in a profile's directory.
pub const FOLDED_FILE: &str = "stacks.folded";
/// The off-CPU folded stacks' file name in a profile's directory.
pub const OFFCPU_FOLDED_FILE: &str = "stacks-offcpu.folded";

/// The on-CPU stacks' pprof file name in a profile's directory.
pub const PPROF_FILE: &str = "stacks.pb.gz";
/// The off-CPU stacks' pprof file name in a profile's directory.
pub const OFFCPU_PPROF_FILE: &str = "stacks-offcpu.pb.gz";

/// One artifact and its renderings.
pub trait Artifact {
    /// Its JSON file's name in the artifact directory ("run.json").
    fn json_name(&self) -> &'static str;
    /// Its JSON as written: pretty, with a final newline.
    fn json(&self) -> Result<Vec<u8>>;
    /// The summary for a terminal (summary.txt).
    fn summary(&self) -> String;
    /// A shorter form of the summary that a terminal gets by default (the
    /// whole one stays in summary.txt); None when the summary is short
    /// enough to print whole.
    fn brief(&self) -> Option<String> {
        None
    }
    /// The HTML page (report.html).
    fn page(&self) -> String;
    /// The other files of the set, rendered from the artifact too (name,
    /// bytes): none unless the artifact says.
    fn files(&self) -> Vec<(&'static str, Vec<u8>)> {
        Vec::new()
    }
}

/// `value` as pretty JSON with a final newline (what every artifact's
/// JSON file holds).
fn pretty<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(value).context("serialising JSON")?;
    bytes.push(b'\n');
    Ok(bytes)
}

impl Artifact for ProfileReport {
    fn json_name(&self) -> &'static str {
        "run.json"
    }
    fn json(&self) -> Result<Vec<u8>> {
        pretty(self)
    }
    fn summary(&self) -> String {
        sections::text::render(self)
    }
    fn brief(&self) -> Option<String> {
        Some(sections::text::render_brief(self))
    }
    fn page(&self) -> String {
        sections::page::profile_page(self)
    }
    /// The stacks, folded and as pprof profiles (on-CPU, and off-CPU when
    /// sampled), when the run has stacks. A pprof file that cannot be
    /// encoded is left out (its folded twin is still written).
    fn files(&self) -> Vec<(&'static str, Vec<u8>)> {
        let Some(st) = &self.stacks else {
            return Vec::new();
        };
        let mut out = vec![(FOLDED_FILE, folded_text(&st.on_cpu).into_bytes())];
        if let Ok(bytes) = pprof::on_cpu_file(st, self.tail.as_ref()) {
            out.push((PPROF_FILE, bytes));
        }
        if let Some(off) = &st.off_cpu {
            out.push((OFFCPU_FOLDED_FILE, folded_text(off).into_bytes()));
        }
        if let Some(Ok(bytes)) = pprof::off_cpu_file(st) {
            out.push((OFFCPU_PPROF_FILE, bytes));
        }
        out
    }
}

impl Artifact for BenchReport {
    fn json_name(&self) -> &'static str {
        "bench.json"
    }
    fn json(&self) -> Result<Vec<u8>> {
        pretty(self)
    }
    fn summary(&self) -> String {
        bench::text::render(self)
    }
    fn page(&self) -> String {
        bench::page::bench_page(self)
    }
}

impl Artifact for DemoReport {
    fn json_name(&self) -> &'static str {
        "demo.json"
    }
    fn json(&self) -> Result<Vec<u8>> {
        pretty(self)
    }
    fn summary(&self) -> String {
        bench::text::render_demo(self)
    }
    fn page(&self) -> String {
        bench::page::demo_page(self)
    }
}

/// A load artifact (`load --json`, `merge --out`): `sockscope report`
/// renders it; its JSON is the file it was read from.
impl Artifact for LoadReport {
    fn json_name(&self) -> &'static str {
        "load.json"
    }
    fn json(&self) -> Result<Vec<u8>> {
        pretty(self)
    }
    fn summary(&self) -> String {
        load_text::render(self)
    }
    fn page(&self) -> String {
        html::load_page(self)
    }
}

/// A `sockscope.requests` artifact (`trace --requests-only --json`):
/// `sockscope report` renders the text the trace printed and a page.
impl Artifact for RequestsReport {
    fn json_name(&self) -> &'static str {
        "requests.json"
    }
    fn json(&self) -> Result<Vec<u8>> {
        pretty(self)
    }
    fn summary(&self) -> String {
        requests::render(self)
    }
    fn page(&self) -> String {
        html::requests_page(self)
    }
}

/// Reads an artifact of schema `schema` from its JSON: None when the
/// schema is none of the profile's, the experiments', the demo's, a
/// load's or a `trace --requests-only`'s; the decoding error when `v` does not
/// match it. The version is the caller's to check.
pub fn from_value(
    schema: &str,
    v: serde_json::Value,
) -> Option<serde_json::Result<Box<dyn Artifact>>> {
    fn boxed<A: Artifact + 'static>(a: A) -> Box<dyn Artifact> {
        Box::new(a)
    }
    Some(match schema {
        profile::SCHEMA => serde_json::from_value::<ProfileReport>(v).map(|mut r| {
            r.fill_legacy();
            boxed(r)
        }),
        bench::SCHEMA => serde_json::from_value::<BenchReport>(v).map(boxed),
        bench::DEMO_SCHEMA => serde_json::from_value::<DemoReport>(v).map(boxed),
        load::SCHEMA => serde_json::from_value::<LoadReport>(v).map(boxed),
        requests::SCHEMA => serde_json::from_value::<RequestsReport>(v).map(boxed),
        _ => return None,
    })
}
