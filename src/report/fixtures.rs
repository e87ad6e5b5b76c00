//! Synthetic profile artifacts for the renderers' unit tests, shaped after
//! real runs on the development machine: an epoll echo server under tcp-rr
//! (two socket calls a transaction, nearly no faults) and a forking server
//! under tcp-crr (PostgreSQL 15 answering an SSLRequest: a process per
//! connection, about 380 minor faults and 52 syscalls a transaction).

use serde_json::{Value, json};

use super::insight;
use super::profile::ProfileReport;
use super::workload::WorkloadRecord;

/// What varies between the synthetic runs.
pub struct Shape {
    /// `serve echo --transport epoll`-like target command.
    pub command: Vec<&'static str>,
    /// The load's workload, connections and duration.
    pub workload: &'static str,
    /// Connections.
    pub connections: u64,
    /// Requested duration, s.
    pub duration_s: f64,
    /// Transactions completed.
    pub transactions: u64,
    /// (name, calls, total ns) of each syscall, by time.
    pub syscalls: Vec<(&'static str, u64, u64)>,
    /// Trace without latency (entry hook only).
    pub count_only: bool,
    /// Target user and system CPU, s.
    pub cpu_s: (f64, f64),
    /// Minor page faults over the window.
    pub minor_faults: u64,
    /// (threads, processes) seen.
    pub seen: (u64, u64),
    /// Per-second (transactions, p99 ns) and the length of the run.
    pub seconds: Vec<(u64, u64)>,
    /// Length of the run (the last second may be partial), s.
    pub span_s: f64,
}

/// An epoll echo server under tcp-rr -c 16 -d 2, with the two-transaction
/// tail second a duration run leaves.
pub fn epoll_echo() -> Shape {
    Shape {
        command: vec!["sockscope", "serve", "echo", "--transport", "epoll"],
        workload: "tcp-rr",
        connections: 16,
        duration_s: 2.0,
        transactions: 399_748,
        syscalls: vec![
            ("sendto", 399_755, 1_140_000_000),
            ("poll", 1, 1_000_000_000),
            ("epoll_wait", 245_165, 1_000_000_000),
            ("recvfrom", 399_771, 258_000_000),
            ("close", 16, 116_000),
            ("accept4", 21, 47_400),
            ("epoll_ctl", 16, 15_600),
            ("setsockopt", 16, 5_330),
            ("read", 2, 2_540),
        ],
        count_only: false,
        cpu_s: (0.111, 1.857),
        minor_faults: 1,
        seen: (3, 1),
        seconds: vec![(198_237, 2_100_000), (201_502, 2_244_607), (9, 5_799_935)],
        span_s: 2.0031,
    }
}

/// A forking server (PostgreSQL-like) under tcp-crr -c 4 -d 3.
pub fn forking_server() -> Shape {
    Shape {
        command: vec!["postgres", "-D", "/tmp/pgdata", "-p", "35871"],
        workload: "tcp-crr",
        connections: 4,
        duration_s: 3.0,
        transactions: 3148,
        syscalls: vec![
            ("epoll_wait", 2939, 8_740_000_000),
            ("pselect6", 3668, 1_570_000_000),
            ("clone", 3152, 698_000_000),
            ("sendto", 3152, 40_300_000),
            ("setsid", 3152, 19_700_000),
            ("epoll_ctl", 18_654, 14_900_000),
            ("wait4", 5076, 10_100_000),
            ("accept", 3152, 8_700_000),
            ("recvfrom", 9215, 7_790_000),
            ("epoll_create1", 6304, 7_180_000),
            ("signalfd4", 3152, 4_390_000),
            ("close", 12_608, 3_840_000),
            ("getrandom", 6304, 3_370_000),
            ("rt_sigaction", 12_608, 3_330_000),
            ("setsockopt", 6304, 3_140_000),
            ("rt_sigprocmask", 19_140, 3_000_000),
            ("getpid", 15_771, 2_000_000),
            ("exit_group", 3152, 1_000_000),
        ],
        count_only: false,
        cpu_s: (0.572, 1.067),
        minor_faults: 1_185_611,
        seen: (3158, 3158),
        seconds: vec![(1026, 7_962_623), (1057, 7_503_871), (1065, 7_471_103)],
        span_s: 3.0004,
    }
}

fn syscall_rows(shape: &Shape) -> Vec<Value> {
    shape
        .syscalls
        .iter()
        .enumerate()
        .map(|(i, (name, calls, ns))| {
            let mut row = json!({"name": name, "nr": i, "calls": calls});
            if !shape.count_only {
                let avg = ns / calls.max(&1);
                row["errors"] = json!(0);
                row["latency"] = json!({
                    "total_ns": ns, "min_ns": avg / 2, "avg_ns": avg, "max_ns": avg * 4,
                    "p50_ns": avg, "p90_ns": avg * 2, "p99_ns": avg * 3, "histogram": []
                });
            }
            row
        })
        .collect()
}

fn load(shape: &Shape) -> Value {
    let intervals: Vec<Value> = shape
        .seconds
        .iter()
        .enumerate()
        .map(|(t, (tx, p99))| {
            json!({"t_s": t, "transactions": tx, "errors": 0, "p50_ns": p99 / 20,
                   "p99_ns": p99, "max_ns": p99 + 1000})
        })
        .collect();
    let intervals: Vec<super::load::Interval> =
        serde_json::from_value(Value::Array(intervals)).expect("intervals");
    let intervals = super::load::seal_intervals(intervals, shape.span_s);
    let tx = shape.transactions;
    json!({
        "schema": "sockscope.load", "schema_version": 1, "sockscope_version": "0.1.0",
        "workload": shape.workload, "target": "127.0.0.1:35871",
        "config": {"connections": shape.connections, "threads": 2, "pipeline": 1,
                   "request_bytes": 100, "response_bytes": 100, "duration_s": shape.duration_s,
                   "warmup_s": 0.0, "verify": false, "timeout_s": 5.0, "max_errors": 0,
                   "command_line": ["sockscope", "load", shape.workload, "127.0.0.1:35871",
                                    "-c", shape.connections.to_string(), "-d",
                                    shape.duration_s.to_string()]},
        "started_at": "2026-11-23T09:17:00.974Z", "duration_s": shape.duration_s,
        "complete": true, "end_reason": "duration",
        "connections": {"requested": shape.connections, "established": shape.connections,
                        "connects": shape.connections},
        "transactions": tx, "rate_per_s": tx as f64 / shape.duration_s,
        "latency": {"count": tx, "min_ns": 14280, "mean_ns": 307023.7, "stddev_ns": 8603.0,
                    "p50_ns": 91199, "p90_ns": 170751, "p99_ns": 4468735, "p999_ns": 8339455,
                    "p9999_ns": 9330687, "max_ns": 9371647, "hdr_histogram": "x"},
        "errors": {"total": 0, "by_class": {}, "unanswered_at_end": 0},
        "intervals": intervals,
        "bytes": {"sent": tx * 100, "received": tx * 100},
        "generator": {"user_cpu_s": 0.03, "system_cpu_s": 0.3, "cpu_us_per_transaction": 3.3,
                      "thread_cpu_share": [0.08, 0.08], "saturated": false},
        "notes": []
    })
}

fn trace(shape: &Shape) -> Value {
    let calls: u64 = shape.syscalls.iter().map(|s| s.1).sum();
    let time: u64 = shape.syscalls.iter().map(|s| s.2).sum();
    let mut totals = json!({"calls": calls});
    if !shape.count_only {
        totals["errors"] = json!(0);
        totals["time_ns"] = json!(time);
    }
    json!({
        "schema": "sockscope.trace", "schema_version": 1, "sockscope_version": "0.1.0",
        "target": {"mode": "attach", "pid": 5110, "comm": shape.command[0]},
        "options": {"count_only": shape.count_only, "follow_forks": true, "per_thread": false},
        "window": {"started_at": "2026-11-23T09:17:00.961Z", "duration_s": shape.span_s + 0.01,
                   "end_reason": "stopped", "complete": true},
        "syscalls": syscall_rows(shape),
        "totals": totals,
        "resources": {"method": "per-thread kernel counters", "user_cpu_s": shape.cpu_s.0,
                      "system_cpu_s": shape.cpu_s.1, "voluntary_ctxt_switches": 4432,
                      "involuntary_ctxt_switches": 287, "minor_faults": shape.minor_faults,
                      "major_faults": 0, "peak_rss_kb": 29389,
                      "peak_rss_method": "VmHWM", "threads_seen": shape.seen.0,
                      "processes_seen": shape.seen.1, "tasks_excluded": 0},
        "tracer": {"events": calls, "programs": [], "bpf_time_ns": 63_400_000,
                   "ns_per_event": 398.0, "cpu_share": 0.021, "ringbuf_drops": 0},
        "notes": []
    })
}

/// A whole profile artifact of `shape`, its derived figures and sentences
/// computed by the code under test.
pub fn profile(shape: &Shape) -> ProfileReport {
    let mut command = vec!["sockscope".to_string(), "profile".to_string()];
    command.extend(shape.command.iter().map(|s| s.to_string()));
    let v = json!({
        "schema": "sockscope.profile", "schema_version": 1,
        "build": {"version": "0.1.0", "git_commit": "974f1c0", "git_dirty": "false"},
        "started_at": "2026-11-23T09:17:00.706Z",
        "command_line": command,
        "target": {"mode": "command", "command": shape.command, "pid": 5110,
                   "comm": shape.command[0], "address": "127.0.0.1:35871",
                   "sockets": ["tcp 127.0.0.1:35871"],
                   "stop": {"signal": "SIGTERM", "after_s": 0.0366, "exit_code": 0}},
        "load_command": ["sockscope", "load", shape.workload, "127.0.0.1:35871", "-c",
                         shape.connections.to_string()],
        "windows": {"load_s": shape.duration_s, "load_wall_s": shape.span_s,
                    "trace_s": shape.span_s + 0.01, "note": "windows"},
        "machine": {"kernel_release": "6.18.44", "kernel_version": "#1 SMP",
                    "cpu_model": "Intel(R) Xeon(R) Processor", "cpus": 2,
                    "virtual_machine": true, "sysctls": {}},
        "load": load(shape),
        "trace": trace(shape),
        "derived": {"transactions": 0, "rate_per_s": 0.0, "target_user_cpu_s": 0.0,
                    "target_system_cpu_s": 0.0, "target_kernel_share": 0.0,
                    "target_cpu_us_per_transaction": 0.0, "target_cpus_busy": 0.0,
                    "syscalls_per_transaction": 0.0, "top_syscalls": [],
                    "voluntary_switches_per_transaction": 0.0,
                    "involuntary_switches_per_transaction": 0.0,
                    "generator_cpu_us_per_transaction": 0.0, "control_thread_cpu_s": 0.0,
                    "generator_saturated": false},
        "insights": [],
        "caveats": []
    });
    // The fixtures are version-1 documents: they go through the v1 reader.
    let mut v = v;
    super::header::upgrade(&mut v).expect("a version-1 artifact");
    let mut r: ProfileReport = serde_json::from_value(v).expect("a valid synthetic artifact");
    let load = r.load.as_ref().expect("a run under sockscope's load");
    r.workload = WorkloadRecord::own(load, shape.span_s, None);
    let trace = r.trace.as_ref().expect("a traced artifact");
    r.derived = insight::derive(load, trace, None, 0.0);
    r.insights = insight::sentences(&r.derived, insight::Volume::Load(load), trace);
    r
}

/// `r` as a run under `wrk` given by `--load-cmd` would have written it:
/// no load report, the requests counted by the request anatomy (as many
/// as the load's transactions), the derived figures over them.
pub fn under_command(mut r: ProfileReport) -> ProfileReport {
    let load = r.load.take().expect("a run under sockscope's load");
    let mut a = anatomy();
    a.turns = load.transactions;
    a.connections = 16;
    r.load_command.clear();
    r.workload = WorkloadRecord {
        source: super::workload::COMMAND.into(),
        command: Some(vec![
            "wrk".into(),
            "-c16".into(),
            "http://127.0.0.1:35871/".into(),
        ]),
        exit: Some("exit status 0".into()),
        output: Some(super::workload::CommandOutput {
            tail: "Running 2s test @ http://127.0.0.1:35871/\n".into(),
            bytes: 42,
            cut: false,
        }),
        window_s: load.duration_s,
        requests: super::workload::RequestCount {
            counted_by: "anatomy".into(),
            count: a.turns,
            window_s: load.duration_s,
            anatomy_count: None,
            edge_bound: Some(16),
            note: "responses written on 16 connections".into(),
        },
    };
    let trace = r.trace.as_ref().expect("a traced artifact");
    r.derived = insight::derive_counted(&r.workload, trace, None, None);
    r.insights = insight::sentences(&r.derived, insight::Volume::Counted(&r.workload), trace);
    r.anatomy = Some(a);
    r
}

/// `r` as `profile --requests-only` would have written it: no trace, the
/// derived figures and sentences without it (the target's CPU as the
/// tracer measured it, read from /proc), and the request anatomy.
pub fn untraced(mut r: ProfileReport) -> ProfileReport {
    let t = r.trace.take().expect("a traced artifact");
    let cpu = (t.resources.user_cpu_s, t.resources.system_cpu_s);
    let window_s = t.window.duration_s;
    let load = r.load.as_ref().expect("a run under sockscope's load");
    r.derived = super::untraced::derive(load, Some(cpu), "/proc stat", window_s, None, 0.0);
    r.insights = super::untraced::sentences(&r.derived, insight::Volume::Load(load));
    r.anatomy = Some(anatomy());
    r
}

/// A request anatomy whose tail is CPU wait: at p99, 2.9 ms of 3.6 ms
/// (the example), two intervals, no client yet.
pub fn anatomy() -> super::anatomy::AnatomyReport {
    use super::anatomy::{AnatomyInterval, AnatomyReport, Composition, PartSummary, Parts};
    let part = |p50: u64, p99: u64| PartSummary {
        count: 1000,
        mean_ns: p50 as f64,
        max_ns: p99,
        p50_ns: p50,
        p90_ns: p50,
        p99_ns: p99,
        p999_ns: p99,
        ..Default::default()
    };
    let comp = |name: &str, q: u64, c: u64, s: u64, w: u64| Composition {
        percentile: name.into(),
        turns: 10,
        server_ns: q + c + s + w,
        queue_wait_ns: q,
        cpu_wait_ns: c,
        service_ns: s,
        send_ns: w,
    };
    let interval = |t_s: f64| AnatomyInterval {
        t_s,
        turns: 500,
        queue_wait_mean_ns: 2_000.0,
        cpu_wait_mean_ns: 40_000.0,
        service_mean_ns: 300_000.0,
        send_mean_ns: 3_000.0,
        server_p50_ns: 320_000,
        server_p99_ns: 3_600_000,
    };
    AnatomyReport {
        turns: 1000,
        connections: 4,
        threads: 1,
        window_s: 2.0,
        parts: Parts {
            queue_wait: part(2_000, 300_000),
            cpu_wait: part(1_000, 2_900_000),
            service: part(310_000, 390_000),
            send: part(3_000, 10_000),
            server_time: part(320_000, 3_600_000),
        },
        at_percentile: vec![
            comp("p50", 2_000, 5_000, 310_000, 3_000),
            comp("p90", 3_000, 20_000, 320_000, 3_000),
            comp("p99", 300_000, 2_900_000, 390_000, 10_000),
            comp("p99.9", 400_000, 3_500_000, 400_000, 10_000),
        ],
        intervals: vec![interval(1.0), interval(2.0)],
        ..Default::default()
    }
}

/// Stacks shaped after nginx under an http load (epoll_wait waiting,
/// request parsing and the write path on CPU, libc unnamed): `scale`
/// multiplies parse_request's weight, so two runs differ in it.
pub fn stacks(scale: u64) -> super::stacks::StacksReport {
    use super::stacks::{
        FrameKey, ModuleNote, StackGraph, StacksCost, StacksReport, WeightUnit, WeightedStack,
    };
    let f = |name: &str, module: &str| FrameKey {
        name: name.into(),
        module: module.into(),
        kernel: module == "[kernel]",
    };
    let nginx = "/usr/sbin/nginx";
    let libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
    let stack = |names: &[(&str, &str)], weight: u64, complete: bool| WeightedStack {
        process: "nginx".into(),
        thread: "nginx".into(),
        frames: std::iter::once(f("main", nginx))
            .chain(std::iter::once(f("ngx_worker_process_cycle", nginx)))
            .chain(names.iter().map(|(n, m)| f(n, m)))
            .collect(),
        weight,
        complete,
    };
    let on = StackGraph::build(
        WeightUnit::Samples,
        vec![
            stack(
                &[
                    ("ngx_process_events_and_timers", nginx),
                    ("ngx_http_parse_request_line", nginx),
                ],
                40 * scale,
                true,
            ),
            stack(
                &[
                    ("ngx_http_write_filter", nginx),
                    ("libc.so.6+0xf7a1e", libc),
                    ("entry_SYSCALL_64", "[kernel]"),
                    ("tcp_sendmsg", "[kernel]"),
                ],
                35,
                true,
            ),
            stack(&[("ngx_epoll_process_events", nginx)], 15, false),
            stack(&[("libc.so.6+0x10c3b2", libc)], 10, false),
        ],
        50,
    );
    let off = StackGraph::build(
        WeightUnit::Nanoseconds,
        vec![
            stack(
                &[
                    ("ngx_epoll_process_events", nginx),
                    ("libc.so.6+0x10c3b2", libc),
                    ("do_epoll_wait", "[kernel]"),
                    ("schedule", "[kernel]"),
                ],
                1_500_000_000,
                true,
            ),
            stack(
                &[("ngx_http_write_filter", nginx), ("schedule", "[kernel]")],
                20_000_000,
                true,
            ),
        ],
        50,
    );
    StacksReport {
        hz: 99,
        cost: StacksCost {
            samples: on.total,
            off_cpu_samples: 4210,
            lost: 3,
            bpf_ns: 1_200_000,
            unwind_ns: 8_500_000,
            symbolize_ns: 41_000_000,
            window_s: 2.0,
            target_share: Some(0.0042),
            machine_share: 0.0126,
            ticks: 396,
            ticks_missed: 0,
            coverage: Some(0.98),
        },
        on_cpu: on,
        off_cpu: Some(off),
        unsymbolized: vec![ModuleNote {
            path: libc.into(),
            frames: 25,
            hint: "install libc6-dbg".into(),
        }],
        notes: vec!["3 samples lost: the ring buffer was full".into()],
    }
}
