"""BA-Agent from Python: token counts, context windows, conversions between wire formats,
the conversation store, the agent (with Python functions as tools and Python approval
callbacks) and the HTTP server.

The work is done in Rust (the ``ba_agent._native`` extension module), which lets go of the
interpreter's lock while it works: other threads go on, and the ``a``-prefixed coroutines
(:meth:`Agent.arun`, :meth:`Agent.astream`) run it in a worker thread for ``asyncio``.

Conversations are given as a request body (``{"system": ..., "messages": [...]}``,
``{"messages": [...]}``, ``{"instructions": ..., "input": [...]}``), a bare list of messages or
items, the log (a list of entries), or the JSON or JSONL text of any of them. Formats are named
``anthropic``, ``chat`` (OpenAI Chat Completions), ``responses`` (OpenAI Responses) and
``log``; ``auto`` decides from the content.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import threading
import types
import typing
import warnings
from typing import Any, AsyncIterator, Callable, Dict, Iterable, Iterator, List, Optional, Union

from . import _native
from ._native import BaAgentError, ConfigError, ConversationError, RunError, StoreError

__all__ = [
    "Agent",
    "BaAgentError",
    "ConfigError",
    "ConversationError",
    "ConversionLossWarning",
    "RunError",
    "Server",
    "Store",
    "StoreError",
    "build_window",
    "convert",
    "count_conversation",
    "count_tokens",
    "serve",
    "tool_schema",
]

Conversation = Union[str, bytes, Dict[str, Any], List[Dict[str, Any]]]
"""A conversation in any supported format, or its JSON (or JSONL) text."""


class ConversionLossWarning(UserWarning):
    """Something of a conversation that the target format (or the reading) could not keep."""


def _text(conversation: Conversation) -> str:
    if isinstance(conversation, bytes):
        return conversation.decode("utf-8")
    if isinstance(conversation, str):
        return conversation
    return json.dumps(conversation)


def _warn_losses(losses: Iterable[Dict[str, str]]) -> None:
    for loss in losses:
        warnings.warn(f"{loss['path']}: {loss['what']}", ConversionLossWarning, stacklevel=3)


def count_tokens(text: str, encoding: str = "o200k_base") -> int:
    """The tokens of ``text`` in ``encoding`` (``o200k_base`` or ``cl100k_base``)."""
    return _native.count_tokens(text, encoding)


def count_conversation(
    conversation: Conversation, format: str = "auto", encoding: str = "o200k_base"
) -> int:
    """The tokens a conversation takes in a request, each message's overhead included."""
    return _native.count_conversation(_text(conversation), format, encoding)


def convert(conversation: Conversation, from_: str = "auto", to: str = "log") -> Any:
    """``conversation`` in the format ``to``: a request body (a dict) for ``anthropic``,
    ``chat`` and ``responses``, a list of entries for ``log``. What the conversion could not
    keep is reported as :class:`ConversionLossWarning` warnings."""
    out = json.loads(_native.convert(_text(conversation), from_, to))
    _warn_losses(out["losses"])
    return out["value"]


def build_window(
    conversation: Conversation,
    budget: int,
    strategy: str = "key-messages",
    *,
    reserve: int = 0,
    format: str = "auto",
    encoding: str = "o200k_base",
    to: Optional[str] = None,
) -> Dict[str, Any]:
    """The window a request would carry at ``budget`` tokens (``reserve`` of them kept for
    the answer), compressed with ``strategy`` (``truncate``, ``key-messages``,
    ``importance``, ``summary``, ``hybrid`` or ``retrieval``).

    Returns a dict: ``window`` (the request body in ``to``, the input's format by default),
    ``usage`` (``used``, ``budget``, ``percent``), ``strategies`` applied, ``items`` (for every
    entry of the conversation: ``id``, ``role``, ``kept``, ``reason`` — ``fits``,
    ``changed`` or why it was dropped — and ``changes``) and ``added`` (entries the build
    wrote, such as a summary)."""
    out = json.loads(
        _native.build_window(_text(conversation), budget, strategy, reserve, format, encoding, to)
    )
    _warn_losses(out.pop("losses"))
    return out


class Store:
    """A conversation store: a folder (created when missing) or a PostgreSQL database."""

    def __init__(self, native: Any) -> None:
        self._native = native

    @classmethod
    def open(
        cls, location: Union[str, "os.PathLike[str]"], *, schema: Optional[str] = None
    ) -> "Store":
        """Opens the store at ``location``: a ``postgres://`` URL (its tables in ``schema``,
        ``public`` by default), or a folder (created when missing)."""
        return cls(_native.Store.open(os.fspath(location), schema))

    def list(self) -> List[Dict[str, Any]]:
        """Every conversation's metadata (``id``, ``title``, ``last_seq``, ``fork``, ...)."""
        return json.loads(self._native.list())

    def meta(self, conversation: str) -> Dict[str, Any]:
        """One conversation's metadata."""
        return json.loads(self._native.meta(conversation))

    def read(self, conversation: str) -> List[Dict[str, Any]]:
        """A conversation's log entries, its rewinds applied."""
        return json.loads(self._native.read(conversation))

    def import_(
        self,
        source: Union[Conversation, "os.PathLike[str]"],
        format: str = "claude-code",
        *,
        title: Optional[str] = None,
    ) -> str:
        """Imports a new conversation and returns its id: a Claude Code session or a Codex
        rollout from a file (``format`` ``claude-code`` or ``codex``; a Claude Code session's
        subagents become conversations of their own), or a conversation in any wire format
        (``format`` ``anthropic``, ``chat``, ``responses``, ``log`` or ``auto``)."""
        if format in ("claude-code", "codex"):
            if not isinstance(source, (str, os.PathLike)):
                raise TypeError(f"a {format} session is imported from a file path")
            return self._native.import_session(os.fspath(source), format)[0]
        if isinstance(source, os.PathLike):
            raise TypeError("give the conversation itself, or a claude-code or codex file")
        return self._native.import_conversation(_text(source), format, title)

    def export(self, conversation: str, to: str = "anthropic") -> Any:
        """A conversation as a request body in ``to`` (or a list of entries for ``log``)."""
        out = json.loads(self._native.export(conversation, to))
        _warn_losses(out["losses"])
        return out["value"]

    def fork(self, conversation: str, at: Optional[int] = None) -> str:
        """A new conversation sharing ``conversation``'s history up to entry ``at`` (all of it
        by default), its files up to then included; its id."""
        return json.loads(self._native.fork(conversation, at))["id"]


_JSON_TYPES: Dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    dict: "object",
    list: "array",
}


def _is_union(origin: Any) -> bool:
    # `int | None` has its own origin from Python 3.10 on.
    return origin is Union or origin is getattr(types, "UnionType", Union)


def _schema_of(hint: Any) -> Dict[str, Any]:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        schema = _schema_of(args[0])
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            schema["description"] = " ".join(notes)
        return schema
    if _is_union(origin):
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return _schema_of(rest[0])
        return {"anyOf": [_schema_of(a) for a in rest]}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (list, List, tuple, Iterable) or hint in (list, tuple):
        schema: Dict[str, Any] = {"type": "array"}
        if args and args[0] is not Ellipsis:
            schema["items"] = _schema_of(args[0])
        return schema
    if origin in (dict, Dict) or hint is dict:
        return {"type": "object"}
    if hint in _JSON_TYPES:
        return {"type": _JSON_TYPES[hint]}
    if hint is Any or hint is inspect.Parameter.empty:
        return {}
    raise TypeError(f"no JSON Schema for the type {hint!r}")


def _doc(func: Callable[..., Any]) -> str:
    doc = inspect.getdoc(func) or ""
    return doc.split("\n\n")[0].strip() or func.__name__.replace("_", " ")


def tool_schema(func: Callable[..., Any]) -> Dict[str, Any]:
    """The tool a Python function makes: ``name``, ``description`` (its docstring's first
    paragraph) and ``input_schema``, the JSON Schema of its arguments written from its type
    hints (``str``, ``int``, ``float``, ``bool``, ``list[...]``, ``dict``, ``Optional``,
    ``Literal``; ``Annotated[T, "text"]`` describes an argument). Arguments without a default
    are required."""
    hints = typing.get_type_hints(func, include_extras=True)
    properties: Dict[str, Any] = {}
    required: List[str] = []
    for name, param in inspect.signature(func).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"{func.__name__}: *args and **kwargs cannot be a tool's arguments")
        schema = _schema_of(hints.get(name, inspect.Parameter.empty))
        if param.default is param.empty:
            required.append(name)
        elif param.default is not None:
            schema["default"] = param.default
        properties[name] = schema
    return {
        "name": func.__name__,
        "description": _doc(func),
        "input_schema": {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        },
    }


def _coerce(value: Any, hint: Any) -> Any:
    """``value`` (from JSON) as the type ``hint`` names, where JSON blurs it."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        return _coerce(value, args[0])
    if _is_union(origin):
        rest = [a for a in args if a is not type(None)]
        return value if value is None or len(rest) != 1 else _coerce(value, rest[0])
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if origin in (list, List) and args and isinstance(value, list):
        return [_coerce(v, args[0]) for v in value]
    if origin is tuple and isinstance(value, list):
        return tuple(value)
    return value


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)


def _tool_spec(func: Callable[..., Any], ask: bool) -> tuple:
    spec = tool_schema(func)
    hints = typing.get_type_hints(func, include_extras=True)

    def call(arguments: str) -> str:
        given = json.loads(arguments)
        kwargs = {k: _coerce(v, hints.get(k, Any)) for k, v in given.items()}
        return json.dumps(_jsonable(func(**kwargs)))

    return (spec["name"], spec["description"], json.dumps(spec["input_schema"]), call, ask)


Approve = Callable[[Dict[str, Any]], Union[bool, str]]
"""Decides a call waiting for approval (``call_id``, ``tool``, ``arguments``): ``True`` runs
it; ``False``, or a string saying why, refuses it."""


class Agent:
    """The agent, built from the configuration the command line reads (a YAML or JSON file,
    or a dict of the same keys: ``provider``, ``model``, ``base_url``, ``api_key``,
    ``compat``, ``home``, ``database_url``, ``data``, ``skills``, ``workflows``,
    ``run_python``, ``context_window``, ``reserve``, ``strategy``, ``max_rounds``,
    ``max_tokens``, ``stream``, ``sub_agents``, ``response_mode``, ``approvals``), then the
    environment, as the command line reads it (``BA_AGENT_PROVIDER``, ``BA_AGENT_MODEL``,
    ``BA_AGENT_BASE_URL``, ``BA_AGENT_HOME``, ``BA_AGENT_COMPAT``; the provider's API key
    from ``ANTHROPIC_API_KEY`` or ``OPENAI_API_KEY``).

    ``tools`` are Python functions offered to the model besides the built-in ones (their
    schemas from their type hints, see :func:`tool_schema`). With ``approve``, each call of
    those functions, and of any tool the approval policy asks for, waits for ``approve``'s
    decision."""

    def __init__(
        self,
        config: Union[None, Dict[str, Any], str, "os.PathLike[str]"] = None,
        *,
        tools: Iterable[Callable[..., Any]] = (),
        approve: Optional[Approve] = None,
    ) -> None:
        specs = [_tool_spec(f, approve is not None) for f in tools]
        if config is None:
            self._native = _native.Agent(None, None, specs)
        elif isinstance(config, dict):
            self._native = _native.Agent(json.dumps(config), None, specs)
        else:
            self._native = _native.Agent(None, os.fspath(config), specs)
        self._approve = approve

    @property
    def store(self) -> Store:
        """The store the agent keeps its conversations in."""
        return Store(self._native.store())

    @property
    def tools(self) -> List[str]:
        """The names of the tools the model is offered."""
        return list(self._native.tool_names())

    def new_conversation(self, title: Optional[str] = None) -> str:
        """A new, empty conversation; its id."""
        return self._native.new_conversation(title)

    def stream(
        self,
        task: str,
        *,
        conversation: Optional[str] = None,
        uploads: Iterable[Union[str, "os.PathLike[str]"]] = (),
    ) -> Iterator[Dict[str, Any]]:
        """Runs ``task`` (in a new conversation unless one is given), with the files at
        ``uploads`` attached, and yields its events as dicts (``event`` names the kind); the
        last is ``finished``, with ``conversation_id``, ``status`` and ``final_answer``."""
        conversation = conversation or self.new_conversation()
        paths = [os.fspath(p) for p in uploads]
        return self._events(conversation, self._native.start(conversation, task, paths))

    def stream_workflow(
        self, name: str, inputs: Dict[str, str], *, conversation: Optional[str] = None
    ) -> Iterator[Dict[str, Any]]:
        """Runs the workflow ``name`` (from the configuration's ``workflows`` folders) with
        ``inputs``; its events, as :meth:`stream`."""
        conversation = conversation or self.new_conversation()
        return self._events(conversation, self._native.start_workflow(conversation, name, inputs))

    def run(self, task: str, **kwargs: Any) -> Dict[str, Any]:
        """Runs ``task`` to its end (see :meth:`stream`); the ``finished`` event."""
        return _last(self.stream(task, **kwargs))

    def run_workflow(self, name: str, inputs: Dict[str, str], **kwargs: Any) -> Dict[str, Any]:
        """Runs a workflow to its end (see :meth:`stream_workflow`); the ``finished`` event."""
        return _last(self.stream_workflow(name, inputs, **kwargs))

    async def arun(self, task: str, **kwargs: Any) -> Dict[str, Any]:
        """:meth:`run` for ``asyncio``: the run goes on in a worker thread."""
        return await asyncio.get_running_loop().run_in_executor(
            None, lambda: self.run(task, **kwargs)
        )

    async def astream(self, task: str, **kwargs: Any) -> AsyncIterator[Dict[str, Any]]:
        """:meth:`stream` for ``asyncio``: each event is waited for in a worker thread."""
        loop = asyncio.get_running_loop()
        events = await loop.run_in_executor(None, lambda: self.stream(task, **kwargs))
        done = object()
        while True:
            event = await loop.run_in_executor(None, next, events, done)
            if event is done:
                return
            yield event

    def pending(self, conversation: str) -> List[Dict[str, Any]]:
        """The calls of ``conversation`` waiting for a decision."""
        return json.loads(self._native.pending(conversation))

    def decide(
        self, conversation: str, decisions: Dict[str, Union[bool, str]]
    ) -> Iterator[Dict[str, Any]]:
        """Goes on after a pause: for each waiting call id, ``True`` runs it, ``False`` or a
        reason refuses it. Its events, as :meth:`stream`."""
        answers = [_answer(call, d) for call, d in decisions.items()]
        return self._events(conversation, self._native.decide(conversation, answers))

    def _events(self, conversation: str, run: Any) -> Iterator[Dict[str, Any]]:
        while True:
            last = None
            try:
                for text in run:
                    last = json.loads(text)
                    yield last
            finally:
                run.close()
            waiting = last is not None and last.get("status") == "awaiting_approval"
            if not waiting or self._approve is None:
                return
            answers = [
                _answer(call["call_id"], self._approve(call)) for call in self.pending(conversation)
            ]
            run = self._native.decide(conversation, answers)


def _answer(call_id: str, decision: Union[bool, str]) -> tuple:
    if decision is True:
        return (call_id, True, None)
    reason = decision if isinstance(decision, str) and decision else "refused by the approver"
    return (call_id, False, reason)


def _last(events: Iterator[Dict[str, Any]]) -> Dict[str, Any]:
    last: Dict[str, Any] = {}
    for event in events:
        last = event
    return last


class Server:
    """A server started by :func:`serve`; :meth:`stop` ends it (so does leaving a ``with``
    block)."""

    def __init__(self, native: Any) -> None:
        self._native = native
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """``http://host:port``."""
        return f"http://{self._native.addr}"

    @property
    def token(self) -> str:
        """The API's bearer token."""
        return self._native.token

    @property
    def running(self) -> bool:
        """Whether it still serves."""
        return self._native.running

    def stop(self) -> None:
        """Stops serving; returns once the server has stopped."""
        with self._lock:
            self._native.stop()

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def serve(agent: Agent, addr: str = "127.0.0.1:8080", token: Optional[str] = None) -> Server:
    """Serves the HTTP API and the page over ``agent`` on ``addr`` (``127.0.0.1:0`` takes a
    free port) in the background, with ``token`` as the bearer token (a random one when not
    given: read it from :attr:`Server.token`)."""
    return Server(_native.serve(agent._native, addr, token))
