//! `sockscope tune`: reads the settings ([`crate::tune`]) and prints the
//! audit: the audit as a table (with a header saying
//! what was read, for which goal, ranked by which run), as JSON, or as a
//! sysctl.d snippet. Nothing here writes to /proc/sys.

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::Serialize;

use crate::error;
use crate::report::profile::{self, ProfileReport};
use crate::report::tune::{AuditRow, table};

use crate::tune::{Goal, Settings};

/// A validated `sockscope tune`.
#[derive(Debug, Clone)]
pub struct TuneSpec {
    /// What the server is tuned for.
    pub goal: Goal,
    /// A profile artifact whose evidence ranks the audit.
    pub from: Option<PathBuf>,
    /// Print a sysctl.d snippet instead of the table.
    pub emit_sysctl: bool,
    /// Print JSON instead of the table.
    pub json: bool,
    /// The ports to keep out of a widened ephemeral range (`--reserve`).
    pub reserve: Vec<u16>,
}

/// `sockscope tune --json`.
#[derive(Debug, Serialize)]
struct TuneJson<'a> {
    goal: &'a str,
    /// `net:[INODE]` the network sysctls were read in.
    netns: String,
    /// Whether that is a child namespace (not the host's).
    child_netns: bool,
    /// The profile artifact that ranked the audit.
    from: Option<String>,
    /// How many leading rows the run's evidence supports.
    evidence_rows: usize,
    notes: &'a [String],
    rows: &'a [AuditRow],
}

/// Runs `sockscope tune`; returns the exit status (0: the audit was
/// printed, whatever it advises).
pub fn run(spec: &TuneSpec) -> Result<u8> {
    let run = match &spec.from {
        Some(p) => Some(read_run(p)?),
        None => None,
    };
    let mut notes = Vec::new();
    if let (Some(p), Some(r)) = (&spec.from, &run)
        && r.evidence.is_none()
    {
        notes.push(format!(
            "{} has no kernel evidence (written before sockscope collected it, or with --no-evidence): the audit is not ranked",
            p.display()
        ));
    }
    let mut settings = Settings::read();
    protect_only_named_ports(spec, run.as_ref(), &mut settings, &mut notes);
    let evidence = run
        .as_ref()
        .and_then(|r| r.evidence.as_ref().map(|e| (e, r.load.as_ref())));
    let rows = crate::tune::ranked(&settings, spec.goal, evidence);
    let evidence_rows = rows.iter().take_while(|r| r.evidence.is_some()).count();
    if let (Some(p), Some((_, _))) = (&spec.from, evidence)
        && evidence_rows == 0
    {
        notes.push(format!(
            "the evidence in {} shows nothing a setting bounds (no overflow, drop, port exhaustion or run-queue wait counted)",
            p.display()
        ));
    }
    let netns = netns_id();
    if spec.json {
        let j = TuneJson {
            goal: spec.goal.name(),
            netns,
            child_netns: settings.child_netns,
            from: spec.from.as_ref().map(|p| p.display().to_string()),
            evidence_rows,
            notes: &notes,
            rows: &rows,
        };
        let mut text = serde_json::to_string_pretty(&j)?;
        text.push('\n');
        crate::output::print(text.as_bytes(), "the audit")?;
        return Ok(0);
    }
    if spec.emit_sysctl {
        let mut header = vec![format!(
            "sysctl.d snippet from `sockscope tune --for {}{}`, network namespace {netns}.",
            spec.goal.name(),
            spec.from
                .as_ref()
                .map(|p| format!(" --from {}", p.display()))
                .unwrap_or_default()
        )];
        header.push(
            "sockscope changed nothing. Review, save as /etc/sysctl.d/90-sockscope.conf, then run `sysctl --system`."
                .into(),
        );
        header.extend(notes.iter().map(|n| format!("Note: {n}.")));
        // The --from path and the notes are a user's or an artifact's text.
        let snippet = crate::tune::sysctl_snippet(&rows, &header);
        crate::output::print(
            crate::text::escape_block(&snippet).as_bytes(),
            "the sysctl snippet",
        )?;
        return Ok(0);
    }
    // An artifact's strings (--from) may carry escape sequences.
    let table = text(
        spec,
        &settings,
        &netns,
        run.as_ref(),
        &rows,
        evidence_rows,
        &notes,
    );
    crate::output::print(crate::text::escape_block(&table).as_bytes(), "the audit")?;
    Ok(0)
}

/// The ports whose reservation the audit may propose: those named with
/// `--reserve`, else the `--from` run's target's, else none. Whatever
/// listens on the machine right now may be a test server or a one-off
/// (the audit once proposed reserving a test suite's ports); the ports
/// listening now are only named in a note.
fn protect_only_named_ports(
    spec: &TuneSpec,
    run: Option<&ProfileReport>,
    settings: &mut Settings,
    notes: &mut Vec<String>,
) {
    let listening = std::mem::take(&mut settings.listening);
    let mut ports = if !spec.reserve.is_empty() {
        spec.reserve.clone()
    } else {
        run.map(|r| target_ports(&r.target.sockets))
            .unwrap_or_default()
    };
    ports.sort_unstable();
    ports.dedup();
    if ports.is_empty() && !listening.is_empty() {
        let mut now = listening;
        now.sort_unstable();
        now.dedup();
        let now: Vec<String> = now.iter().take(20).map(u16::to_string).collect();
        notes.push(format!(
            "no port is proposed for net.ipv4.ip_local_reserved_ports: name your services' ports \
             with --reserve PORT,... (or give --from a run); listening now: {}",
            now.join(", ")
        ));
    }
    settings.listening = ports;
}

/// The ports of a run's target sockets as the artifact writes them
/// (`tcp 127.0.0.1:8080`, `udp [::1]:53 (pid 12)`, `unix:/path ...`).
fn target_ports(sockets: &[String]) -> Vec<u16> {
    sockets
        .iter()
        .filter_map(|s| {
            let mut w = s.split_whitespace();
            let proto = w.next()?;
            if proto != "tcp" && proto != "udp" {
                return None;
            }
            w.next()?
                .parse::<std::net::SocketAddr>()
                .ok()
                .map(|a| a.port())
        })
        .collect()
}

/// Reads `--from`: a profile artifact, or a usage error saying what the
/// file is instead.
fn read_run(p: &Path) -> Result<ProfileReport> {
    let what = format!("tune --from {}", p.display());
    let bytes = crate::input::read_artifact(p, crate::input::ARTIFACT_MAX, &what)?;
    profile::from_bytes(&bytes, p, "tune --from").map_err(|e| error::usage(format!("{e:#}")))
}

/// The text output: header, table, a count of the changes advised.
fn text(
    spec: &TuneSpec,
    settings: &Settings,
    netns: &str,
    run: Option<&ProfileReport>,
    rows: &[AuditRow],
    evidence_rows: usize,
    notes: &[String],
) -> String {
    let mut out = format!(
        "Tuning audit of this machine for {} (--for latency|throughput|connections).\n",
        spec.goal.name()
    );
    out.push_str(&format!(
        "Read now: sysctls under /proc/sys (network namespace {netns}), this shell's RLIMIT_NOFILE, THP, cpufreq, RPS/XPS, conntrack. sockscope changes nothing.\n"
    ));
    if settings.child_netns {
        out.push_str(&format!(
            "{netns} is not the host's network namespace: its own interfaces are listed, and sysctls only the host's namespace has say \"{}\".\n",
            crate::tune::settings::HOST_NAMESPACE_ONLY
        ));
    }
    if let (Some(p), Some(r)) = (&spec.from, run.filter(|r| r.evidence.is_some())) {
        out.push_str(&format!(
            "Ranked by the evidence of {} (profile of {} started {}): {} row{} it supports first.\n",
            p.display(),
            r.target.comm,
            r.started_at,
            evidence_rows,
            if evidence_rows == 1 { "" } else { "s" }
        ));
    }
    for n in notes {
        out.push_str(&format!("Note: {n}.\n"));
    }
    out.push('\n');
    // The table pads its last column too; a terminal needs no trailing
    // blanks.
    for line in table(rows).to_text().lines() {
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let change = rows.iter().filter(|r| !r.ok).count();
    let sysctls = rows.iter().filter(|r| !r.ok && r.sysctl.is_some()).count();
    out.push_str(&format!(
        "\n{change} of {} settings to change ({sysctls} sysctl{}: `sockscope tune --for {}{} --emit sysctl` prints them).\n",
        rows.len(),
        if sysctls == 1 { "" } else { "s" },
        spec.goal.name(),
        spec.from
            .as_ref()
            .map(|p| format!(" --from {}", p.display()))
            .unwrap_or_default()
    ));
    out
}

/// `net:[INODE]` of this process's network namespace ("?" unreadable).
fn netns_id() -> String {
    std::fs::read_link("/proc/self/ns/net")
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_ports_are_read_from_its_sockets_and_nothing_else() {
        let s = [
            "tcp 127.0.0.1:8080",
            "udp [::1]:53 (pid 12)",
            "unix:/run/x.sock",
            "tcp nonsense",
        ]
        .map(String::from);
        assert_eq!(target_ports(&s), vec![8080, 53]);
    }
}
