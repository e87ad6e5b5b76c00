//! Inline SVG charts generated in Rust, for self-contained HTML reports:
//! no script, no fonts, no network. Three shapes cover every report: line
//! charts (linear or log axes), grouped vertical bars and stacked
//! horizontal bars. Colours are the Okabe-Ito palette, which stays
//! distinguishable with the common colour-vision deficiencies; series are
//! also told apart by markers and by the legend order.

use std::fmt::Write as _;

/// Okabe-Ito colours, in the order series use them.
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
];

/// Escapes text for HTML and SVG: control characters written out (as
/// [`crate::text::escape_block`] writes them; newlines kept), then `&`,
/// `<`, `>` and both quotes as entities.
pub fn esc(s: &str) -> String {
    // Control characters written out first, as `crate::text` writes them
    // for a terminal: a name, an output or an artifact's string could
    // otherwise carry ESC, BEL or a bidirectional override into the page.
    let s = crate::text::escape_block(s);
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Axis scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// Linear, starting at zero unless the data is negative.
    Linear,
    /// Base-10 logarithmic.
    Log,
}

/// Formats an axis or bar value.
pub type Fmt = fn(f64) -> String;

const W: f64 = 760.0;
const H: f64 = 330.0;
const ML: f64 = 78.0;
const MR: f64 = 24.0;
const MT: f64 = 40.0;
const MB: f64 = 56.0;

/// A value axis mapping data to pixels.
#[derive(Clone, Copy, Debug)]
struct Axis {
    scale: Scale,
    lo: f64,
    hi: f64,
    p0: f64,
    p1: f64,
}

impl Axis {
    fn new(scale: Scale, min: f64, max: f64, p0: f64, p1: f64) -> Self {
        let (lo, hi) = match scale {
            Scale::Linear => {
                let lo = min.min(0.0);
                let hi = if max > lo { nice_ceil(max) } else { lo + 1.0 };
                (lo, hi)
            }
            Scale::Log => {
                let min = if min > 0.0 { min } else { 1.0 };
                let max = if max > min { max } else { min * 10.0 };
                (
                    10f64.powf(min.log10().floor()),
                    10f64.powf(max.log10().ceil()),
                )
            }
        };
        Self {
            scale,
            lo,
            hi,
            p0,
            p1,
        }
    }

    fn px(&self, v: f64) -> f64 {
        let f = match self.scale {
            Scale::Linear => (v - self.lo) / (self.hi - self.lo),
            Scale::Log => {
                let v = v.max(self.lo);
                (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
            }
        };
        self.p0 + f.clamp(0.0, 1.0) * (self.p1 - self.p0)
    }

    fn ticks(&self) -> Vec<f64> {
        match self.scale {
            Scale::Linear => {
                let step = nice_step((self.hi - self.lo) / 5.0);
                let mut t = Vec::new();
                let mut v = (self.lo / step).ceil() * step;
                while v <= self.hi + step * 1e-9 && t.len() < 20 {
                    t.push(v);
                    v += step;
                }
                t
            }
            Scale::Log => {
                let mut t = Vec::new();
                let mut v = self.lo;
                let decades = (self.hi / self.lo).log10().round() as usize;
                let minor: &[f64] = if decades <= 2 {
                    &[1.0, 2.0, 5.0]
                } else {
                    &[1.0]
                };
                while v <= self.hi * 1.0001 && t.len() < 40 {
                    for m in minor {
                        if v * m <= self.hi * 1.0001 {
                            t.push(v * m);
                        }
                    }
                    v *= 10.0;
                }
                t
            }
        }
    }
}

fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let n = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    n * mag
}

/// Ticks at whole numbers from `lo` to `hi` (a whole step of 1, 2, 5,
/// 10...), for axes that count whole units such as seconds: no 0.5 tick
/// between two seconds.
pub fn whole_ticks(lo: f64, hi: f64) -> Vec<(f64, String)> {
    let lo = lo.ceil();
    let hi = hi.max(lo);
    let step = nice_step((hi - lo) / 5.0).max(1.0).round();
    let mut out = Vec::new();
    let mut v = (lo / step).ceil() * step;
    while v <= hi + 1e-9 && out.len() < 20 {
        out.push((v, format!("{v:.0}")));
        v += step;
    }
    out
}

fn nice_ceil(v: f64) -> f64 {
    let step = nice_step(v / 5.0);
    (v / step).ceil() * step
}

fn open_svg(out: &mut String, id: &str, title: &str, width: f64, height: f64) {
    let _ = write!(
        out,
        r#"<svg class="chart" id="{id}" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" aria-labelledby="{id}-title" xmlns="http://www.w3.org/2000/svg"><title id="{id}-title">{}</title>"#,
        esc(title)
    );
}

fn legend(out: &mut String, names: &[String], y: f64) {
    let mut x = ML;
    for (i, n) in names.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        let _ = write!(
            out,
            r#"<g class="legend-item"><rect x="{x:.1}" y="{:.1}" width="12" height="12" rx="2" fill="{c}"/><text x="{:.1}" y="{:.1}" class="legend">{}</text></g>"#,
            y - 10.0,
            x + 17.0,
            y,
            esc(n)
        );
        x += 30.0 + 7.0 * n.chars().count() as f64;
    }
}

fn y_axis(out: &mut String, ax: &Axis, fmt: Fmt, label: &str, x0: f64, x1: f64) {
    for t in ax.ticks() {
        let y = ax.px(t);
        let _ = write!(
            out,
            r#"<line class="grid" x1="{x0:.1}" x2="{x1:.1}" y1="{y:.1}" y2="{y:.1}"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            x0 - 6.0,
            y + 4.0,
            esc(&fmt(t))
        );
    }
    let mid = (ax.p0 + ax.p1) / 2.0;
    let _ = write!(
        out,
        r#"<text class="axis-label" transform="translate(16 {mid:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        esc(label)
    );
}

/// One line of a line chart.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend name.
    pub name: String,
    /// (x, y) points in x order.
    pub points: Vec<(f64, f64)>,
}

/// A line chart.
pub struct LineChart<'a> {
    /// Element id (tests and links find the chart by it).
    pub id: &'a str,
    /// Accessible title.
    pub title: &'a str,
    /// X axis label.
    pub x_label: &'a str,
    /// Y axis label.
    pub y_label: &'a str,
    /// X scale.
    pub x_scale: Scale,
    /// Y scale.
    pub y_scale: Scale,
    /// Tick labels for x; None: numeric ticks formatted with `x_fmt`.
    pub x_ticks: Option<Vec<(f64, String)>>,
    /// X tick format.
    pub x_fmt: Fmt,
    /// Y tick format.
    pub y_fmt: Fmt,
    /// The lines.
    pub series: Vec<Series>,
}

const MARKERS: [&str; 4] = ["circle", "square", "diamond", "triangle"];

fn marker(out: &mut String, kind: usize, x: f64, y: f64, color: &str) {
    match MARKERS[kind % MARKERS.len()] {
        "circle" => {
            let _ = write!(
                out,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{color}"/>"#
            );
        }
        "square" => {
            let _ = write!(
                out,
                r#"<rect x="{:.1}" y="{:.1}" width="7" height="7" fill="{color}"/>"#,
                x - 3.5,
                y - 3.5
            );
        }
        "diamond" => {
            let _ = write!(
                out,
                r#"<path d="M{x:.1} {:.1}L{:.1} {y:.1}L{x:.1} {:.1}L{:.1} {y:.1}Z" fill="{color}"/>"#,
                y - 4.5,
                x + 4.5,
                y + 4.5,
                x - 4.5
            );
        }
        _ => {
            let _ = write!(
                out,
                r#"<path d="M{x:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}Z" fill="{color}"/>"#,
                y - 4.5,
                x + 4.5,
                y + 3.5,
                x - 4.5,
                y + 3.5
            );
        }
    }
}

/// Renders a line chart; series with no points are left out.
pub fn line_chart(c: &LineChart<'_>) -> String {
    let series: Vec<&Series> = c.series.iter().filter(|s| !s.points.is_empty()).collect();
    let all = || series.iter().flat_map(|s| s.points.iter());
    let (xmin, xmax) = all().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let ymax = all().map(|p| p.1).fold(f64::MIN, f64::max);
    let ymin = all()
        .map(|p| p.1)
        .filter(|v| *v > 0.0 || c.y_scale == Scale::Linear)
        .fold(f64::MAX, f64::min);
    let mut out = String::new();
    open_svg(&mut out, c.id, c.title, W, H);
    if series.is_empty() {
        let _ = write!(
            out,
            r#"<text class="empty" x="{}" y="{}" text-anchor="middle">no data</text></svg>"#,
            W / 2.0,
            H / 2.0
        );
        return out;
    }
    let (xlo, xhi) = if xmax > xmin {
        (xmin, xmax)
    } else {
        (xmin, xmin + 1.0)
    };
    let x = match c.x_scale {
        Scale::Linear => Axis {
            scale: Scale::Linear,
            lo: xlo,
            hi: xhi,
            p0: ML,
            p1: W - MR,
        },
        Scale::Log => Axis::new(Scale::Log, xlo, xhi, ML, W - MR),
    };
    let y = Axis::new(c.y_scale, ymin, ymax, H - MB, MT);
    y_axis(&mut out, &y, c.y_fmt, c.y_label, ML, W - MR);
    let xt: Vec<(f64, String)> = match &c.x_ticks {
        Some(t) => t.clone(),
        None => x.ticks().into_iter().map(|t| (t, (c.x_fmt)(t))).collect(),
    };
    for (t, label) in xt {
        let px = x.px(t);
        let _ = write!(
            out,
            r#"<line class="tickmark" x1="{px:.1}" x2="{px:.1}" y1="{:.1}" y2="{:.1}"/><text class="tick" x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            H - MB,
            H - MB + 5.0,
            H - MB + 19.0,
            esc(&label)
        );
    }
    let _ = write!(
        out,
        r#"<line class="axis" x1="{ML}" x2="{:.1}" y1="{:.1}" y2="{:.1}"/><text class="axis-label" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        W - MR,
        H - MB,
        H - MB,
        (ML + W - MR) / 2.0,
        H - 12.0,
        esc(c.x_label)
    );
    for (i, s) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let pts: Vec<String> = s
            .points
            .iter()
            .map(|p| format!("{:.1},{:.1}", x.px(p.0), y.px(p.1)))
            .collect();
        let _ = write!(
            out,
            r#"<g class="series" data-name="{}"><polyline fill="none" stroke="{color}" stroke-width="2.2" points="{}"/>"#,
            esc(&s.name),
            pts.join(" ")
        );
        if s.points.len() <= 40 {
            for p in &s.points {
                marker(&mut out, i, x.px(p.0), y.px(p.1), color);
            }
        }
        out.push_str("</g>");
    }
    legend(
        &mut out,
        &series.iter().map(|s| s.name.clone()).collect::<Vec<_>>(),
        22.0,
    );
    out.push_str("</svg>");
    out
}

/// Grouped vertical bars: one group per category, one bar per series.
pub struct BarChart<'a> {
    /// Element id.
    pub id: &'a str,
    /// Accessible title.
    pub title: &'a str,
    /// Y axis label.
    pub y_label: &'a str,
    /// X axis label (under the categories).
    pub x_label: &'a str,
    /// Category names along x.
    pub categories: Vec<String>,
    /// (series name, value per category; None: not measured).
    pub series: Vec<(String, Vec<Option<f64>>)>,
    /// Y scale.
    pub scale: Scale,
    /// Value format (ticks and bar labels).
    pub fmt: Fmt,
    /// A narrower chart, for two side by side.
    pub compact: bool,
}

/// Renders grouped vertical bars with the value above each bar.
pub fn bar_chart(c: &BarChart<'_>) -> String {
    let vals = || c.series.iter().flat_map(|s| s.1.iter().flatten().copied());
    let max = vals().fold(0.0f64, f64::max);
    let min = vals().filter(|v| *v > 0.0).fold(f64::MAX, f64::min);
    let (w, h) = if c.compact { (470.0, 300.0) } else { (W, H) };
    let mut out = String::new();
    open_svg(&mut out, c.id, c.title, w, h);
    if c.categories.is_empty() || vals().next().is_none() {
        let _ = write!(
            out,
            r#"<text class="empty" x="{}" y="{}" text-anchor="middle">no data</text></svg>"#,
            w / 2.0,
            h / 2.0
        );
        return out;
    }
    let y = Axis::new(
        c.scale,
        if min == f64::MAX { 1.0 } else { min },
        max,
        h - MB,
        MT,
    );
    y_axis(&mut out, &y, c.fmt, c.y_label, ML, w - MR);
    let n = c.categories.len() as f64;
    let group_w = (w - ML - MR) / n;
    let k = c.series.len().max(1) as f64;
    let bar_w = ((group_w * 0.8) / k).min(46.0);
    let base = y.px(if c.scale == Scale::Log {
        y.lo
    } else {
        0.0f64.max(y.lo)
    });
    let mut labels = BarLabels::default();
    for (ci, cat) in c.categories.iter().enumerate() {
        let gx = ML + group_w * ci as f64 + (group_w - bar_w * k) / 2.0;
        for (si, (name, vals)) in c.series.iter().enumerate() {
            let Some(v) = vals.get(ci).copied().flatten() else {
                continue;
            };
            let color = PALETTE[si % PALETTE.len()];
            let top = y.px(v);
            let bx = gx + bar_w * si as f64;
            let _ = write!(
                out,
                r#"<rect class="bar" x="{bx:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{color}"><title>{}: {} = {}</title></rect>"#,
                (bar_w - 2.0).max(1.0),
                (base - top).max(0.5),
                esc(name),
                esc(cat),
                esc(&(c.fmt)(v))
            );
            let text = (c.fmt)(v);
            let x = bx + (bar_w - 2.0) / 2.0;
            if bar_w >= 20.0
                && let Some(y) = labels.place(x, top - 4.0, text.chars().count())
            {
                let _ = write!(
                    out,
                    r#"<text class="bar-label" x="{x:.1}" y="{y:.1}" text-anchor="middle">{}</text>"#,
                    esc(&text)
                );
            }
        }
        let _ = write!(
            out,
            r#"<text class="tick" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            ML + group_w * (ci as f64 + 0.5),
            h - MB + 19.0,
            esc(cat)
        );
    }
    let _ = write!(
        out,
        r#"<line class="axis" x1="{ML}" x2="{:.1}" y1="{base:.1}" y2="{base:.1}"/><text class="axis-label" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        w - MR,
        (ML + w - MR) / 2.0,
        h - 12.0,
        esc(c.x_label)
    );
    legend(
        &mut out,
        &c.series.iter().map(|s| s.0.clone()).collect::<Vec<_>>(),
        22.0,
    );
    out.push_str("</svg>");
    out
}

/// Width of one character of a bar label (11.5 px, `.bar-label`), a
/// little over a digit's in the fonts the page names, and its height.
const BAR_LABEL_CHAR_PX: f64 = 7.0;
const BAR_LABEL_H: f64 = 12.0;

/// The value labels over a chart's bars, placed so that none covers
/// another: a label that would is lifted over the one in its way, and
/// left out when that would take it above the plot (the bar's title and
/// the table below the chart still hold its value).
#[derive(Default)]
struct BarLabels {
    /// Boxes of the labels placed: (left, right, top, bottom).
    placed: Vec<(f64, f64, f64, f64)>,
}

impl BarLabels {
    /// The baseline for a label of `chars` centred on `x` that would sit
    /// on `y`, or None when there is no room for it.
    fn place(&mut self, x: f64, y: f64, chars: usize) -> Option<f64> {
        let half = chars as f64 * BAR_LABEL_CHAR_PX / 2.0;
        let (l, r) = (x - half, x + half);
        let mut y = y;
        // Each lift clears one placed box, so this ends within their count.
        for _ in 0..=self.placed.len() {
            let hit = self
                .placed
                .iter()
                .filter(|b| l < b.1 && b.0 < r && y - BAR_LABEL_H < b.3 && b.2 < y)
                .map(|b| b.2)
                .fold(f64::NAN, f64::min);
            if hit.is_nan() {
                if y - BAR_LABEL_H < MT - 16.0 {
                    return None;
                }
                self.placed.push((l, r, y - BAR_LABEL_H, y));
                return Some(y);
            }
            y = hit - 1.0;
        }
        None
    }
}

/// Stacked horizontal bars: one row per item, one segment per part.
pub struct StackChart<'a> {
    /// Element id.
    pub id: &'a str,
    /// Accessible title.
    pub title: &'a str,
    /// X axis label.
    pub x_label: &'a str,
    /// Names of the stacked parts (legend).
    pub parts: Vec<String>,
    /// (row label, value per part).
    pub rows: Vec<(String, Vec<f64>)>,
    /// Value format.
    pub fmt: Fmt,
}

/// Narrowest segment of a stacked bar that is labelled with its value.
const SEG_LABEL_MIN_PX: f64 = 48.0;

/// Renders stacked horizontal bars with the row total at the end, and
/// each segment's value inside it where it fits.
pub fn stack_chart(c: &StackChart<'_>) -> String {
    let row_h = 34.0;
    let label_w = 190.0;
    let height = MT + row_h * c.rows.len().max(1) as f64 + MB;
    let max = c
        .rows
        .iter()
        .map(|r| r.1.iter().sum::<f64>())
        .fold(0.0f64, f64::max);
    let mut out = String::new();
    open_svg(&mut out, c.id, c.title, W, height);
    let x = Axis::new(
        Scale::Linear,
        0.0,
        if max > 0.0 { max } else { 1.0 },
        label_w,
        W - MR - 60.0,
    );
    let bottom = height - MB;
    for t in x.ticks() {
        let px = x.px(t);
        let _ = write!(
            out,
            r#"<line class="grid" x1="{px:.1}" x2="{px:.1}" y1="{MT}" y2="{bottom:.1}"/><text class="tick" x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            bottom + 18.0,
            esc(&(c.fmt)(t))
        );
    }
    for (ri, (label, vals)) in c.rows.iter().enumerate() {
        let y0 = MT + row_h * ri as f64 + 6.0;
        let _ = write!(
            out,
            r#"<text class="row-label" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            label_w - 8.0,
            y0 + 15.0,
            esc(label)
        );
        let mut acc = 0.0;
        for (pi, v) in vals.iter().enumerate() {
            let color = PALETTE[pi % PALETTE.len()];
            let a = x.px(acc);
            let b = x.px(acc + v);
            let _ = write!(
                out,
                r#"<rect class="bar" x="{a:.1}" y="{y0:.1}" width="{:.1}" height="22" fill="{color}"><title>{}: {} = {}</title></rect>"#,
                (b - a).max(0.0),
                esc(label),
                esc(c.parts.get(pi).map_or("", |s| s.as_str())),
                esc(&(c.fmt)(*v))
            );
            // A segment wide enough for its value shows it inside.
            if b - a >= SEG_LABEL_MIN_PX {
                let _ = write!(
                    out,
                    r#"<text class="seg-label" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                    (a + b) / 2.0,
                    y0 + 15.0,
                    esc(&(c.fmt)(*v))
                );
            }
            acc += v;
        }
        let _ = write!(
            out,
            r#"<text class="bar-label" x="{:.1}" y="{:.1}">{}</text>"#,
            x.px(acc) + 6.0,
            y0 + 15.0,
            esc(&(c.fmt)(acc))
        );
    }
    let _ = write!(
        out,
        r#"<text class="axis-label" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        (label_w + W - MR) / 2.0,
        height - 12.0,
        esc(c.x_label)
    );
    legend(&mut out, &c.parts, 22.0);
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::units::{fmt_ns, fmt_si};

    /// A name, an output or any artifact string reaches the page through
    /// `esc`: its control characters are written out as `crate::text`
    /// writes them, never sent as bytes.
    #[test]
    fn esc_writes_control_characters_out() {
        assert_eq!(
            esc("a\x1b[31m\x07<b>\u{9b}\n"),
            "a\\x1b[31m\\x07&lt;b&gt;\\u{9b}\n"
        );
        assert_eq!(esc("plain & simple"), "plain &amp; simple");
    }

    #[test]
    fn log_axis_spans_decades_and_maps_monotonically() {
        let a = Axis::new(Scale::Log, 3.0, 4500.0, 300.0, 0.0);
        assert_eq!((a.lo, a.hi), (1.0, 10000.0));
        assert!(a.px(10.0) > a.px(100.0));
        assert_eq!(a.ticks(), vec![1.0, 10.0, 100.0, 1000.0, 10000.0]);
    }

    #[test]
    fn linear_ticks_are_round() {
        let a = Axis::new(Scale::Linear, 0.0, 87.0, 0.0, 100.0);
        assert_eq!(a.hi, 100.0);
        assert_eq!(a.ticks(), vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
    }

    #[test]
    fn whole_ticks_never_fall_between_units() {
        let t: Vec<f64> = whole_ticks(0.0, 2.0).into_iter().map(|t| t.0).collect();
        assert_eq!(t, vec![0.0, 1.0, 2.0]);
        let t: Vec<f64> = whole_ticks(0.0, 1.0).into_iter().map(|t| t.0).collect();
        assert_eq!(t, vec![0.0, 1.0]);
        let t = whole_ticks(0.0, 59.0);
        assert!(t.iter().all(|(v, l)| v.fract() == 0.0 && !l.contains('.')));
        assert_eq!(t[1].0, 20.0);
    }

    #[test]
    fn stacked_segments_wide_enough_show_their_value() {
        let svg = stack_chart(&StackChart {
            id: "s",
            title: "t",
            x_label: "x",
            parts: vec!["wide".into(), "narrow".into()],
            rows: vec![("row".into(), vec![1000.0, 1.0])],
            fmt: fmt_si,
        });
        let labels: Vec<&str> = svg
            .split("<text class=\"seg-label\"")
            .skip(1)
            .map(|t| &t[t.find('>').unwrap() + 1..t.find('<').unwrap()])
            .collect();
        assert_eq!(labels, ["1k"]);
    }

    #[test]
    fn charts_render_ids_and_escape_text() {
        let svg = bar_chart(&BarChart {
            id: "chart-x",
            title: "a <b>",
            y_label: "y",
            x_label: "x",
            categories: vec!["1".into(), "16".into()],
            series: vec![("epoll".into(), vec![Some(10.0), None])],
            scale: Scale::Linear,
            fmt: fmt_si,
            compact: false,
        });
        assert!(svg.starts_with("<svg class=\"chart\" id=\"chart-x\""));
        assert!(svg.contains("a &lt;b&gt;"));
        assert_eq!(svg.matches("<rect class=\"bar\"").count(), 1);
        let line = line_chart(&LineChart {
            id: "l",
            title: "t",
            x_label: "x",
            y_label: "y",
            x_scale: Scale::Linear,
            y_scale: Scale::Log,
            x_ticks: None,
            x_fmt: fmt_si,
            y_fmt: fmt_ns,
            series: vec![Series {
                name: "s".into(),
                points: vec![(0.0, 100.0), (1.0, 1e6)],
            }],
        });
        assert!(line.contains("<polyline"));
    }
}
