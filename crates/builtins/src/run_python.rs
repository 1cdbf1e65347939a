//! `run_python`: runs analysis code in a `python3` subprocess (seed 003).
//!
//! The code runs in a fresh scratch directory with a cleared environment, in its own process
//! group so that the whole group (including anything the code started) is killed at the
//! timeout. Imports are limited to an allow-list twice: a static scan of `import`/`from` lines
//! gives the model a precise error before anything runs, and a guard installed before the code
//! (on `__import__` and `sys.meta_path`) refuses dynamic imports made by the code itself while
//! letting allowed libraries import what they need. This is a guard against mistakes and casual
//! misuse, not a sandbox: run the agent in a container for hostile code.

use ba_tools::{CallContext, Tool, ToolCapabilities, ToolError};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use ba_protocol::OutputLevel;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use super::BuiltinError;

/// The tool name.
pub const NAME: &str = "run_python";

/// The description shown to the model.
pub const DESCRIPTION: &str = "Run Python code for data analysis, calculation or charts. \
    Print the results you need. Allowed libraries: json, csv, datetime, math, statistics, \
    random, pandas, numpy, scipy, statsmodels, openpyxl, xlrd, xlsxwriter, matplotlib, seaborn, \
    plotly.";

/// Seed 003's allow-list of importable modules.
pub const DEFAULT_ALLOWED_MODULES: [&str; 16] = [
    "json",
    "csv",
    "datetime",
    "math",
    "statistics",
    "random",
    "pandas",
    "numpy",
    "scipy",
    "statsmodels",
    "openpyxl",
    "xlrd",
    "xlsxwriter",
    "matplotlib",
    "seaborn",
    "plotly",
];

fn default_timeout() -> u64 {
    60
}

/// Arguments of `run_python` (seed 003).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunPythonArgs {
    /// The Python code to run.
    pub code: String,
    /// Timeout in seconds (default 60).
    #[serde(default = "default_timeout")]
    pub timeout: u64,
    /// How detailed the answer should be: brief, standard or full.
    #[serde(default)]
    pub response_format: OutputLevel,
}

/// How `run_python` runs code.
#[derive(Debug, Clone)]
pub struct RunPythonConfig {
    /// The interpreter, looked up on `path_env` when not a path.
    pub python: PathBuf,
    /// Top-level modules the code may import (`__future__` is always allowed).
    pub allowed_modules: Vec<String>,
    /// The ceiling on the `timeout` argument, in seconds.
    pub max_timeout_secs: u64,
    /// The most bytes kept from each of stdout and stderr; the rest is counted and dropped.
    pub max_output_bytes: usize,
    /// Where scratch directories are made (the system temp dir by default).
    pub scratch_parent: Option<PathBuf>,
    /// The `PATH` given to the code; the rest of the environment is cleared.
    pub path_env: String,
    /// Where files the code writes are copied after the run, if anywhere.
    pub output_dir: Option<PathBuf>,
}

impl Default for RunPythonConfig {
    fn default() -> Self {
        Self {
            python: PathBuf::from("python3"),
            allowed_modules: DEFAULT_ALLOWED_MODULES
                .iter()
                .map(|m| (*m).to_owned())
                .collect(),
            max_timeout_secs: 600,
            max_output_bytes: 64 * 1024,
            scratch_parent: None,
            path_env: std::env::var("PATH")
                .unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
            output_dir: None,
        }
    }
}

/// The `run_python` tool.
#[derive(Debug, Clone, Default)]
pub struct RunPython {
    config: RunPythonConfig,
}

/// Installs the import guard, then runs the user's file as `__main__`. It is compiled under the
/// name `<ba-guard>` so its own frames can be told apart from the user's.
const PRELUDE: &str = r#"
import builtins, sys
def _ba_install(allowed):
    allowed = frozenset(allowed)
    # Code in the interpreter's own install (stdlib, site-packages) is library code and may
    # import what it needs; code from anywhere else, or compiled from a string, is the user's.
    lib_roots = tuple({p.rstrip('/') + '/' for p in
                       (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)})
    def is_user(frame):
        name = frame.f_code.co_filename
        if name == '<ba-guard>' or name.startswith('<frozen'):
            return False
        return not name.startswith(lib_roots)
    def refuse(name):
        raise ImportError("import of module '%s' is not allowed; allowed modules: %s"
                          % (name, ', '.join(sorted(allowed))))
    real_import = builtins.__import__
    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        if is_user(sys._getframe(1)):
            if level != 0:
                refuse('.' * level + (name or ''))
            if name.partition('.')[0] not in allowed:
                refuse(name)
        return real_import(name, globals, locals, fromlist, level)
    builtins.__import__ = guarded_import
    class Guard:
        @classmethod
        def find_spec(cls, name, path=None, target=None):
            # Called from the import machinery: look past it to whoever asked. Imports that came
            # through __import__ end at <ba-guard> and were checked there already.
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_filename.startswith('<frozen'):
                frame = frame.f_back
            if frame is not None and is_user(frame) and name.partition('.')[0] not in allowed:
                refuse(name)
            return None
    sys.meta_path.insert(0, Guard)
_ba_user = sys.argv[2]
_ba_install(sys.argv[3].split(',') + ['__future__'])
with open(_ba_user, encoding='utf-8') as _ba_f:
    _ba_code = compile(_ba_f.read(), _ba_user, 'exec')
sys.argv = [_ba_user]
del _ba_f, _ba_install
exec(_ba_code, {'__name__': '__main__', '__file__': _ba_user, '__builtins__': builtins})
"#;

const BOOT: &str = "import sys; exec(compile(sys.argv[1], '<ba-guard>', 'exec'))";

impl RunPython {
    /// A tool with `config`.
    pub fn new(config: RunPythonConfig) -> Self {
        Self { config }
    }

    /// The JSON Schema of the arguments.
    pub fn schema() -> Value {
        super::args_schema::<RunPythonArgs>()
    }

    /// Parses `args` and runs.
    pub async fn call_json(&self, args: Value) -> Result<Value, BuiltinError> {
        self.run(super::parse_args(NAME, args)?).await
    }

    /// Runs the code. A zero exit gives `stdout`, `stderr`, `exit_code`, `duration_ms` and the
    /// `files` the code wrote; a non-zero exit is [`BuiltinError::ScriptFailed`] with the end of
    /// stderr; running past the timeout is [`BuiltinError::Timeout`], after the process group
    /// has been killed and reaped.
    pub async fn run(&self, args: RunPythonArgs) -> Result<Value, BuiltinError> {
        if args.timeout == 0 {
            return Err(BuiltinError::InvalidArguments {
                tool: NAME,
                message: "timeout must be at least 1 second".into(),
            });
        }
        check_imports(&args.code, &self.config.allowed_modules)?;
        let seconds = args.timeout.min(self.config.max_timeout_secs);
        let env_err = |message: String| BuiltinError::Environment {
            tool: NAME,
            message,
        };
        let parent = self
            .config
            .scratch_parent
            .clone()
            .unwrap_or_else(std::env::temp_dir);
        let scratch = tempfile::Builder::new()
            .prefix("ba-python-")
            .tempdir_in(&parent)
            .map_err(|e| {
                env_err(format!(
                    "cannot make a scratch directory in {}: {e}",
                    parent.display()
                ))
            })?;
        let script = scratch.path().join("main.py");
        tokio::fs::write(&script, &args.code)
            .await
            .map_err(|e| env_err(format!("cannot write {}: {e}", script.display())))?;

        let started = Instant::now();
        let mut child = Command::new(&self.config.python)
            .args(["-I", "-B", "-X", "utf8", "-c", BOOT, PRELUDE])
            .arg(&script)
            .arg(self.config.allowed_modules.join(","))
            .current_dir(scratch.path())
            .env_clear()
            .env("PATH", &self.config.path_env)
            .env("HOME", scratch.path())
            .env("MPLBACKEND", "Agg")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|err| {
                if err.kind() == std::io::ErrorKind::NotFound {
                    BuiltinError::PythonMissing {
                        program: self.config.python.display().to_string(),
                    }
                } else {
                    env_err(format!(
                        "cannot start {}: {err}",
                        self.config.python.display()
                    ))
                }
            })?;
        let pgid = child.id().and_then(|id| i32::try_from(id).ok());
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(env_err("the child's output pipes were not opened".into()));
        };
        let limit = self.config.max_output_bytes;
        let waited = tokio::time::timeout(Duration::from_secs(seconds), async {
            let (out, err, status) = tokio::join!(
                read_bounded(stdout, limit),
                read_bounded(stderr, limit),
                child.wait()
            );
            (out, err, status)
        })
        .await;
        let Ok((out, err, status)) = waited else {
            // Kill the group while the child is still unreaped, so its id cannot have been
            // reused, then reap it.
            kill_group(pgid);
            let _ = child.kill().await;
            return Err(BuiltinError::Timeout {
                tool: NAME,
                seconds,
            });
        };
        // Anything the code left running in the background goes with it.
        kill_group(pgid);
        let status = status.map_err(|e| env_err(format!("waiting for python failed: {e}")))?;
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        if !status.success() {
            let status_text = status
                .code()
                .map_or_else(|| "killed by a signal".to_owned(), |c| c.to_string());
            return Err(BuiltinError::ScriptFailed {
                status: status_text,
                stderr: tail(&err.text, 2000),
            });
        }
        let files = self.collect_files(scratch.path(), &script).await;
        Ok(json!({
            "exit_code": status.code(),
            "stdout": out.text,
            "stderr": err.text,
            "stdout_truncated": out.dropped > 0,
            "stderr_truncated": err.dropped > 0,
            "duration_ms": duration_ms,
            "files": files,
        }))
    }

    /// Files the code wrote in its scratch directory (top level), copied to `output_dir` when
    /// one is configured, since the scratch directory is removed after the run.
    async fn collect_files(&self, scratch: &Path, script: &Path) -> Vec<Value> {
        let mut files = Vec::new();
        let Ok(mut entries) = tokio::fs::read_dir(scratch).await else {
            return files;
        };
        while let Ok(Some(entry)) = entries.next_entry().await {
            let path = entry.path();
            let Ok(meta) = entry.metadata().await else {
                continue;
            };
            if path == script || !meta.is_file() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let mut file = json!({"name": name, "bytes": meta.len()});
            if let Some(dir) = &self.config.output_dir {
                let dest = dir.join(&name);
                let copied = async {
                    tokio::fs::create_dir_all(dir).await?;
                    tokio::fs::copy(&path, &dest).await
                };
                file["saved_to"] = match copied.await {
                    Ok(_) => json!(dest.display().to_string()),
                    Err(err) => json!(format!("not saved: {err}")),
                };
            }
            files.push(file);
        }
        files.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        files
    }
}

fn kill_group(pgid: Option<i32>) {
    if let Some(pid) = pgid.and_then(rustix::process::Pid::from_raw) {
        // ESRCH means the group is already empty, which is the goal.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

struct Captured {
    text: String,
    dropped: u64,
}

/// Reads a pipe to its end, keeping its first and last `limit / 2` bytes (a traceback's end
/// matters as much as the output's start); draining the middle keeps the child from blocking
/// on a full pipe.
async fn read_bounded(mut pipe: impl AsyncRead + Unpin, limit: usize) -> Captured {
    let head_cap = limit / 2;
    let tail_cap = limit - head_cap;
    let mut head = Vec::new();
    let mut tail: Vec<u8> = Vec::new();
    let mut dropped = 0u64;
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = head_cap.saturating_sub(head.len()).min(n);
                head.extend_from_slice(&buf[..room]);
                tail.extend_from_slice(&buf[room..n]);
                if tail.len() > tail_cap {
                    let excess = tail.len() - tail_cap;
                    dropped += excess as u64;
                    tail.drain(..excess);
                }
            }
        }
    }
    let mut text = String::from_utf8_lossy(&head).into_owned();
    if dropped > 0 {
        text.push_str(&format!("\n[... {dropped} bytes not shown ...]\n"));
    }
    text.push_str(&String::from_utf8_lossy(&tail));
    Captured { text, dropped }
}

fn tail(text: &str, max_chars: usize) -> String {
    let count = text.chars().count();
    if count <= max_chars {
        return text.trim_end().to_owned();
    }
    let skipped: String = text.chars().skip(count - max_chars).collect();
    format!("...{}", skipped.trim_end())
}

/// Checks every `import x` / `from x import y` in `code` against `allowed` (top-level names).
/// Strings and comments are skipped; relative imports are refused since the code has no
/// package.
pub fn check_imports(code: &str, allowed: &[String]) -> Result<(), BuiltinError> {
    for (module, line) in find_imports(code) {
        let top = module.split('.').next().unwrap_or_default();
        let ok = top == "__future__" || (!top.is_empty() && allowed.iter().any(|a| a == top));
        if !ok {
            return Err(BuiltinError::ImportRefused {
                module,
                line,
                allowed: allowed.join(", "),
            });
        }
    }
    Ok(())
}

/// The modules imported by `code`, each with the 1-based line of its statement.
fn find_imports(code: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    for (text, line) in logical_lines(code) {
        for segment in text.split(';') {
            scan_statement(segment.trim(), line, &mut found);
        }
    }
    found
}

/// Compound statements whose body can follow the colon on the same line.
const COMPOUND: [&str; 11] = [
    "if", "elif", "else", "try", "except", "finally", "with", "for", "while", "def", "class",
];

fn scan_statement(stmt: &str, line: usize, found: &mut Vec<(String, usize)>) {
    let first = stmt.split_whitespace().next().unwrap_or_default();
    if let Some(rest) = stmt.strip_prefix("import").filter(|_| first == "import") {
        for part in rest.replace(['(', ')'], " ").split(',') {
            if let Some(module) = part.split_whitespace().next() {
                found.push((module.to_owned(), line));
            }
        }
    } else if let Some(rest) = stmt.strip_prefix("from").filter(|_| first == "from") {
        if let Some(module) = rest.split_whitespace().next() {
            found.push((module.to_owned(), line));
        }
    } else if COMPOUND.contains(&first.trim_end_matches(':'))
        && let Some(colon) = stmt.find(':')
    {
        scan_statement(stmt[colon + 1..].trim(), line, found);
    }
}

/// Joins physical lines into logical ones (open brackets, backslash continuations) with string
/// contents and comments removed; each comes with the line it starts on.
fn logical_lines(code: &str) -> Vec<(String, usize)> {
    let mut lines = Vec::new();
    let mut current = String::new();
    let mut start_line = 1;
    let mut line = 1;
    let mut depth = 0i32;
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '#' => {
                while chars.peek().is_some_and(|&d| d != '\n') {
                    chars.next();
                }
            }
            '\'' | '"' => {
                let triple = chars.peek() == Some(&c) && {
                    let mut ahead = chars.clone();
                    ahead.next();
                    ahead.peek() == Some(&c)
                };
                if triple {
                    chars.next();
                    chars.next();
                }
                let mut run = 0;
                while let Some(d) = chars.next() {
                    if d == '\n' {
                        line += 1;
                        if !triple {
                            break;
                        }
                    }
                    if d == '\\' {
                        if chars.next() == Some('\n') {
                            line += 1;
                        }
                        run = 0;
                        continue;
                    }
                    if d == c {
                        run += 1;
                        if !triple || run == 3 {
                            break;
                        }
                    } else {
                        run = 0;
                    }
                }
                current.push_str("\"\"");
            }
            '(' | '[' | '{' => {
                depth += 1;
                current.push(c);
            }
            ')' | ']' | '}' => {
                depth -= 1;
                current.push(c);
            }
            '\\' if chars.peek() == Some(&'\n') => {
                chars.next();
                line += 1;
                current.push(' ');
            }
            '\n' => {
                line += 1;
                if depth > 0 {
                    current.push(' ');
                } else {
                    lines.push((std::mem::take(&mut current), start_line));
                    start_line = line;
                }
            }
            _ => {
                if current.trim().is_empty() && !c.is_whitespace() {
                    start_line = line;
                }
                current.push(c);
            }
        }
    }
    lines.push((current, start_line));
    lines
}

#[async_trait::async_trait]
impl Tool for RunPython {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        Self::schema()
    }

    async fn call(&self, input: Value, _ctx: &CallContext) -> Result<Value, ToolError> {
        Ok(self.call_json(input).await?)
    }

    fn capabilities(&self) -> ToolCapabilities {
        // Running code is neither idempotent nor safe at the restricted level, and code that ran
        // out of time would run out again.
        ToolCapabilities::default().with_deterministic_timeouts(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed() -> Vec<String> {
        DEFAULT_ALLOWED_MODULES
            .iter()
            .map(|m| (*m).to_owned())
            .collect()
    }

    fn imports(code: &str) -> Vec<(String, usize)> {
        find_imports(code)
    }

    #[test]
    fn finds_imports_in_all_their_shapes() {
        let code = "import pandas as pd, numpy\nfrom matplotlib import (\n    pyplot,\n)\n\
                    x = 'import os'  # import sys\ns = \"\"\"\nimport shutil\n\"\"\"\n\
                    if True: import socket\nimport json; from os import path\n\
                    from . import sibling\n";
        let got = imports(code);
        let names: Vec<&str> = got.iter().map(|(m, _)| m.as_str()).collect();
        assert_eq!(
            names,
            ["pandas", "numpy", "matplotlib", "socket", "json", "os", "."]
        );
        assert_eq!(got[3].1, 9);
        assert_eq!(got[5].1, 10);
    }

    #[test]
    fn import_check_names_the_module_and_line() {
        check_imports(
            "import pandas.io\nfrom __future__ import annotations\n",
            &allowed(),
        )
        .unwrap();
        let err = check_imports("x = 1\nimport os\n", &allowed()).unwrap_err();
        assert!(
            matches!(&err, BuiltinError::ImportRefused { module, line: 2, .. } if module == "os"),
            "{err}"
        );
        let err = check_imports("from subprocess import run", &allowed()).unwrap_err();
        assert!(err.to_string().contains("subprocess"), "{err}");
        assert!(check_imports("from .x import y", &allowed()).is_err());
    }

    #[tokio::test]
    async fn missing_interpreter_is_a_clear_error() {
        let tool = RunPython::new(RunPythonConfig {
            python: PathBuf::from("/nonexistent/python3"),
            ..RunPythonConfig::default()
        });
        let err = tool
            .call_json(json!({"code": "print(1)"}))
            .await
            .unwrap_err();
        assert!(matches!(err, BuiltinError::PythonMissing { .. }), "{err}");
        assert!(err.to_string().contains("install python3"), "{err}");
    }

    /// Whether python3 runs: a skip when it does not, a failure under CI.
    fn python_present() -> bool {
        ba_testkit::require_tool("python3")
    }

    #[tokio::test]
    async fn runs_code_in_a_scratch_dir_with_a_cleared_environment() {
        if !python_present() {
            return;
        }
        let out_dir = tempfile::tempdir().unwrap();
        let tool = RunPython::new(RunPythonConfig {
            output_dir: Some(out_dir.path().to_owned()),
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

        let tool = RunPython::new(RunPythonConfig {
            allowed_modules: vec!["os".into(), "json".into()],
            ..RunPythonConfig::default()
        });
        let code = "import os, json\nprint(json.dumps({'cwd': os.getcwd(), \
                    'home': os.environ.get('HOME'), 'keys': sorted(os.environ)}))";
        let out = tool.call_json(json!({"code": code})).await.unwrap();
        let seen: Value = serde_json::from_str(out["stdout"].as_str().unwrap()).unwrap();
        let cwd = seen["cwd"].as_str().unwrap();
        assert!(cwd.contains("ba-python-"), "{cwd}");
        assert_eq!(seen["home"], seen["cwd"]);
        let keys: Vec<&str> = seen["keys"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(keys.contains(&"PATH"), "{keys:?}");
        // cargo runs tests with CARGO_* set; none may reach the code. (A pyenv shim standing in
        // for python3 adds its own PYENV_* variables, which is why this is not an exact list.)
        let leaked: Vec<&&str> = keys
            .iter()
            .filter(|k| k.starts_with("CARGO") || k.starts_with("RUST"))
            .collect();
        assert!(leaked.is_empty(), "leaked: {leaked:?}");
        assert!(!Path::new(cwd).exists(), "scratch dir was not removed");
    }

    #[tokio::test]
    async fn dynamic_imports_are_refused_by_the_guard() {
        if !python_present() {
            return;
        }
        let tool = RunPython::default();
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
        if !python_present() {
            return;
        }
        let err = RunPython::default()
            .call_json(json!({"code": "x = 1\nraise ValueError('bad region')"}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("ValueError: bad region"), "{err}");
        assert_eq!(err.kind(), ba_protocol::ToolErrorKind::ExecutionError);
        let tool = RunPython::new(RunPythonConfig {
            max_output_bytes: 100,
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

    #[tokio::test]
    async fn timeout_kills_the_whole_process_group() {
        if !python_present() {
            return;
        }
        let marks = tempfile::tempdir().unwrap();
        let pids = marks.path().join("pids");
        let tool = RunPython::new(RunPythonConfig {
            allowed_modules: vec!["os".into(), "subprocess".into(), "time".into()],
            ..RunPythonConfig::default()
        });
        let code = format!(
            "import os, subprocess, time\n\
             child = subprocess.Popen(['sleep', '30'])\n\
             open({pids:?}, 'w').write('%d %d %d' % (os.getpid(), os.getpgid(0), child.pid))\n\
             time.sleep(30)\n",
            pids = pids.display().to_string()
        );
        let started = Instant::now();
        let err = tool
            .call_json(json!({"code": code, "timeout": 1}))
            .await
            .unwrap_err();
        assert!(
            matches!(err, BuiltinError::Timeout { seconds: 1, .. }),
            "{err}"
        );
        assert!(started.elapsed() < Duration::from_secs(10));
        let text = std::fs::read_to_string(&pids).unwrap();
        let ids: Vec<i32> = text.split(' ').map(|s| s.parse().unwrap()).collect();
        assert_eq!(ids[0], ids[1], "python leads its own process group");
        // The grandchild may need a moment to be reaped by init after the kill.
        let deadline = Instant::now() + Duration::from_secs(5);
        while (alive(ids[0]) || alive(ids[2])) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(ids[0]), "python {} still runs", ids[0]);
        assert!(!alive(ids[2]), "sleep {} still runs", ids[2]);
        let group = rustix::process::Pid::from_raw(ids[1]).unwrap();
        // Zombies awaiting init still count for kill(0), so only an error other than "no such
        // group" would mean something is wrong.
        if let Err(err) = rustix::process::test_kill_process_group(group) {
            assert_eq!(err, rustix::io::Errno::SRCH);
        }
    }

    proptest::proptest! {
        #[test]
        fn import_scanner_never_panics(code in "[a-z .,;:()#'\"\\\n]{0,80}") {
            let _ = find_imports(&code);
        }
    }
}
