//! A run whose load was not sockscope's (`--load-cmd`, observe only): its
//! requests are the request anatomy's, counted at the target's sockets.
//! What the count is, its workload record, and its windows' note. Pure.

use super::driven::Driven;
use crate::report::anatomy::AnatomyReport;
use crate::report::profile::Windows;
use crate::report::workload::{COMMAND, OBSERVED, RequestCount, WorkloadRecord};

/// The requests the anatomy counted: the timed turns, the turns of
/// multiplexed connections (a batch each: a lower bound there) and the UDP
/// datagrams answered whose arrival it did not see. Where it counted
/// commands from the bytes (RESP, memcached, PostgreSQL, HTTP/1, DNS), those are the requests,
/// never their turns (a pipelined batch is one turn of many commands):
/// the turns that carried commands are replaced by the commands.
pub fn requests(a: &AnatomyReport) -> u64 {
    let turns = a.turns + a.multiplexed.turns + a.udp_arrival_unseen;
    match a.requests {
        Some(commands) => commands + turns.saturating_sub(command_turns(a)),
        None => turns,
    }
}

/// The turns that carried commands, every protocol.
fn command_turns(a: &AnatomyReport) -> u64 {
    crate::report::commands::command_turns(&a.protocol_counts())
}

/// The workload record of a command's run or an observation, its requests
/// counted by `anatomy` (None only if it failed: the run is then refused
/// before anything is written, see `measure`).
pub(super) fn record(driven: Driven, anatomy: Option<&AnatomyReport>) -> WorkloadRecord {
    let (count, window_s, connections, note) = match anatomy {
        Some(a) => (requests(a), a.window_s, a.connections, note(a)),
        None => (0, 0.0, 0, "the request anatomy did not record".into()),
    };
    let observed = matches!(driven, Driven::Observed(_));
    // At most one request per connection is under way at each edge (the
    // anatomy times one turn at a time): a command's requests start after
    // the window opened, so only the closing edge cuts them.
    let edges = if observed { 2 } else { 1 };
    let requests = RequestCount {
        counted_by: "anatomy".into(),
        count,
        window_s,
        anatomy_count: None,
        edge_bound: Some(connections * edges),
        note,
    };
    match driven {
        Driven::Command(run) => WorkloadRecord {
            source: COMMAND.into(),
            command: Some(run.argv),
            exit: Some(run.exit),
            output: Some(run.output),
            window_s: run.wall.as_secs_f64(),
            requests,
        },
        Driven::Observed(d) => WorkloadRecord {
            source: OBSERVED.into(),
            command: None,
            exit: None,
            output: None,
            window_s: d.as_secs_f64(),
            requests,
        },
        Driven::Own { .. } => unreachable!("sockscope's own load counts its own requests"),
    }
}

/// What the anatomy's count is made of, for people.
fn note(a: &AnatomyReport) -> String {
    let ports: Vec<String> = a.ports.iter().map(|p| p.label()).collect();
    if let Some(commands) = a.requests {
        return format!(
            "{commands} {} requests read whole on {} connection{} ({} in {} turns: pipelined \
             batches count every request, an HTTP/2 stream is a turn of its own), and {} turns \
             on connections whose requests were not parsed ({})",
            crate::report::commands::protocols(&a.protocol_counts()),
            a.connections,
            if a.connections == 1 { "" } else { "s" },
            commands,
            command_turns(a),
            (a.turns + a.multiplexed.turns + a.udp_arrival_unseen).saturating_sub(command_turns(a)),
            if ports.is_empty() {
                "none answered".to_string()
            } else {
                ports.join(", ")
            }
        );
    }
    let mut s = format!(
        "responses the target wrote on {} connection{} to its listening port{} ({})",
        a.connections,
        if a.connections == 1 { "" } else { "s" },
        if ports.len() == 1 { "" } else { "s" },
        if ports.is_empty() {
            "none answered".to_string()
        } else {
            ports.join(", ")
        }
    );
    if a.multiplexed.turns > 0 {
        s.push_str(&format!(
            "; {} of them on {} multiplexed connection{} (pipelining, HTTP/2), where a turn may \
             hold several requests: there the count is a lower bound",
            a.multiplexed.turns,
            a.multiplexed.connections,
            if a.multiplexed.connections == 1 {
                ""
            } else {
                "s"
            }
        ));
    }
    if a.udp_arrival_unseen > 0 {
        s.push_str(&format!(
            "; {} UDP datagrams answered but not timed",
            a.udp_arrival_unseen
        ));
    }
    s
}

/// The windows of a run without sockscope's load: the command's run or
/// the observation, inside the trace (or anatomy) window.
pub(super) fn windows(w: &WorkloadRecord, trace_s: f64, traced: bool) -> Windows {
    let window = if traced {
        "trace window"
    } else {
        "request anatomy's window (no syscall tracer, --requests-only)"
    };
    let what = if w.source == COMMAND {
        format!("the load command's run ({:.3} s)", w.window_s)
    } else {
        format!("the observation ({:.3} s)", w.window_s)
    };
    Windows {
        load_s: w.requests.window_s,
        load_wall_s: w.window_s,
        trace_s,
        note: format!(
            "The {window} ({trace_s:.3} s) opens before {what} starts and closes after it \
             ends; the requests were counted by the request anatomy over its own window \
             ({:.3} s). The CPU per request is the target's CPU over that window divided by \
             its count{}.",
            w.requests.window_s,
            if traced {
                "; the tracer's per-request figures (syscalls, switches, faults) are its \
                 counts over the trace window divided by it"
            } else {
                ""
            }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures;

    #[test]
    fn an_observation_counts_every_kind_of_turn_and_bounds_both_edges() {
        let mut a = fixtures::anatomy();
        a.turns = 1000;
        a.connections = 8;
        a.multiplexed.turns = 20;
        a.multiplexed.connections = 1;
        a.udp_arrival_unseen = 3;
        assert_eq!(requests(&a), 1023);
        let w = record(
            Driven::Observed(std::time::Duration::from_secs(5)),
            Some(&a),
        );
        assert_eq!(w.source, OBSERVED);
        assert_eq!(w.requests.count, 1023);
        assert_eq!(w.requests.counted_by, "anatomy");
        assert_eq!(w.requests.edge_bound, Some(16));
        assert!(
            w.requests.note.contains("lower bound"),
            "{}",
            w.requests.note
        );
        assert!(
            w.requests.note.contains("3 UDP datagrams"),
            "{}",
            w.requests.note
        );
        assert_eq!(w.window_s, 5.0);
    }

    #[test]
    fn counted_commands_replace_the_turns_that_carried_them() {
        let mut a = fixtures::anatomy();
        // 25 batches of 16 commands, 2 lockstep commands, 5 turns on a
        // connection whose bytes were not RESP.
        a.turns = 32;
        a.requests = Some(402);
        a.resp.turns = 27;
        a.resp.connections = 3;
        assert_eq!(requests(&a), 407);
        let w = record(
            Driven::Observed(std::time::Duration::from_secs(1)),
            Some(&a),
        );
        assert_eq!(w.requests.count, 407);
        assert!(
            w.requests.note.contains("402 RESP requests"),
            "{}",
            w.requests.note
        );
        // memcached's turns are replaced by its commands too.
        a.memcached.turns = 3;
        a.memcached.connections = 1;
        a.requests = Some(405);
        assert_eq!(requests(&a), 407);
        let w = record(
            Driven::Observed(std::time::Duration::from_secs(1)),
            Some(&a),
        );
        assert!(
            w.requests.note.contains("405 RESP and memcached requests"),
            "{}",
            w.requests.note
        );
    }
}
