//! The helper's side on Linux: rlimits, the parent-death signal, capabilities, Landlock and
//! seccomp applied to the running process, then `exec` of the interpreter.

use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};
use rustix::process::{Resource, Rlimit, Signal};

use super::{Policy, PolicyLimits, SandboxError, filter};

/// The Landlock ABI whose rights the policy asks for; older kernels get what they support.
const TARGET_ABI: ABI = ABI::V6;

/// The highest Landlock ABI (1 to 6) the kernel supports, found by asking for each ABI's
/// newest right as a hard requirement: a ruleset is created and dropped, nothing is
/// restricted.
pub(super) fn landlock_abi() -> Result<u32, String> {
    let hard = || Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
    let supports = |access: BitFlags<AccessFs>| {
        hard()
            .handle_access(access)
            .and_then(Ruleset::create)
            .is_ok()
    };
    if !supports(AccessFs::from_all(ABI::V1)) {
        return Err(
            "the kernel has no Landlock (Linux 5.13 or later with Landlock enabled \
                    in the boot's lsm= list is needed)"
                .into(),
        );
    }
    let scoped = hard()
        .scope(Scope::from_all(ABI::V6))
        .and_then(Ruleset::create)
        .is_ok();
    let networked = hard()
        .handle_access(AccessNet::from_all(ABI::V4))
        .and_then(Ruleset::create)
        .is_ok();
    let abi = if scoped {
        6
    } else if supports(BitFlags::from(AccessFs::IoctlDev)) {
        5
    } else if networked {
        4
    } else if supports(BitFlags::from(AccessFs::Truncate)) {
        3
    } else if supports(BitFlags::from(AccessFs::Refer)) {
        2
    } else {
        1
    };
    Ok(abi)
}

/// Confines the process by `policy` and execs `program`; returns only on failure.
pub(super) fn confine_and_exec(
    policy: &Policy,
    program: &OsStr,
    args: &[OsString],
) -> SandboxError {
    if let Err(err) = confine(policy) {
        return err;
    }
    // The environment, working folder and standard streams are the ones the tool gave the
    // helper; exec keeps them.
    let source = Command::new(program).args(args).exec();
    SandboxError::Exec {
        program: program.into(),
        source,
    }
}

fn confine(policy: &Policy) -> Result<(), SandboxError> {
    set_limits(&policy.limits)?;
    tie_to_parent(policy.parent)?;
    drop_capabilities()?;
    restrict_filesystem(policy)?;
    filter::install(rustix::process::getpid().as_raw_nonzero().get())
}

fn set_limits(limits: &PolicyLimits) -> Result<(), SandboxError> {
    set_limit(
        Resource::As,
        "RLIMIT_AS",
        limits.memory_bytes,
        limits.memory_bytes,
    )?;
    set_limit(
        Resource::Fsize,
        "RLIMIT_FSIZE",
        limits.file_size_bytes,
        limits.file_size_bytes,
    )?;
    set_limit(
        Resource::Nofile,
        "RLIMIT_NOFILE",
        limits.open_files,
        limits.open_files,
    )?;
    set_limit(Resource::Core, "RLIMIT_CORE", 0, 0)?;
    // SIGXCPU at the soft limit, SIGKILL at the hard one should the code ignore the first.
    set_limit(
        Resource::Cpu,
        "RLIMIT_CPU",
        limits.cpu_seconds,
        limits.cpu_seconds.saturating_add(1),
    )?;
    let tasks = user_tasks(rustix::process::getuid().as_raw()).saturating_add(limits.extra_tasks);
    set_limit(Resource::Nproc, "RLIMIT_NPROC", tasks, tasks)
}

/// Sets `resource` to `soft`/`hard`, never above the current hard limit (only a privileged
/// process may raise it, and the sandbox never wants more than it was given).
fn set_limit(
    resource: Resource,
    name: &'static str,
    soft: u64,
    hard: u64,
) -> Result<(), SandboxError> {
    let current = rustix::process::getrlimit(resource);
    let cap = |v: u64| current.maximum.map_or(v, |max| v.min(max));
    let new = Rlimit {
        current: Some(cap(soft)),
        maximum: Some(cap(hard)),
    };
    rustix::process::setrlimit(resource, new).map_err(|e| SandboxError::Limit {
        resource: name,
        source: e.into(),
    })
}

/// The tasks (threads) the user `uid` runs, as `/proc` shows them: what `RLIMIT_NPROC` counts.
fn user_tasks(uid: u32) -> u64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut tasks = 0u64;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        {
            continue;
        }
        // A process may end while it is read; it then counts for nothing.
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let field = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
        };
        if field("Uid:") == Some(u64::from(uid)) {
            tasks = tasks.saturating_add(field("Threads:").unwrap_or(1));
        }
    }
    tasks
}

/// SIGKILL when the thread that started the helper goes; if the parent is already gone (it
/// went before the signal was set), stop here.
fn tie_to_parent(parent: i32) -> Result<(), SandboxError> {
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
        .map_err(|e| SandboxError::Parent(e.to_string()))?;
    let now = rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get());
    if now != parent {
        return Err(SandboxError::Parent(format!(
            "the parent {parent} is gone (the parent is now {now})"
        )));
    }
    Ok(())
}

/// Empties every capability set, so that root's code runs as an unprivileged uid 0: the
/// bounding set (which `exec` would otherwise hand back to uid 0 in full), ambient,
/// inheritable, permitted and effective.
fn drop_capabilities() -> Result<(), SandboxError> {
    use rustix::io::Errno;
    use rustix::thread::{
        CapabilitySet, CapabilitySets, capabilities, capability_is_in_bounding_set,
        clear_ambient_capability_set, remove_capability_from_bounding_set, set_capabilities,
    };
    let fail = |what: &str, e: Errno| SandboxError::Capabilities(format!("{what}: {e}"));
    let current = capabilities(None).map_err(|e| fail("reading them", e))?;
    match clear_ambient_capability_set() {
        // Kernels before 4.3 have no ambient set.
        Ok(()) | Err(Errno::INVAL) => {}
        Err(e) => return Err(fail("clearing the ambient set", e)),
    }
    let mut kept = Vec::new();
    for cap in CapabilitySet::all().iter() {
        match capability_is_in_bounding_set(cap) {
            Ok(true) => {
                if current.effective.contains(CapabilitySet::SETPCAP) {
                    remove_capability_from_bounding_set(cap)
                        .map_err(|e| fail("emptying the bounding set", e))?;
                } else {
                    kept.push(cap);
                }
            }
            // Not in the set, or a capability newer than the kernel.
            Ok(false) | Err(Errno::INVAL) => {}
            Err(e) => return Err(fail("reading the bounding set", e)),
        }
    }
    let none = CapabilitySet::empty();
    set_capabilities(
        None,
        CapabilitySets {
            effective: none,
            permitted: none,
            inheritable: none,
        },
    )
    .map_err(|e| fail("clearing the sets", e))?;
    // A non-root user without file capabilities gains nothing from the bounding set at exec;
    // uid 0 would get all of it back.
    let root = rustix::process::getuid().is_root() || rustix::process::geteuid().is_root();
    if root && !kept.is_empty() {
        return Err(SandboxError::Capabilities(format!(
            "running as root without CAP_SETPCAP, the bounding set cannot be emptied \
             ({} capabilities would come back at exec)",
            kept.len()
        )));
    }
    Ok(())
}

fn restrict_filesystem(policy: &Policy) -> Result<(), SandboxError> {
    let landlock = |e: landlock::RulesetError| SandboxError::Landlock(e.to_string());
    let abi = TARGET_ABI;
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    let scratch =
        AccessFs::from_all(abi) & !(AccessFs::Execute | AccessFs::MakeChar | AccessFs::MakeBlock);
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(landlock)?
        .handle_access(AccessNet::from_all(abi))
        .map_err(landlock)?
        .scope(Scope::from_all(abi))
        .map_err(landlock)?
        .create()
        .map_err(landlock)?;
    ruleset = add_rule(ruleset, &policy.scratch, scratch, true)?;
    for path in &policy.read {
        ruleset = add_rule(ruleset, path, read, false)?;
    }
    for path in &policy.read_write_files {
        ruleset = add_rule(
            ruleset,
            path,
            AccessFs::ReadFile | AccessFs::WriteFile,
            false,
        )?;
    }
    for path in &policy.execute {
        ruleset = add_rule(ruleset, path, AccessFs::ReadFile | AccessFs::Execute, true)?;
    }
    let status = ruleset.restrict_self().map_err(landlock)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(SandboxError::LandlockNotEnforced);
    }
    Ok(())
}

/// Allows `access` beneath `path` (only the rights that apply to a file when it is one). A
/// path that cannot be opened is an error when `required`, else it is skipped: nothing of it
/// can be reached then anyway.
fn add_rule(
    ruleset: RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
    required: bool,
) -> Result<RulesetCreated, SandboxError> {
    let fd = match PathFd::new(path) {
        Ok(fd) => fd,
        Err(_) if !required => return Ok(ruleset),
        Err(e) => {
            return Err(SandboxError::Path {
                path: path.to_owned(),
                message: e.to_string(),
            });
        }
    };
    let access = if path.is_dir() {
        access
    } else {
        access & AccessFs::from_file(TARGET_ABI)
    };
    ruleset
        .add_rule(PathBeneath::new(fd, access))
        .map_err(|e| SandboxError::Landlock(e.to_string()))
}
