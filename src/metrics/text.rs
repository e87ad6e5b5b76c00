//! The Prometheus text exposition format (version 0.0.4), encoded from the
//! same metric families as the protobuf format.

use std::fmt::Write as _;

use super::model::pb;

/// Content type of this format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// HELP text: backslash and newline escaped.
fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A label value: backslash, double quote and newline escaped.
fn escape_value(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A sample value as Go's strconv would print it for Prometheus: `+Inf`,
/// `-Inf`, `NaN`, integers without a fraction, others shortest round-trip.
pub fn value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v == v.trunc() && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:e}")
    }
}

fn labels(pairs: &[pb::LabelPair], extra: Option<(&str, &str)>) -> String {
    let mut parts: Vec<String> = pairs
        .iter()
        .map(|p| {
            format!(
                "{}=\"{}\"",
                p.name.as_deref().unwrap_or(""),
                escape_value(p.value.as_deref().unwrap_or(""))
            )
        })
        .collect();
    if let Some((k, v)) = extra {
        parts.push(format!("{k}=\"{v}\""));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

/// Encodes every family in the text format.
pub fn encode(families: &[pb::MetricFamily]) -> String {
    let mut s = String::new();
    for f in families {
        let name = f.name.as_deref().unwrap_or("");
        let ty = pb::MetricType::try_from(f.r#type.unwrap_or(3)).unwrap_or(pb::MetricType::Untyped);
        let ty_text = match ty {
            pb::MetricType::Counter => "counter",
            pb::MetricType::Gauge => "gauge",
            pb::MetricType::Histogram => "histogram",
            pb::MetricType::Summary => "summary",
            _ => "untyped",
        };
        let _ = writeln!(
            s,
            "# HELP {name} {}",
            escape_help(f.help.as_deref().unwrap_or(""))
        );
        let _ = writeln!(s, "# TYPE {name} {ty_text}");
        for m in &f.metric {
            if let Some(c) = &m.counter {
                let _ = writeln!(s, "{name}{} {}", labels(&m.label, None), value(c.value()));
            } else if let Some(g) = &m.gauge {
                let _ = writeln!(s, "{name}{} {}", labels(&m.label, None), value(g.value()));
            } else if let Some(h) = &m.histogram {
                for b in &h.bucket {
                    let le = value(b.upper_bound());
                    let _ = writeln!(
                        s,
                        "{name}_bucket{} {}",
                        labels(&m.label, Some(("le", &le))),
                        b.cumulative_count()
                    );
                }
                let _ = writeln!(
                    s,
                    "{name}_bucket{} {}",
                    labels(&m.label, Some(("le", "+Inf"))),
                    h.sample_count()
                );
                let _ = writeln!(
                    s,
                    "{name}_sum{} {}",
                    labels(&m.label, None),
                    value(h.sample_sum())
                );
                let _ = writeln!(
                    s,
                    "{name}_count{} {}",
                    labels(&m.label, None),
                    h.sample_count()
                );
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_escapes_follow_the_format() {
        assert_eq!(value(123457.0), "123457");
        assert_eq!(value(f64::INFINITY), "+Inf");
        assert_eq!(value(f64::NAN), "NaN");
        assert_eq!(value(2.56e-7).parse::<f64>().unwrap(), 2.56e-7);
        assert_eq!(escape_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(escape_help("x\\y\nz \"q\""), "x\\\\y\\nz \"q\"");
    }
}
