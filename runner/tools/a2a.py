"""``tools: - a2a: URL``: a remote A2A agent as one tool of this agent (docs/a2a.md, "Calling").

The URL is the agent's card (``.../agent-card.json``, any ``.json``) or its base URL (the card is
then ``BASE/.well-known/agent-card.json``). The card is fetched once, when the runtime opens its
tool sources (a reload opens them again, and fetches it again), with the source's ``headers``:

- a card that is not JSON, or not an Agent Card, is a ``ConfigError`` naming the URL;
- the interface used is the first of the card's that runner speaks: JSON-RPC or HTTP+JSON, at
  protocol 1.0 first, else 0.3 (the ``a2a-sdk`` speaks both); none is an error listing them;
- the interface must be where the card was fetched from (same scheme, host and port): a card that
  points elsewhere is refused, except that an unroutable host (``0.0.0.0``, ``[::]``) is read as the
  card's own host (a server that advertised its bind address).

One tool per remote agent (not per skill: A2A sends a message to the agent, never to a skill; the
skills are in the tool's description). It takes ``message`` and returns the remote answer (the
artifacts' text, data parts as JSON). The remote ``contextId`` is kept per session, so a follow-up
call continues the remote conversation; a task that ends ``input-required`` comes back as a result
asking the model for what is missing, and the next call answers that task. Status messages of a
streamed task are the source's progress lines. A call ends within the tool's timeout (``timeout_s``,
else the agent's ``tool_timeout_s``) whatever the remote does; failures are ``ToolError`` results.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from runner.agentfile.config import ToolSourceConfig
from runner.errors import ConfigError, ToolError
from runner.tls import tls_context
from runner.tools.base import RunContext, Tool
from runner.tools.registry import sanitize_name
from runner.tools.sources import LoadedSource, SourceContext

__all__ = ["CARD_PATH", "RemoteAgent", "card_url", "load_source", "pick_interface", "whole_numbers"]

CARD_PATH = "/.well-known/agent-card.json"
#: Bindings runner speaks, and protocol versions, best first.
BINDINGS = ("JSONRPC", "HTTP+JSON")
VERSIONS = ("1.0", "0.3")
#: Sessions whose remote contextId is remembered (the oldest is forgotten first).
MAX_SESSIONS = 1000
_UNROUTABLE = {"0.0.0.0", "::", "[::]"}
_PARAMETERS = {
    "type": "object",
    "properties": {"message": {"type": "string", "description": "What to send to the remote agent."}},
    "required": ["message"],
    "additionalProperties": False,
}


def card_url(target: str) -> str:
    """The card's URL for a source's URL (a card URL as it is, a base URL plus the well-known path)."""
    path = urlsplit(target).path
    if path.endswith(".json"):
        return target
    return target.rstrip("/") + CARD_PATH


def _error(label: str, message: str, hint: str | None = None) -> ConfigError:
    return ConfigError(f"a2a source '{label}': {message}", hint=hint)


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


def pick_interface(card: Any, fetched_from: str, label: str) -> tuple[str, str, str]:
    """(binding, version, url) of the card's interface runner uses (module docstring's rules)."""
    offered = [(i.protocol_binding, i.protocol_version or "0.3", i.url) for i in card.supported_interfaces]
    usable = [
        (binding, version, url)
        for version in VERSIONS
        for binding, given, url in offered
        if binding in BINDINGS and given.startswith(version) and url
    ]
    if not usable:
        said = ", ".join(f"{b} {v}" for b, v, _ in offered) or "none"
        raise _error(
            label,
            f"the card at {fetched_from} advertises no interface runner speaks (it has: {said[:300]})",
            hint="runner speaks JSON-RPC and HTTP+JSON at A2A 1.0 and 0.3",
        )
    binding, version, url = usable[0]
    url = urljoin(fetched_from, url)
    parts = urlsplit(url)
    if (parts.hostname or "") in _UNROUTABLE:
        home = urlsplit(fetched_from)
        netloc = home.hostname or ""
        if parts.port:
            netloc = f"{netloc}:{parts.port}"
        url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
    if _origin(url) != _origin(fetched_from):
        raise _error(
            label,
            f"the card at {fetched_from} points elsewhere: its interface is at {url[:200]}",
            hint="runner calls only the host the card was fetched from; name the card on that host",
        )
    return binding, version, url


async def _fetch_card(spec: ToolSourceConfig, http: Any, url: str, timeout_s: float) -> Any:
    import httpx
    from a2a.client.card_resolver import parse_agent_card

    label = spec.label
    try:
        async with asyncio.timeout(timeout_s):
            response = await http.get(url)
    except TimeoutError:
        raise _error(label, f"the card at {url} did not arrive within {timeout_s:g} s") from None
    except httpx.HTTPError as exc:
        raise _error(label, f"cannot fetch the card at {url}: {exc or type(exc).__name__}") from None
    if response.status_code != 200:
        raise _error(label, f"the card at {url} answered HTTP {response.status_code}")
    try:
        data = response.json()
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        card = parse_agent_card(data)
    except Exception as exc:  # the SDK's parser raises what protobuf and pydantic raise
        raise _error(label, f"the card at {url} does not parse: {str(exc)[:200]}") from None
    if not card.name:
        raise _error(label, f"the card at {url} has no name")
    return card


@dataclass
class _Remote:
    """What one session holds of the remote conversation: its context, the task waiting for input."""

    context_id: str = ""
    task_id: str = ""  # the task that asked for input: the next call answers it
    running: str = ""  # the task of the call under way (cancelled when the call times out)


class RemoteAgent:
    """The remote agent behind one ``a2a:`` source: its card, the SDK client, each session's context."""

    def __init__(self, spec: ToolSourceConfig, card: Any, client: Any, url: str, version: str) -> None:
        self.spec = spec
        self.card = card
        self.client = client
        self.url = url
        self.version = version
        self.timeout_s = 60.0
        self.report: Any = None
        self._sessions: OrderedDict[str, _Remote] = OrderedDict()

    def remote(self, session_id: str) -> _Remote:
        remote = self._sessions.get(session_id)
        if remote is None:
            remote = self._sessions[session_id] = _Remote()
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        self._sessions.move_to_end(session_id)
        return remote

    def tool(self) -> Tool:
        card = self.card
        name = sanitize_name(self.spec.id or card.name)
        skills = "; ".join(f"{s.name}: {s.description}"[:200] for s in card.skills[:10])
        description = (self.spec.description or card.description or f"the A2A agent {card.name}")[:1000]
        if skills:
            description += f" Skills: {skills}"
        description += f" (remote A2A agent '{card.name}' at {self.url})"
        return Tool(
            name=name,
            description=description,
            parameters=_PARAMETERS,
            source_kind="a2a",
            source_id=self.spec.label,
            call=self.call,
            confirm=bool(self.spec.confirm),
            timeout_s=self.spec.timeout_s,
            original_name=card.name,
        )

    async def call(self, arguments: dict[str, Any], ctx: RunContext) -> str:
        """Send ``message``; the remote answer, or a question back (``input-required``)."""
        remote = self.remote(ctx.session_id)
        timeout = self.spec.timeout_s if self.spec.timeout_s is not None else self.timeout_s
        reading = _Reading(self.card.name)
        try:
            async with asyncio.timeout(timeout if timeout and timeout > 0 else None):
                async for event in self._send(str(arguments.get("message", "")), remote):
                    reading.take(event, remote, self._progress)
        except TimeoutError:
            await self._cancel_quietly(remote)
            raise ToolError(
                f"the remote agent '{self.card.name}' did not finish within {timeout:g} s "
                f"(last state: {reading.state_name()})"
            ) from None
        except ToolError:
            raise
        except Exception as exc:
            if reading.state:  # it had started: the stream broke
                raise ToolError(
                    f"the remote agent '{self.card.name}' stopped answering before the task ended "
                    f"(last state: {reading.state_name()}): {_said(exc)}"
                ) from None
            raise ToolError(f"the remote agent '{self.card.name}' failed: {_said(exc)}") from None
        return reading.result(remote)

    def _send(self, text: str, remote: _Remote) -> AsyncIterator[Any]:
        from a2a.types import a2a_pb2 as pb

        message = pb.Message(
            message_id=uuid.uuid4().hex,
            role=pb.Role.ROLE_USER,
            parts=[pb.Part(text=text)],
            context_id=remote.context_id,
            task_id=remote.task_id,
        )
        remote.task_id = ""  # answered now; a new question sets it again
        return self.client.send_message(pb.SendMessageRequest(message=message))

    def _progress(self, text: str) -> None:
        if self.report is not None and text:
            self.report(self.spec.label, f"{self.card.name}: {text[:200]}")

    async def _cancel_quietly(self, remote: _Remote) -> None:
        """Tell the remote to stop the task this call left running (within a second; errors ignored)."""
        from a2a.types import a2a_pb2 as pb

        task_id = remote.running or remote.task_id
        if not task_id:
            return
        try:
            async with asyncio.timeout(1.0):
                await self.client.cancel_task(pb.CancelTaskRequest(id=task_id))
        except Exception:  # best effort: the call already failed with its own message
            return


def _said(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return re.sub(r"\s+", " ", text)[:300]


class _Reading:
    """The events of one call, read into its answer."""

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.state = 0
        self.status_text = ""
        self.artifacts: dict[str, list[str]] = {}
        self.message_text: str | None = None
        self.task_id = ""

    def state_name(self) -> str:
        from a2a.types import a2a_pb2 as pb

        if not self.state:
            return "no answer yet"
        return str(pb.TaskState.Name(self.state)).removeprefix("TASK_STATE_").lower().replace("_", "-")

    def take(self, event: Any, remote: _Remote, progress: Any) -> None:
        kind = event.WhichOneof("payload")
        if kind == "task":
            task = event.task
            self._task(task, remote)
            for artifact in task.artifacts:
                self.artifacts[artifact.artifact_id] = [_text(p) for p in artifact.parts]
            self._status(task.status)
        elif kind == "status_update":
            update = event.status_update
            remote.context_id = update.context_id or remote.context_id
            self.task_id = update.task_id or self.task_id
            remote.running = self.task_id
            self._status(update.status)
            progress(self.status_text)
        elif kind == "artifact_update":
            update = event.artifact_update
            pieces = [_text(p) for p in update.artifact.parts]
            kept = self.artifacts.setdefault(update.artifact.artifact_id, [])
            if update.append:
                kept.extend(pieces)
            else:
                kept[:] = pieces
        elif kind == "message":
            self.message_text = "".join(_text(p) for p in event.message.parts)
            remote.context_id = event.message.context_id or remote.context_id
            self.state = -1

    def _task(self, task: Any, remote: _Remote) -> None:
        remote.context_id = task.context_id or remote.context_id
        self.task_id = task.id or self.task_id
        remote.running = self.task_id

    def _status(self, status: Any) -> None:
        self.state = status.state
        texts = [_text(p) for p in status.message.parts]
        if any(texts):
            self.status_text = "".join(texts)

    def result(self, remote: _Remote) -> str:
        from a2a.types import a2a_pb2 as pb

        remote.running = ""
        answer = "".join("".join(parts) for parts in self.artifacts.values())
        state = self.state
        if state == -1:
            return self.message_text or ""
        if state == pb.TaskState.TASK_STATE_COMPLETED:
            return answer or self.status_text
        if state == pb.TaskState.TASK_STATE_INPUT_REQUIRED:
            remote.task_id = self.task_id
            return (
                f"The remote agent '{self.agent}' needs more input before it can go on: "
                f"{self.status_text or '(it did not say what)'} "
                "Call this tool again with the answer (ask the user if you do not know it)."
            )
        if state in (pb.TaskState.TASK_STATE_FAILED, pb.TaskState.TASK_STATE_REJECTED):
            raise ToolError(
                f"the remote agent '{self.agent}' failed: {self.status_text or 'no reason given'}"
            )
        if state == pb.TaskState.TASK_STATE_CANCELED:
            raise ToolError(f"the remote agent '{self.agent}' canceled the task")
        raise ToolError(
            f"the remote agent '{self.agent}' stopped answering before the task ended "
            f"(last state: {self.state_name()})"
        )


def whole_numbers(value: Any) -> Any:
    """JSON from a protobuf ``Value`` with its whole numbers as integers (protobuf has doubles only)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, list):
        return [whole_numbers(item) for item in value]
    if isinstance(value, dict):
        return {key: whole_numbers(item) for key, item in value.items()}
    return value


def _text(part: Any) -> str:
    kind = part.WhichOneof("content")
    if kind == "text":
        return str(part.text)
    if kind == "data":
        from google.protobuf.json_format import MessageToDict

        return json.dumps(whole_numbers(MessageToDict(part.data)), ensure_ascii=False)
    if kind == "url":
        return f"[file: {part.url}]"
    return f"[file: {part.filename or part.media_type or 'bytes'}]"


async def load_source(spec: ToolSourceConfig, ctx: SourceContext, stack: AsyncExitStack) -> LoadedSource:
    """Fetch the card, pick the interface, make the client: one tool (module docstring)."""
    os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")  # as runner.serve.a2a does
    import httpx

    try:
        from a2a.client import ClientConfig, ClientFactory
    except ModuleNotFoundError as exc:
        if exc.name != "a2a" and not str(exc.name).startswith("a2a."):
            raise
        raise _error(
            spec.label, "A2A is not installed", hint="pip install 'runner[a2a]' (the a2a-sdk)"
        ) from None

    timeout_s = spec.timeout_s if spec.timeout_s is not None else ctx.default_timeout_s
    bound = timeout_s if timeout_s and timeout_s > 0 else None
    http = httpx.AsyncClient(
        headers=dict(spec.headers), timeout=httpx.Timeout(bound, connect=10.0), verify=tls_context()
    )
    stack.push_async_callback(http.aclose)
    url = card_url(spec.target)
    card = await _fetch_card(spec, http, url, bound or 30.0)
    binding, version, chosen = pick_interface(card, url, spec.label)
    del card.supported_interfaces[:]
    card.supported_interfaces.append(_interface(binding, version, chosen))
    config = ClientConfig(
        streaming=bool(card.capabilities.streaming),
        httpx_client=http,
        supported_protocol_bindings=[binding],
    )
    client = ClientFactory(config).create(card)
    stack.push_async_callback(client.close)
    remote = RemoteAgent(spec, card, client, chosen, version)
    remote.timeout_s = ctx.default_timeout_s
    remote.report = ctx.on_progress
    return LoadedSource([remote.tool()])


def _interface(binding: str, version: str, url: str) -> Any:
    from a2a.types import a2a_pb2 as pb

    return pb.AgentInterface(protocol_binding=binding, protocol_version=version, url=url)
