//! What the code may use up: processes, memory, file size and time are bounded, other
//! processes are out of its reach, and its process group dies with it.

use super::*;

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
         child = subprocess.Popen(['sleep', '120'])\n\
         open({pids:?}, 'w').write('%d %d %d' % (os.getpid(), os.getpgid(0), child.pid))\n\
         time.sleep(120)\n",
        pids = pids.display().to_string()
    );
    // Five seconds to start Python, a child and write a file: fifty times what it takes.
    let err = tool
        .call_json(json!({"code": code, "timeout": 5}))
        .await
        .unwrap_err();
    assert!(
        matches!(err, BuiltinError::Timeout { seconds: 5, .. }),
        "{err}"
    );
    // Unconfined: it could write outside its scratch folder.
    let text = std::fs::read_to_string(&pids).unwrap();
    let ids: Vec<i32> = text.split(' ').map(|s| s.parse().unwrap()).collect();
    assert_eq!(ids[0], ids[1], "python leads its own process group");
    // The grandchild is reparented to init when python dies; init reaps it after the kill.
    let deadline = Instant::now() + Duration::from_secs(30);
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
