//! `run_python` against a real interpreter: the run itself, and the sandbox escape tests. Each
//! escape is refused or killed; the test checks that its effect did not happen (no file, no
//! connection, the other process alive), that no process of the run is left, and that the tool
//! still works afterwards.
//!
//! The import allow-list is widened in most of these tests (os, subprocess, ctypes, socket, …):
//! the sandbox, not the allow-list, is the boundary under test.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ba_builtins::BuiltinError;
use ba_builtins::run_python::sandbox::{
    HelperCommand, SandboxConfig, SandboxLimits, SandboxStatus,
};
use ba_builtins::run_python::{DEFAULT_ALLOWED_MODULES, RunPython, RunPythonConfig};
use ba_tools::{CallContext, ConversationFiles, DirFiles, Tool};
use serde_json::{Value, json};

mod reach;
mod resources;

/// Whether python3 runs: a skip with a message when it does not, a failure under CI.
fn require_python() -> bool {
    ba_testkit::require_tool("python3")
}

/// The helper built with this package.
fn helper() -> HelperCommand {
    HelperCommand::new(env!("CARGO_BIN_EXE_ba-sandbox"))
}

/// A sandboxed tool whose scratch folders are made in `marks` (so its processes can be found by
/// that path in their command lines), importing `extra` modules besides the default ones.
fn tool(marks: &Path, extra: &[&str], sandbox: SandboxConfig) -> RunPython {
    let mut allowed: Vec<String> = DEFAULT_ALLOWED_MODULES
        .iter()
        .map(|m| (*m).into())
        .collect();
    allowed.extend(extra.iter().map(|m| (*m).to_owned()));
    let tool = RunPython::new(RunPythonConfig {
        allowed_modules: allowed,
        scratch_parent: Some(marks.to_owned()),
        sandbox: sandbox.with_helper(helper()),
        ..RunPythonConfig::default()
    });
    assert!(
        tool.sandbox_status().is_enforced() || tool.sandbox_status() == &SandboxStatus::Off,
        "the sandbox is unavailable: {}",
        tool.sandbox_status()
    );
    tool
}

fn sandboxed(marks: &Path, extra: &[&str]) -> RunPython {
    tool(marks, extra, SandboxConfig::default())
}

/// Live (not zombie) processes whose command line mentions `marker`.
fn processes_with(marker: &Path) -> Vec<i32> {
    let marker = marker.display().to_string();
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if u32::try_from(pid).ok() == Some(me) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if !String::from_utf8_lossy(&cmdline).contains(&marker) {
            continue;
        }
        let state = std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().next().map(str::to_owned))
            });
        if !matches!(state.as_deref(), Some("Z" | "X") | None) {
            found.push(pid);
        }
    }
    found
}

fn assert_nothing_left(marks: &Path) {
    let left = processes_with(marks);
    assert!(left.is_empty(), "processes of the run are left: {left:?}");
}

/// The tool still runs code after an escape attempt.
async fn assert_unharmed(tool: &RunPython) {
    let out = tool
        .call_json(json!({"code": "print(6 * 7)"}))
        .await
        .unwrap();
    assert_eq!(out["stdout"], "42\n");
}

/// Runs `code` and parses the JSON line it prints last.
async fn report(tool: &RunPython, code: &str) -> Value {
    let out = tool
        .call_json(json!({"code": code, "timeout": 30}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let stdout = out["stdout"].as_str().unwrap();
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// Runs `code` through the `Tool` trait with the conversation's `files`.
async fn call_with(
    tool: &RunPython,
    files: &DirFiles,
    args: Value,
) -> Result<Value, ba_tools::ToolError> {
    let files: std::sync::Arc<dyn ConversationFiles> = std::sync::Arc::new(files.clone());
    tool.call(args, &CallContext::detached("call_1").with_files(files))
        .await
}

/// Python that tries each `(name, statement)` and records `ok` or the exception's name.
fn attempts(setup: &str, tries: &[(&str, String)]) -> String {
    let mut code = format!("import json\n{setup}\nresults = {{}}\n");
    for (name, statement) in tries {
        code.push_str(&format!(
            "try:\n    {statement}\n    results[{name:?}] = 'ok'\n\
             except Exception as e:\n    results[{name:?}] = type(e).__name__\n"
        ));
    }
    code.push_str("print(json.dumps(results))\n");
    code
}

#[tokio::test]
async fn runs_code_in_a_scratch_dir_with_a_cleared_environment() {
    if !require_python() {
        return;
    }
    let marks = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let files = DirFiles::new(store.path());
    let tool = RunPython::new(RunPythonConfig {
        scratch_parent: Some(marks.path().to_owned()),
        sandbox: SandboxConfig::default().with_helper(helper()),
        ..RunPythonConfig::default()
    });
    let code = "import json, math\nfrom statistics import mean\n\
                print(json.dumps({'m': mean([1, 2, 3]), 'r': math.sqrt(16)}))\n\
                open('outputs/result.csv', 'w').write('a,b\\n1,2\\n')\n\
                open('scratch.txt', 'w').write('lost')\n";
    let out = call_with(&tool, &files, json!({"code": code}))
        .await
        .unwrap();
    assert_eq!(out["stdout"], "{\"m\": 2, \"r\": 4.0}\n");
    assert_eq!(out["exit_code"], 0);
    assert_eq!(
        out["outputs"],
        json!([{"id": "output_001", "name": "result.csv", "size": 8, "media_type": "text/csv"}])
    );
    assert_eq!(out["not_kept"], json!(["scratch.txt"]));
    let kept = files.local_path("output_001").await.unwrap();
    assert_eq!(std::fs::read_to_string(kept).unwrap(), "a,b\n1,2\n");

    let tool = sandboxed(marks.path(), &["os"]);
    let code = "import os, json\nprint(json.dumps({'cwd': os.getcwd(), \
                'home': os.environ.get('HOME'), 'keys': sorted(os.environ)}))";
    let out = tool.call_json(json!({"code": code})).await.unwrap();
    let seen: Value = serde_json::from_str(out["stdout"].as_str().unwrap()).unwrap();
    // The working folder's path is shown as `.`.
    assert_eq!(seen["cwd"], ".", "{seen}");
    assert_eq!(seen["home"], seen["cwd"]);
    // The helper execs the real interpreter, so not even a pyenv shim adds variables.
    assert_eq!(
        seen["keys"],
        json!(["HOME", "LC_CTYPE", "MPLBACKEND", "PATH", "TMPDIR"]),
        "{seen}"
    );
    let left: Vec<_> = std::fs::read_dir(marks.path()).unwrap().flatten().collect();
    assert!(
        left.is_empty(),
        "the working folder was not removed: {left:?}"
    );
    assert_nothing_left(marks.path());
}

#[tokio::test]
async fn dynamic_imports_are_refused_by_the_guard() {
    if !require_python() {
        return;
    }
    let marks = tempfile::tempdir().unwrap();
    let tool = sandboxed(marks.path(), &[]);
    for code in [
        "m = __import__('os')\nprint(m.getcwd())",
        "exec('import socket')",
        "exec(compile('import socket', '/tmp/lib.py', 'exec'))",
        "import json\nb = json.__builtins__\nb['__import__']('shutil')",
    ] {
        let err = tool.call_json(json!({"code": code})).await.unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, BuiltinError::ScriptFailed { .. }) && text.contains("not allowed"),
            "{code}: {text}"
        );
    }
    // Allowed libraries still import their own dependencies.
    let out = tool
        .call_json(json!({"code": "import json, datetime, random\nprint(json.dumps([1]))"}))
        .await
        .unwrap();
    assert_eq!(out["stdout"], "[1]\n");
}

#[tokio::test]
async fn failures_carry_stderr_and_output_is_bounded() {
    if !require_python() {
        return;
    }
    let marks = tempfile::tempdir().unwrap();
    let err = sandboxed(marks.path(), &[])
        .call_json(json!({"code": "x = 1\nraise ValueError('bad region')"}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("ValueError: bad region"), "{err}");
    assert_eq!(err.kind(), ba_protocol::ToolErrorKind::ExecutionError);
    let tool = RunPython::new(RunPythonConfig {
        max_output_bytes: 100,
        sandbox: SandboxConfig::default().with_helper(helper()),
        ..RunPythonConfig::default()
    });
    let out = tool
        .call_json(json!({"code": "print('a' * 100000 + 'z')"}))
        .await
        .unwrap();
    assert_eq!(out["stdout_truncated"], true);
    let stdout = out["stdout"].as_str().unwrap();
    assert!(stdout.len() < 200, "{stdout}");
    assert!(
        stdout.starts_with("aaaa") && stdout.ends_with("az\n"),
        "{stdout}"
    );
}

#[tokio::test]
async fn the_helper_is_found_beside_the_program_by_default() {
    let tool = RunPython::default();
    match tool.sandbox_status() {
        SandboxStatus::Enforced { helper, .. } => {
            let name = helper.program.file_name().unwrap().to_str().unwrap();
            assert!(["ba-sandbox", "ba-agent"].contains(&name), "{helper:?}");
        }
        other => panic!("{other}"),
    }
}

/// The analysis libraries work inside the sandbox (their threads, font cache, temp files and
/// chart output): the allow-list names them, and CI installs them (`.ci/tools.sh`), so their
/// absence is a skip on a developer's machine and a failure under CI.
#[tokio::test]
async fn analysis_libraries_work_in_the_sandbox() {
    if !require_python() {
        return;
    }
    if !ba_testkit::require_python_modules(&["numpy", "pandas", "matplotlib"]) {
        return;
    }
    let marks = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    std::fs::write(
        data.path().join("sales.csv"),
        "region,amount\nWest,10\nWest,30\nEast,5\n",
    )
    .unwrap();
    let store = tempfile::tempdir().unwrap();
    let files = DirFiles::new(store.path());
    let tool = RunPython::new(RunPythonConfig {
        scratch_parent: Some(marks.path().to_owned()),
        sandbox: SandboxConfig::default()
            .with_helper(helper())
            .with_read_roots(vec![data.path().to_owned()]),
        ..RunPythonConfig::default()
    });
    let code = format!(
        "import json\nimport numpy as np\nimport pandas as pd\nimport matplotlib.pyplot as plt\n\
         df = pd.read_csv({csv:?})\nsums = df.groupby('region')['amount'].sum()\n\
         m = np.random.default_rng(0).random((300, 300))\ntrace = float(np.trace(m @ m.T))\n\
         sums.plot(kind='bar')\nplt.savefig('outputs/chart.png')\n\
         df.to_csv('outputs/copy.csv', index=False)\n\
         print(json.dumps({{'West': int(sums['West']), 'trace_positive': trace > 0}}))\n",
        csv = data.path().join("sales.csv").display().to_string()
    );
    let out = call_with(&tool, &files, json!({"code": code, "timeout": 120}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let stdout = out["stdout"].as_str().unwrap();
    let seen: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(seen, json!({"West": 40, "trace_positive": true}), "{out}");
    let names: Vec<&str> = out["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["chart.png", "copy.csv"], "{out}");
    assert_nothing_left(marks.path());
}

/// The limits are in force inside the code and cannot be raised; no capability is left.
#[tokio::test]
async fn limits_hold_and_capabilities_are_gone() {
    if !require_python() {
        return;
    }
    let marks = tempfile::tempdir().unwrap();
    let limits = SandboxLimits::default()
        .with_memory_bytes(3 << 30)
        .with_file_size_bytes(5 << 20)
        .with_open_files(64);
    let tool = tool(
        marks.path(),
        &["resource", "os"],
        SandboxConfig::default().with_limits(limits),
    );
    let code = "import json, resource, os\nr = {}\n\
                for name in ['AS', 'CPU', 'FSIZE', 'NOFILE', 'CORE', 'NPROC']:\n    \
                r[name] = resource.getrlimit(getattr(resource, 'RLIMIT_' + name))\n\
                try:\n    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY,) * 2)\n    \
                r['raise'] = 'ok'\nexcept (OSError, ValueError) as e:\n    \
                r['raise'] = type(e).__name__\n\
                status = open('/proc/self/status').read().splitlines()\n\
                r['caps'] = {l.split(':')[0]: l.split()[1] for l in status if l.startswith('Cap')}\n\
                r['no_new_privs'] = [l.split()[1] for l in status if l.startswith('NoNewPrivs')][0]\n\
                r['seccomp'] = [l.split()[1] for l in status if l.startswith('Seccomp:')][0]\n\
                print(json.dumps(r))\n";
    let r = report(&tool, code).await;
    assert_eq!(r["AS"], json!([3u64 << 30, 3u64 << 30]), "{r}");
    // The call's timeout (30 s in `report`) plus one; SIGKILL one second after.
    assert_eq!(r["CPU"], json!([31, 32]), "{r}");
    assert_eq!(r["FSIZE"], json!([5 << 20, 5 << 20]), "{r}");
    assert_eq!(r["NOFILE"], json!([64, 64]), "{r}");
    assert_eq!(r["CORE"], json!([0, 0]), "{r}");
    let nproc = r["NPROC"][0].as_u64().unwrap();
    assert!(nproc > 256 && nproc == r["NPROC"][1], "{r}");
    assert_ne!(r["raise"], "ok", "{r}");
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(r["caps"][set], "0000000000000000", "{set}: {r}");
    }
    assert_eq!(r["no_new_privs"], "1", "{r}");
    assert_eq!(r["seccomp"], "2", "filter mode: {r}");
    assert_nothing_left(marks.path());
}

/// A helper that fails before the code runs is reported as such, not as the code's failure.
#[tokio::test]
async fn a_failed_setup_is_a_sandbox_error() {
    if !require_python() {
        return;
    }
    let marks = tempfile::tempdir().unwrap();
    let failing = HelperCommand {
        program: PathBuf::from("/bin/sh"),
        args: vec![
            "-c".into(),
            "echo 'ba-sandbox: setup failed: no Landlock today' >&2; exit 125".into(),
            "sh".into(),
        ],
    };
    let tool = RunPython::new(RunPythonConfig {
        scratch_parent: Some(marks.path().to_owned()),
        sandbox: SandboxConfig::default().with_helper(failing),
        ..RunPythonConfig::default()
    });
    let err = tool
        .call_json(json!({"code": "print(1)"}))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, BuiltinError::SandboxFailed { message } if message == "no Landlock today"),
        "{err}"
    );
    assert_eq!(err.kind(), ba_protocol::ToolErrorKind::PermissionDenied);

    // The real helper refuses what it cannot read, with the same prefix and status.
    let out = Command::new(env!("CARGO_BIN_EXE_ba-sandbox"))
        .args(["sandbox-exec", "{not json", "--", "/bin/true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("ba-sandbox: setup failed: the policy does not parse"),
        "{stderr}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_ba-sandbox"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// What the code prints and its tracebacks name no path outside the working folder: a real
/// pandas error shows pandas's files as `<python>/…`, never the interpreter's installation or
/// the server account's home folder — sandboxed or not.
#[tokio::test]
async fn tracebacks_show_pythons_own_files_as_python() {
    if !require_python() {
        return;
    }
    if !ba_testkit::require_python_modules(&["pandas"]) {
        return;
    }
    let asked = Command::new("python3")
        .args([
            "-I",
            "-c",
            "import sys, pandas; print(sys.prefix); print(pandas.__file__)",
        ])
        .output()
        .unwrap();
    let said = String::from_utf8(asked.stdout).unwrap();
    let mut lines = said.lines();
    let (prefix, pandas) = (lines.next().unwrap(), lines.next().unwrap());
    let home = std::env::var("HOME").unwrap_or_default();
    let marks = tempfile::tempdir().unwrap();
    for sandbox in [SandboxConfig::default(), SandboxConfig::off()] {
        let tool = tool(marks.path(), &[], sandbox);
        let err = tool
            .call_json(json!({"code": "import pandas as pd\npd.read_csv('sales_2024.csv')"}))
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("FileNotFoundError"), "{text}");
        assert!(
            text.contains("File \"<python>/pandas/io/parsers/readers.py\", line"),
            "{text}"
        );
        assert!(text.contains("File \"./main.py\", line 2"), "{text}");
        for server_path in [prefix, pandas, home.as_str(), "site-packages"] {
            assert!(
                server_path.is_empty() || !text.contains(server_path),
                "{server_path} in {text}"
            );
        }
        let out = tool
            .call_json(json!({"code": "import json, pandas\nprint(pandas.__file__)\nprint(json.__file__)"}))
            .await
            .unwrap();
        let stdout = out["stdout"].as_str().unwrap();
        assert!(
            stdout.starts_with("<python>/pandas/__init__.py\n<python>/"),
            "{stdout}"
        );
        assert!(!stdout.contains(prefix), "{stdout}");
    }
    assert_nothing_left(marks.path());
}

/// Text uploads in GBK (Chinese) or UTF-16 (with its byte-order mark) reach the code as UTF-8,
/// under their own names, as `file_reader` reads them; UTF-8 text and other files are copied
/// as they are.
#[tokio::test]
async fn text_uploads_in_other_encodings_reach_the_code_as_utf8() {
    if !require_python() {
        return;
    }
    let marks = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let files = DirFiles::new(store.path());
    let text = "地区,季度,目标金额\n华东,Q1,1200\n华北,Q2,980\n";
    let (gbk, _, _) = encoding_rs::GBK.encode(text);
    files.add_upload("targets_gbk.csv", &gbk).await.unwrap();
    let mut utf16 = vec![0xFF, 0xFE];
    utf16.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
    files.add_upload("targets_utf16.csv", &utf16).await.unwrap();
    files
        .add_upload("plain.csv", text.as_bytes())
        .await
        .unwrap();
    // Not text by its name: left alone, even though its bytes are GBK.
    files.add_upload("blob.bin", &gbk).await.unwrap();
    let tool = sandboxed(marks.path(), &[]);
    let code = "import json\n\
                names = ['targets_gbk.csv', 'targets_utf16.csv', 'plain.csv']\n\
                print(json.dumps([open(n, encoding='utf-8').read() for n in names]))\n\
                print(len(open('blob.bin', 'rb').read()))\n";
    let out = call_with(&tool, &files, json!({"code": code}))
        .await
        .unwrap();
    let stdout = out["stdout"].as_str().unwrap();
    let mut lines = stdout.lines();
    let read: Vec<String> = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(read, [text, text, text], "{out}");
    assert_eq!(lines.next(), Some(gbk.len().to_string().as_str()));
    assert_eq!(
        out["converted_to_utf8"],
        json!([{"name": "targets_gbk.csv", "from": "gbk"},
               {"name": "targets_utf16.csv", "from": "utf-16le"}])
    );
    assert_nothing_left(marks.path());
}
