//! The result table: rows of text cells, printed aligned for a terminal or as a Markdown table
//! (what `docs/performance.md` holds).

use std::fmt::Write as _;

/// `x` rounded to 3 significant digits, without an exponent (`0.0123`, `4.56`, `789`, `1230`).
pub fn three_digits(x: f64) -> String {
    if !x.is_finite() {
        return "n/a".to_owned();
    }
    if x == 0.0 {
        return "0".to_owned();
    }
    let mut magnitude = x.abs().log10().floor() as i32;
    let scale = 10f64.powi(2 - magnitude);
    let rounded = (x * scale).round() / scale;
    if rounded.abs() >= 10f64.powi(magnitude + 1) {
        magnitude += 1; // 9.996 rounded up to 10.0
    }
    let decimals = (2 - magnitude).max(0) as usize;
    format!("{rounded:.decimals$}")
}

/// A table with a header row.
#[derive(Clone, Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        Table { header: header.into_iter().map(Into::into).collect(), rows: Vec::new() }
    }

    /// Appends a row; missing cells are printed empty, extra cells are kept.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// The rows added so far.
    pub fn rows(&self) -> &[Vec<String>] {
        &self.rows
    }

    fn widths(&self) -> Vec<usize> {
        let columns = self.rows.iter().map(Vec::len).chain([self.header.len()]).max().unwrap_or(0);
        (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .chain([&self.header])
                    .filter_map(|row| row.get(c))
                    .map(|cell| cell.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect()
    }

    /// The table with aligned columns, for a terminal.
    pub fn to_text(&self) -> String {
        let widths = self.widths();
        let line = |row: &[String]| {
            let mut text = String::new();
            for (c, width) in widths.iter().enumerate() {
                let cell = row.get(c).map(String::as_str).unwrap_or("");
                let _ = write!(text, "{cell:<width$}  ");
            }
            text.trim_end().to_owned() + "\n"
        };
        let mut text = line(&self.header);
        text += &(widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("  ") + "\n");
        for row in &self.rows {
            text += &line(row);
        }
        text
    }

    /// The table in Markdown (`|` in cells escaped).
    pub fn to_markdown(&self) -> String {
        let columns = self.widths().len();
        let line = |row: &[String]| {
            let cells: Vec<String> = (0..columns)
                .map(|c| row.get(c).map(|cell| cell.replace('|', "\\|")).unwrap_or_default())
                .collect();
            format!("| {} |\n", cells.join(" | "))
        };
        let mut text = line(&self.header);
        text += &format!("|{}\n", "---|".repeat(columns));
        for row in &self.rows {
            text += &line(row);
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::Table;

    #[test]
    fn text_and_markdown_forms() {
        let mut table = Table::new(["what", "ratio"]);
        table.row(["a|b", "1.00"]);
        table.row(["longer name"]);
        assert_eq!(
            table.to_text(),
            "what         ratio\n-----------  -----\na|b          1.00\nlonger name\n"
        );
        assert_eq!(
            table.to_markdown(),
            "| what | ratio |\n|---|---|\n| a\\|b | 1.00 |\n| longer name |  |\n"
        );
    }
}
