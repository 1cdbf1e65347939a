"""The conversation store: import a real Claude Code session, list, read, fork, export."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

import ba_agent
from conftest import missing


def test_a_real_session_imports_lists_reads_forks_and_exports(tmp_path: Path, fixtures_dir: Path):
    session = fixtures_dir / "transcripts" / "spotter" / "tool_heavy.jsonl"
    if not session.is_file():
        pytest.fail(f"{session} is missing from the shared fixtures")
    store = ba_agent.Store.open(tmp_path / "store")
    assert store.list() == []

    imported = store.import_(session, format="claude-code")
    listed = store.list()
    assert [m["id"] for m in listed] == [imported]

    entries = store.read(imported)
    assert len(entries) == listed[0]["last_seq"] > 10
    calls = [c for e in entries for c in (e.get("tool_calls") or [])]
    results = [e for e in entries if e["role"] == "tool"]
    assert calls and {r["tool_call_id"] for r in results} <= {c["id"] for c in calls}

    fork = store.fork(imported, at=5)
    assert fork != imported
    assert len(store.read(fork)) == 5
    assert store.read(fork) == entries[:5]
    assert store.meta(fork)["fork"]["parent"] == imported
    assert {m["id"] for m in store.list()} == {imported, fork}

    whole = store.fork(imported)
    assert len(store.read(whole)) == len(entries)

    # The session's Anthropic-only fields are named as losses, not dropped silently.
    with pytest.warns(ba_agent.ConversionLossWarning, match="has no OpenAI"):
        body = store.export(imported, to="chat")
    exported_calls = [c for m in body["messages"] for c in (m.get("tool_calls") or [])]
    assert {c["id"] for c in exported_calls} == {c["id"] for c in calls}
    log = store.export(fork, to="log")
    assert [e["id"] for e in log] == [e["id"] for e in entries[:5]]


def test_a_conversation_in_any_format_imports(tmp_path: Path):
    store = ba_agent.Store.open(tmp_path / "store")
    conv = store.import_(
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
        format="anthropic",
        title="greeting",
    )
    assert store.meta(conv)["title"] == "greeting"
    assert [e["role"] for e in store.read(conv)] == ["user", "assistant"]
    assert store.export(conv, to="anthropic")["messages"][1]["content"] == "hello"


def test_an_unknown_conversation_raises_a_store_error(tmp_path: Path):
    store = ba_agent.Store.open(tmp_path / "store")
    with pytest.raises(ba_agent.StoreError):
        store.read("c-does-not-exist")
    with pytest.raises(ba_agent.BaAgentError):
        store.read("../../etc/passwd")


def test_a_postgresql_store_lists_and_reads_what_was_imported():
    url = os.environ.get("BA_AGENT_TEST_DATABASE_URL")
    if not url:
        missing("BA_AGENT_TEST_DATABASE_URL is not set (no PostgreSQL server to test against)")
    schema = f"py_{uuid.uuid4().hex[:12]}"
    store = ba_agent.Store.open(url, schema=schema)
    conv = store.import_([{"role": "user", "content": "hi from python"}], format="anthropic")
    assert conv in {m["id"] for m in store.list()}
    assert store.export(conv, to="chat")["messages"] == [{"role": "user", "content": "hi from python"}]
    fork = store.fork(conv)
    assert store.read(fork) == store.read(conv)
