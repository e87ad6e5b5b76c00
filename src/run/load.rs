//! `sockscope load`: runs a [`LoadSpec`] through [`crate::load`] and
//! prints what it measured: the summary on stdout (stderr when `--json -`
//! takes stdout), the report to `--json`, the exit status. Also used by
//! `load --path --serve` ([`super::pathload`]).

use anyhow::Result;

use crate::error;
use crate::load::spec::LoadSpec;
use crate::report::{self, load_text};

/// Runs a load; returns the exit status (the CLI path: prints the summary
/// and writes --json). A workload whose options cannot make a run (http:
/// a bad URL, header or --urls file) is a usage error.
pub fn run(spec: LoadSpec, quiet: bool) -> Result<u8> {
    let json = spec.json_path();
    let load = spec.into_load()?;
    if let Some(path) = &json {
        crate::output::check(path, "--json")?;
    }
    let out = load.execute(quiet, None)?;
    finish(&out.report, out.failure, json.as_deref(), quiet)
}

/// Prints the summary, writes the JSON (also for a failed run that
/// measured something: it is marked `complete: false`), and turns a
/// failure into exit status 1. The summary goes to stdout, or to stderr
/// when the JSON does (`--json -`), and comes before the JSON is written,
/// so a destination that turns out full loses nothing already shown.
pub fn finish(
    rep: &report::load::LoadReport,
    failure: Option<String>,
    json: Option<&std::path::Path>,
    quiet: bool,
) -> Result<u8> {
    use std::io::Write;
    // udp-rr requests that all went unanswered are a measurement: the
    // loss.
    let nothing_measured = rep.transactions == 0
        && rep.udp.as_ref().is_none_or(|u| u.published == 0)
        && rep.udp_rr.as_ref().is_none_or(|u| u.requests_sent == 0)
        && rep.connections.established == 0;
    // A failed run still shows what it measured (even with --quiet); a run
    // that measured nothing shows only the error.
    let show = (!quiet || failure.is_some()) && !(nothing_measured && failure.is_some());
    // A closed or full stdout fails the run, but only after the JSON
    // asked for is written.
    let mut printed = Ok(());
    if show {
        let text = load_text::render(rep);
        if json.is_some_and(crate::output::is_stdout) {
            let _ = std::io::stderr().write_all(text.as_bytes());
        } else {
            printed = crate::output::print(text.as_bytes(), "the results");
        }
    }
    let written = match json {
        Some(path) if !nothing_measured => report::write_json(path, rep),
        _ => Ok(()),
    };
    let written = crate::output::both(written, printed);
    match (failure, written) {
        (None, Ok(())) => Ok(0),
        (None, Err(e)) => Err(e),
        (Some(why), Ok(())) => Err(error::with_code(1, why)),
        (Some(why), Err(e)) => Err(error::with_code(1, format!("{why}; and {e:#}"))),
    }
}
