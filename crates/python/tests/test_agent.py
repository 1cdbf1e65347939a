"""The agent against the scripted model: runs, events, Python tools and approvals."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import List, Literal, Optional

import pytest

import ba_agent


def test_a_run_answers_and_its_events_stream(agent_config: dict):
    agent = ba_agent.Agent(agent_config)
    events = list(agent.stream("hello there"))
    kinds = [e["event"] for e in events]
    assert kinds[0] == "run_started"
    assert kinds[-1] == "finished"
    finished = events[-1]
    assert finished["status"] == "answered"
    assert finished["final_answer"] == "You said: hello there"
    # The conversation is in the agent's store.
    conv = finished["conversation_id"]
    assert conv in {m["id"] for m in agent.store.list()}


def test_a_python_tool_is_called_with_typed_arguments(agent_config: dict):
    seen = []

    def scale(values: List[float], factor: int, label: Optional[str] = None) -> dict:
        """Multiplies each value by a factor."""
        seen.append((values, factor, label))
        return {"scaled": [v * factor for v in values], "label": label}

    agent = ba_agent.Agent(agent_config, tools=[scale])
    assert "scale" in agent.tools
    result = agent.run('call scale {"values": [1, 2.5], "factor": 3.0}')
    assert seen == [([1.0, 2.5], 3, None)]
    assert isinstance(seen[0][1], int) and all(isinstance(v, float) for v in seen[0][0])
    assert result["status"] == "answered"
    assert "7.5" in result["final_answer"] and "scale" in result["final_answer"]


def test_a_tool_schema_comes_from_type_hints():

    def top(metric: Literal["revenue", "units"], n: int = 5, regions: Optional[List[str]] = None) -> list:
        """The top products by a metric.

        Longer text that is not part of the description."""
        return []

    spec = ba_agent.tool_schema(top)
    assert spec["name"] == "top"
    assert spec["description"] == "The top products by a metric."
    schema = spec["input_schema"]
    assert schema["required"] == ["metric"]
    assert schema["properties"]["metric"] == {"enum": ["revenue", "units"]}
    assert schema["properties"]["n"] == {"type": "integer", "default": 5}
    assert schema["properties"]["regions"] == {"type": "array", "items": {"type": "string"}}


def test_a_failing_python_tool_is_reported_to_the_model(agent_config: dict):
    def explode(reason: str) -> str:
        """Fails on purpose."""
        raise RuntimeError(f"boom: {reason}")

    agent = ba_agent.Agent(agent_config, tools=[explode])
    result = agent.run('call explode {"reason": "testing"}')
    assert "failed" in result["final_answer"]
    assert "boom: testing" in result["final_answer"]


def test_an_approval_callback_that_refuses_stops_the_call(agent_config: dict):
    called = []
    asked = []

    def delete_rows(table: str) -> str:
        """Deletes every row of a table."""
        called.append(table)
        return "deleted"

    def approve(call: dict) -> object:
        asked.append(call)
        return "no deletions today"

    agent = ba_agent.Agent(agent_config, tools=[delete_rows], approve=approve)
    events = list(agent.stream('call delete_rows {"table": "sales"}'))
    assert called == []
    assert [(c["tool"], c["arguments"]) for c in asked] == [("delete_rows", {"table": "sales"})]
    kinds = [e["event"] for e in events]
    assert "approval_requested" in kinds and "approval_decided" in kinds
    finished = events[-1]
    assert finished["status"] == "answered"
    assert "failed" in finished["final_answer"]
    assert "no deletions today" in finished["final_answer"]


def test_an_approval_callback_that_approves_runs_the_call(agent_config: dict):
    called = []

    def delete_rows(table: str) -> str:
        """Deletes every row of a table."""
        called.append(table)
        return f"deleted {table}"

    agent = ba_agent.Agent(agent_config, tools=[delete_rows], approve=lambda call: True)
    result = agent.run('call delete_rows {"table": "sales"}')
    assert called == ["sales"]
    assert "deleted sales" in result["final_answer"]


def test_an_upload_is_read_and_summed(agent_config: dict, tmp_path: Path):
    csv = tmp_path / "sales.csv"
    csv.write_text("region,revenue\nnorth,100\nsouth,40\nnorth,25.5\n", encoding="utf-8")
    agent = ba_agent.Agent(agent_config)
    result = agent.run("Total revenue by region?", uploads=[csv])
    assert result["status"] == "answered", result
    assert "- north: 125.5" in result["final_answer"]
    assert "- south: 40" in result["final_answer"]


def test_arun_and_astream_work_under_asyncio(agent_config: dict):
    agent = ba_agent.Agent(agent_config)

    async def main():
        finished = await agent.arun("async hello")
        kinds = [e["event"] async for e in agent.astream("streamed hello")]
        return finished, kinds

    finished, kinds = asyncio.run(main())
    assert finished["final_answer"] == "You said: async hello"
    assert kinds[0] == "run_started" and kinds[-1] == "finished"


def test_a_bad_configuration_names_the_key(tmp_path: Path):
    with pytest.raises(ba_agent.ConfigError, match="colour"):
        ba_agent.Agent({"provider": "openai", "colour": "blue", "home": str(tmp_path)})
    with pytest.raises(ba_agent.ConfigError, match="unknown provider `nope`"):
        ba_agent.Agent({"provider": "nope", "home": str(tmp_path)})


def test_a_configuration_file_is_read(agent_config: dict, tmp_path: Path):
    path = tmp_path / "config.yaml"
    lines = [f"{k}: {v!r}" if isinstance(v, str) else f"{k}: {str(v).lower()}" for k, v in agent_config.items() if k != "run_python"]
    path.write_text("\n".join(lines) + "\nrun_python: false\n", encoding="utf-8")
    agent = ba_agent.Agent(path)
    assert "run_python" not in agent.tools and "file_reader" in agent.tools
    assert agent.run("from a file")["final_answer"] == "You said: from a file"


def test_a_conversation_goes_on_the_next_day_with_a_new_agent(agent_config: dict):
    first = ba_agent.Agent(agent_config)
    conversation = first.run("hello there")["conversation_id"]
    del first
    # The next day: another agent (another process would do the same) over the same store.
    again = ba_agent.Agent(agent_config)
    assert [m["id"] for m in again.store.list()] == [conversation]
    result = again.run("and again", conversation=conversation)
    assert result["conversation_id"] == conversation
    assert result["final_answer"] == "You said: and again"
    entries = again.store.read(conversation)
    assert [e["role"] for e in entries] == ["user", "assistant", "user", "assistant"]
    assert "hello there" in json.dumps(entries[0]) and "and again" in json.dumps(entries[2])


WORKFLOW = """---
name: month-check
description: Count one month's rows and say whether the month is complete.
inputs:
  - {name: month, type: string, default: 2024-09, description: The month, YYYY-MM.}
nodes:
  - id: check
    title: Check the month
    brief: Count the month's rows and say whether every day has some.
    outputs:
      - {name: rows, kind: value, description: How many rows the month has.}
      - {name: verdict, kind: decision, options: [complete, missing], description: Whether every day has rows.}
---
"""


def test_a_workflow_runs_its_node_and_its_events_stream(agent_config: dict, tmp_path: Path):
    folder = tmp_path / "flows" / "month-check"
    folder.mkdir(parents=True)
    (folder / "WORKFLOW.md").write_text(WORKFLOW, encoding="utf-8")
    agent = ba_agent.Agent({**agent_config, "workflows": [str(tmp_path / "flows")]})

    events = list(agent.stream_workflow("month-check", {"month": "2024-10"}))
    kinds = [e["event"] for e in events]
    assert kinds[0] == "run_started" and kinds[-1] == "finished", kinds
    started = next(e for e in events if e["event"] == "workflow_started")
    assert started["inputs"] == {"month": "2024-10"}
    assert [n["id"] for n in started["nodes"]] == ["check"]
    completed = next(e for e in events if e["event"] == "node_completed")
    assert completed["node"] == "check"
    assert completed["outputs"] == {"rows": 1, "verdict": "complete"}
    assert "workflow_completed" in kinds
    assert events[-1]["status"] == "answered", events[-1]

    # To its end at once, in a conversation of the caller's.
    conversation = agent.new_conversation("October")
    finished = agent.run_workflow("month-check", {}, conversation=conversation)
    assert finished["conversation_id"] == conversation
    assert finished["status"] == "answered", finished


def test_an_unknown_workflow_ends_the_run_failed_with_its_name(agent_config: dict):
    agent = ba_agent.Agent(agent_config)
    finished = agent.run_workflow("no-such-flow", {})
    assert finished["status"] == "failed"
    assert finished["error"] == 'no workflow named "no-such-flow" (known: none)'


def test_the_environment_wins_over_the_configuration_as_on_the_command_line(
    agent_config: dict, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    monkeypatch.setenv("BA_AGENT_HOME", str(tmp_path / "from-env"))
    agent = ba_agent.Agent(agent_config)
    agent.run("where am I kept")
    assert (tmp_path / "from-env").is_dir()
    monkeypatch.setenv("BA_AGENT_COMPAT", "maybe")
    with pytest.raises(ba_agent.ConfigError, match="BA_AGENT_COMPAT: expected 1, true, 0 or false, found `maybe`"):
        ba_agent.Agent(agent_config)
