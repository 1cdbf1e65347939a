"""Shared fixtures of the pytest suite: the repository's programs (the command line and the
scripted model, built by cargo), the shared third-party fixtures, and a helper that skips, or
under CI=true fails, when one of them is missing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[3]
"""The workspace root (crates/python/tests → crates/python → crates → root)."""


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1")


def missing(what: str) -> None:
    """Skips the test, or under CI fails it: there a missing fixture or program is a failure."""
    if in_ci():
        pytest.fail(f"{what} (CI is set: a missing fixture, tool or service is a failure)")
    pytest.skip(what)


def program(env: str, name: str) -> Path:
    """A program of the workspace: ``$env`` when set, else ``target/debug/name``."""
    path = Path(os.environ.get(env) or ROOT / "target" / "debug" / name)
    if not path.is_file():
        missing(f"{path} not found (build it with cargo, or set {env})")
    return path


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    path = Path(os.environ.get("BA_AGENT_SHARED_FIXTURES") or ROOT.parent / "shared" / "fixtures")
    if not path.is_dir():
        missing(f"shared fixtures folder {path} not found")
    return path


@pytest.fixture(scope="session")
def cli() -> Path:
    return program("BA_AGENT_BIN", "ba-agent")


@pytest.fixture(scope="session")
def model_url() -> Iterator[str]:
    """The base URL of a scripted model (`ba-scripted-model --script analyst`), serving until
    the session ends."""
    binary = program("BA_SCRIPTED_MODEL", "ba-scripted-model")
    proc = subprocess.Popen(
        [str(binary), "--script", "analyst"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), f"the scripted model printed {url!r}"
    yield url
    proc.stdin.close()
    proc.wait(timeout=30)


@pytest.fixture
def agent_config(tmp_path: Path, model_url: str) -> dict:
    """A configuration for an agent on the scripted model, its store in a fresh folder."""
    return {
        "provider": "openai",
        "compat": True,
        "base_url": model_url,
        "model": "scripted",
        "home": str(tmp_path / "home"),
        # The package's runs have no sandbox helper beside them; the scripted code is ours.
        "run_python": {"sandbox": "off"},
        "sub_agents": False,
    }
