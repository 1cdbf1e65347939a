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
use ba_tools::Tool;
use serde_json::{Value, json};

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
    let out_dir = tempfile::tempdir().unwrap();
    let tool = RunPython::new(RunPythonConfig {
        output_dir: Some(out_dir.path().to_owned()),
        scratch_parent: Some(marks.path().to_owned()),
        sandbox: SandboxConfig::default().with_helper(helper()),
        ..RunPythonConfig::default()
    });
    let code = "import json, math\nfrom statistics import mean\n\
                print(json.dumps({'m': mean([1, 2, 3]), 'r': math.sqrt(16)}))\n\
                open('result.csv', 'w').write('a,b\\n1,2\\n')\n";
    let out = tool.call_json(json!({"code": code})).await.unwrap();
    assert_eq!(out["stdout"], "{\"m\": 2, \"r\": 4.0}\n");
    assert_eq!(out["exit_code"], 0);
    assert_eq!(out["files"][0]["name"], "result.csv");
    assert!(out_dir.path().join("result.csv").is_file());

    let tool = sandboxed(marks.path(), &["os"]);
    let code = "import os, json\nprint(json.dumps({'cwd': os.getcwd(), \
                'home': os.environ.get('HOME'), 'keys': sorted(os.environ)}))";
    let out = tool.call_json(json!({"code": code})).await.unwrap();
    let seen: Value = serde_json::from_str(out["stdout"].as_str().unwrap()).unwrap();
    let cwd = seen["cwd"].as_str().unwrap();
    assert!(cwd.contains("ba-python-"), "{cwd}");
    assert_eq!(seen["home"], seen["cwd"]);
    // The helper execs the real interpreter, so not even a pyenv shim adds variables.
    assert_eq!(
        seen["keys"],
        json!(["HOME", "LC_CTYPE", "MPLBACKEND", "PATH", "TMPDIR"]),
        "{seen}"
    );
    assert!(!Path::new(cwd).exists(), "scratch dir was not removed");
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

/// Shell through `os.system`, `subprocess`, `ctypes`, `exec` and the ELF loader: nothing runs.
#[tokio::test]
async fn shell_commands_do_not_run() {
    if !require_python() {
        return;
    }
    let marks = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = |n: &str| outside.path().join(n).display().to_string();

    // The finding of the issue, with the default allow-list.
    let tool = sandboxed(marks.path(), &[]);
    let code = format!(
        "import random\nprint(random._os.system('touch {}'))",
        target("system")
    );
    let out = tool.call_json(json!({"code": code})).await.unwrap();
    assert_ne!(out["stdout"], "0\n", "the shell ran: {out}");

    let tool = sandboxed(marks.path(), &["os", "subprocess", "ctypes"]);
    let loader = ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("/nonexistent-loader");
    let mut tries = vec![
        (
            "subprocess",
            format!("subprocess.run(['touch', {:?}])", target("subprocess")),
        ),
        (
            "popen",
            format!("os.popen('touch {}').read()", target("popen")),
        ),
        (
            "ctypes_system",
            format!(
                "assert ctypes.CDLL(None).system(b'touch {}') == 0",
                target("ctypes")
            ),
        ),
        (
            "execv_sh",
            format!(
                "os.execv('/bin/sh', ['sh', '-c', 'touch {}'])",
                target("execv")
            ),
        ),
        (
            "spawn",
            format!(
                "os.posix_spawn('/usr/bin/touch', ['touch', {:?}], {{}})",
                target("spawn")
            ),
        ),
    ];
    if cfg!(target_arch = "x86_64") {
        // fork(2) by its x86_64 number, past the C library.
        tries.push((
            "raw_fork",
            "assert ctypes.CDLL(None).syscall(57) >= 0".to_owned(),
        ));
    }
    let results = report(&tool, &attempts("import os, subprocess, ctypes", &tries)).await;
    for (name, _) in &tries {
        assert_ne!(results[name], "ok", "{name}: {results}");
    }
    // The loader runs a shell inside the sandboxed process itself; the shell can then neither
    // write outside nor start a command.
    let code = format!(
        "import os\nos.execv({loader:?}, [{loader:?}, '/bin/sh', '-c', \
         'echo pwned > {}; touch {}; exit 3'])",
        target("loader-echo"),
        target("loader-touch")
    );
    let err = tool.call_json(json!({"code": code})).await.unwrap_err();
    assert!(matches!(err, BuiltinError::ScriptFailed { .. }), "{err}");

    let made: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(made.is_empty(), "files were made outside: {made:?}");
    assert_nothing_left(marks.path());
    assert_unharmed(&tool).await;
}

#[tokio::test]
async fn writes_outside_the_scratch_folder_are_refused() {
    if !require_python() {
        return;
    }
    let marks = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("sales.csv"), "region\nWest\n").unwrap();
    let tool = tool(
        marks.path(),
        &["os", "shutil"],
        SandboxConfig::default().with_read_roots(vec![data.path().to_owned()]),
    );
    let out = |n: &str| outside.path().join(n).display().to_string();
    let tries = [
        ("outside", format!("open({:?}, 'w').write('x')", out("new"))),
        (
            "data_root",
            format!(
                "open({:?}, 'a').write('x')",
                data.path().join("sales.csv").display().to_string()
            ),
        ),
        (
            "data_root_new",
            format!(
                "open({:?}, 'w')",
                data.path().join("new.csv").display().to_string()
            ),
        ),
        (
            "beside_scratch",
            "open(os.path.join(os.getcwd(), '..', 'escape'), 'w')".to_owned(),
        ),
        ("tmp", "open('/tmp/ba-sandbox-escape', 'w')".to_owned()),
        ("mkdir", format!("os.mkdir({:?})", out("dir"))),
        ("symlink", format!("os.symlink('/etc', {:?})", out("link"))),
        (
            "rename_out",
            format!(
                "open('mine', 'w').write('x'); os.rename('mine', {:?})",
                out("moved")
            ),
        ),
        (
            "link_out",
            format!("open('mine2', 'w'); os.link('mine2', {:?})", out("hard")),
        ),
        (
            "truncate",
            format!(
                "os.truncate({:?}, 0)",
                data.path().join("sales.csv").display().to_string()
            ),
        ),
        (
            "chmod",
            format!("os.chmod({:?}, 0o777)", data.path().display().to_string()),
        ),
        (
            "utime",
            format!(
                "os.utime({:?}, (0, 0))",
                data.path().join("sales.csv").display().to_string()
            ),
        ),
        (
            "copy",
            format!("shutil.copy('/etc/hostname', {:?})", out("c")),
        ),
        ("inside", "open('fine.txt', 'w').write('ok')".to_owned()),
        (
            "read_data",
            format!(
                "assert open({:?}).read().startswith('region')",
                data.path().join("sales.csv").display().to_string()
            ),
        ),
    ];
    let results = report(&tool, &attempts("import os, shutil", &tries)).await;
    for (name, _) in &tries {
        let expect_ok = matches!(*name, "inside" | "read_data");
        assert_eq!(results[name] == "ok", expect_ok, "{name}: {results}");
    }
    let made: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(made.is_empty(), "files were made outside: {made:?}");
    assert_eq!(
        std::fs::read_to_string(data.path().join("sales.csv")).unwrap(),
        "region\nWest\n"
    );
    assert!(!data.path().join("new.csv").exists());
    assert!(!marks.path().join("escape").exists());
    assert!(!Path::new("/tmp/ba-sandbox-escape").exists());
    assert_nothing_left(marks.path());
}

#[tokio::test]
async fn reads_of_the_home_and_the_conversation_store_are_refused() {
    if !require_python() {
        return;
    }
    let marks = tempfile::tempdir().unwrap();
    // A conversation store as the agent keeps one.
    let store = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(store.path().join("conversations")).unwrap();
    std::fs::write(store.path().join("index.json"), "{\"secret\": 1}").unwrap();
    let log = store.path().join("conversations").join("c1.jsonl");
    std::fs::write(&log, "{\"role\":\"user\",\"content\":\"secret\"}\n").unwrap();
    let uploads = store.path().join("uploads");
    std::fs::create_dir_all(&uploads).unwrap();
    std::fs::write(uploads.join("upload_1.csv"), "a\n1\n").unwrap();
    let tool = tool(
        marks.path(),
        &["os"],
        SandboxConfig::default()
            .with_read_roots(vec![uploads.clone()])
            .with_protected(vec![store.path().to_owned()]),
    );
    let home = PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()));
    // Some file of the real home, if it has one (never written by this test).
    let home_file = std::fs::read_dir(&home).ok().and_then(|entries| {
        entries
            .flatten()
            .map(|e| e.path())
            .find(|p| p.is_file() && std::fs::File::open(p).is_ok())
    });
    let show = |p: &Path| p.display().to_string();
    let mut tries = vec![
        (
            "index",
            format!("open({:?}).read()", show(&store.path().join("index.json"))),
        ),
        ("log", format!("open({:?}).read()", show(&log))),
        (
            "list_store",
            format!("os.listdir({:?})", show(store.path())),
        ),
        ("list_home", format!("os.listdir({:?})", show(&home))),
        ("passwd", "open('/etc/passwd').read()".to_owned()),
        (
            "proc_parent",
            "open('/proc/%d/environ' % os.getppid(), 'rb').read()".to_owned(),
        ),
        ("proc_root", "os.listdir('/proc/1/root')".to_owned()),
        (
            "proc_self_root",
            format!("open('/proc/self/root' + {:?}).read()", show(&log)),
        ),
        (
            "upload",
            format!(
                "assert open({:?}).read() == 'a\\n1\\n'",
                show(&uploads.join("upload_1.csv"))
            ),
        ),
    ];
    if let Some(file) = &home_file {
        tries.push(("home_file", format!("open({:?}, 'rb').read()", show(file))));
    }
    let results = report(&tool, &attempts("import os", &tries)).await;
    for (name, _) in &tries {
        let expect_ok = *name == "upload";
        assert_eq!(results[name] == "ok", expect_ok, "{name}: {results}");
    }
    assert_nothing_left(marks.path());

    // A data root that holds the store is refused outright: Landlock cannot carve it out.
    let exposed = tool_with_roots(marks.path(), store.path(), vec![store.path().to_owned()]);
    let err = exposed
        .call_json(json!({"code": "print(1)"}))
        .await
        .unwrap_err();
    assert!(
        matches!(err, BuiltinError::SandboxUnavailable { .. })
            && err.to_string().contains("protected folder"),
        "{err}"
    );
}

fn tool_with_roots(marks: &Path, store: &Path, roots: Vec<PathBuf>) -> RunPython {
    RunPython::new(RunPythonConfig {
        scratch_parent: Some(marks.to_owned()),
        sandbox: SandboxConfig::default()
            .with_helper(helper())
            .with_read_roots(roots)
            .with_protected(vec![store.to_owned()]),
        ..RunPythonConfig::default()
    })
}

#[tokio::test]
async fn a_socket_to_a_local_listener_never_connects() {
    if !require_python() {
        return;
    }
    let marks = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let tool = sandboxed(marks.path(), &["socket", "ctypes", "os"]);
    let mut tries = vec![
        (
            "create_connection",
            format!("socket.create_connection(('127.0.0.1', {port}), timeout=5)"),
        ),
        ("inet6", "socket.socket(socket.AF_INET6)".to_owned()),
        ("unix", "socket.socket(socket.AF_UNIX)".to_owned()),
        (
            "udp",
            "socket.socket(socket.AF_INET, socket.SOCK_DGRAM)".to_owned(),
        ),
        (
            "libc_socket",
            "assert ctypes.CDLL(None).socket(2, 1, 0) >= 0".to_owned(),
        ),
    ];
    if cfg!(target_arch = "x86_64") {
        // socket(AF_INET, SOCK_STREAM, 0) by its x86_64 number.
        tries.push((
            "raw_syscall",
            "assert ctypes.CDLL(None).syscall(41, 2, 1, 0) >= 0".to_owned(),
        ));
    }
    let results = report(&tool, &attempts("import socket, ctypes, os", &tries)).await;
    for (name, _) in &tries {
        assert_ne!(results[name], "ok", "{name}: {results}");
    }
    assert_eq!(results["create_connection"], "PermissionError", "{results}");
    // A connection, had one been made, would be waiting in the backlog by now: the code has
    // exited.
    match listener.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("the listener got a connection: {other:?}"),
    }
    assert_nothing_left(marks.path());
    assert_unharmed(&tool).await;
}

#[tokio::test]
async fn a_fork_bomb_and_a_thread_bomb_are_stopped() {
    if !require_python() {
        return;
    }
    let marks = tempfile::tempdir().unwrap();
    let tool = sandboxed(marks.path(), &["threading", "time"]);
    let code = "import random\nos = random._os\nwhile True:\n    os.fork()\n";
    let err = tool
        .call_json(json!({"code": code, "timeout": 20}))
        .await
        .unwrap_err();
    assert!(
        matches!(err, BuiltinError::ScriptFailed { .. })
            && err.to_string().contains("PermissionError"),
        "{err}"
    );
    assert_nothing_left(marks.path());

    // Threads are allowed, but bounded: by the address space (and RLIMIT_NPROC for non-root).
    let tool = tool_limited(
        marks.path(),
        SandboxLimits::default().with_memory_bytes(1 << 30),
    );
    let code = "import threading, time\nn = 0\nwhile True:\n    \
                threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n    n += 1\n";
    let err = tool
        .call_json(json!({"code": code, "timeout": 30}))
        .await
        .unwrap_err();
    assert!(
        matches!(err, BuiltinError::ScriptFailed { .. }) && err.to_string().contains("thread"),
        "{err}"
    );
    assert_nothing_left(marks.path());
    assert_unharmed(&tool).await;
}

fn tool_limited(marks: &Path, limits: SandboxLimits) -> RunPython {
    tool(
        marks,
        &["threading", "time", "os"],
        SandboxConfig::default().with_limits(limits),
    )
}

#[tokio::test]
async fn a_10_gb_allocation_fails_inside_the_code() {
    if !require_python() {
        return;
    }
    let marks = tempfile::tempdir().unwrap();
    let tool = sandboxed(marks.path(), &[]);
    let err = tool
        .call_json(json!({"code": "b = bytearray(10 * 1024 ** 3)\nprint(len(b))"}))
        .await
        .unwrap_err();
    assert!(
        matches!(err, BuiltinError::ScriptFailed { .. }) && err.to_string().contains("MemoryError"),
        "{err}"
    );
    assert_nothing_left(marks.path());
    assert_unharmed(&tool).await;
}

#[tokio::test]
async fn a_10_gb_file_stops_at_the_file_size_limit() {
    if !require_python() {
        return;
    }
    let marks = tempfile::tempdir().unwrap();
    let limit = 8u64 << 20;
    let tool = tool_limited(
        marks.path(),
        SandboxLimits::default().with_file_size_bytes(limit),
    );
    let code = "import json\nresults = {}\nchunk = b'x' * (1 << 20)\nwritten = 0\n\
                try:\n    with open('big.bin', 'wb') as f:\n        \
                while written < 10 * 1024 ** 3:\n            f.write(chunk)\n            \
                f.flush()\n            written += len(chunk)\n\
                except OSError as e:\n    results['stream'] = e.errno\n\
                results['written'] = written\n\
                try:\n    with open('sparse.bin', 'wb') as f:\n        \
                f.seek(10 * 1024 ** 3)\n        f.write(b'x')\n\
                except OSError as e:\n    results['sparse'] = e.errno\n\
                print(json.dumps(results))\n";
    let results = report(&tool, code).await;
    // EFBIG: "File too large".
    assert_eq!(results["stream"], 27, "{results}");
    assert_eq!(results["sparse"], 27, "{results}");
    assert!(results["written"].as_u64().unwrap() <= limit, "{results}");
    assert_nothing_left(marks.path());
}

#[tokio::test]
async fn busy_code_is_killed_at_the_timeout_with_nothing_left() {
    if !require_python() {
        return;
    }
    let marks = tempfile::tempdir().unwrap();
    let tool = sandboxed(marks.path(), &[]);
    let run = {
        let tool = tool.clone();
        tokio::spawn(async move {
            tool.call_json(json!({"code": "while True:\n    pass\n", "timeout": 2}))
                .await
        })
    };
    // The run shows up among the processes (so the check after it is not vacuous).
    let deadline = Instant::now() + Duration::from_secs(20);
    while processes_with(marks.path()).is_empty() {
        assert!(Instant::now() < deadline, "the run never started");
        tokio::task::yield_now().await;
    }
    let started = Instant::now();
    let err = run.await.unwrap().unwrap_err();
    assert!(
        matches!(err, BuiltinError::Timeout { seconds: 2, .. }),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_nothing_left(marks.path());
}

/// Signals and tracing reach nothing outside: the test's own child survives them.
#[tokio::test]
async fn other_processes_cannot_be_signalled_or_traced() {
    if !require_python() {
        return;
    }
    let marks = tempfile::tempdir().unwrap();
    let mut victim = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = victim.id();
    let tool = sandboxed(marks.path(), &["os", "ctypes", "signal"]);
    let mut tries = vec![
        ("kill", format!("os.kill({pid}, 9)")),
        ("kill_parent", "os.kill(os.getppid(), 0)".to_owned()),
        ("kill_group", format!("os.killpg({pid}, 9)")),
        ("mem", format!("open('/proc/{pid}/mem', 'rb')")),
        ("self", "os.kill(os.getpid(), 0)".to_owned()),
    ];
    // prctl(PR_SET_PDEATHSIG, 0): outliving the agent.
    tries.push((
        "outlive",
        "assert ctypes.CDLL(None).prctl(1, 0, 0, 0, 0) == 0".to_owned(),
    ));
    if cfg!(target_arch = "x86_64") {
        // ptrace(PTRACE_ATTACH, pid) by its x86_64 number.
        tries.push((
            "ptrace",
            format!("assert ctypes.CDLL(None).syscall(101, 16, {pid}, 0, 0) == 0"),
        ));
    }
    let results = report(&tool, &attempts("import os, ctypes, signal", &tries)).await;
    for (name, _) in &tries {
        assert_eq!(results[name] == "ok", *name == "self", "{name}: {results}");
    }
    assert!(
        victim.try_wait().unwrap().is_none(),
        "the test's child was killed"
    );
    victim.kill().unwrap();
    victim.wait().unwrap();
    assert_nothing_left(marks.path());
}

#[tokio::test]
async fn with_the_sandbox_off_code_runs_unconfined_and_the_group_is_still_killed() {
    if !require_python() {
        return;
    }
    let marks = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let pids = outside.path().join("pids");
    let tool = tool(
        marks.path(),
        &["os", "subprocess", "time"],
        SandboxConfig::off(),
    );
    assert!(tool.description().ends_with("It runs without a sandbox."));
    let code = format!(
        "import os, subprocess, time\n\
         child = subprocess.Popen(['sleep', '30'])\n\
         open({pids:?}, 'w').write('%d %d %d' % (os.getpid(), os.getpgid(0), child.pid))\n\
         time.sleep(30)\n",
        pids = pids.display().to_string()
    );
    let err = tool
        .call_json(json!({"code": code, "timeout": 1}))
        .await
        .unwrap_err();
    assert!(
        matches!(err, BuiltinError::Timeout { seconds: 1, .. }),
        "{err}"
    );
    // Unconfined: it could write outside its scratch folder.
    let text = std::fs::read_to_string(&pids).unwrap();
    let ids: Vec<i32> = text.split(' ').map(|s| s.parse().unwrap()).collect();
    assert_eq!(ids[0], ids[1], "python leads its own process group");
    // The grandchild is reparented to init when python dies; init reaps it after the kill.
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(ids[2]) && Instant::now() < deadline {
        std::thread::yield_now();
    }
    assert!(!alive(ids[0]), "python {} still runs", ids[0]);
    assert!(!alive(ids[2]), "sleep {} still runs", ids[2]);
}

/// Whether process `pid` still runs (a zombie waiting for its reaper counts as gone).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next());
            state != Some("Z") && state != Some("X")
        }
        Err(_) => false,
    }
}

/// The analysis libraries work inside the sandbox (their threads, font cache, temp files and
/// chart output), where the interpreter has them; the allow-list names them, but they are not
/// a requirement of the project, so their absence is a skip even under CI.
#[tokio::test]
async fn analysis_libraries_work_in_the_sandbox() {
    if !require_python() {
        return;
    }
    let probe = Command::new("python3")
        .args(["-c", "import numpy, pandas, matplotlib"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !probe {
        eprintln!("skipping: numpy, pandas or matplotlib is not installed for python3");
        return;
    }
    let marks = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    std::fs::write(
        data.path().join("sales.csv"),
        "region,amount\nWest,10\nWest,30\nEast,5\n",
    )
    .unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let tool = RunPython::new(RunPythonConfig {
        scratch_parent: Some(marks.path().to_owned()),
        output_dir: Some(out_dir.path().to_owned()),
        sandbox: SandboxConfig::default()
            .with_helper(helper())
            .with_read_roots(vec![data.path().to_owned()]),
        ..RunPythonConfig::default()
    });
    let code = format!(
        "import json\nimport numpy as np\nimport pandas as pd\nimport matplotlib.pyplot as plt\n\
         df = pd.read_csv({csv:?})\nsums = df.groupby('region')['amount'].sum()\n\
         m = np.random.default_rng(0).random((300, 300))\ntrace = float(np.trace(m @ m.T))\n\
         sums.plot(kind='bar')\nplt.savefig('chart.png')\ndf.to_csv('copy.csv', index=False)\n\
         print(json.dumps({{'West': int(sums['West']), 'trace_positive': trace > 0}}))\n",
        csv = data.path().join("sales.csv").display().to_string()
    );
    let out = tool
        .call_json(json!({"code": code, "timeout": 120}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let stdout = out["stdout"].as_str().unwrap();
    let seen: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(seen, json!({"West": 40, "trace_positive": true}), "{out}");
    assert!(out_dir.path().join("chart.png").is_file(), "{out}");
    assert!(out_dir.path().join("copy.csv").is_file(), "{out}");
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
