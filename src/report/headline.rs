//! The headline of a profile: the figures a reader looks for first
//! (requests per second, client and server p50/p99, CPU and syscalls per
//! request, the hottest function when stacks were sampled, why the slow
//! requests were slow when samples were tied to them, what the tail was
//! made of, sockscope's own cost), each a short
//! label and value, for the top of summary.txt and report.html. A figure
//! the run did not measure is left out, never shown as 0.

use super::profile::ProfileReport;
use super::stacks::TopFunction;
use super::units::{fmt_us, human_ns};

/// One headline figure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Figure {
    /// What it is (`requests/s`).
    pub label: &'static str,
    /// Its value, for people (`125432 (counted by the load)`).
    pub value: String,
}

/// The headline figures of `r`, in reading order.
pub fn figures(r: &ProfileReport) -> Vec<Figure> {
    let d = &r.derived;
    let mut out = Vec::new();
    let mut add = |label, value: String| out.push(Figure { label, value });
    let commands = r
        .anatomy
        .as_ref()
        .filter(|a| a.requests.is_some())
        .map(|a| super::commands::protocols(&a.protocol_counts()));
    let counted = match (r.workload.requests.counted_by.as_str(), commands) {
        ("anatomy", Some(p)) => format!("{p} requests counted at the target's sockets"),
        ("anatomy", None) => "counted at the target's sockets".to_string(),
        _ => "counted by the load".to_string(),
    };
    add(
        "requests/s",
        format!(
            "{:.0} ({} in {:.2} s, {counted})",
            d.rate_per_s, d.transactions, r.workload.requests.window_s
        ),
    );
    if let Some(l) = r.load.as_ref().and_then(|l| l.latency.as_ref()) {
        add(
            "client latency",
            format!(
                "p50 {}  p99 {}",
                human_ns(l.summary.p50_ns),
                human_ns(l.summary.p99_ns)
            ),
        );
    }
    if let Some(a) = r.anatomy.as_ref().filter(|a| a.parts.server_time.count > 0) {
        let s = &a.parts.server_time;
        // A pipelined batch is one turn: its time is the batch's.
        let batches = if a.endpoints.iter().any(|e| e.batched > 0) {
            " (per turn; a pipelined batch is one)"
        } else {
            ""
        };
        add(
            "server time",
            format!(
                "p50 {}  p99 {}{batches}",
                human_ns(s.p50_ns),
                human_ns(s.p99_ns)
            ),
        );
    }
    let mut per = Vec::new();
    if d.target_cpu_us_per_transaction.is_finite() {
        per.push(format!("{} CPU", fmt_us(d.target_cpu_us_per_transaction)));
    }
    if d.syscalls_per_transaction.is_finite() {
        per.push(format!("{:.2} syscalls", d.syscalls_per_transaction));
    }
    if !per.is_empty() {
        add("per request", per.join(", "));
    }
    if let Some((t, landed)) = r.stacks.as_ref().and_then(|s| hottest_named(&s.on_cpu.top)) {
        let landed = if landed >= 0.005 {
            format!(
                "; {:.0}% landed where the kernel re-enables interrupts",
                100.0 * landed
            )
        } else {
            String::new()
        };
        add(
            "hottest function",
            format!(
                "{}{} ({:.0}% of the target's CPU samples{landed})",
                t.name,
                if t.kernel { " (kernel)" } else { "" },
                100.0 * t.self_share
            ),
        );
    }
    if let Some(t) = r.tail.as_ref().filter(|t| t.sampled_requests.tail > 0) {
        add("why the slow ones", t.headline.clone());
    }
    if let Some((part, ns, total)) = r.anatomy.as_ref().and_then(|a| a.dominant("p99"))
        && total > 0
    {
        add(
            "the p99 tail",
            format!(
                "mostly {part}: {} of {} at the server ({:.0}%)",
                human_ns(ns),
                human_ns(total),
                100.0 * ns as f64 / total as f64
            ),
        );
    }
    let mut cost = Vec::new();
    if let Some(s) = d.tracer_target_share {
        cost.push(format!("{:.1}% (syscall tracer)", 100.0 * s));
    }
    if let Some(s) = r.anatomy.as_ref().and_then(|a| a.cost.of_target_cpu) {
        cost.push(format!("{:.1}% (request anatomy)", 100.0 * s));
    }
    if !cost.is_empty() {
        add(
            "sockscope's cost",
            format!("{} of the target's CPU", cost.join(" + ")),
        );
    }
    out
}

/// Where a cpu-clock tick that came due while the kernel had interrupts
/// off fires: the functions that turn them back on (docs/stacks.md). Their
/// samples belong to whatever ran with interrupts off, so they are not a
/// "hottest function" a person can act on.
fn interrupt_enable_point(t: &TopFunction) -> bool {
    t.kernel && (t.name.contains("unlock_irq") || t.name.starts_with("finish_task_switch"))
}

/// The function with the most self weight outside the interrupt-enable
/// points, and the share of samples those points took (of the top list).
fn hottest_named(top: &[TopFunction]) -> Option<(&TopFunction, f64)> {
    let landed = top
        .iter()
        .filter(|t| interrupt_enable_point(t))
        .map(|t| t.self_share)
        .sum();
    top.iter()
        .find(|t| t.self_weight > 0 && !interrupt_enable_point(t))
        .map(|t| (t, landed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures;

    #[test]
    fn the_headline_has_the_figures_the_run_measured_and_no_others() {
        let mut r = fixtures::profile(&fixtures::epoll_echo());
        let mut a = fixtures::anatomy();
        a.cost.of_target_cpu = Some(0.053);
        r.anatomy = Some(a);
        let f = figures(&r);
        let labels: Vec<&str> = f.iter().map(|f| f.label).collect();
        assert_eq!(
            labels,
            [
                "requests/s",
                "client latency",
                "server time",
                "per request",
                "the p99 tail",
                "sockscope's cost"
            ]
        );
        assert!(
            f[0].value
                .starts_with("199874 (399748 in 2.00 s, counted by the load)"),
            "{f:?}"
        );
        assert!(
            f[4].value.starts_with("mostly CPU wait: 2.90ms of 3.60ms"),
            "{f:?}"
        );
        // Under a command: no client latency, the count is the anatomy's.
        let c = fixtures::under_command(fixtures::profile(&fixtures::epoll_echo()));
        let f = figures(&c);
        assert!(f.iter().all(|f| f.label != "client latency"), "{f:?}");
        assert!(
            f[0].value.contains("counted at the target's sockets"),
            "{f:?}"
        );
        // Without the tracer: no syscalls per request, and nothing says NaN.
        let u = fixtures::untraced(fixtures::profile(&fixtures::epoll_echo()));
        let f = figures(&u);
        let per = f.iter().find(|f| f.label == "per request").unwrap();
        assert!(!per.value.contains("syscalls"), "{per:?}");
        assert!(f.iter().all(|f| !f.value.contains("NaN")), "{f:?}");
    }

    #[test]
    fn the_hottest_function_is_a_headline_figure_when_stacks_exist() {
        let mut r = fixtures::profile(&fixtures::epoll_echo());
        assert!(figures(&r).iter().all(|f| f.label != "hottest function"));
        r.stacks = Some(fixtures::stacks(1));
        let f = figures(&r);
        let hot = f.iter().find(|f| f.label == "hottest function").unwrap();
        assert_eq!(
            hot.value,
            "ngx_http_parse_request_line (40% of the target's CPU samples)"
        );
        // The interrupt-enable points first: the next function is named,
        // and what landed there is said.
        let top = &mut r.stacks.as_mut().unwrap().on_cpu.top;
        let mut irq = top[0].clone();
        irq.name = "_raw_spin_unlock_irqrestore".into();
        irq.kernel = true;
        irq.self_weight = 30;
        irq.self_share = 0.30;
        top.insert(0, irq);
        let f = figures(&r);
        let hot = f.iter().find(|f| f.label == "hottest function").unwrap();
        assert_eq!(
            hot.value,
            "ngx_http_parse_request_line (40% of the target's CPU samples; 30% landed where \
             the kernel re-enables interrupts)"
        );
        // Nothing sampled: no figure.
        r.stacks.as_mut().unwrap().on_cpu = Default::default();
        assert!(figures(&r).iter().all(|f| f.label != "hottest function"));
    }
}
