//! The real interpreter behind the configured `python3`, found once per tool by asking it:
//! a pyenv shim or a wrapper is followed to the binary it runs, and the sandbox learns which
//! folders hold the installation (prefixes and `sys.path`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use tokio::process::Command;

use super::NAME;
use super::sandbox::elf_interpreter;
use crate::BuiltinError;

/// Run with `-I` like the code itself, so `sys.path` is the one the code gets.
const PROBE: &str = "import json, sys\n\
print(json.dumps({'executable': sys.executable, 'prefixes': [sys.prefix, sys.base_prefix, \
sys.exec_prefix, sys.base_exec_prefix], 'path': sys.path}))";

/// How long the probe may take (a pyenv shim resolving its version is the slow case).
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// An interpreter and what of the file system it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Interpreter {
    /// `sys.executable`: what the helper execs (a venv's own `python` stays itself).
    pub executable: PathBuf,
    /// Files that must be executable: the interpreter's real file and its ELF loader.
    pub execute: Vec<PathBuf>,
    /// Folders (or zip files) to read: the prefixes and `sys.path` entries.
    pub read: Vec<PathBuf>,
}

#[derive(Deserialize)]
struct Probe {
    executable: String,
    prefixes: Vec<String>,
    path: Vec<String>,
}

impl Interpreter {
    /// Asks `python` (looked up on `path_env` when not a path) about itself, with the same
    /// cleared environment the code gets.
    pub(crate) async fn probe(python: &Path, path_env: &str) -> Result<Self, BuiltinError> {
        let env_err = |message: String| BuiltinError::Environment {
            tool: NAME,
            message,
        };
        let child = Command::new(python)
            .args(["-I", "-B", "-c", PROBE])
            .env_clear()
            .env("PATH", path_env)
            .env("HOME", std::env::temp_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|err| {
                if err.kind() == std::io::ErrorKind::NotFound {
                    BuiltinError::PythonMissing {
                        program: python.display().to_string(),
                    }
                } else {
                    env_err(format!("cannot start {}: {err}", python.display()))
                }
            })?;
        let output = tokio::time::timeout(PROBE_TIMEOUT, child.wait_with_output())
            .await
            .map_err(|_| {
                env_err(format!(
                    "{} did not say where it is installed within {} s",
                    python.display(),
                    PROBE_TIMEOUT.as_secs()
                ))
            })?
            .map_err(|e| env_err(format!("waiting for {} failed: {e}", python.display())))?;
        if !output.status.success() {
            return Err(env_err(format!(
                "{} failed when asked where it is installed: {}",
                python.display(),
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        let probe: Probe = serde_json::from_slice(&output.stdout).map_err(|e| {
            env_err(format!(
                "{} answered where it is installed with something unreadable ({e})",
                python.display()
            ))
        })?;
        Self::from_probe(probe).map_err(env_err)
    }

    fn from_probe(probe: Probe) -> Result<Self, String> {
        let executable = PathBuf::from(&probe.executable);
        if !executable.is_absolute() {
            return Err(format!(
                "the interpreter does not know its own path (sys.executable is {:?})",
                probe.executable
            ));
        }
        let real = std::fs::canonicalize(&executable)
            .map_err(|e| format!("{}: {e}", executable.display()))?;
        let loader = elf_interpreter(&real)
            .map_err(|e| format!("reading the ELF headers of {}: {e}", real.display()))?;
        let mut read: Vec<PathBuf> = Vec::new();
        for entry in probe.prefixes.iter().chain(&probe.path) {
            let path = PathBuf::from(entry);
            if path.is_absolute() && !read.contains(&path) {
                read.push(path);
            }
        }
        // The folder of the executable holds `pyvenv.cfg` lookups and, for a venv, the link.
        if let Some(dir) = executable
            .parent()
            .filter(|d| !read.iter().any(|r| d.starts_with(r)))
        {
            read.push(dir.to_owned());
        }
        let mut execute = vec![real];
        execute.extend(loader);
        Ok(Self {
            executable,
            execute,
            read,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_answer_becomes_rules() {
        let exe = std::env::current_exe().unwrap();
        let probe = Probe {
            executable: exe.display().to_string(),
            prefixes: vec!["/opt/py".into(), "/opt/py".into(), "/usr".into()],
            path: vec!["".into(), "/opt/py/lib/python3.11".into()],
        };
        let found = Interpreter::from_probe(probe).unwrap();
        assert_eq!(found.executable, exe);
        assert_eq!(found.execute.len(), 2, "{found:?}");
        assert_eq!(
            found.read[..3],
            [
                PathBuf::from("/opt/py"),
                PathBuf::from("/usr"),
                PathBuf::from("/opt/py/lib/python3.11")
            ]
        );
        let relative = Probe {
            executable: "python3".into(),
            prefixes: vec![],
            path: vec![],
        };
        assert!(Interpreter::from_probe(relative).is_err());
    }
}
