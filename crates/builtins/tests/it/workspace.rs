//! The conversation's files seen by the tools, through the `Tool` trait with a
//! [`DirFiles`] handle as the agent hands one to each call: `file_reader` reads uploads by id
//! and by original name by their real type (the local file has no extension), `run_python`
//! finds them in its working folder and keeps what it writes to `outputs/`, and no answer or
//! error holds a local path.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ba_builtins::demo_data;
use ba_builtins::file_reader::{FileReader, FileReaderConfig};
use ba_builtins::run_python::sandbox::{HelperCommand, SandboxConfig, SandboxStatus};
use ba_builtins::run_python::{DEFAULT_ALLOWED_MODULES, RunPython, RunPythonConfig};
use ba_protocol::ToolErrorKind;
use ba_tools::{CallContext, ConversationFiles, DirFiles, Tool, ToolError};
use serde_json::{Value, json};

/// A conversation's files in a folder of their own, under a root that nothing shown may name.
struct Conversation {
    root: tempfile::TempDir,
    files: DirFiles,
}

impl Conversation {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let files = DirFiles::new(root.path().join("conversations/c1/files"));
        Self { root, files }
    }

    /// Another conversation's files beside this one's.
    fn other(&self) -> DirFiles {
        DirFiles::new(self.root.path().join("conversations/c2/files"))
    }

    fn handle(&self) -> Arc<dyn ConversationFiles> {
        Arc::new(self.files.clone())
    }

    /// Uploads the demo's CSV, GBK CSV and workbook: `upload_001`, `upload_002`, `upload_003`.
    async fn upload_demo(&self) {
        let demo = self.root.path().join("demo");
        demo_data::generate(&demo).unwrap();
        for name in [
            demo_data::CSV_FILE,
            demo_data::GBK_CSV_FILE,
            demo_data::XLSX_FILE,
        ] {
            let bytes = std::fs::read(demo.join(name)).unwrap();
            self.files.add_upload(name, &bytes).await.unwrap();
        }
    }

    /// Fails when `text` names the root of the files (or the machine's temp folder).
    fn assert_no_path(&self, text: &str) {
        let root = self.root.path().display().to_string();
        assert!(!text.contains(&root), "a local path was shown: {text}");
        let temp = std::env::temp_dir().display().to_string();
        assert!(!text.contains(&temp), "a local path was shown: {text}");
    }
}

/// Calls `tool` with the conversation's files.
async fn call(
    tool: &dyn Tool,
    conversation: &Conversation,
    args: Value,
) -> Result<Value, ToolError> {
    let ctx = CallContext::detached("call_1").with_files(conversation.handle());
    tool.call(args, &ctx).await
}

/// A reader whose `auto` falls back to GBK, over a data folder holding another `sales.csv`.
fn reader(conversation: &Conversation) -> FileReader {
    let data = conversation.root.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("sales.csv"), "region\nNorth\n").unwrap();
    std::fs::write(data.join("notes.txt"), "data folder\n").unwrap();
    FileReader::new(
        FileReaderConfig::new(vec![data])
            .with_fallback_encoding("gbk")
            .unwrap(),
    )
}

#[tokio::test]
async fn file_reader_reads_uploads_by_id_and_by_name_by_their_real_type() {
    let c = Conversation::new();
    c.upload_demo().await;
    let reader = reader(&c);

    for reference in ["upload_001", "sales.csv"] {
        let out = call(&reader, &c, json!({"path": reference})).await.unwrap();
        assert_eq!(out["format"], "csv", "{reference}: {out}");
        assert_eq!(
            out["columns"],
            json!(["region", "quarter", "target_amount", "note"])
        );
        // The upload, not the data folder's file of the same name.
        assert_eq!(out["row_count"], 20, "{reference}: {out}");
        assert!(out["profile"].is_array() || out["profile"].is_object());
        assert_eq!(out["path"], reference);
        assert_eq!(
            out["file"],
            json!({"id": "upload_001", "kind": "upload", "name": "sales.csv",
                   "media_type": "text/csv"})
        );
        c.assert_no_path(&out.to_string());
    }

    // The argument is named for what it takes; `path` above is its old name, still taken.
    let out = call(&reader, &c, json!({"file": "upload_001"}))
        .await
        .unwrap();
    assert_eq!(out["file"]["id"], "upload_001", "{out}");
    let err = call(
        &reader,
        &c,
        json!({"file": "upload_001", "path": "upload_002"}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::InvalidParameters, "{err:?}");

    // GBK, decoded with the configured fallback.
    for reference in ["upload_002", "sales_gbk.csv"] {
        let out = call(&reader, &c, json!({"path": reference})).await.unwrap();
        assert_eq!(out["encoding"], "gbk", "{out}");
        assert_eq!(out["columns"], json!(["地区", "季度", "目标金额", "备注"]));
        assert_eq!(out["row_count"], 20);
        c.assert_no_path(&out.to_string());
    }

    // The workbook, its sheets by name.
    for reference in ["upload_003", "sales.xlsx"] {
        let out = call(&reader, &c, json!({"path": reference})).await.unwrap();
        assert_eq!(out["format"], "excel", "{out}");
        assert_eq!(out["sheet"], "targets");
        assert_eq!(out["sheets"], json!(["targets", "sales"]));
        assert_eq!(out["row_count"], 20);
        c.assert_no_path(&out.to_string());
    }
    let out = call(
        &reader,
        &c,
        json!({"path": "upload_003", "sheet": "sales", "nrows": 2}),
    )
    .await
    .unwrap();
    assert_eq!(
        out["columns"],
        json!(["date", "region", "product", "units", "amount"])
    );
    assert_eq!(out["rows_returned"], 2);

    // Data folders still work beside the conversation's files.
    let out = call(&reader, &c, json!({"path": "notes.txt"}))
        .await
        .unwrap();
    assert_eq!(out["content"], "data folder\n");
    assert!(out.get("file").is_none());
}

#[tokio::test]
async fn file_reader_reads_outputs_data_and_code_and_refuses_what_it_cannot_read() {
    let c = Conversation::new();
    let reader = reader(&c);
    c.files
        .add_data("call_9_0123.json", b"[1, 2, 3]")
        .await
        .unwrap();
    c.files
        .add_code("code_ab12", "code_ab12.py", "print(1)\n")
        .await
        .unwrap();
    let png = c.root.path().join("chart.png");
    std::fs::write(&png, b"\x89PNG\r\n\x1a\n").unwrap();
    c.files.add_output("chart.png", &png, "").await.unwrap();

    let out = call(&reader, &c, json!({"path": "data_001"}))
        .await
        .unwrap();
    assert_eq!(out["format"], "json");
    assert_eq!(out["content"], json!([1, 2, 3]));
    let out = call(&reader, &c, json!({"path": "code_ab12"}))
        .await
        .unwrap();
    assert_eq!(out["format"], "python");
    assert_eq!(out["content"], "print(1)\n");

    let err = call(&reader, &c, json!({"path": "output_001"}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::InvalidParameters);
    assert!(
        err.message.contains("`output_001` (chart.png, image/png)")
            && err.message.contains("not a table or text file"),
        "{}",
        err.message
    );
    c.assert_no_path(&err.message);
}

#[tokio::test]
async fn unknown_ids_and_failures_name_the_reference_never_a_path() {
    let c = Conversation::new();
    c.upload_demo().await;
    c.files
        .add_upload("broken.xlsx", b"a,b\n1,2\n")
        .await
        .unwrap();
    c.files.add_upload("latin.txt", b"caf\xe9\n").await.unwrap();
    c.other()
        .add_upload("secret.csv", b"a\nsecret\n")
        .await
        .unwrap();
    let reader = reader(&c);
    let fail = |args: Value| {
        let (reader, c) = (&reader, &c);
        async move {
            let err = call(reader, c, args.clone()).await.unwrap_err();
            c.assert_no_path(&err.message);
            err
        }
    };

    // A code id is the conversation's too: never looked for among the data folder's files,
    // even when one there has that name.
    let data = c.root.path().join("data");
    std::fs::write(data.join("code_missing"), "data folder\n").unwrap();
    for id in ["upload_009", "output_001", "data_001", "code_missing"] {
        let err = fail(json!({"path": id})).await;
        assert_eq!(
            err.message,
            format!("no file `{id}` in this conversation"),
            "{err:?}"
        );
        assert_eq!(err.kind, ToolErrorKind::InvalidParameters);
    }
    // Another conversation's upload is nobody's here, by name or by id.
    let err = fail(json!({"path": "secret.csv"})).await;
    assert!(err.message.contains("was not found"), "{}", err.message);
    let err = fail(json!({"path": "upload_006"})).await;
    assert!(
        err.message.contains("no file `upload_006`"),
        "{}",
        err.message
    );
    // Paths into the files' folder are refused like any path outside the data folders.
    let local = c.files.local_path("upload_001").await.unwrap();
    let err = reader.call_json(json!({"path": local})).await.unwrap_err();
    assert!(
        matches!(err, ba_builtins::BuiltinError::PathOutsideRoots { .. }),
        "{err}"
    );
    let err = fail(json!({"path": "../conversations/c1/files/upload_001"})).await;
    assert_eq!(err.kind, ToolErrorKind::PermissionDenied, "{err:?}");

    let err = fail(json!({"path": "upload_004"})).await;
    assert!(
        err.message.contains("`upload_004`") && err.message.contains("not a workbook"),
        "{}",
        err.message
    );
    let err = fail(json!({"path": "latin.txt"})).await;
    assert!(
        err.message.contains("`latin.txt`") && err.message.contains("byte offset 3"),
        "{}",
        err.message
    );
    let err = fail(json!({"path": "upload_001", "format": "json"})).await;
    assert!(err.message.contains("`upload_001`"), "{}", err.message);

    // Without conversation files, an upload id is still a clear error.
    let err = reader
        .call(
            json!({"path": "upload_001"}),
            &CallContext::detached("call_2"),
        )
        .await
        .unwrap_err();
    assert_eq!(err.message, "no file `upload_001` in this conversation");
}

/// The helper built with this package.
fn helper() -> HelperCommand {
    HelperCommand::new(env!("CARGO_BIN_EXE_ba-sandbox"))
}

/// A sandboxed `run_python` whose working folders are made in `marks`, importing `extra`
/// modules besides the default ones.
fn python_tool(marks: &Path, extra: &[&str], max_output_file_bytes: u64) -> RunPython {
    let mut allowed: Vec<String> = DEFAULT_ALLOWED_MODULES
        .iter()
        .map(|m| (*m).into())
        .collect();
    allowed.extend(extra.iter().map(|m| (*m).to_owned()));
    let tool = RunPython::new(RunPythonConfig {
        allowed_modules: allowed,
        scratch_parent: Some(marks.to_owned()),
        max_output_file_bytes,
        sandbox: SandboxConfig::default().with_helper(helper()),
        ..RunPythonConfig::default()
    });
    assert!(
        matches!(tool.sandbox_status(), SandboxStatus::Enforced { .. }),
        "the sandbox is unavailable: {}",
        tool.sandbox_status()
    );
    tool
}

/// The JSON line a run printed last.
fn last_line(out: &Value) -> Value {
    let stdout = out["stdout"].as_str().unwrap();
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[tokio::test]
async fn run_python_sees_the_uploads_and_keeps_its_outputs() {
    if !ba_testkit::require_tool("python3") {
        return;
    }
    let c = Conversation::new();
    c.files
        .add_upload("sales.csv", b"region,amount\nOld,1\n")
        .await
        .unwrap();
    c.files
        .add_upload("sales.csv", b"region,amount\nWest,10\nWest,30\nEast,5\n")
        .await
        .unwrap();
    c.files.add_upload("main.py", b"# mine").await.unwrap();
    let marks = tempfile::tempdir().unwrap();
    let tool = python_tool(marks.path(), &["os"], 1000);
    let code = "import csv, json, os\n\
        rows = list(csv.DictReader(open('sales.csv')))\n\
        west = sum(int(r['amount']) for r in rows if r['region'] == 'West')\n\
        try:\n    open('sales.csv', 'a').write('x')\n    write = 'ok'\n\
        except OSError as e:\n    write = type(e).__name__\n\
        os.makedirs('outputs/sub')\n\
        open('outputs/summary.csv', 'w').write('region,amount\\nWest,%d\\n' % west)\n\
        open('outputs/sub/notes.txt', 'w').write('from the upload')\n\
        open('outputs/big.bin', 'wb').write(b'0' * 5000)\n\
        os.symlink('/etc/hostname', 'outputs/link')\n\
        open('draft.txt', 'w').write('not kept')\n\
        print(os.path.abspath('sales.csv'))\n\
        print(json.dumps({'west': west, 'write': write, 'listing': sorted(os.listdir('.')),\n\
                          'old': open('upload_001-sales.csv').read()}))\n";
    let out = call(&tool, &c, json!({"code": code})).await.unwrap();
    c.assert_no_path(&out.to_string());
    let seen = last_line(&out);
    assert_eq!(seen["west"], 40, "{out}");
    assert_eq!(
        seen["write"], "PermissionError",
        "uploads are read-only: {out}"
    );
    assert_eq!(
        seen["listing"],
        json!([
            "draft.txt",
            "main.py",
            "outputs",
            "sales.csv",
            "upload_001-sales.csv",
            "upload_003-main.py"
        ]),
        "{out}"
    );
    assert_eq!(seen["old"], "region,amount\nOld,1\n");
    assert!(
        out["stdout"].as_str().unwrap().starts_with("./sales.csv\n"),
        "{out}"
    );
    assert_eq!(
        out["outputs"],
        json!([
            {"id": "output_001", "name": "notes.txt", "size": 15, "media_type": "text/plain"},
            {"id": "output_002", "name": "summary.csv", "size": 22, "media_type": "text/csv"},
        ]),
        "{out}"
    );
    let skipped = &out["outputs_skipped"];
    assert_eq!(skipped[0]["name"], "outputs/big.bin", "{out}");
    assert!(
        skipped[0]["reason"]
            .as_str()
            .unwrap()
            .contains("over the limit of 1000 bytes"),
        "{out}"
    );
    assert_eq!(skipped[1]["name"], "outputs/link", "{out}");
    assert_eq!(out["not_kept"], json!(["draft.txt"]));
    let kept = c.files.local_path("output_002").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(kept).unwrap(),
        "region,amount\nWest,40\n"
    );
    // An output is read back by `file_reader` like any file of the conversation.
    let reader = reader(&c);
    let back = call(&reader, &c, json!({"path": "summary.csv"}))
        .await
        .unwrap();
    assert_eq!(back["rows"], json!([["West", "40"]]), "{back}");

    // A failure's traceback names the code as `./main.py`.
    let err = call(&tool, &c, json!({"code": "x = 1\nraise ValueError('bad')"}))
        .await
        .unwrap_err();
    assert!(
        err.message.contains("File \"./main.py\", line 2"),
        "{}",
        err.message
    );
    c.assert_no_path(&err.message);
    // Nothing kept from a failed run, and the working folders are gone.
    assert_eq!(c.files.list().await.unwrap().len(), 5);
    assert_eq!(std::fs::read_dir(marks.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn run_python_without_conversation_files_keeps_nothing_and_says_so() {
    if !ba_testkit::require_tool("python3") {
        return;
    }
    let marks = tempfile::tempdir().unwrap();
    let tool = python_tool(marks.path(), &[], 1000);
    let out = tool
        .call_json(json!({"code": "open('outputs/a.txt', 'w').write('a')"}))
        .await
        .unwrap();
    assert_eq!(out["outputs"], json!([]));
    assert_eq!(out["outputs_skipped"][0]["name"], "outputs/a.txt");
    assert!(
        out["outputs_skipped"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("no conversation"),
        "{out}"
    );
}

#[tokio::test]
async fn run_python_cannot_reach_files_outside_its_working_folder() {
    if !ba_testkit::require_tool("python3") {
        return;
    }
    let c = Conversation::new();
    c.files
        .add_upload("sales.csv", b"region\nWest\n")
        .await
        .unwrap();
    let other = c.other();
    other.add_upload("secret.csv", b"secret\n").await.unwrap();
    let mine = c.files.local_path("upload_001").await.unwrap();
    let theirs = other.local_path("upload_001").await.unwrap();
    let marks = tempfile::tempdir().unwrap();
    let tool = python_tool(marks.path(), &["os"], 1 << 20);
    let show = |p: &Path| p.display().to_string();
    let tries: Vec<(&str, String)> = vec![
        ("own_copy", "open('sales.csv').read()".to_owned()),
        ("list_own", "os.listdir('.')".to_owned()),
        (
            "list_files",
            format!("os.listdir({:?})", show(c.files.dir())),
        ),
        ("open_upload", format!("open({:?}).read()", show(&mine))),
        ("open_other", format!("open({:?}).read()", show(&theirs))),
        ("list_other", format!("os.listdir({:?})", show(other.dir()))),
        (
            "list_conversations",
            format!(
                "os.listdir({:?})",
                show(&c.root.path().join("conversations"))
            ),
        ),
        ("list_parent", "os.listdir('..')".to_owned()),
        ("list_tmp", "os.listdir('/tmp')".to_owned()),
        ("list_root", "os.listdir('/')".to_owned()),
    ];
    let mut code = "import json, os\nresults = {}\n".to_owned();
    for (name, statement) in &tries {
        code.push_str(&format!(
            "try:\n    {statement}\n    results[{name:?}] = 'ok'\n\
             except Exception as e:\n    results[{name:?}] = type(e).__name__\n"
        ));
    }
    code.push_str("print(json.dumps(results))\n");
    let out = call(&tool, &c, json!({"code": code, "timeout": 30}))
        .await
        .unwrap();
    let results = last_line(&out);
    for (name, _) in &tries {
        let expect_ok = matches!(*name, "own_copy" | "list_own");
        assert_eq!(results[name] == "ok", expect_ok, "{name}: {results}");
    }
    assert_eq!(results["open_other"], "PermissionError", "{results}");
}

#[tokio::test]
async fn links_in_outputs_are_never_followed() {
    if !ba_testkit::require_tool("python3") {
        return;
    }
    let c = Conversation::new();
    let other = c.other();
    other.add_upload("secret.csv", b"secret\n").await.unwrap();
    let marks = tempfile::tempdir().unwrap();
    let tool = python_tool(marks.path(), &["os"], 1 << 20);
    // `outputs` itself replaced by a link to another conversation's files.
    let code = format!(
        "import os\nos.rmdir('outputs')\nos.symlink({:?}, 'outputs')\n",
        other.dir().display().to_string()
    );
    let out = call(&tool, &c, json!({"code": code})).await.unwrap();
    assert_eq!(out["outputs"], json!([]), "{out}");
    assert_eq!(out["outputs_skipped"][0]["name"], "outputs", "{out}");
    // A linked folder and a linked file inside it.
    let code = format!(
        "import os\nos.symlink({:?}, 'outputs/folder')\nos.symlink({:?}, 'outputs/file')\n",
        other.dir().display().to_string(),
        other
            .local_path("upload_001")
            .await
            .unwrap()
            .display()
            .to_string()
    );
    let out = call(&tool, &c, json!({"code": code})).await.unwrap();
    assert_eq!(out["outputs"], json!([]), "{out}");
    let skipped: Vec<&str> = out["outputs_skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(skipped, ["outputs/file", "outputs/folder"], "{out}");
    c.assert_no_path(&out.to_string());
    assert!(c.files.list().await.unwrap().is_empty());
}

/// Whether python3 has pandas, matplotlib and openpyxl (CI installs them; see
/// `ba_testkit::require_python_modules`).
fn analysis_libraries() -> bool {
    ba_testkit::require_python_modules(&["pandas", "matplotlib", "openpyxl"])
}

#[tokio::test]
async fn run_python_reads_an_upload_and_writes_a_chart_and_a_workbook() {
    if !ba_testkit::require_tool("python3") || !analysis_libraries() {
        return;
    }
    let c = Conversation::new();
    c.upload_demo().await;
    let marks = tempfile::tempdir().unwrap();
    let tool = python_tool(marks.path(), &[], 100 << 20);
    let code = "import json\nimport pandas as pd\nimport matplotlib.pyplot as plt\n\
        targets = pd.read_csv('sales.csv')\n\
        sales = pd.read_excel('sales.xlsx', sheet_name='sales')\n\
        by_region = sales.groupby('region')['amount'].sum().round(2)\n\
        by_region.plot(kind='bar')\nplt.tight_layout()\nplt.savefig('outputs/chart.png')\n\
        by_region.reset_index().to_excel('outputs/out.xlsx', index=False)\n\
        print(json.dumps({'targets': len(targets), 'regions': len(by_region)}))\n";
    let out = call(&tool, &c, json!({"code": code, "timeout": 120}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    c.assert_no_path(&out.to_string());
    assert_eq!(
        last_line(&out),
        json!({"targets": 20, "regions": 5}),
        "{out}"
    );
    let outputs = out["outputs"].as_array().unwrap();
    let described: Vec<(&str, &str, &str)> = outputs
        .iter()
        .map(|o| {
            (
                o["id"].as_str().unwrap(),
                o["name"].as_str().unwrap(),
                o["media_type"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        described,
        [
            ("output_001", "chart.png", "image/png"),
            (
                "output_002",
                "out.xlsx",
                "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
            )
        ],
        "{out}"
    );
    let chart: PathBuf = c.files.local_path("output_001").await.unwrap();
    assert!(std::fs::read(chart).unwrap().starts_with(b"\x89PNG"));
    // The workbook the code wrote reads back as a table.
    let reader = reader(&c);
    let back = call(&reader, &c, json!({"path": "output_002"}))
        .await
        .unwrap();
    assert_eq!(back["format"], "excel");
    assert_eq!(back["columns"], json!(["region", "amount"]), "{back}");
    assert_eq!(back["row_count"], 5);
}
