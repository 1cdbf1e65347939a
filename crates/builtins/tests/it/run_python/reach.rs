//! What the code may reach: no shell, no writes outside the scratch folder, no reads of the
//! home or the conversation store, no socket.

use super::*;

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
