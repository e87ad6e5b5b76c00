//! Drawing one screen of `sockscope top` with ratatui: a title line (the
//! target, the time, the sort), the table of ports and their endpoints
//! (requests/s, errors, p50, p99 and the server time's parts as a bar),
//! with `--stacks` the last interval's hottest on-CPU functions, a status
//! line and the keys. The same drawing makes `--once`'s text
//! (a buffer read back as lines, no colour), so the two cannot differ.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row as TableRow, Table, Widget};

use super::model::{PortGroup, Row, SortKey};
use crate::report::units::fmt_ns;
use crate::stacks::live::HotFunctions;

/// The smallest screen the table fits; a smaller one says so.
pub const MIN_WIDTH: u16 = 60;
/// See [`MIN_WIDTH`].
pub const MIN_HEIGHT: u16 = 8;
/// Functions listed at most (fewer when the screen is short).
pub const MAX_FUNCTIONS: usize = 8;
/// Rows the table keeps before the functions take any.
const TABLE_MIN: u16 = 3;

/// The parts' letters in the bar (no colour) and their colours.
const PARTS: [(char, &str, Color); 4] = [
    ('q', "queue", Color::Yellow),
    ('c', "cpu wait", Color::Red),
    ('s', "service", Color::Green),
    ('w', "send", Color::Blue),
];

/// Everything one screen shows.
#[derive(Clone, Debug, Default)]
pub struct Screen {
    /// Who is watched (escaped and cut already).
    pub target: String,
    /// Seconds since the window opened.
    pub elapsed_s: f64,
    /// The seconds the figures are over (the last interval).
    pub interval_s: f64,
    /// The groups, sorted.
    pub groups: Vec<PortGroup>,
    /// How they are sorted.
    pub sort: SortKey,
    /// The selected row (of every row drawn).
    pub selected: usize,
    /// Something the user must know (the target exited, no reading yet).
    pub status: Option<String>,
    /// Colours (off under NO_COLOR and for `--once`).
    pub color: bool,
    /// Whether stacks are sampled (the functions' panel is drawn).
    pub stacks: bool,
    /// The last interval's hottest functions (None: none yet).
    pub functions: Option<HotFunctions>,
}

impl Screen {
    /// Every row drawn, in order: each port, then its endpoints.
    pub fn rows(&self) -> Vec<&Row> {
        self.groups
            .iter()
            .flat_map(|g| std::iter::once(&g.port).chain(g.endpoints.iter()))
            .collect()
    }

    /// Lines the functions' panel wants: its title and a line per
    /// function (one saying why when there is none); 0 without stacks.
    fn panel_wants(&self) -> u16 {
        if !self.stacks {
            return 0;
        }
        let n = self
            .functions
            .as_ref()
            .map_or(0, |h| h.functions.len().min(MAX_FUNCTIONS));
        1 + n.max(1) as u16
    }
}

/// A module as a short name: a path's file name (`[kernel]` as it is).
fn module_text(module: &str) -> &str {
    module.rsplit('/').next().unwrap_or(module)
}

/// Draws the functions' panel over `area` (its first line the title).
fn draw_functions(s: &Screen, area: Rect, strong: Style, buf: &mut Buffer) {
    let title = match &s.functions {
        Some(h) => format!(
            "HOTTEST FUNCTIONS (on-CPU, last {:.1} s, {} samples)",
            h.interval_s, h.samples
        ),
        None => "HOTTEST FUNCTIONS (on-CPU)".to_string(),
    };
    Paragraph::new(Line::styled(title, strong)).render(Rect { height: 1, ..area }, buf);
    let body = Rect {
        y: area.y + 1,
        height: area.height.saturating_sub(1),
        ..area
    };
    let h = match &s.functions {
        Some(h) if !h.functions.is_empty() => h,
        other => {
            let why = if other.is_none() {
                "waiting for the first interval"
            } else {
                "no on-CPU sample of the target"
            };
            Paragraph::new(format!("        {why}")).render(body, buf);
            return;
        }
    };
    let rows: Vec<TableRow> = h
        .functions
        .iter()
        .take(usize::from(body.height))
        .map(|f| {
            let share = f.samples as f64 * 100.0 / h.samples.max(1) as f64;
            TableRow::new(vec![
                Cell::from(format!("{share:5.1} %")),
                Cell::from(f.name.clone()),
                Cell::from(module_text(&f.module).to_string()),
            ])
        })
        .collect();
    // The names as wide as the longest needs (up to what the module
    // leaves), the module right after.
    let longest = h
        .functions
        .iter()
        .map(|f| f.name.chars().count())
        .max()
        .unwrap_or(0);
    let name_width = u16::try_from(longest)
        .unwrap_or(u16::MAX)
        .clamp(16, area.width.saturating_sub(7 + 2 + 12).max(16));
    Table::new(
        rows,
        [
            Constraint::Length(7),
            Constraint::Length(name_width),
            Constraint::Min(10),
        ],
    )
    .column_spacing(1)
    .render(body, buf);
}

fn rate_text(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.1}")
    }
}

fn bar(parts: [f64; 4], width: usize, color: bool) -> Line<'static> {
    let total: f64 = parts.iter().sum();
    if total <= 0.0 || width == 0 {
        return Line::from("-");
    }
    // Largest remainders, so the cells add up to the width.
    let exact: Vec<f64> = parts.iter().map(|p| p / total * width as f64).collect();
    let mut cells: Vec<usize> = exact.iter().map(|e| e.floor() as usize).collect();
    let mut left = width.saturating_sub(cells.iter().sum());
    let mut order: Vec<usize> = (0..4).collect();
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())));
    for i in order {
        if left == 0 {
            break;
        }
        cells[i] += 1;
        left -= 1;
    }
    let spans: Vec<Span<'static>> = cells
        .iter()
        .zip(PARTS)
        .filter(|(n, _)| **n > 0)
        .map(|(n, (letter, _, c))| {
            let text: String = std::iter::repeat_n(letter, *n).collect();
            if color {
                Span::styled(text, Style::default().fg(Color::Black).bg(c))
            } else {
                Span::raw(text)
            }
        })
        .collect();
    Line::from(spans)
}

fn ns_text(ns: Option<u64>) -> String {
    ns.map_or_else(|| "-".into(), |n| fmt_ns(n as f64))
}

/// Draws `s` into `buf` over `area`.
pub fn draw(s: &Screen, area: Rect, buf: &mut Buffer) {
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let text = format!(
            "terminal too small ({}x{}): sockscope top needs {MIN_WIDTH}x{MIN_HEIGHT}; q quits",
            area.width, area.height
        );
        Paragraph::new(text)
            .wrap(ratatui::widgets::Wrap { trim: true })
            .render(area, buf);
        return;
    }
    let strong = if s.color {
        Style::default().add_modifier(Modifier::BOLD)
    } else {
        Style::default()
    };
    let title = format!(
        "sockscope top - {} - {:.0} s - per {:.1} s - sort: {}",
        s.target,
        s.elapsed_s,
        s.interval_s,
        s.sort.name()
    );
    Paragraph::new(Line::styled(title, strong)).render(Rect { height: 1, ..area }, buf);
    let legend: String = PARTS
        .iter()
        .map(|(l, n, _)| format!("{l} {n}"))
        .collect::<Vec<_>>()
        .join("  ");
    let keys = format!("q quit  s sort  up/down select  parts: {legend}");
    let status = s.status.clone().unwrap_or_default();
    let bottom = area.y + area.height - 2;
    Paragraph::new(Line::from(status)).render(
        Rect {
            y: bottom,
            height: 1,
            ..area
        },
        buf,
    );
    Paragraph::new(Line::from(keys)).render(
        Rect {
            y: bottom + 1,
            height: 1,
            ..area
        },
        buf,
    );
    let widths = [
        Constraint::Min(24),
        Constraint::Length(10),
        Constraint::Length(7),
        Constraint::Length(9),
        Constraint::Length(9),
        Constraint::Length(20),
    ];
    // The bar takes what the name column leaves, up to 40 cells.
    let bar_width = usize::from(area.width.saturating_sub(24 + 10 + 7 + 9 + 9 + 5)).clamp(10, 40);
    let mut rows = Vec::new();
    for (i, r) in s.rows().into_iter().enumerate() {
        let label = if r.endpoint {
            format!("  {}", r.label)
        } else {
            match r.protocol {
                Some(p) => format!("{} {p}", r.label),
                None => r.label.clone(),
            }
        };
        let errors = r.errors.map_or_else(|| "-".into(), |e| e.to_string());
        let mut row = TableRow::new(vec![
            Cell::from(label),
            Cell::from(rate_text(r.rate)),
            Cell::from(errors),
            Cell::from(ns_text(r.p50_ns)),
            Cell::from(ns_text(r.p99_ns)),
            Cell::from(bar(r.parts, bar_width, s.color)),
        ]);
        if i == s.selected {
            row = row.style(if s.color {
                Style::default().add_modifier(Modifier::REVERSED)
            } else {
                Style::default()
            });
        }
        rows.push(row);
    }
    let header = TableRow::new([
        "PORT / ENDPOINT",
        "REQ/S",
        "ERR",
        "P50",
        "P99",
        "SERVER TIME",
    ])
    .style(strong);
    // The functions take what the table leaves past its first rows.
    let room = area.height.saturating_sub(4);
    let panel = s.panel_wants().min(room.saturating_sub(TABLE_MIN));
    let panel = if panel >= 2 { panel } else { 0 };
    let table_area = Rect {
        y: area.y + 2,
        height: room - panel,
        ..area
    };
    if panel > 0 {
        draw_functions(
            s,
            Rect {
                y: table_area.y + table_area.height,
                height: panel,
                ..area
            },
            strong,
            buf,
        );
    }
    // Keep the selected row in view.
    let visible = usize::from(table_area.height.saturating_sub(1)).max(1);
    let skip = s.selected.saturating_sub(visible - 1);
    let rows: Vec<TableRow> = rows.into_iter().skip(skip).collect();
    Table::new(rows, widths)
        .header(header)
        .column_spacing(1)
        .render(table_area, buf);
}

/// The screen as plain lines `width` wide (trailing blanks trimmed), as
/// tall as it needs: `--once`'s output.
pub fn text(s: &Screen, width: u16) -> String {
    let table = (s.rows().len() as u16).saturating_add(1).max(TABLE_MIN);
    let height = table
        .saturating_add(4)
        .saturating_add(s.panel_wants())
        .max(MIN_HEIGHT);
    let area = Rect::new(0, 0, width.max(MIN_WIDTH), height);
    let mut buf = Buffer::empty(area);
    draw(s, area, &mut buf);
    let mut out = String::new();
    for y in 0..area.height {
        let mut line = String::new();
        for x in 0..area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anatomy::counts::Transport;
    use crate::top::model::PortGroup;

    fn row(label: &str, rate: f64, endpoint: bool) -> Row {
        Row {
            label: label.into(),
            port: (Transport::Tcp, 7),
            protocol: None,
            rate,
            errors: None,
            p50_ns: Some(300_000),
            p99_ns: Some(1_200_000),
            parts: [0.1, 0.1, 0.6, 0.2],
            endpoint,
        }
    }

    fn screen() -> Screen {
        Screen {
            target: "pid 42 (serve)".into(),
            elapsed_s: 3.0,
            interval_s: 1.0,
            groups: vec![PortGroup {
                port: row("tcp:7", 1234.0, false),
                endpoints: vec![row("GET /a", 12.5, true)],
                hidden: 0,
            }],
            ..Screen::default()
        }
    }

    #[test]
    fn once_text_has_the_ports_row_with_its_rate_and_percentiles() {
        let t = text(&screen(), 100);
        let line = t.lines().find(|l| l.starts_with("tcp:7")).expect(&t);
        assert!(line.contains("1234"), "{line}");
        assert!(line.contains("300"), "{line}");
        assert!(t.lines().any(|l| l.starts_with("  GET /a")), "{t}");
        assert!(t.contains("pid 42 (serve)"));
        // The bar, in letters, mostly service.
        let bar = line.split_whitespace().last().unwrap();
        assert!(
            bar.chars().filter(|c| *c == 's').count() > bar.len() / 2,
            "{bar}"
        );
        assert!(!t.chars().any(|c| c.is_control() && c != '\n'));
    }

    fn hot() -> HotFunctions {
        use crate::stacks::live::HotFunction;
        HotFunctions {
            interval_s: 1.0,
            samples: 200,
            functions: (0..12)
                .map(|i| HotFunction {
                    name: if i == 0 {
                        "slow_hash".into()
                    } else {
                        format!("f{i}")
                    },
                    module: "/opt/app/bin/server".into(),
                    samples: if i == 0 { 150 } else { 4 },
                })
                .collect(),
        }
    }

    #[test]
    fn the_functions_panel_lists_the_hottest_with_their_shares() {
        let mut s = screen();
        s.stacks = true;
        let waiting = text(&s, 100);
        assert!(
            waiting.contains("waiting for the first interval"),
            "{waiting}"
        );
        s.functions = Some(hot());
        let t = text(&s, 100);
        let line = t.lines().find(|l| l.contains("slow_hash")).expect(&t);
        assert!(line.contains("75.0 %"), "{line}");
        assert!(line.contains("server") && !line.contains("/opt"), "{line}");
        // At most MAX_FUNCTIONS of the twelve, and the table's rows kept.
        let listed = t.lines().filter(|l| l.contains(" % ")).count();
        assert_eq!(listed, MAX_FUNCTIONS, "{t}");
        assert!(t.lines().any(|l| l.starts_with("tcp:7")), "{t}");
        s.functions = Some(HotFunctions::default());
        assert!(text(&s, 100).contains("no on-CPU sample"));
    }

    #[test]
    fn a_short_terminal_keeps_the_table_before_the_functions() {
        let mut s = screen();
        s.stacks = true;
        s.functions = Some(hot());
        for height in [MIN_HEIGHT, MIN_HEIGHT + 1, 12] {
            let area = Rect::new(0, 0, 80, height);
            let mut buf = Buffer::empty(area);
            draw(&s, area, &mut buf);
            let lines: Vec<String> = (0..height)
                .map(|y| (0..80).map(|x| buf[(x, y)].symbol().to_string()).collect())
                .collect();
            assert!(
                lines.iter().any(|l| l.starts_with("tcp:7")),
                "{height}: {lines:#?}"
            );
            assert!(
                lines[usize::from(height) - 1].starts_with("q quit"),
                "{lines:#?}"
            );
        }
    }

    #[test]
    fn a_tiny_terminal_is_told_so() {
        let area = Rect::new(0, 0, 20, 5);
        let mut buf = Buffer::empty(area);
        draw(&screen(), area, &mut buf);
        let all: String = (0..5)
            .flat_map(|y| (0..20).map(move |x| (x, y)))
            .map(|p| buf[p].symbol().to_string())
            .collect();
        assert!(all.contains("too"), "{all}");
        // Nothing at all fits in 0x0.
        let none = Rect::new(0, 0, 0, 0);
        draw(&screen(), none, &mut Buffer::empty(none));
    }

    #[test]
    fn bars_fill_their_width_exactly() {
        for parts in [[0.25; 4], [1.0, 0.0, 0.0, 0.0], [0.333, 0.333, 0.334, 0.0]] {
            let l = bar(parts, 17, false);
            let n: usize = l.spans.iter().map(|s| s.content.chars().count()).sum();
            assert_eq!(n, 17, "{parts:?}");
        }
        assert_eq!(bar([0.0; 4], 10, false).to_string(), "-");
    }

    #[test]
    fn many_rows_keep_the_selected_one_in_view() {
        let mut s = screen();
        s.groups = (0..50)
            .map(|i| PortGroup {
                port: row(&format!("tcp:{i}"), 1.0, false),
                endpoints: vec![],
                hidden: 0,
            })
            .collect();
        s.selected = 45;
        let area = Rect::new(0, 0, 80, 12);
        let mut buf = Buffer::empty(area);
        draw(&s, area, &mut buf);
        let all: String = (0..12)
            .flat_map(|y| (0..80).map(move |x| (x, y)))
            .map(|p| buf[p].symbol().to_string())
            .collect();
        assert!(all.contains("tcp:45"), "{all}");
    }
}
