//! Reading sockscope's pprof files with Go's own reader (`go tool pprof`,
//! from Debian's golang-go): its `-top` table and its `-raw` samples.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// `go tool pprof ARGS FILE`'s standard output (the run must succeed).
fn pprof(args: &[&str], file: &Path) -> String {
    let out = Command::new("go")
        .args(["tool", "pprof"])
        .args(args)
        .arg(file)
        .env("HOME", std::env::temp_dir())
        .env("PPROF_TMPDIR", std::env::temp_dir())
        .output()
        .expect("go tool pprof runs");
    assert!(
        out.status.success(),
        "go tool pprof {args:?} {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("pprof writes text")
}

/// Has `go tool pprof` built and cached (Go builds its tools on first
/// use, which takes both CPUs of this machine for most of a minute: a test
/// whose profiler samples the whole machine would sample the compiler).
#[allow(dead_code)]
pub fn warm() {
    let _ = Command::new("go")
        .args(["tool", "pprof", "-h"])
        .env("HOME", std::env::temp_dir())
        .output();
}

/// `-top`'s rows: (function, flat %).
pub fn top(file: &Path) -> Vec<(String, f64)> {
    top_with(file, &[])
}

/// `-top`'s rows of the samples whose `process` label is `process`.
#[allow(dead_code)]
pub fn top_of_process(file: &Path, process: &str) -> Vec<(String, f64)> {
    top_with(file, &[&format!("-tagfocus=process=^{process}$")])
}

fn top_with(file: &Path, extra: &[&str]) -> Vec<(String, f64)> {
    // Every node: by default pprof hides those under 0.5 % of the total.
    let mut args = vec!["-top", "-nodecount=100000", "-nodefraction=0"];
    args.extend_from_slice(extra);
    let text = pprof(&args, file);
    let mut rows = Vec::new();
    let mut table = false;
    for l in text.lines() {
        if l.trim_start().starts_with("flat") {
            table = true;
            continue;
        }
        if !table {
            continue;
        }
        // flat flat% sum% cum cum% name (the name may hold spaces).
        let cols: Vec<&str> = l.split_whitespace().collect();
        if cols.len() < 6 {
            continue;
        }
        let Ok(flat) = cols[1].trim_end_matches('%').parse::<f64>() else {
            continue;
        };
        rows.push((cols[5..].join(" "), flat));
    }
    rows
}

/// `-raw`'s header lines `Time:` and `Duration:` (when the window began,
/// how long it was), as pprof prints them.
pub fn time_and_duration(file: &Path) -> (String, String) {
    let text = pprof(&["-raw"], file);
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k))
            .map(|v| v.trim().to_string())
            .unwrap_or_default()
    };
    (field("Time:"), field("Duration:"))
}

/// `-raw`'s samples: (first value, its label lines joined).
pub fn raw(file: &Path) -> Vec<(u64, String)> {
    let text = pprof(&["-raw"], file);
    let mut out: Vec<(u64, String)> = Vec::new();
    let mut in_samples = false;
    for l in text.lines() {
        if l.starts_with("Samples:") {
            in_samples = true;
            continue;
        }
        if l.starts_with("Locations") || l.starts_with("Mappings") {
            in_samples = false;
        }
        if !in_samples {
            continue;
        }
        // A sample is `VALUES: LOCATION IDS`; the lines under it that are
        // not are its labels (`key:[value] ...`).
        let t = l.trim_start();
        let values = t.split_once(':').map(|(v, _)| v).filter(|v| {
            !v.trim().is_empty() && v.split_whitespace().all(|x| x.parse::<u64>().is_ok())
        });
        match values {
            Some(v) => {
                let first = v.split_whitespace().next().unwrap().parse().unwrap();
                out.push((first, String::new()));
            }
            None => {
                if let Some(last) = out.last_mut() {
                    last.1.push_str(t);
                    last.1.push(' ');
                }
            }
        }
    }
    out
}

/// Checks a pprof file against the graph `g` of the same run (its JSON):
/// `-raw` totals the graph's weight, every sample is labelled with its
/// process, and `-top` gives the graph's `top_n` hottest functions the
/// same self shares to 0.1 point.
pub fn check_against(g: &Value, file: &Path, top_n: usize, what: &str) {
    let samples = raw(file);
    let total: u64 = samples.iter().map(|(v, _)| v).sum();
    assert_eq!(
        total,
        g["total"].as_u64().unwrap(),
        "{what}: go tool pprof -raw's samples add up to the graph's total"
    );
    assert!(
        samples.iter().all(|(_, l)| l.contains("process:[")),
        "{what}: a sample without its process label: {samples:?}"
    );
    let rows = top(file);
    let shown_of = |t: &Value| {
        let suffix = if t["kernel"].as_bool().unwrap() {
            "_[k]"
        } else {
            ""
        };
        format!("{}{suffix}", t["name"].as_str().unwrap())
    };
    let all = g["top"].as_array().unwrap();
    for t in all.iter().take(top_n) {
        let shown = shown_of(t);
        // pprof's -top merges the functions of one name whatever their
        // module (clock_gettime in the vDSO and in libc): so are ours.
        let ours = all
            .iter()
            .filter(|u| shown_of(u) == shown)
            .map(|u| u["self_share"].as_f64().unwrap())
            .sum::<f64>()
            * 100.0;
        let theirs = rows
            .iter()
            .find(|(n, _)| *n == shown)
            .map(|(_, f)| *f)
            .unwrap_or_else(|| panic!("{what}: {shown} is not in go tool pprof -top: {rows:?}"));
        assert!(
            (ours - theirs).abs() <= 0.1,
            "{what}: {shown}: sockscope {ours:.2} %, go tool pprof {theirs:.2} %"
        );
    }
}
