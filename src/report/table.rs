//! A table built once, as columns and rows of cells, and rendered both to
//! aligned text (summary.txt, a terminal) and to HTML (report.html).
//!
//! A column may be shown in both, or in one only: the page has room for
//! every column, a terminal for the few that matter most. Where both show
//! it, the text's header is usually shorter and names the unit ("server
//! us/tx"), while the page's header names the figure ("server CPU/tx") and
//! its cells carry the unit.
//!
//! The text is drawn as [`TextLayout`] says: by default every cell padded
//! and one space between columns; `strace -c` style tables (trace's) also
//! rule off their header and totals and let their last column run free.
//!
//! A cell longer than [`CELL_MAX`] characters (a generated function name,
//! a perf map's, a crafted artifact's string) is cut in both, saying how
//! many characters were cut; the JSON keeps it whole.

use std::borrow::Cow;
use std::fmt::Write as _;

use super::svg::esc;

/// The most characters of a cell a table shows, text and page alike.
/// Beyond it a column would be unreadable anyway, and a format width is
/// at most 65,535 (a wider one panics).
pub const CELL_MAX: usize = 1000;

/// `cell` as a table shows it: whole, or its first [`CELL_MAX`]
/// characters and how many more were cut.
pub fn shown(cell: &str) -> Cow<'_, str> {
    match cell.char_indices().nth(CELL_MAX) {
        None => Cow::Borrowed(cell),
        Some((at, _)) => Cow::Owned(format!(
            "{}... [{} characters cut]",
            &cell[..at],
            cell[at..].chars().count()
        )),
    }
}

/// How a column's cells line up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// Words: to the left.
    Left,
    /// Numbers: to the right (class `n` on the page).
    Right,
}

/// One column: its headers where it is shown, and how its cells line up.
#[derive(Clone, Debug)]
pub struct Column {
    /// Header on the page; None: not on the page.
    pub page: Option<String>,
    /// Header in the text, and the least width of the column there
    /// (wider when a cell or the header is); None: not in the text.
    pub text: Option<(String, usize)>,
    /// Alignment in both.
    pub align: Align,
    /// Appended to every cell on the page, except a placeholder ("-"),
    /// for a column whose text header names the unit instead (" us").
    pub unit: Option<&'static str>,
    /// Spaces before it in the text (after the previous column): 1, or 2
    /// to set a name column off from the numbers before it.
    pub gap: usize,
}

impl Column {
    /// A column on the page and in the text, with the text's own header
    /// and least width.
    pub fn both(page: &str, text: &str, width: usize, align: Align) -> Self {
        Column {
            page: Some(page.into()),
            text: Some((text.into(), width)),
            align,
            unit: None,
            gap: 1,
        }
    }

    /// A column on the page only.
    pub fn page(header: &str, align: Align) -> Self {
        Column {
            page: Some(header.into()),
            text: None,
            align,
            unit: None,
            gap: 1,
        }
    }

    /// A column in the text only.
    pub fn text(header: &str, width: usize, align: Align) -> Self {
        Column {
            page: None,
            text: Some((header.into(), width)),
            align,
            unit: None,
            gap: 1,
        }
    }

    /// The same column, `spaces` after the previous one in the text.
    pub fn gap(self, spaces: usize) -> Self {
        Column {
            gap: spaces,
            ..self
        }
    }

    /// The same column, its page cells followed by `unit`.
    pub fn unit(self, unit: &'static str) -> Self {
        Column {
            unit: Some(unit),
            ..self
        }
    }
}

/// Columns and rows; each row has one cell per column, in order (a row
/// may stop short: the columns it lacks are empty on the page, and its
/// text line ends at its last cell).
#[derive(Clone, Debug, Default)]
pub struct Table {
    /// The columns.
    pub columns: Vec<Column>,
    /// The rows' cells, as shown (numbers already formatted).
    pub rows: Vec<Vec<String>>,
}

/// How [`Table::to_text_with`] draws the text; the default is what
/// [`Table::to_text`] draws.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TextLayout {
    /// The last this many rows are the footer (totals), set apart.
    pub footer: usize,
    /// A rule of dashes under the header and above the footer.
    pub ruled: bool,
    /// The last column runs free (as `strace -c`'s syscall names do): a
    /// line's last cell is not padded when it is left-aligned, the last
    /// column's rule is as long as its least width, and the header stops
    /// at its last title.
    pub open_end: bool,
}

/// The cells as the `&str`s a line is drawn from.
fn strs(cells: &[String]) -> Vec<&str> {
    cells.iter().map(String::as_str).collect()
}

/// What stands in a cell that has no value; it takes no unit.
const PLACEHOLDER: &str = "-";

impl Table {
    /// A page-only table with `headers`; the columns listed in `numeric`
    /// are right-aligned.
    pub fn for_page(headers: &[&str], numeric: &[usize], rows: Vec<Vec<String>>) -> Self {
        let columns = headers
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let align = if numeric.contains(&i) {
                    Align::Right
                } else {
                    Align::Left
                };
                Column::page(h, align)
            })
            .collect();
        Table { columns, rows }
    }

    /// The text columns: a header line, then a line per row, every cell
    /// padded to its column's width and separated by one space.
    pub fn to_text(&self) -> String {
        self.to_text_with(&TextLayout::default())
    }

    /// The text columns drawn as `layout` says.
    pub fn to_text_with(&self, layout: &TextLayout) -> String {
        let (body, footer) = self.text_parts(layout);
        body + &footer
    }

    /// The text as two parts: the header and body, and the footer (its
    /// rule included), for a caller that puts a line between them.
    pub fn text_parts(&self, layout: &TextLayout) -> (String, String) {
        let rows: Vec<Vec<Cow<'_, str>>> = self
            .rows
            .iter()
            .map(|r| r.iter().map(|c| shown(c)).collect())
            .collect();
        // (column, header, width, least width) of each text column.
        let columns: Vec<(usize, &str, usize, usize)> = self
            .columns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let (header, least) = c.text.as_ref()?;
                let widest = rows
                    .iter()
                    .filter_map(|r| r.get(i))
                    .map(|cell| cell.chars().count())
                    .chain([header.chars().count(), *least])
                    .max()
                    .unwrap_or(0);
                Some((i, header.as_str(), widest, *least))
            })
            .collect();
        let mut header: Vec<&str> = columns.iter().map(|&(_, h, _, _)| h).collect();
        if layout.open_end {
            while header.last().is_some_and(|h| h.is_empty()) {
                header.pop();
            }
        }
        let line = |s: &mut String, cells: &[&str]| {
            let last = cells.len().saturating_sub(1);
            for (k, (cell, &(i, _, width, _))) in cells.iter().zip(&columns).enumerate() {
                let column = &self.columns[i];
                if k > 0 {
                    s.extend(std::iter::repeat_n(' ', column.gap));
                }
                // Padding a left-aligned last cell would add only blanks.
                let _ = if layout.open_end && k == last && column.align == Align::Left {
                    write!(s, "{cell}")
                } else {
                    match column.align {
                        Align::Left => write!(s, "{cell:<width$}"),
                        Align::Right => write!(s, "{cell:>width$}"),
                    }
                };
            }
            s.push('\n');
        };
        let rule = |s: &mut String| {
            let last = columns.len().saturating_sub(1);
            let dashes: Vec<String> = columns
                .iter()
                .enumerate()
                .map(|(k, &(_, _, width, least))| {
                    "-".repeat(if layout.open_end && k == last {
                        least
                    } else {
                        width
                    })
                })
                .collect();
            line(s, &strs(&dashes));
        };
        // A row that stops short ends its line at its last cell.
        let row_cells = |r: &[Cow<'_, str>]| -> Vec<String> {
            columns
                .iter()
                .map_while(|&(i, _, _, _)| r.get(i).map(|c| c.to_string()))
                .collect()
        };
        let split = rows.len().saturating_sub(layout.footer);
        let mut body = String::new();
        line(&mut body, &header);
        if layout.ruled {
            rule(&mut body);
        }
        for r in &rows[..split] {
            line(&mut body, &strs(&row_cells(r)));
        }
        let mut footer = String::new();
        if split < rows.len() {
            if layout.ruled {
                rule(&mut footer);
            }
            for r in &rows[split..] {
                line(&mut footer, &strs(&row_cells(r)));
            }
        }
        (body, footer)
    }

    /// The page columns as an HTML table (scrolling sideways when wide).
    pub fn to_html(&self) -> String {
        let on_page: Vec<(usize, &Column, &str)> = self
            .columns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| Some((i, c, c.page.as_deref()?)))
            .collect();
        let class = |c: &Column| match c.align {
            Align::Right => " class=\"n\"",
            Align::Left => "",
        };
        let mut s = String::from("<div class=\"tw\"><table><thead><tr>");
        for &(_, c, h) in &on_page {
            let _ = write!(s, "<th{}>{}</th>", class(c), esc(h));
        }
        s.push_str("</tr></thead><tbody>");
        for r in &self.rows {
            s.push_str("<tr>");
            for &(i, c, _) in &on_page {
                let cell = shown(r.get(i).map_or("", String::as_str));
                let unit = c.unit.filter(|_| cell != PLACEHOLDER).unwrap_or("");
                let _ = write!(s, "<td{}>{}{}</td>", class(c), esc(&cell), esc(unit));
            }
            s.push_str("</tr>");
        }
        s.push_str("</tbody></table></div>");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        Table {
            columns: vec![
                Column::both("name", "name", 6, Align::Left),
                Column::text("short", 3, Align::Right),
                Column::both("CPU/tx", "us/tx", 7, Align::Right).unit(" us"),
                Column::page("note", Align::Left),
            ],
            rows: vec![
                vec!["a".into(), "1".into(), "2.50".into(), "x < y".into()],
                vec!["longer-name".into(), "1234".into(), "-".into(), "".into()],
            ],
        }
    }

    #[test]
    fn text_shows_its_columns_aligned_to_the_widest_cell() {
        assert_eq!(
            sample().to_text(),
            "name        short   us/tx\n\
             a               1    2.50\n\
             longer-name  1234       -\n"
        );
    }

    #[test]
    fn html_shows_its_columns_with_units_and_escapes() {
        let h = sample().to_html();
        assert!(h.starts_with(
            "<div class=\"tw\"><table><thead><tr><th>name</th><th class=\"n\">CPU/tx</th>\
             <th>note</th></tr></thead>"
        ));
        assert!(h.contains("<td class=\"n\">2.50 us</td><td>x &lt; y</td>"));
        // A placeholder takes no unit.
        assert!(h.contains("<td class=\"n\">-</td><td></td>"));
        assert!(!h.contains("short"));
    }

    /// A cell longer than any format width (65,535) panicked the whole
    /// run: a generated function name, a perf map's, a crafted artifact's.
    #[test]
    fn a_cell_of_100000_characters_is_cut_with_a_marker_in_text_and_html() {
        let long = "f".repeat(100_000);
        let t = Table {
            columns: vec![
                Column::both("function", "function", 8, Align::Left),
                Column::both("samples", "samples", 7, Align::Right),
            ],
            rows: vec![
                vec![long.clone(), "1".into()],
                vec!["short".into(), "2".into()],
            ],
        };
        let text = t.to_text();
        let marker = "... [99000 characters cut]";
        assert!(text.contains(marker), "{}", &text[..200]);
        assert!(!text.contains(&long));
        assert!(text.lines().all(|l| l.chars().count() < 1100));
        let html = t.to_html();
        assert!(html.contains(marker));
        assert!(!html.contains(&long));
        // What fits is left alone.
        assert!(text.contains("short") && html.contains("<td>short</td>"));
    }
}
