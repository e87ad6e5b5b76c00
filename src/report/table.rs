//! A table built once, as columns and rows of cells, and rendered both to
//! aligned text (summary.txt, a terminal) and to HTML (report.html).
//!
//! A column may be shown in both, or in one only: the page has room for
//! every column, a terminal for the few that matter most. Where both show
//! it, the text's header is usually shorter and names the unit ("server
//! us/tx"), while the page's header names the figure ("server CPU/tx") and
//! its cells carry the unit.

use std::fmt::Write as _;

use super::svg::esc;

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
        }
    }

    /// A column on the page only.
    pub fn page(header: &str, align: Align) -> Self {
        Column {
            page: Some(header.into()),
            text: None,
            align,
            unit: None,
        }
    }

    /// A column in the text only.
    pub fn text(header: &str, width: usize, align: Align) -> Self {
        Column {
            page: None,
            text: Some((header.into(), width)),
            align,
            unit: None,
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

/// Columns and rows; each row has one cell per column, in order.
#[derive(Clone, Debug, Default)]
pub struct Table {
    /// The columns.
    pub columns: Vec<Column>,
    /// The rows' cells, as shown (numbers already formatted).
    pub rows: Vec<Vec<String>>,
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
        let shown: Vec<(usize, &str, usize)> = self
            .columns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let (header, least) = c.text.as_ref()?;
                let widest = self
                    .rows
                    .iter()
                    .map(|r| r[i].chars().count())
                    .chain([header.chars().count(), *least])
                    .max()
                    .unwrap_or(0);
                Some((i, header.as_str(), widest))
            })
            .collect();
        let header = shown.iter().map(|&(_, h, _)| h).collect::<Vec<_>>();
        let rows = self
            .rows
            .iter()
            .map(|r| shown.iter().map(|&(i, _, _)| r[i].as_str()).collect());
        let mut s = String::new();
        for cells in std::iter::once(header).chain(rows) {
            for (k, (cell, &(i, _, width))) in cells.iter().zip(&shown).enumerate() {
                if k > 0 {
                    s.push(' ');
                }
                let _ = match self.columns[i].align {
                    Align::Left => write!(s, "{cell:<width$}"),
                    Align::Right => write!(s, "{cell:>width$}"),
                };
            }
            s.push('\n');
        }
        s
    }

    /// The page columns as an HTML table (scrolling sideways when wide).
    pub fn to_html(&self) -> String {
        let shown: Vec<(usize, &Column, &str)> = self
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
        for &(_, c, h) in &shown {
            let _ = write!(s, "<th{}>{}</th>", class(c), esc(h));
        }
        s.push_str("</tr></thead><tbody>");
        for r in &self.rows {
            s.push_str("<tr>");
            for &(i, c, _) in &shown {
                let cell = &r[i];
                let unit = c.unit.filter(|_| cell != PLACEHOLDER).unwrap_or("");
                let _ = write!(s, "<td{}>{}{}</td>", class(c), esc(cell), esc(unit));
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
}
