//! Media types of files by their names: one table for every crate that stores, lists, serves
//! or reads a conversation's files.

/// The media type of a file called `name`, from its extension (case-insensitive);
/// `application/octet-stream` when the extension is unknown or missing.
pub fn media_type_for(name: &str) -> &'static str {
    let Some((_, ext)) = name.rsplit_once('.') else {
        return "application/octet-stream";
    };
    match ext.to_ascii_lowercase().as_str() {
        "csv" => "text/csv",
        "tsv" | "tab" => "text/tab-separated-values",
        "txt" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "json" => "application/json",
        "jsonl" | "ndjson" => "application/x-ndjson",
        "xml" => "application/xml",
        "yaml" | "yml" => "application/yaml",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "xlsm" => "application/vnd.ms-excel.sheet.macroEnabled.12",
        "xls" => "application/vnd.ms-excel",
        "ods" => "application/vnd.oasis.opendocument.spreadsheet",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "pptx" => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "parquet" => "application/vnd.apache.parquet",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "js" => "text/javascript",
        "ts" => "text/x-typescript",
        "py" => "text/x-python",
        "r" => "text/x-r",
        "sql" => "application/sql",
        "sh" => "application/x-sh",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_give_their_media_types() {
        for (name, want) in [
            ("sales.CSV", "text/csv"),
            (
                "book.xlsx",
                "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            ),
            ("chart.png", "image/png"),
            ("a.tar.gz", "application/gzip"),
            ("noext", "application/octet-stream"),
            ("trailing.", "application/octet-stream"),
        ] {
            assert_eq!(media_type_for(name), want, "{name}");
        }
    }
}
