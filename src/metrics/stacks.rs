//! A node agent's sampled stacks (`trace --requests-only --stacks
//! --metrics`) as metric families, and the last window's pprof profile
//! at `/debug/pprof/profile` ([`crate::stacks::export`] keeps both).

use std::collections::BTreeMap;

use super::model::{counter, family, gauge, label, pb};
use crate::stacks::export::Exported;

/// The families of `e`: the samples per (command, innermost function,
/// module), what one sample stands for, and the sampler's own counters.
pub fn families(e: &Exported) -> Vec<pb::MetricFamily> {
    use pb::MetricType::{Counter, Gauge};
    // Sorted, so a scrape reads the same way each time.
    let sorted: BTreeMap<_, _> = e.leaves().iter().collect();
    let samples = sorted
        .into_iter()
        .map(|((comm, function, module), n)| {
            counter(
                vec![
                    label("comm", comm.as_str()),
                    label("function", function.as_str()),
                    label("module", module.as_str()),
                ],
                *n as f64,
            )
        })
        .collect();
    vec![
        family(
            "sockscope_stack_samples_total",
            "On-CPU stack samples of each command (process name) by the function it was running \
             in (innermost frame: self time; kernel functions end in _[k]) and that function's \
             module, since the agent started. One sample stands for \
             sockscope_stack_sample_period_seconds of CPU. Past --max-series label sets, a \
             command's samples go to function=\"(other)\", then to comm=\"(other)\".",
            Counter,
            samples,
        ),
        family(
            "sockscope_stack_sample_period_seconds",
            "The CPU time one stack sample stands for (1 / the sampling rate per CPU).",
            Gauge,
            vec![gauge(vec![], 1.0 / f64::from(e.hz().max(1)))],
        ),
        family(
            "sockscope_stack_window_seconds",
            "The length of the windows whose whole stacks /debug/pprof/profile serves (the \
             last complete one).",
            Gauge,
            vec![gauge(vec![], e.window().as_secs_f64())],
        ),
        family(
            "sockscope_stack_samples_lost_total",
            "Stack samples lost because the ring buffer was full.",
            Counter,
            vec![counter(vec![], e.lost() as f64)],
        ),
        family(
            "sockscope_stack_bpf_seconds_total",
            "Run time of the stack sampler's BPF program, in the sampled tasks' context (not in \
             sockscope_agent_cpu_seconds_total nor in sockscope_agent_target_* families).",
            Counter,
            vec![counter(vec![], e.bpf_ns() as f64 / 1e9)],
        ),
        family(
            "sockscope_stack_module_cache_bytes",
            "Bytes the agent holds to unwind and name the modules it sampled (an estimate: their \
             unwind sections and FDE tables, symbol tables and the index over them, private \
             copies), and under budget=\"true\" the most it keeps before dropping the least \
             recently sampled modules.",
            Gauge,
            vec![
                gauge(vec![], e.cache().held as f64),
                gauge(vec![label("budget", "true")], e.cache().budget as f64),
            ],
        ),
        family(
            "sockscope_stack_module_evictions_total",
            "Modules dropped to keep to the budget (each is read and parsed again if sampled \
             again: a count that keeps rising means the budget is smaller than what the node \
             runs).",
            Counter,
            vec![counter(vec![], e.cache().evicted as f64)],
        ),
    ]
}

/// What `/debug/pprof/profile?QUERY` asks for, judged against a window of
/// `window_s` seconds: Ok when it is the last complete window, Err with
/// why not. `seconds` may only name the window itself: this agent serves
/// what it already sampled and never samples on demand.
pub fn check_query(query: &str, window_s: u64) -> Result<(), String> {
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if k != "seconds" {
            continue;
        }
        match v.parse::<u64>() {
            Ok(n) if n == window_s => {}
            _ => {
                return Err(format!(
                    "seconds={}: this agent serves its last complete window of {window_s} s \
                     (--stack-window); leave seconds out, or ask for seconds={window_s}\n",
                    crate::text::escape(v)
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostile;
    use crate::report::stacks::FrameKey;
    use crate::stacks::export::DEFAULT_WINDOW;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(hostile::config(2048))]

        #[test]
        fn queries_naming_the_window_pass_and_mutated_ones_never_panic(
            window in 1..3600u64,
            extra in prop::collection::vec("[a-z]{1,6}=[0-9a-z]{0,4}", 0..3),
            ms in hostile::mutations(),
        ) {
            let mut pairs = extra.clone();
            pairs.retain(|p| !p.starts_with("seconds="));
            pairs.push(format!("seconds={window}"));
            let q = pairs.join("&");
            prop_assert!(check_query(&q, window).is_ok());
            let bad = hostile::mutate_text(&q, &ms);
            if let Err(why) = check_query(&bad, window) {
                prop_assert!(why.trim_end_matches('\n').chars().all(|c| !c.is_control()));
            }
        }
    }

    #[test]
    fn samples_are_a_counter_per_command_function_and_module() {
        let shared = Exported::shared(19, DEFAULT_WINDOW, 8);
        let mut e = shared.lock().unwrap();
        let f = FrameKey {
            name: "slow_hash".into(),
            module: "/srv/slow_server".into(),
            kernel: false,
        };
        e.add("slow_server", Some(&f), 3);
        e.set_counters(2, 5_000_000);
        let text = super::super::text::encode(&families(&e));
        assert!(
            text.contains(
                "sockscope_stack_samples_total{comm=\"slow_server\",function=\"slow_hash\",\
                 module=\"/srv/slow_server\"} 3\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("sockscope_stack_samples_lost_total 2\n"),
            "{text}"
        );
        assert!(
            text.contains("sockscope_stack_bpf_seconds_total 5e-3\n"),
            "{text}"
        );
        assert!(
            text.contains("sockscope_stack_window_seconds 60\n"),
            "{text}"
        );
        e.set_cache(crate::stacks::export::ModuleCacheStats {
            held: 3 << 20,
            budget: 16 << 20,
            evicted: 7,
        });
        let text = super::super::text::encode(&families(&e));
        assert!(
            text.contains("sockscope_stack_module_cache_bytes 3145728\n")
                && text.contains("sockscope_stack_module_cache_bytes{budget=\"true\"} 16777216\n")
                && text.contains("sockscope_stack_module_evictions_total 7\n"),
            "{text}"
        );
        let period = text
            .lines()
            .find_map(|l| l.strip_prefix("sockscope_stack_sample_period_seconds "))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap();
        assert!((period - 1.0 / 19.0).abs() < 1e-9, "{text}");
    }

    #[test]
    fn a_query_may_name_the_window_and_nothing_else() {
        assert!(check_query("", 60).is_ok());
        assert!(check_query("seconds=60", 60).is_ok());
        assert!(check_query("debug=0&seconds=60", 60).is_ok());
        let e = check_query("seconds=30", 60).unwrap_err();
        assert!(e.contains("window of 60 s"), "{e}");
        assert!(check_query("seconds=-1", 60).is_err());
        assert!(
            !check_query("seconds=\x1b[2J", 60)
                .unwrap_err()
                .contains('\x1b')
        );
        assert!(check_query("seconds", 60).is_err());
    }
}
