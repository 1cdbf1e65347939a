use super::*;

struct Setup {
    _tmp: tempfile::TempDir,
    outside: PathBuf,
    data: PathBuf,
    reader: FileReader,
    files: ba_tools::DirFiles,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let outside = tmp.path().join("outside");
    for dir in [&data, &outside] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(
        data.join("sales.csv"),
        "region,note\nWest,\"grew, fast\"\nEast,\"two\nlines\"\nNorth,flat\n",
    )
    .unwrap();
    std::fs::write(data.join("q.sql"), "SELECT 1;\n-- two\n-- three\n").unwrap();
    std::fs::write(data.join("list.json"), "[1, 2, 3]").unwrap();
    std::fs::write(data.join("latin.txt"), b"caf\xe9\n").unwrap();
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    let config = FileReaderConfig::new(vec![data.clone()]);
    let reader = FileReader::new(config);
    let files = ba_tools::DirFiles::new(tmp.path().join("files"));
    Setup {
        outside,
        data,
        reader,
        files,
        _tmp: tmp,
    }
}

async fn read(reader: &FileReader, args: Value) -> Result<Value, BuiltinError> {
    reader.call_json(args).await
}

#[tokio::test]
async fn reads_csv_with_quoted_fields_and_nrows() {
    let s = setup();
    let out = read(&s.reader, json!({"path": "sales.csv", "nrows": 2}))
        .await
        .unwrap();
    assert_eq!(out["columns"], json!(["region", "note"]));
    assert_eq!(
        out["rows"],
        json!([["West", "grew, fast"], ["East", "two\nlines"]])
    );
    assert_eq!(out["rows_returned"], 2);
    assert_eq!(out["truncated"], true);
    assert_eq!(out["format"], "csv");
    let msg = out["message"].as_str().unwrap();
    assert!(msg.contains("rows 1–2 shown, more rows follow"), "{msg}");
    let out = read(&s.reader, json!({"path": "sales.csv"})).await.unwrap();
    assert_eq!(out["row_count"], 3);
    assert_eq!(out["rows_left"], 0);
}

#[tokio::test]
async fn reads_uploads_json_sql_and_latin1() {
    let s = setup();
    s.files.add_upload("a.csv", b"a,b\n1,2\n").await.unwrap();
    let args = crate::parse_args(NAME, json!({"path": "upload_001"})).unwrap();
    let out = s.reader.read(args, Some(&s.files)).await.unwrap();
    assert_eq!(out["rows"], json!([["1", "2"]]));
    assert_eq!(out["path"], "upload_001");
    assert_eq!(out["file"]["name"], "a.csv");
    let out = read(&s.reader, json!({"path": "list.json", "nrows": 2}))
        .await
        .unwrap();
    assert_eq!(out["content"], json!([1, 2]));
    assert_eq!(out["item_count"], 3);
    let out = read(&s.reader, json!({"path": "q.sql", "nrows": 1}))
        .await
        .unwrap();
    assert_eq!(out["content"], "SELECT 1;");
    assert_eq!(out["format"], "sql");
    assert_eq!(out["line_count"], 3);
    let out = read(
        &s.reader,
        json!({"path": "latin.txt", "encoding": "latin-1"}),
    )
    .await
    .unwrap();
    assert_eq!(out["content"], "café\n");
    let err = read(&s.reader, json!({"path": "latin.txt"}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("byte offset 3 (0xE9)"), "{err}");
    let out = read(&s.reader, json!({"path": "latin.txt", "errors": "replace"}))
        .await
        .unwrap();
    assert_eq!(out["content"], "caf\u{FFFD}\n");
    assert_eq!(out["replaced_sequences"], 1);
    let err = read(
        &s.reader,
        json!({"path": "latin.txt", "encoding": "klingon"}),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("not supported"), "{err}");
}

#[tokio::test]
async fn refuses_parent_directories() {
    let s = setup();
    for path in [
        "../outside/secret.txt",
        "sub/../../outside/secret.txt",
        "..",
    ] {
        let err = read(&s.reader, json!({"path": path})).await.unwrap_err();
        assert!(
            matches!(err, BuiltinError::PathOutsideRoots { .. }),
            "{path}: {err}"
        );
        assert_eq!(err.kind(), ba_protocol::ToolErrorKind::PermissionDenied);
    }
}

#[tokio::test]
async fn refuses_absolute_paths_outside_the_roots() {
    let s = setup();
    let secret = s.outside.join("secret.txt");
    for path in [secret.to_string_lossy().into_owned(), "/etc/passwd".into()] {
        let err = read(&s.reader, json!({"path": path})).await.unwrap_err();
        assert!(
            matches!(err, BuiltinError::PathOutsideRoots { .. }),
            "{path}: {err}"
        );
    }
    let missing = read(&s.reader, json!({"path": "/no/such/file"}))
        .await
        .unwrap_err();
    assert!(matches!(missing, BuiltinError::PathOutsideRoots { .. }));
    let inside = s.data.join("sales.csv");
    let ok = read(&s.reader, json!({"path": inside})).await.unwrap();
    assert_eq!(ok["row_count"], 3);
}

#[cfg(unix)]
#[tokio::test]
async fn refuses_symlinks_that_escape() {
    let s = setup();
    std::os::unix::fs::symlink(s.outside.join("secret.txt"), s.data.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(&s.outside, s.data.join("dirlink")).unwrap();
    for path in ["link.txt", "dirlink/secret.txt"] {
        let err = read(&s.reader, json!({"path": path})).await.unwrap_err();
        assert!(
            matches!(err, BuiltinError::PathOutsideRoots { .. }),
            "{path}: {err}"
        );
    }
}

#[tokio::test]
async fn bad_arguments_and_missing_files_are_clear() {
    let s = setup();
    let err = read(&s.reader, json!({"path": "nope.csv"}))
        .await
        .unwrap_err();
    assert!(matches!(err, BuiltinError::NotFound { .. }), "{err}");
    let err = read(&s.reader, json!({"path": "upload_999"}))
        .await
        .unwrap_err();
    assert!(matches!(err, BuiltinError::NoSuchFile { .. }), "{err}");
    assert_eq!(err.to_string(), "no file `upload_999` in this conversation");
    let err = read(&s.reader, json!({"path": "a.csv", "format": "pdf"}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unknown variant `pdf`"), "{err}");
    std::fs::write(s.data.join("book.xlsx"), "x,y\n").unwrap();
    let err = read(&s.reader, json!({"path": "book.xlsx"}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not a workbook"), "{err}");
    std::fs::write(s.data.join("empty.xlsx"), "").unwrap();
    let err = read(&s.reader, json!({"path": "empty.xlsx"}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("empty (0 bytes)"), "{err}");
}

#[test]
fn schema_lists_seed_fields() {
    let schema = FileReader::schema().to_string();
    for field in ["path", "format", "encoding", "nrows", "response_format"] {
        assert!(schema.contains(field), "{field} missing from {schema}");
    }
}
