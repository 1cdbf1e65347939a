//! `run_python`: runs analysis code in a `python3` subprocess in a sandbox.
//!
//! The code runs in a fresh scratch folder with a cleared environment, in its own process
//! group so that the whole group is killed at the timeout. When the call has the files of its
//! conversation ([`CallContext::files`]), the conversation's uploads are copied into the scratch
//! folder under their own names, read-only, and every file the code writes under `outputs/` is
//! kept as an output of the conversation (`output_001`, …) after a successful run, within size
//! and count bounds. The scratch folder's path never reaches the model: it is replaced by `.`
//! in what the code prints.
//!
//! On Linux it runs in the
//! [`sandbox`]: Landlock makes the scratch folder the only writable place and lets it read only
//! the interpreter's installation, system libraries and the configured data folders (never a
//! folder of uploads or of any conversation's files: the uploads it sees are its copies); a seccomp
//! filter refuses sockets, new processes and process tracing; rlimits bound memory, CPU time,
//! file size, open files and tasks; capabilities are dropped. That is the boundary. Where it
//! cannot be set up, the tool refuses to run code unless the sandbox is turned off
//! ([`sandbox::SandboxMode::Off`]), and its description says which it is.
//!
//! Imports are also limited to an allow-list, twice: a static scan of `import`/`from` lines
//! gives the model a precise error before anything runs, and a guard installed before the code
//! (on `__import__` and `sys.meta_path`) refuses dynamic imports made by the code itself while
//! letting allowed libraries import what they need. The allow-list is a convenience that keeps
//! the model on the libraries meant for analysis, not a security boundary.

pub mod sandbox;

mod files;
mod imports;
mod interpreter;

use ba_tools::ConversationFiles;
use ba_tools::{CallContext, Tool, ToolCapabilities, ToolError};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ba_protocol::OutputLevel;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::sync::OnceCell;

use self::files::{Inputs, copy_uploads, not_kept};
pub use self::imports::check_imports;
use self::interpreter::Interpreter;
use self::sandbox::{
    HelperCommand, POLICY_VERSION, Policy, PolicyLimits, SETUP_FAILED_PREFIX, SETUP_FAILED_STATUS,
    SandboxConfig, SandboxStatus,
};
use super::BuiltinError;

/// The tool name.
pub const NAME: &str = "run_python";

/// The description shown to the model (the sandbox's state is appended).
pub const DESCRIPTION: &str = "Run Python code for data analysis, calculation or charts. \
    Print the results you need. The conversation's uploaded files are in the working folder \
    under their own names (pd.read_csv(\"sales.csv\")); text files uploaded in another \
    encoding (GBK, UTF-16) are there as UTF-8, so read them without an encoding. Write files to keep (charts, \
    workbooks, exports) to outputs/ (plt.savefig(\"outputs/chart.png\")): they become \
    downloadable outputs of the conversation (output_001, …), listed in the result; other \
    files are discarded. Allowed libraries: json, csv, datetime, math, statistics, random, \
    pandas, numpy, scipy, statsmodels, openpyxl, xlrd, xlsxwriter, matplotlib, seaborn, plotly.";

/// What the description adds when the code runs in the sandbox.
const SANDBOXED_NOTE: &str = "It runs sandboxed: no network, no subprocesses; it writes only \
    in its working folder and reads only that folder and the data folders.";

/// The folder under the working folder whose files are kept as outputs.
pub const OUTPUTS_DIR: &str = "outputs";

/// The most files of `outputs/` kept from one run.
pub const MAX_OUTPUT_FILES: usize = 50;

/// The file the code is written to in the working folder.
const SCRIPT: &str = "main.py";

/// Entries of `outputs/` looked at, at most (files and folders), so a run that made a huge tree
/// cannot keep the tool walking it.
const MAX_OUTPUT_ENTRIES: usize = 10_000;

/// The modules analysis code may import by default.
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

/// Arguments of `run_python`.
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
    /// The largest file of `outputs/` kept as an output, in bytes (the conversation's own
    /// limit, [`ConversationFiles::max_file_bytes`], applies too).
    pub max_output_file_bytes: u64,
    /// The sandbox: required by default, with the data folders the code may read.
    pub sandbox: SandboxConfig,
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
            max_output_file_bytes: 100 * 1024 * 1024,
            sandbox: SandboxConfig::default(),
        }
    }
}

/// The `run_python` tool.
#[derive(Debug, Clone)]
pub struct RunPython {
    config: RunPythonConfig,
    status: SandboxStatus,
    description: String,
    /// The interpreter behind `config.python`, found at the first sandboxed call.
    interpreter: Arc<OnceCell<Interpreter>>,
}

impl Default for RunPython {
    fn default() -> Self {
        Self::new(RunPythonConfig::default())
    }
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
    /// A tool with `config`. The sandbox is checked here (the kernel's Landlock, the helper),
    /// once, and the result is in [`RunPython::sandbox_status`] and the description.
    pub fn new(config: RunPythonConfig) -> Self {
        let status = SandboxStatus::check(&config.sandbox);
        let description = match &status {
            SandboxStatus::Enforced { .. } => format!("{DESCRIPTION} {SANDBOXED_NOTE}"),
            SandboxStatus::Off => format!("{DESCRIPTION} It runs without a sandbox."),
            SandboxStatus::Unavailable { reason } => {
                format!("{DESCRIPTION} Unavailable here: no sandbox ({reason}).")
            }
        };
        Self {
            config,
            status,
            description,
            interpreter: Arc::new(OnceCell::new()),
        }
    }

    /// Whether code runs sandboxed, as checked when the tool was made.
    pub fn sandbox_status(&self) -> &SandboxStatus {
        &self.status
    }

    /// The JSON Schema of the arguments.
    pub fn schema() -> Value {
        super::args_schema::<RunPythonArgs>()
    }

    /// Parses `args` and runs, without conversation files.
    pub async fn call_json(&self, args: Value) -> Result<Value, BuiltinError> {
        self.run(super::parse_args(NAME, args)?).await
    }

    /// Runs the code without conversation files: no uploads in the working folder, and what
    /// it writes to `outputs/` is listed in `outputs_skipped`, not kept.
    pub async fn run(&self, args: RunPythonArgs) -> Result<Value, BuiltinError> {
        self.run_in(args, None).await
    }

    /// Runs the code with the files of its conversation: the uploads of `files` are copied
    /// into the working folder under their names (read-only; a name that is taken, by another
    /// upload of that name or by `main.py` or `outputs`, gets the id in front,
    /// `upload_001-sales.csv`; the newest upload of a name keeps the name itself, as
    /// `file_reader` finds it), and after a zero exit every regular file under `outputs/` is
    /// kept with [`ConversationFiles::add_output`].
    ///
    /// A zero exit gives `stdout`, `stderr` (the working folder's path shown as `.`),
    /// `exit_code`, `duration_ms`, `outputs` (`id`, `name`, `size`, `media_type` of each file
    /// kept), `outputs_skipped` (`name`, `reason`, when some were not kept: over
    /// [`RunPythonConfig::max_output_file_bytes`] or the conversation's limit, past
    /// [`MAX_OUTPUT_FILES`], links, no conversation files) and `not_kept` (files written
    /// outside `outputs/`, discarded, when there are some). A non-zero exit is
    /// [`BuiltinError::ScriptFailed`] with the end of stderr; running past the timeout is
    /// [`BuiltinError::Timeout`], after the process group has been killed and reaped; past the
    /// CPU limit, [`BuiltinError::LimitExceeded`]. When the sandbox is required but unavailable
    /// nothing runs: [`BuiltinError::SandboxUnavailable`].
    pub async fn run_in(
        &self,
        args: RunPythonArgs,
        files: Option<&dyn ConversationFiles>,
    ) -> Result<Value, BuiltinError> {
        if args.timeout == 0 {
            return Err(BuiltinError::InvalidArguments {
                tool: NAME,
                message: "timeout must be at least 1 second".into(),
            });
        }
        check_imports(&args.code, &self.config.allowed_modules)?;
        let helper = match &self.status {
            SandboxStatus::Enforced { helper, .. } => Some(helper),
            SandboxStatus::Unavailable { reason } => {
                return Err(BuiltinError::SandboxUnavailable {
                    reason: reason.clone(),
                });
            }
            _ => None,
        };
        let seconds = args.timeout.min(self.config.max_timeout_secs);
        let sandboxed = match helper {
            Some(helper) => Some((helper, self.interpreter().await?)),
            None => None,
        };
        // Where the interpreter's own files are, to be shown as `<python>/…`; without the
        // sandbox a failed probe only costs that (running the code says what is wrong).
        let python_roots = match sandboxed {
            Some((_, interpreter)) => interpreter.read.clone(),
            None => self
                .interpreter()
                .await
                .map(|i| i.read.clone())
                .unwrap_or_default(),
        };
        let parent = self
            .config
            .scratch_parent
            .clone()
            .unwrap_or_else(std::env::temp_dir);
        let scratch = working_folder(&parent, &args.code).await?;
        let inputs = match files {
            Some(files) => copy_uploads(files, scratch.path()).await?,
            None => Inputs::default(),
        };
        let scrub = Scrub::new(
            scratch.path(),
            &python_roots,
            &[parent.clone(), std::env::temp_dir()],
        );
        let mut command = match sandboxed {
            Some((helper, interpreter)) => {
                self.sandboxed_command(helper, interpreter, scratch.path(), seconds)?
            }
            None => Command::new(&self.config.python),
        };
        let started = Instant::now();
        let child = self.spawn(&mut command, scratch.path(), helper.is_some())?;
        let (out, err, status) = wait_bounded(child, seconds, self.config.max_output_bytes).await?;
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        if !status.success() {
            return Err(failure(status, &err, helper.is_some(), seconds, &scrub));
        }
        let kept = self.keep_outputs(scratch.path(), files).await;
        let mut answer = json!({
            "exit_code": status.code(),
            "stdout": scrub.apply(&out.text),
            "stderr": scrub.apply(&err.text),
            "stdout_truncated": out.dropped > 0,
            "stderr_truncated": err.dropped > 0,
            "duration_ms": duration_ms,
            "outputs": kept.outputs,
        });
        if !kept.skipped.is_empty() {
            answer["outputs_skipped"] = json!(kept.skipped);
        }
        if !inputs.converted.is_empty() {
            answer["converted_to_utf8"] = json!(inputs.converted);
        }
        let not_kept = not_kept(scratch.path(), &inputs.names).await;
        if !not_kept.is_empty() {
            answer["not_kept"] = json!(not_kept);
        }
        Ok(answer)
    }

    /// Starts the interpreter on the script in `scratch` in a process group of its own, with
    /// nothing of this process's environment; a missing program is named for what it is (the
    /// sandbox helper when `sandboxed`, else python).
    fn spawn(
        &self,
        command: &mut Command,
        scratch: &Path,
        sandboxed: bool,
    ) -> Result<tokio::process::Child, BuiltinError> {
        command
            .args(["-I", "-B", "-X", "utf8", "-c", BOOT, PRELUDE])
            .arg(scratch.join(SCRIPT))
            .arg(self.config.allowed_modules.join(","))
            .current_dir(scratch)
            .env_clear()
            .env("PATH", &self.config.path_env)
            .env("HOME", scratch)
            .env("TMPDIR", scratch)
            .env("MPLBACKEND", "Agg")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|err| {
                let program = command.as_std().get_program().to_owned();
                match (err.kind(), sandboxed) {
                    (std::io::ErrorKind::NotFound, true) => BuiltinError::SandboxUnavailable {
                        reason: format!(
                            "the sandbox helper {} is missing",
                            Path::new(&program).display()
                        ),
                    },
                    (std::io::ErrorKind::NotFound, false) => BuiltinError::PythonMissing {
                        program: self.config.python.display().to_string(),
                    },
                    _ => env_err(format!(
                        "cannot start {}: {err}",
                        Path::new(&program).display()
                    )),
                }
            })
    }

    /// The interpreter behind `config.python`, asked once.
    async fn interpreter(&self) -> Result<&Interpreter, BuiltinError> {
        self.interpreter
            .get_or_try_init(|| Interpreter::probe(&self.config.python, &self.config.path_env))
            .await
    }

    /// `helper sandbox-exec POLICY -- INTERPRETER`, to which the interpreter's arguments are
    /// added.
    fn sandboxed_command(
        &self,
        helper: &HelperCommand,
        interpreter: &Interpreter,
        scratch: &Path,
        seconds: u64,
    ) -> Result<Command, BuiltinError> {
        let sandbox = &self.config.sandbox;
        let mut read: Vec<PathBuf> = sandbox::SYSTEM_READ.iter().map(PathBuf::from).collect();
        read.extend(interpreter.read.iter().cloned());
        read.extend(sandbox.read_roots.iter().cloned());
        sandbox::check_exposure(&read, &sandbox.protected)
            .map_err(|reason| BuiltinError::SandboxUnavailable { reason })?;
        let policy = Policy {
            version: POLICY_VERSION,
            scratch: scratch.to_owned(),
            read,
            read_write_files: sandbox::SYSTEM_READ_WRITE
                .iter()
                .map(PathBuf::from)
                .collect(),
            execute: interpreter.execute.clone(),
            limits: PolicyLimits::new(&sandbox.limits, seconds + 1),
            parent: rustix::process::getpid().as_raw_nonzero().get(),
        };
        let policy = serde_json::to_string(&policy).map_err(|e| BuiltinError::Environment {
            tool: NAME,
            message: format!("the sandbox policy cannot be written (a path is not UTF-8?): {e}"),
        })?;
        let mut command = Command::new(&helper.program);
        command
            .args(&helper.args)
            .arg(policy)
            .arg("--")
            .arg(&interpreter.executable);
        Ok(command)
    }
}

/// Rewrites what the code printed so that it names no path outside its working folder: the
/// working folder becomes `.`, the interpreter's installation (its prefixes and `sys.path`)
/// `<python>`, the temp folder `<tmp>` and the home folder `<home>`; a traceback frame in a
/// file outside all of these is shown as `<python>/…/` and the file's name. The longest root
/// wins, so a Python installed under the home folder reads `<python>/…`.
struct Scrub {
    roots: Vec<(String, &'static str)>,
}

impl Scrub {
    fn new(scratch: &Path, python: &[PathBuf], temp: &[PathBuf]) -> Self {
        let mut roots: Vec<(String, &'static str)> = Vec::new();
        let mut add = |path: &Path, shown: &'static str| {
            let real = std::fs::canonicalize(path).ok();
            for p in std::iter::once(path).chain(real.as_deref()) {
                let text = p.display().to_string();
                let text = text.trim_end_matches('/');
                // `/` itself would rewrite every path; a relative one names nothing.
                if text.starts_with('/') && !roots.iter().any(|(r, _)| r == text) {
                    roots.push((text.to_owned(), shown));
                }
            }
        };
        add(scratch, ".");
        for p in python {
            add(p, "<python>");
        }
        for p in temp {
            add(p, "<tmp>");
        }
        if let Some(home) = std::env::var_os("HOME") {
            add(Path::new(&home), "<home>");
        }
        Self::with_roots(roots)
    }

    fn with_roots(mut roots: Vec<(String, &'static str)>) -> Self {
        // The longest first, so one that contains another is replaced whole.
        roots.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        Self { roots }
    }

    fn apply(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find('/') {
            let (before, from) = rest.split_at(at);
            out.push_str(before);
            let starts_path = !out.chars().next_back().is_some_and(path_char);
            let root = self.roots.iter().find(|(root, _)| {
                starts_path
                    && from.starts_with(root.as_str())
                    && !from[root.len()..]
                        .chars()
                        .next()
                        .is_some_and(|c| c != '/' && path_char(c))
            });
            match root {
                Some((root, shown)) => {
                    out.push_str(shown);
                    rest = &from[root.len()..];
                }
                None => {
                    out.push('/');
                    rest = &from[1..];
                }
            }
        }
        out.push_str(rest);
        outside_frames(&out)
    }
}

/// Whether `c` can be part of a path's segment (so a root must not be cut out of one).
fn path_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '+' | '~' | '@' | '/')
}

/// Traceback frames (`File "/…/name.py", line 3`) in a file none of the roots named: the path
/// goes, its file name stays.
fn outside_frames(text: &str) -> String {
    const FRAME: &str = "File \"/";
    if !text.contains(FRAME) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(FRAME) {
        out.push_str(&rest[..at + FRAME.len() - 1]);
        let path = &rest[at + FRAME.len() - 1..];
        let end = path.find(['"', '\n']).unwrap_or(path.len());
        let name = path[..end].rsplit('/').next().unwrap_or_default();
        out.push_str("<python>/…/");
        out.push_str(name);
        rest = &path[end..];
    }
    out.push_str(rest);
    out
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

/// A failure of the tool's own environment (not of the code it runs).
fn env_err(message: String) -> BuiltinError {
    BuiltinError::Environment {
        tool: NAME,
        message,
    }
}

/// A fresh working folder under `parent` holding the code as [`SCRIPT`] and an empty
/// [`OUTPUTS_DIR`]; it goes when dropped.
async fn working_folder(parent: &Path, code: &str) -> Result<tempfile::TempDir, BuiltinError> {
    let scratch = tempfile::Builder::new()
        .prefix("ba-python-")
        .tempdir_in(parent)
        .map_err(|e| env_err(format!("cannot make a working folder: {e}")))?;
    tokio::fs::write(scratch.path().join(SCRIPT), code)
        .await
        .map_err(|e| env_err(format!("cannot write the code to the working folder: {e}")))?;
    tokio::fs::create_dir(scratch.path().join(OUTPUTS_DIR))
        .await
        .map_err(|e| env_err(format!("cannot make the outputs folder: {e}")))?;
    Ok(scratch)
}

/// The child's output (each stream bounded to `limit` bytes) and exit, within `seconds`;
/// past them the whole process group is killed and reaped and the call is a
/// [`BuiltinError::Timeout`]. Whatever the code left running in the background is killed
/// either way.
async fn wait_bounded(
    mut child: tokio::process::Child,
    seconds: u64,
    limit: usize,
) -> Result<(Captured, Captured, std::process::ExitStatus), BuiltinError> {
    let pgid = child.id().and_then(|id| i32::try_from(id).ok());
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(env_err("the child's output pipes were not opened".into()));
    };
    let waited = tokio::time::timeout(Duration::from_secs(seconds), async {
        tokio::join!(
            read_bounded(stdout, limit),
            read_bounded(stderr, limit),
            child.wait()
        )
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
    kill_group(pgid);
    let status = status.map_err(|e| env_err(format!("waiting for python failed: {e}")))?;
    Ok((out, err, status))
}

/// The error of a non-zero exit: the sandbox helper's own failure before the code ran (when
/// `sandboxed`), the CPU limit, else the script's failure with the end of its stderr.
fn failure(
    status: std::process::ExitStatus,
    err: &Captured,
    sandboxed: bool,
    seconds: u64,
    scrub: &Scrub,
) -> BuiltinError {
    // Code that imitates the helper's message only misreports its own failure.
    if sandboxed
        && status.code() == Some(i32::from(SETUP_FAILED_STATUS))
        && let Some(message) = err.text.strip_prefix(SETUP_FAILED_PREFIX)
    {
        return BuiltinError::SandboxFailed {
            message: message.trim().to_owned(),
        };
    }
    if status.signal() == Some(rustix::process::Signal::XCPU.as_raw()) {
        return BuiltinError::LimitExceeded {
            tool: NAME,
            limit: format!("CPU time limit of {} s", seconds + 1),
        };
    }
    let status_text = match (status.code(), status.signal()) {
        (Some(code), _) => code.to_string(),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "unknown".to_owned(),
    };
    BuiltinError::ScriptFailed {
        status: status_text,
        stderr: tail(&scrub.apply(&err.text), 2000),
    }
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

#[async_trait::async_trait]
impl Tool for RunPython {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        Self::schema()
    }

    async fn call(&self, input: Value, ctx: &CallContext) -> Result<Value, ToolError> {
        let args = super::parse_args(NAME, input)?;
        Ok(self.run_in(args, ctx.files.as_deref()).await?)
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
    #[tokio::test]
    async fn missing_interpreter_is_a_clear_error() {
        // Off and sandboxed alike: the sandboxed tool asks the interpreter about itself first.
        for sandbox in [SandboxConfig::off(), SandboxConfig::default()] {
            let tool = RunPython::new(RunPythonConfig {
                python: PathBuf::from("/nonexistent/python3"),
                sandbox,
                ..RunPythonConfig::default()
            });
            let err = tool
                .call_json(json!({"code": "print(1)"}))
                .await
                .unwrap_err();
            if let SandboxStatus::Unavailable { .. } = tool.sandbox_status() {
                // No helper beside this unit-test binary: the refusal comes first.
                assert!(
                    matches!(err, BuiltinError::SandboxUnavailable { .. }),
                    "{err}"
                );
                continue;
            }
            assert!(matches!(err, BuiltinError::PythonMissing { .. }), "{err}");
            assert!(err.to_string().contains("install python3"), "{err}");
        }
    }

    #[test]
    fn printed_paths_outside_the_working_folder_are_rewritten() {
        let scrub = Scrub::with_roots(vec![
            ("/tmp".into(), "<tmp>"),
            ("/home/u".into(), "<home>"),
            ("/tmp/ba-python-x".into(), "."),
            ("/home/u/.pyenv/versions/3.11".into(), "<python>"),
            (
                "/home/u/.pyenv/versions/3.11/lib/python3.11/site-packages".into(),
                "<python>",
            ),
        ]);
        for (printed, shown) in [
            (
                "  File \"/home/u/.pyenv/versions/3.11/lib/python3.11/site-packages/pandas/io/parsers/readers.py\", line 1026, in read_csv",
                "  File \"<python>/pandas/io/parsers/readers.py\", line 1026, in read_csv",
            ),
            (
                "  File \"/tmp/ba-python-x/main.py\", line 2",
                "  File \"./main.py\", line 2",
            ),
            (
                "/home/u/.pyenv/versions/3.11/bin/python3",
                "<python>/bin/python3",
            ),
            (
                "saved /tmp/other.txt and /tmp",
                "saved <tmp>/other.txt and <tmp>",
            ),
            ("'/home/u/notes.txt'", "'<home>/notes.txt'"),
            ("/home/user2/x and /tmpfiles", "/home/user2/x and /tmpfiles"),
            ("https://example.com/tmp/x", "https://example.com/tmp/x"),
            ("ratio 3/4", "ratio 3/4"),
            (
                "  File \"/opt/elsewhere/lib.py\", line 2, in f",
                "  File \"<python>/…/lib.py\", line 2, in f",
            ),
        ] {
            assert_eq!(scrub.apply(printed), shown, "{printed}");
        }
    }

    #[test]
    fn the_description_tells_the_model_the_sandbox_state() {
        let off = RunPython::new(RunPythonConfig {
            sandbox: SandboxConfig::off(),
            ..RunPythonConfig::default()
        });
        assert!(off.description().ends_with("It runs without a sandbox."));
        let missing = RunPython::new(RunPythonConfig {
            sandbox: SandboxConfig::default().with_helper(HelperCommand::new("/nonexistent")),
            ..RunPythonConfig::default()
        });
        assert!(
            missing
                .description()
                .contains("Unavailable here: no sandbox ("),
            "{}",
            missing.description()
        );
        assert!(missing.description().starts_with(DESCRIPTION));
    }

    #[tokio::test]
    async fn an_unavailable_sandbox_refuses_before_anything_runs() {
        let tool = RunPython::new(RunPythonConfig {
            sandbox: SandboxConfig::default().with_helper(HelperCommand::new("/nonexistent")),
            ..RunPythonConfig::default()
        });
        let err = tool
            .call_json(json!({"code": "print(1)"}))
            .await
            .unwrap_err();
        assert!(
            matches!(err, BuiltinError::SandboxUnavailable { .. }),
            "{err}"
        );
        assert_eq!(err.kind(), ba_protocol::ToolErrorKind::PermissionDenied);
        let text = err.to_string();
        assert!(
            text.contains("/nonexistent") && text.contains("`run_python: {sandbox: off}`"),
            "{text}"
        );
    }
}
