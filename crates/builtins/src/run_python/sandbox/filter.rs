//! The seccomp filters of the sandbox: a deny list answered with `EPERM` (the default is to
//! allow, since the interpreter and its libraries need a wide and changing set of calls), and
//! `clone3` answered with `ENOSYS` so the C library falls back to `clone`, whose flags a filter
//! can read.

use std::collections::BTreeMap;

use libc::c_long;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::SandboxError;

type Rules = BTreeMap<i64, Vec<SeccompRule>>;

/// `setrlimit`: libc names it on x86_64 only; 164 in the generic table of the others.
#[cfg(target_arch = "x86_64")]
const SYS_SETRLIMIT: c_long = libc::SYS_setrlimit;
#[cfg(not(target_arch = "x86_64"))]
const SYS_SETRLIMIT: c_long = 164;
/// `fchmodat2` (Linux 6.6) has the same number on every architecture.
const SYS_FCHMODAT2: c_long = 452;

/// Calls refused whatever their arguments.
const DENIED: &[c_long] = &[
    // Network: every socket (see the module docs of `sandbox` for AF_UNIX).
    libc::SYS_socket,
    // Tracing and reading other processes.
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_pidfd_open,
    libc::SYS_pidfd_getfd,
    libc::SYS_pidfd_send_signal,
    libc::SYS_kcmp,
    libc::SYS_process_madvise,
    libc::SYS_move_pages,
    libc::SYS_migrate_pages,
    // Signals by thread id alone (tgkill names the process and is filtered below).
    libc::SYS_tkill,
    // io_uring runs operations (sockets among them) that the filter never sees.
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    // Namespaces and mounts.
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    // Opening by file handle bypasses path checks.
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    // The kernel's own surface.
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_kexec_load,
    #[cfg(not(target_arch = "riscv64"))]
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_fanotify_init,
    libc::SYS_syslog,
    libc::SYS_vhangup,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    // Limits are set by the helper and stay.
    SYS_SETRLIMIT,
    // Path truncation is not covered by Landlock before ABI 3 (ftruncate needs a writable fd).
    libc::SYS_truncate,
    // Metadata changes by path, which Landlock does not cover at all: modes, owners, extended
    // attributes (times are filtered below). The fd-based calls stay: their fd had to be
    // opened under the Landlock rules.
    libc::SYS_fchmodat,
    SYS_FCHMODAT2,
    libc::SYS_fchownat,
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_chmod,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_chown,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_lchown,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utime,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utimes,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_futimesat,
    // Scheduling of this or other processes.
    libc::SYS_setpriority,
    libc::SYS_sched_setscheduler,
    libc::SYS_sched_setparam,
    libc::SYS_sched_setattr,
    libc::SYS_ioprio_set,
    // New processes (clone is filtered below, clone3 answers ENOSYS).
    #[cfg(target_arch = "x86_64")]
    libc::SYS_fork,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_vfork,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

/// The architecture the filters are built for.
fn target_arch() -> Result<TargetArch, SandboxError> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(|_| {
        SandboxError::Unsupported(format!(
            "no seccomp filter for {} (x86_64, aarch64 and riscv64 only)",
            std::env::consts::ARCH
        ))
    })
}

fn condition(
    arg: u8,
    len: SeccompCmpArgLen,
    op: SeccompCmpOp,
    value: u64,
) -> Result<SeccompCondition, SandboxError> {
    SeccompCondition::new(arg, len, op, value).map_err(|e| SandboxError::Seccomp(e.to_string()))
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, SandboxError> {
    SeccompRule::new(conditions).map_err(|e| SandboxError::Seccomp(e.to_string()))
}

/// The `EPERM` rules for a process whose id is `pid`.
fn deny_rules(pid: i32) -> Result<Rules, SandboxError> {
    use SeccompCmpArgLen::{Dword, Qword};
    use SeccompCmpOp::{Eq, MaskedEq, Ne};
    let own = u64::from(pid.unsigned_abs());
    let mut rules: Rules = DENIED.iter().map(|&nr| (nr, Vec::new())).collect();
    // A clone that is not a thread is a new process.
    let thread = u64::try_from(libc::CLONE_THREAD).unwrap_or_default();
    rules.insert(
        libc::SYS_clone,
        vec![rule(vec![condition(0, Qword, MaskedEq(thread), 0)?])?],
    );
    // Setting a limit (reading one passes a null new limit).
    rules.insert(
        libc::SYS_prlimit64,
        vec![rule(vec![condition(2, Qword, Ne, 0)?])?],
    );
    // Signals only to itself: kill(own pid or 0 = its own group, which it alone is in).
    rules.insert(
        libc::SYS_kill,
        vec![rule(vec![
            condition(0, Dword, Ne, own)?,
            condition(0, Dword, Ne, 0)?,
        ])?],
    );
    for nr in [
        libc::SYS_tgkill,
        libc::SYS_rt_sigqueueinfo,
        libc::SYS_rt_tgsigqueueinfo,
    ] {
        rules.insert(nr, vec![rule(vec![condition(0, Dword, Ne, own)?])?]);
    }
    // The parent-death signal stays, so the code dies with the agent.
    rules.insert(
        libc::SYS_prctl,
        vec![rule(vec![condition(
            0,
            Dword,
            Eq,
            u64::from(libc::PR_SET_PDEATHSIG.unsigned_abs()),
        )?])?],
    );
    // Times by path (a null path is futimens on an fd, which is allowed).
    rules.insert(
        libc::SYS_utimensat,
        vec![rule(vec![condition(1, Qword, Ne, 0)?])?],
    );
    // Pushing input into a terminal, or its console ioctls.
    let ioctl = |cmd: u64| -> Result<SeccompRule, SandboxError> {
        rule(vec![condition(1, Dword, Eq, cmd)?])
    };
    rules.insert(
        libc::SYS_ioctl,
        vec![ioctl(libc::TIOCSTI)?, ioctl(libc::TIOCLINUX)?],
    );
    Ok(rules)
}

fn compile(rules: Rules, action: SeccompAction) -> Result<BpfProgram, SandboxError> {
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, action, target_arch()?)
        .map_err(|e| SandboxError::Seccomp(e.to_string()))?;
    BpfProgram::try_from(filter).map_err(|e| SandboxError::Seccomp(e.to_string()))
}

/// The filters of a process whose id is `pid`, in the order they are installed.
fn programs(pid: i32) -> Result<Vec<BpfProgram>, SandboxError> {
    let eperm = SeccompAction::Errno(libc::EPERM.unsigned_abs());
    let enosys = SeccompAction::Errno(libc::ENOSYS.unsigned_abs());
    let mut programs = vec![
        compile(deny_rules(pid)?, eperm)?,
        compile([(libc::SYS_clone3, Vec::new())].into(), enosys)?,
    ];
    #[cfg(target_arch = "x86_64")]
    programs.push(x32::refuse());
    Ok(programs)
}

/// Installs the filters on the calling (single-threaded) process; they pass to the program it
/// execs.
pub(super) fn install(pid: i32) -> Result<(), SandboxError> {
    for program in programs(pid)? {
        seccompiler::apply_filter(&program).map_err(|e| SandboxError::Seccomp(e.to_string()))?;
    }
    Ok(())
}

/// The x32 ABI shares x86_64's audit architecture and marks its calls with bit 30 of the
/// number, so the deny list above would not match them; this filter refuses every x32 call
/// (`ENOSYS`, as on kernels built without x32). Calls of the i386 ABI are killed by the
/// architecture check that leads every filter seccompiler builds.
#[cfg(target_arch = "x86_64")]
mod x32 {
    use seccompiler::{BpfProgram, sock_filter};

    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const JGE_K: u16 = 0x35;
    const RET_K: u16 = 0x06;
    /// `offsetof(struct seccomp_data, nr)` and `arch`.
    const NR: u32 = 0;
    const ARCH: u32 = 4;
    const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;

    fn op(code: u16, jt: u8, jf: u8, k: u32) -> sock_filter {
        sock_filter { code, jt, jf, k }
    }

    pub(super) fn refuse() -> BpfProgram {
        let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS.unsigned_abs();
        vec![
            op(LD_W_ABS, 0, 0, ARCH),
            // Another architecture: not this filter's business (the others kill it).
            op(JEQ_K, 0, 3, AUDIT_ARCH_X86_64),
            op(LD_W_ABS, 0, 0, NR),
            op(JGE_K, 0, 1, X32_SYSCALL_BIT),
            op(RET_K, 0, 0, enosys),
            op(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_compile_for_this_machine() {
        let programs = programs(4242).unwrap();
        assert!(programs.len() >= 2);
        assert!(programs.iter().all(|p| !p.is_empty()));
        let rules = deny_rules(4242).unwrap();
        for nr in [libc::SYS_socket, libc::SYS_ptrace, libc::SYS_clone] {
            assert!(rules.contains_key(&nr), "{nr} is not filtered");
        }
        assert!(!rules.contains_key(&libc::SYS_socketpair));
    }
}
