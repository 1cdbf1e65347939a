"""Token counts, windows and conversions."""

from __future__ import annotations

import json
import subprocess
import warnings
from pathlib import Path

import pytest

import ba_agent

TEXTS = [
    "Revenue grew 12% in the north region, while the south fell by 3%.",
    "销售额在第三季度增长了百分之十二。",
    "def f(x):\n    return {'a': [1, 2, 3]}\n",
    "",
]


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
@pytest.mark.parametrize("text", TEXTS)
def test_token_counts_equal_the_command_lines(cli: Path, tmp_path: Path, text: str, encoding: str):
    path = tmp_path / "text.txt"
    path.write_text(text, encoding="utf-8")
    out = subprocess.run(
        [str(cli), "tokens", "--encoding", encoding, str(path)],
        check=True,
        capture_output=True,
        text=True,
    )
    assert ba_agent.count_tokens(text, encoding) == int(out.stdout.strip())


def test_count_tokens_defaults_to_o200k_and_refuses_an_unknown_encoding():
    assert ba_agent.count_tokens("hello world") == ba_agent.count_tokens("hello world", "o200k_base")
    with pytest.raises(ba_agent.BaAgentError, match="gpt2"):
        ba_agent.count_tokens("hello", "gpt2")


CONVERSATION = {
    "system": "You are an analyst.",
    "messages": [
        {"role": "user", "content": "What was the revenue in March?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "query_database",
                    "input": {"sql": "select sum(revenue) from sales where month = 3"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "1234.5"},
            ],
        },
        {"role": "assistant", "content": "March revenue was 1234.5."},
    ],
}


def test_a_conversation_counts_as_the_command_line_counts_it(cli: Path, tmp_path: Path):
    path = tmp_path / "conversation.json"
    path.write_text(json.dumps(CONVERSATION), encoding="utf-8")
    out = subprocess.run(
        [str(cli), "tokens", "--conversation", "--encoding", "o200k_base", str(path)],
        check=True,
        capture_output=True,
        text=True,
    )
    assert ba_agent.count_conversation(CONVERSATION) == int(out.stdout.strip())
    # More words, more tokens: the count reads the messages.
    longer = json.loads(json.dumps(CONVERSATION))
    longer["messages"][0]["content"] += " And in April, by region and by product?"
    assert ba_agent.count_conversation(longer) > ba_agent.count_conversation(CONVERSATION)


def test_convert_round_trip_anthropic_log_chat_keeps_the_content():
    log = ba_agent.convert(CONVERSATION, from_="anthropic", to="log")
    assert [e["role"] for e in log] == ["system", "user", "assistant", "tool", "assistant"]
    chat = ba_agent.convert(log, from_="log", to="chat")
    messages = chat["messages"]
    assert messages[0] == {"role": "system", "content": "You are an analyst."}
    assert messages[1]["content"] == "What was the revenue in March?"
    call = messages[2]["tool_calls"][0]
    assert call["id"] == "toolu_1"
    assert call["function"]["name"] == "query_database"
    assert json.loads(call["function"]["arguments"]) == {
        "sql": "select sum(revenue) from sales where month = 3"
    }
    assert messages[3]["role"] == "tool" and messages[3]["tool_call_id"] == "toolu_1"
    assert "1234.5" in json.dumps(messages[3]["content"])
    assert messages[4]["content"] == "March revenue was 1234.5."
    # And back to Anthropic's shape: the same conversation.
    back = ba_agent.convert(chat, from_="chat", to="anthropic")
    assert back["system"] == CONVERSATION["system"]
    assert back["messages"][1]["content"][1]["input"] == CONVERSATION["messages"][1]["content"][1]["input"]


def test_convert_to_responses_and_a_detected_format():
    responses = ba_agent.convert(CONVERSATION, to="responses")
    assert responses["input"][0] == {"type": "message", "role": "system", "content": "You are an analyst."}
    kinds = [item.get("type", item.get("role")) for item in responses["input"]]
    assert "function_call" in kinds and "function_call_output" in kinds


def test_a_broken_conversation_raises_a_conversation_error_that_says_why():
    with pytest.raises(ba_agent.ConversationError) as caught:
        ba_agent.convert({"messages": [{"role": "wizard", "content": "hi"}]}, from_="anthropic")
    assert "wizard" in str(caught.value)
    with pytest.raises(ValueError, match="unknown conversation format `xml`"):
        ba_agent.convert(CONVERSATION, from_="xml")


def _long_conversation(turns: int) -> list:
    messages = []
    for i in range(turns):
        messages.append({"role": "user", "content": f"Question {i}: " + "tell me about the sales figures " * 20})
        messages.append({"role": "assistant", "content": f"Answer {i}: " + "the figures grew steadily " * 20})
    return messages


def test_a_window_at_a_small_budget_drops_entries_and_says_why():
    conversation = _long_conversation(12)
    window = ba_agent.build_window(conversation, budget=800, strategy="truncate")
    items = window["items"]
    assert len(items) == 24
    dropped = [i for i in items if not i["kept"]]
    kept = [i for i in items if i["kept"]]
    assert dropped and kept
    assert all(i["reason"] for i in dropped)
    assert {i["reason"] for i in dropped} <= {
        "over_budget", "outside_recent_rounds", "older_round", "message_limit", "low_score"
    }
    # The latest question stays; the window fits the budget.
    assert items[-2]["kept"] and items[-2]["role"] == "user"
    assert window["usage"]["used"] <= 800
    assert window["usage"]["budget"] == 800
    shown = json.dumps(window["window"])
    assert "Question 11" in shown and "Question 0:" not in shown


def test_a_window_with_room_keeps_everything():
    window = ba_agent.build_window(_long_conversation(2), budget=100_000)
    assert all(i["kept"] and i["reason"] == "fits" for i in window["items"])


def test_an_unknown_strategy_is_refused_by_name():
    with pytest.raises(ba_agent.BaAgentError, match="shuffle"):
        ba_agent.build_window(_long_conversation(2), budget=1000, strategy="shuffle")


def test_what_a_conversion_leaves_out_is_a_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = ba_agent.convert(
            {"temperature": 0.2, "messages": [{"role": "user", "content": "hi"}]},
            from_="anthropic",
            to="chat",
        )
    assert out["messages"] == [{"role": "user", "content": "hi"}]
    lost = [str(w.message) for w in caught if issubclass(w.category, ba_agent.ConversionLossWarning)]
    assert any("temperature" in m for m in lost), lost


def test_token_counts_match_tiktokens_vectors(fixtures_dir: Path):
    vectors = json.loads((fixtures_dir / "tokens" / "vectors.json").read_text(encoding="utf-8"))
    ordinary = [v for v in vectors["vectors"] if v["allowed_special"] == "none"]
    assert len(ordinary) > 50
    wrong = [
        (v["id"], v["count"], ba_agent.count_tokens(v["text"], v["encoding"]))
        for v in ordinary
        if ba_agent.count_tokens(v["text"], v["encoding"]) != v["count"]
    ]
    assert wrong == []
