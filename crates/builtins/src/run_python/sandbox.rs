//! The sandbox `run_python` runs its code in (Linux): Landlock rules, a seccomp filter, rlimits,
//! no capabilities, and its own process group.
//!
//! # How the sandbox is set up without `unsafe`
//!
//! Landlock, seccomp and rlimits must be applied to the child between `fork` and `exec`, which
//! std only offers through the `unsafe` `CommandExt::pre_exec`; the workspace forbids
//! `unsafe_code`. Instead the tool starts a small **helper program** that applies the policy to
//! *itself*, through the safe APIs of the `landlock`, `seccompiler` and `rustix` crates, and
//! then replaces itself with the interpreter (`CommandExt::exec`, also safe). Landlock domains,
//! seccomp filters, rlimits, the emptied capability sets and the parent-death signal all carry
//! across `exec`, so the interpreter starts already confined and never runs a line outside.
//!
//! The helper's entry point is [`exec_main`]; any binary can host it as a subcommand named
//! [`HELPER_SUBCOMMAND`]. Two do: `ba-agent` (`ba-agent sandbox-exec …`, dispatched before its
//! argument parser) and this crate's tiny `ba-sandbox` binary (feature `python`), which other
//! programs embedding the library can ship beside themselves. [`SandboxConfig::helper`] names
//! the one to use; left unset, [`HelperCommand::discover`] takes the running program when it is
//! `ba-agent` or `ba-sandbox`, else a `ba-sandbox` or `ba-agent` beside it or one folder up
//! (where Cargo puts binaries next to test executables). Its arguments are the policy as JSON
//! ([`POLICY_VERSION`] inside), `--`, then the interpreter and its arguments; it is a private
//! protocol between this module and itself.
//!
//! Re-executing a helper costs one extra `exec` (about a millisecond) per call; the interpreter
//! itself is resolved once per tool (a trusted `python3 -I -c` probe, outside the sandbox, that
//! reports `sys.executable`, its prefixes and `sys.path`), so a pyenv shim or a venv is followed
//! to the real interpreter and only its installation becomes readable.
//!
//! # The policy
//!
//! - **Files (Landlock, ABI 6 rights requested, best effort down to ABI 1):** the scratch folder
//!   is the only writable place (everything but executing and making device nodes). Readable:
//!   the interpreter's prefixes and `sys.path` entries, `/usr`, `/lib`, `/lib32`, `/lib64`,
//!   `/libx32`, a few files of `/etc` (the loader cache, the time zone, certificates, MIME
//!   types), `/dev/null` (also writable: it is a sink), `/dev/zero`, `/dev/random`,
//!   `/dev/urandom`, `/proc/self`, `/proc/cpuinfo`, `/proc/meminfo`,
//!   `/sys/devices/system/cpu`, and the configured data folders
//!   ([`SandboxConfig::read_roots`]). Executable: the interpreter and its ELF loader only.
//!   Nothing else — not the user's home, not the agent's conversation store, no folder of
//!   uploads or of any conversation's files — can be opened: the conversation's uploads are
//!   copied into the scratch folder before the run.
//!   TCP bind and connect are denied too (ABI 4), and signals and abstract UNIX sockets are
//!   scoped to the sandbox (ABI 6).
//! - **System calls (seccomp, `EPERM`):** every `socket` (`AF_INET`, `AF_INET6`, and `AF_UNIX`
//!   too: Landlock before ABI 9 does not mediate `connect` to a pathname socket, so a UNIX
//!   socket could reach host daemons, and nothing the analysis libraries need creates one;
//!   `socketpair` stays allowed, since a connected pair reaches nothing); process tracing
//!   (`ptrace`, `process_vm_readv`, `process_vm_writev`, `pidfd_getfd`, `kcmp`); new processes
//!   (`fork`, `vfork`, `clone` without `CLONE_THREAD`; `clone3` answers `ENOSYS` so the C
//!   library falls back to `clone`, and threads still work); signals to any process but itself;
//!   `io_uring` (it would bypass the filter); namespaces, mounts, modules, `bpf`,
//!   `perf_event_open`, keyrings, clocks, reboot, swap, `TIOCSTI`; raising rlimits
//!   (`setrlimit`, `prlimit64` with a new limit); path `truncate`; metadata changes by path,
//!   which Landlock does not cover (`chmod`, `chown`, `utime*`, `*setxattr`,
//!   `*removexattr`); scheduling changes; clearing the parent-death signal. On
//!   x86_64, calls of another ABI are refused too (i386 kills the process, x32 is `ENOSYS`).
//! - **Limits (rlimits, soft = hard):** address space ([`SandboxLimits::memory_bytes`]), CPU
//!   seconds (the call's timeout + 1; `SIGKILL` a second later), file size
//!   ([`SandboxLimits::file_size_bytes`]), open files ([`SandboxLimits::open_files`]), core
//!   dumps 0, and processes (`RLIMIT_NPROC` = the user's current tasks +
//!   [`SandboxLimits::extra_tasks`]). `RLIMIT_NPROC` counts every task of the *real user*, so a
//!   fixed small number would starve a user with many processes (or parallel tests) of
//!   threads; the kernel does not enforce it at all for root. That is why it is headroom over
//!   the current count, and why the seccomp filter, not `RLIMIT_NPROC`, is what stops a fork
//!   bomb: no process can be created at all, and threads are bounded by the address space.
//! - **Privileges:** `no_new_privs`; when the agent runs as root, the bounding, ambient,
//!   inheritable, permitted and effective capability sets are emptied, so the code runs as an
//!   unprivileged uid 0 that Landlock still confines.
//! - **Lifetime:** the parent-death signal is `SIGKILL` (the code dies with the thread that
//!   started it, even if the agent is killed), and the tool kills the whole process group at
//!   the timeout.
//!
//! Where the kernel has no Landlock (or the helper is missing) the tool refuses to run code
//! unless the configuration turns the sandbox off ([`SandboxMode::Off`]); [`SandboxStatus`]
//! says which, and the tool's description tells the model.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::{Deserialize, Serialize};

#[cfg(target_os = "linux")]
mod elf;
#[cfg(target_os = "linux")]
mod filter;
#[cfg(target_os = "linux")]
mod linux;

/// The subcommand (first argument) a host program dispatches to [`exec_main`].
pub const HELPER_SUBCOMMAND: &str = "sandbox-exec";

/// The version of the helper's policy; a helper from another build refuses a policy of
/// another version instead of misreading it.
pub const POLICY_VERSION: u32 = 1;

/// The exit status of the helper when it could not set the sandbox up (the code never ran).
pub const SETUP_FAILED_STATUS: u8 = 125;

/// How the helper's setup failures start on its standard error.
pub(crate) const SETUP_FAILED_PREFIX: &str = "ba-sandbox: setup failed: ";

/// Names of programs that host the helper.
const HELPER_NAMES: [&str; 2] = ["ba-sandbox", "ba-agent"];

/// Whether code runs in the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SandboxMode {
    /// In the sandbox, or not at all: the tool refuses when the sandbox is unavailable.
    #[default]
    Required,
    /// Unconfined (a scratch folder, a cleared environment and a process group only), for
    /// kernels without Landlock where the operator accepts the risk.
    Off,
}

/// A program that hosts the sandbox helper, and the arguments that select it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelperCommand {
    /// The program.
    pub program: PathBuf,
    /// Its leading arguments (normally just [`HELPER_SUBCOMMAND`]).
    pub args: Vec<OsString>,
}

impl HelperCommand {
    /// `program sandbox-exec …`.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: vec![OsString::from(HELPER_SUBCOMMAND)],
        }
    }

    /// The running program when it is `ba-agent` or `ba-sandbox`; else a `ba-sandbox` or
    /// `ba-agent` in the running program's folder or the folder above it (Cargo's layout for
    /// test executables). The error says where it looked.
    pub fn discover() -> Result<Self, String> {
        let exe = std::env::current_exe()
            .map_err(|e| format!("the running program's path is unknown: {e}"))?;
        if exe
            .file_stem()
            .and_then(OsStr::to_str)
            .is_some_and(|stem| HELPER_NAMES.contains(&stem))
        {
            return Ok(Self::new(exe));
        }
        let dirs: Vec<&Path> = exe.ancestors().skip(1).take(2).collect();
        for dir in &dirs {
            for name in HELPER_NAMES {
                let candidate = dir.join(name);
                if candidate.is_file() {
                    return Ok(Self::new(candidate));
                }
            }
        }
        Err(format!(
            "no sandbox helper: neither ba-sandbox nor ba-agent is in {}; name one in \
             SandboxConfig::helper",
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(" or ")
        ))
    }
}

/// The resource limits of a run (the CPU limit follows the call's timeout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SandboxLimits {
    /// Address space, in bytes (`RLIMIT_AS`); an allocation past it is a `MemoryError`.
    pub memory_bytes: u64,
    /// The largest file the code may write, in bytes (`RLIMIT_FSIZE`); a write past it fails
    /// with "File too large".
    pub file_size_bytes: u64,
    /// Open files (`RLIMIT_NOFILE`).
    pub open_files: u64,
    /// Tasks (threads) the code may add to those its user already runs (`RLIMIT_NPROC`).
    pub extra_tasks: u64,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        Self {
            memory_bytes: 4 << 30,
            file_size_bytes: 1 << 30,
            open_files: 256,
            extra_tasks: 256,
        }
    }
}

impl SandboxLimits {
    /// Sets the address-space limit.
    #[must_use]
    pub fn with_memory_bytes(mut self, bytes: u64) -> Self {
        self.memory_bytes = bytes;
        self
    }

    /// Sets the file-size limit.
    #[must_use]
    pub fn with_file_size_bytes(mut self, bytes: u64) -> Self {
        self.file_size_bytes = bytes;
        self
    }

    /// Sets the open-files limit.
    #[must_use]
    pub fn with_open_files(mut self, files: u64) -> Self {
        self.open_files = files;
        self
    }

    /// Sets the headroom of tasks over the user's current count.
    #[must_use]
    pub fn with_extra_tasks(mut self, tasks: u64) -> Self {
        self.extra_tasks = tasks;
        self
    }
}

/// How `run_python` confines the code.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct SandboxConfig {
    /// Required (the default) or off.
    pub mode: SandboxMode,
    /// The helper; found by [`HelperCommand::discover`] when unset.
    pub helper: Option<HelperCommand>,
    /// Folders (or files) the code may read besides the interpreter and its working folder:
    /// the data folders. Never a folder of uploads or of conversation files (the tool copies
    /// the call's own uploads into the working folder), which would let one conversation's
    /// code read another's.
    pub read_roots: Vec<PathBuf>,
    /// Folders the code must never read, such as the agent's conversation store; the user's
    /// home (`$HOME`) always is one. A readable folder that is one of them or contains one
    /// makes the tool refuse to run (Landlock can only allow, so the overlap cannot be cut
    /// out).
    pub protected: Vec<PathBuf>,
    /// Resource limits.
    pub limits: SandboxLimits,
}

impl SandboxConfig {
    /// The sandbox turned off.
    pub fn off() -> Self {
        Self {
            mode: SandboxMode::Off,
            ..Self::default()
        }
    }

    /// Sets the mode.
    #[must_use]
    pub fn with_mode(mut self, mode: SandboxMode) -> Self {
        self.mode = mode;
        self
    }

    /// Names the helper.
    #[must_use]
    pub fn with_helper(mut self, helper: HelperCommand) -> Self {
        self.helper = Some(helper);
        self
    }

    /// Sets the folders the code may read.
    #[must_use]
    pub fn with_read_roots(mut self, roots: Vec<PathBuf>) -> Self {
        self.read_roots = roots;
        self
    }

    /// Sets the folders the code must never read.
    #[must_use]
    pub fn with_protected(mut self, protected: Vec<PathBuf>) -> Self {
        self.protected = protected;
        self
    }

    /// Sets the resource limits.
    #[must_use]
    pub fn with_limits(mut self, limits: SandboxLimits) -> Self {
        self.limits = limits;
        self
    }
}

/// Whether code will run confined, as found when the tool was made.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SandboxStatus {
    /// Code runs in the sandbox.
    Enforced {
        /// The highest Landlock ABI the kernel offers of those the policy uses (1 to 6).
        landlock_abi: u32,
        /// The helper that sets it up.
        helper: HelperCommand,
    },
    /// The configuration turned the sandbox off.
    Off,
    /// The sandbox is required but cannot be set up; calls are refused.
    Unavailable {
        /// Why.
        reason: String,
    },
}

impl SandboxStatus {
    /// Checks the kernel and finds the helper for `config`.
    pub fn check(config: &SandboxConfig) -> Self {
        if config.mode == SandboxMode::Off {
            return Self::Off;
        }
        if let Err(reason) = check_exposure(&config.read_roots, &config.protected) {
            return Self::Unavailable { reason };
        }
        let landlock_abi = match landlock_abi() {
            Ok(abi) => abi,
            Err(reason) => return Self::Unavailable { reason },
        };
        let helper = match &config.helper {
            Some(helper) if !helper.program.is_file() => {
                return Self::Unavailable {
                    reason: format!(
                        "the sandbox helper {} does not exist",
                        helper.program.display()
                    ),
                };
            }
            Some(helper) => helper.clone(),
            None => match HelperCommand::discover() {
                Ok(helper) => helper,
                Err(reason) => return Self::Unavailable { reason },
            },
        };
        Self::Enforced {
            landlock_abi,
            helper,
        }
    }

    /// Whether code runs confined.
    pub fn is_enforced(&self) -> bool {
        matches!(self, Self::Enforced { .. })
    }
}

impl fmt::Display for SandboxStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Enforced { landlock_abi, .. } => write!(
                f,
                "sandboxed (Landlock ABI {landlock_abi}, seccomp, rlimits, no capabilities)"
            ),
            Self::Off => f.write_str("not sandboxed (the sandbox is turned off)"),
            Self::Unavailable { reason } => write!(f, "unavailable ({reason})"),
        }
    }
}

/// Refuses a readable path that is, or contains, a protected folder or the user's home.
pub(crate) fn check_exposure(readable: &[PathBuf], protected: &[PathBuf]) -> Result<(), String> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let protected: Vec<(PathBuf, bool)> = protected
        .iter()
        .map(|p| (resolve(p), false))
        .chain(home.map(|h| (resolve(&h), true)))
        .collect();
    for path in readable {
        let resolved = resolve(path);
        for (guarded, is_home) in &protected {
            if guarded.starts_with(&resolved) {
                let what = if *is_home {
                    "the user's home"
                } else {
                    "a protected folder"
                };
                return Err(format!(
                    "{} would be readable and it holds {what}, {}",
                    path.display(),
                    guarded.display()
                ));
            }
        }
    }
    Ok(())
}

/// `path` made absolute and free of symbolic links as far as it exists.
fn resolve(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            return rest
                .iter()
                .rev()
                .fold(real, |acc: PathBuf, part| acc.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return absolute,
        }
    }
}

/// The highest Landlock ABI of those the policy uses, or why there is none.
#[cfg(target_os = "linux")]
fn landlock_abi() -> Result<u32, String> {
    linux::landlock_abi()
}

#[cfg(not(target_os = "linux"))]
fn landlock_abi() -> Result<u32, String> {
    Err("the sandbox needs Linux (Landlock and seccomp)".into())
}

/// What the helper applies before it runs the interpreter; it travels as JSON in the helper's
/// arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Policy {
    /// [`POLICY_VERSION`].
    pub version: u32,
    /// The only writable folder.
    pub scratch: PathBuf,
    /// Readable folders and files (those missing are skipped).
    pub read: Vec<PathBuf>,
    /// Files that may be read and written (`/dev/null`).
    pub read_write_files: Vec<PathBuf>,
    /// Files that may be executed (the interpreter and its ELF loader).
    pub execute: Vec<PathBuf>,
    /// Resource limits.
    pub limits: PolicyLimits,
    /// The process that started the helper; it dies with it.
    pub parent: i32,
}

/// The limits of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PolicyLimits {
    pub memory_bytes: u64,
    pub file_size_bytes: u64,
    pub open_files: u64,
    pub extra_tasks: u64,
    pub cpu_seconds: u64,
}

impl PolicyLimits {
    pub(crate) fn new(limits: &SandboxLimits, cpu_seconds: u64) -> Self {
        Self {
            memory_bytes: limits.memory_bytes,
            file_size_bytes: limits.file_size_bytes,
            open_files: limits.open_files,
            extra_tasks: limits.extra_tasks,
            cpu_seconds,
        }
    }
}

/// The system folders and files every interpreter may read.
pub(crate) const SYSTEM_READ: [&str; 19] = [
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/mime.types",
    "/dev/zero",
    "/dev/random",
    "/dev/urandom",
    "/proc/self",
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/sys/devices/system/cpu",
];

/// The files that are also writable.
pub(crate) const SYSTEM_READ_WRITE: [&str; 1] = ["/dev/null"];

/// Why the helper could not confine itself and run the interpreter.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The arguments are not `POLICY -- PROGRAM [ARGS…]`.
    #[error("usage: {HELPER_SUBCOMMAND} POLICY-JSON -- PROGRAM [ARGS...] ({0})")]
    Usage(String),
    /// The policy does not parse.
    #[error("the policy does not parse: {0}")]
    Policy(#[from] serde_json::Error),
    /// The policy is of another version (a helper from another build).
    #[error("the policy is version {found}, this helper reads version {POLICY_VERSION}")]
    Version {
        /// The version received.
        found: u32,
    },
    /// The platform cannot be sandboxed.
    #[error("{0}")]
    Unsupported(String),
    /// An rlimit could not be set.
    #[error("cannot set {resource}: {source}")]
    Limit {
        /// The resource.
        resource: &'static str,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// The parent-death signal could not be set, or the parent is already gone.
    #[error("cannot tie the code's lifetime to its parent: {0}")]
    Parent(String),
    /// Capabilities could not be dropped.
    #[error("cannot drop capabilities: {0}")]
    Capabilities(String),
    /// A path of the policy could not be opened for a Landlock rule.
    #[error("cannot open {} for a Landlock rule: {message}", path.display())]
    Path {
        /// The path.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// Landlock refused the ruleset.
    #[error("Landlock: {0}")]
    Landlock(String),
    /// The kernel did not enforce the ruleset.
    #[error("the kernel did not enforce the Landlock ruleset (Landlock is unavailable)")]
    LandlockNotEnforced,
    /// The seccomp filter could not be built or installed.
    #[error("seccomp: {0}")]
    Seccomp(String),
    /// The interpreter could not be executed.
    #[error("cannot execute {}: {source}", program.display())]
    Exec {
        /// The program.
        program: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
}

/// The helper's entry point: `args` are those after [`HELPER_SUBCOMMAND`] — the policy JSON,
/// `--`, the program and its arguments. It confines the process and replaces it with the
/// program, so it returns only when that failed: then it prints why on standard error (after
/// `ba-sandbox: setup failed: `) and the caller should exit with the code it returns
/// ([`SETUP_FAILED_STATUS`]).
pub fn exec_main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let err = match parse_args(args) {
        Ok((policy, program, rest)) => confine_and_exec(&policy, &program, &rest),
        Err(err) => err,
    };
    eprintln!("{SETUP_FAILED_PREFIX}{err}");
    ExitCode::from(SETUP_FAILED_STATUS)
}

type HelperArgs = (Policy, OsString, Vec<OsString>);

fn parse_args(args: impl IntoIterator<Item = OsString>) -> Result<HelperArgs, SandboxError> {
    let mut args = args.into_iter();
    let policy = args
        .next()
        .ok_or_else(|| SandboxError::Usage("no policy".into()))?;
    let policy = policy
        .to_str()
        .ok_or_else(|| SandboxError::Usage("the policy is not UTF-8".into()))?;
    let policy: Policy = serde_json::from_str(policy)?;
    if policy.version != POLICY_VERSION {
        return Err(SandboxError::Version {
            found: policy.version,
        });
    }
    if args.next().as_deref() != Some(OsStr::new("--")) {
        return Err(SandboxError::Usage("`--` must follow the policy".into()));
    }
    let program = args
        .next()
        .ok_or_else(|| SandboxError::Usage("no program".into()))?;
    Ok((policy, program, args.collect()))
}

#[cfg(target_os = "linux")]
fn confine_and_exec(policy: &Policy, program: &OsStr, args: &[OsString]) -> SandboxError {
    linux::confine_and_exec(policy, program, args)
}

#[cfg(not(target_os = "linux"))]
fn confine_and_exec(_: &Policy, _: &OsStr, _: &[OsString]) -> SandboxError {
    SandboxError::Unsupported("the sandbox needs Linux (Landlock and seccomp)".into())
}

/// The ELF loader (`PT_INTERP`) of the executable at `path`, if it names one.
#[cfg(target_os = "linux")]
pub(crate) fn elf_interpreter(path: &Path) -> std::io::Result<Option<PathBuf>> {
    elf::interpreter(path)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn elf_interpreter(_: &Path) -> std::io::Result<Option<PathBuf>> {
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy {
            version: POLICY_VERSION,
            scratch: "/tmp/x".into(),
            read: vec!["/usr".into()],
            read_write_files: vec!["/dev/null".into()],
            execute: vec!["/usr/bin/python3".into()],
            limits: PolicyLimits::new(&SandboxLimits::default(), 61),
            parent: 1,
        }
    }

    fn os(items: &[&str]) -> Vec<OsString> {
        items.iter().map(OsString::from).collect()
    }

    #[test]
    fn helper_arguments_round_trip_and_refuse_what_they_cannot_read() {
        let json = serde_json::to_string(&policy()).unwrap();
        let (p, program, rest) = parse_args(os(&[&json, "--", "python3", "-c", "x"])).unwrap();
        assert_eq!(p, policy());
        assert_eq!(program, "python3");
        assert_eq!(rest, os(&["-c", "x"]));

        let err = parse_args(os(&[&json, "python3"])).unwrap_err();
        assert!(err.to_string().contains("`--`"), "{err}");
        let err = parse_args(os(&[])).unwrap_err();
        assert!(err.to_string().contains("no policy"), "{err}");
        let mut old = policy();
        old.version = 0;
        let json = serde_json::to_string(&old).unwrap();
        let err = parse_args(os(&[&json, "--", "python3"])).unwrap_err();
        assert!(matches!(err, SandboxError::Version { found: 0 }), "{err}");
        let err = parse_args(os(&["{\"version\": 1, \"extra\": 2}", "--", "p"])).unwrap_err();
        assert!(matches!(err, SandboxError::Policy(_)), "{err}");
    }

    #[test]
    fn a_readable_folder_may_not_hold_a_protected_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("agent").join(".ba-agent");
        let data = dir.path().join("agent").join("data");
        std::fs::create_dir_all(&data).unwrap();
        let protected = vec![store.clone()];
        check_exposure(std::slice::from_ref(&data), &protected).unwrap();
        check_exposure(&[PathBuf::from("/usr")], &protected).unwrap();
        let err = check_exposure(&[dir.path().join("agent")], &protected).unwrap_err();
        assert!(err.contains("protected folder"), "{err}");
        // The same folder through a symbolic link and a relative `..` is still caught.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path().join("agent"), &link).unwrap();
        let err = check_exposure(&[link.join("data").join("..")], &protected).unwrap_err();
        assert!(err.contains(&store.display().to_string()), "{err}");
        if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            let err = check_exposure(&[PathBuf::from(&home)], &[]).unwrap_err();
            assert!(err.contains("the user's home"), "{err}");
            check_exposure(&[PathBuf::from("/")], &[]).unwrap_err();
        }
    }

    #[test]
    fn status_off_and_unavailable_say_so() {
        assert_eq!(
            SandboxStatus::check(&SandboxConfig::off()),
            SandboxStatus::Off
        );
        let missing = SandboxConfig::default().with_helper(HelperCommand::new("/nonexistent"));
        let text = SandboxStatus::check(&missing).to_string();
        assert!(text.starts_with("unavailable ("), "{text}");
        let unavailable = SandboxStatus::Unavailable {
            reason: "no Landlock".into(),
        };
        assert_eq!(unavailable.to_string(), "unavailable (no Landlock)");
        assert!(!unavailable.is_enforced());
    }
}
