//! `ba-scripted-model`: prints a base URL that answers on the OpenAI wire, and stops when its
//! standard input closes.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Posts `body` to `url` (`http://127.0.0.1:PORT/v1/chat/completions`) and returns the answer's
/// body as JSON.
fn post(url: &str, body: &serde_json::Value) -> serde_json::Value {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut stream = TcpStream::connect(host).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let body = body.to_string();
    write!(
        stream,
        "POST /{path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, rest) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    serde_json::from_str(rest.trim()).unwrap()
}

#[test]
fn the_program_answers_on_the_url_it_prints_and_stops_when_stdin_closes() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ba-scripted-model"))
        .args(["--script", "analyst"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let url = url.trim();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/v1"),
        "{url}"
    );

    let echo = post(
        &format!("{url}/chat/completions"),
        &serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hello"}]}),
    );
    assert_eq!(
        echo["choices"][0]["message"]["content"], "You said: hello",
        "{echo}"
    );
    let call = post(
        &format!("{url}/chat/completions"),
        &serde_json::json!({
            "model": "m",
            "messages": [{"role": "user", "content": "call scale {\"factor\": 3}"}],
            "tools": [{"type": "function", "function": {"name": "scale", "parameters": {}}}],
        }),
    );
    let called = &call["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!(called["name"], "scale", "{call}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(called["arguments"].as_str().unwrap()).unwrap(),
        serde_json::json!({"factor": 3})
    );

    drop(child.stdin.take());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait().unwrap()));
    let status = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the program still runs 30 s after its standard input closed");
    assert!(status.success(), "{status}");
}

#[test]
fn a_wrong_flag_is_refused_with_the_usage() {
    let out = Command::new(env!("CARGO_BIN_EXE_ba-scripted-model"))
        .args(["--script", "poet"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage: ba-scripted-model"));
}
