"""The chat-completions request body: parsing, validation and OpenAI-shaped errors.

Only what the runner acts on is read; other fields OpenAI clients send (``top_p``, ``user``,
``metadata``, ...) are accepted and ignored. Per-request parameters can only lower what the agent
file allows (SPEC section 15): ``max_tokens`` and ``temperature`` are capped by the agent's
``model:`` values, and the optional ``limits`` object (``max_steps``, ``max_tool_calls``,
``timeout_s``; the openai SDK sends it with ``extra_body``) by the agent's ``limits:``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from runner.agentfile.config import AgentConfig
from runner.agentfile.output_schema import OutputSchema
from runner.serve.schemas import SchemaProblem, client_schema

__all__ = ["ApiError", "ChatRequest", "model_params", "parse_chat_request", "request_limits"]

ROLES = ("system", "developer", "user", "assistant", "tool")
LIMIT_FIELDS = ("max_steps", "max_tool_calls", "timeout_s")
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ApiError(Exception):
    """An error answered in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        retry: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.retry = retry
        """False: the same request would fail the same way (``x-should-retry: false``, which the
        openai SDK honours); None: the status says it (the SDK retries 408, 409, 429 and 5xx)."""

    def headers(self) -> dict[str, str]:
        """The response headers that say whether to retry."""
        return {} if self.retry is None else {"x-should-retry": "true" if self.retry else "false"}

    def body(self) -> dict[str, Any]:
        """The JSON body of the error response."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


@dataclass(frozen=True)
class ChatRequest:
    """A validated ``POST /v1/chat/completions`` body."""

    model: str
    messages: list[dict[str, Any]]
    stream: bool = False
    include_usage: bool = False
    client_tools: list[dict[str, Any]] = field(default_factory=list)
    temperature: float | None = None
    max_tokens: int | None = None
    limits: dict[str, float] = field(default_factory=dict)
    #: The client's ``response_format`` (``json_schema`` or ``json_object``); None for text.
    output: OutputSchema | None = None
    #: A client tool that ``tool_choice`` forces: the answer is one call of it (``output`` holds its
    #: parameters; the tool itself is not offered to the model). LangChain's ``function_calling``.
    answer_tool: str | None = None


def _bad(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param=param)


def _number(body: dict[str, Any], key: str, *, low: float, high: float | None = None) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _bad(f"'{key}' must be a number", key)
    if value < low or (high is not None and value > high):
        bounds = f"between {low:g} and {high:g}" if high is not None else f"at least {low:g}"
        raise _bad(f"'{key}' must be {bounds}", key)
    return float(value)


def _positive_int(value: Any, param: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _bad(f"'{param}' must be a positive integer", param)
    return value


def _check_content(content: Any, param: str, *, required: bool) -> None:
    if content is None:
        if required:
            raise _bad(f"'{param}' is required", param)
        return
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise _bad(f"'{param}' must be a string or a list of content parts", param)
    for index, part in enumerate(content):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise _bad(f"'{param}[{index}]' must be a content part with a 'type'", f"{param}[{index}]")
        if part["type"] == "text" and not isinstance(part.get("text"), str):
            raise _bad(f"'{param}[{index}].text' must be a string", f"{param}[{index}].text")


def _check_tool_calls(calls: Any, param: str) -> None:
    if not isinstance(calls, list):
        raise _bad(f"'{param}' must be a list", param)
    for index, call in enumerate(calls):
        where = f"{param}[{index}]"
        function = call.get("function") if isinstance(call, dict) else None
        if (
            not isinstance(call, dict)
            or not isinstance(call.get("id"), str)
            or not call["id"]
            or not isinstance(function, dict)
            or not isinstance(function.get("name"), str)
            or not isinstance(function.get("arguments", ""), str)
        ):
            raise _bad(f"'{where}' must be {{id, type: function, function: {{name, arguments}}}}", where)


def _check_messages(messages: Any) -> list[dict[str, Any]]:
    if messages is None:
        raise _bad("'messages' is required", "messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("'messages' must be a non-empty list", "messages")
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise _bad(f"'{where}' must be an object", where)
        role = message.get("role")
        if role not in ROLES:
            raise _bad(f"'{where}.role' must be one of {', '.join(ROLES)}", f"{where}.role")
        has_calls = role == "assistant" and message.get("tool_calls")
        _check_content(message.get("content"), f"{where}.content", required=role != "assistant")
        if has_calls:
            _check_tool_calls(message["tool_calls"], f"{where}.tool_calls")
        if role == "tool" and not isinstance(message.get("tool_call_id"), str):
            raise _bad(f"'{where}.tool_call_id' is required", f"{where}.tool_call_id")
    return messages


def _check_tools(tools: Any, tool_choice: Any) -> list[dict[str, Any]]:
    if tools is None or tool_choice == "none":
        return []
    if not isinstance(tools, list):
        raise _bad("'tools' must be a list", "tools")
    specs: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, tool in enumerate(tools):
        where = f"tools[{index}]"
        function = tool.get("function") if isinstance(tool, dict) else None
        if (
            not isinstance(tool, dict)
            or tool.get("type", "function") != "function"
            or not isinstance(function, dict)
        ):
            raise _bad(f"'{where}' must be {{type: function, function: {{name, ...}}}}", where)
        name = function.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise _bad(f"'{where}.function.name' must match [A-Za-z0-9_-]{{1,64}}", f"{where}.function.name")
        if name in seen:
            raise _bad(f"'{where}.function.name': two tools are named '{name}'", f"{where}.function.name")
        seen.add(name)
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(parameters, dict):
            raise _bad(f"'{where}.function.parameters' must be a JSON Schema object", f"{where}.function")
        spec: dict[str, Any] = {"name": name, "parameters": parameters}
        if isinstance(function.get("description"), str):
            spec["description"] = function["description"]
        specs.append({"type": "function", "function": spec})
    return specs


#: Where a client's schema comes from, in messages.
CLIENT_SCHEMA = "the request's response_format"


def _check_response_format(value: Any) -> OutputSchema | None:
    """The client's ``response_format`` as an ``OutputSchema`` (None: plain text); 400 when malformed."""
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise _bad("'response_format' must be an object with a 'type'", "response_format")
    kind = value["type"]
    if kind == "text":
        return None
    if kind == "json_object":
        return OutputSchema({"type": "object"}, name="json_object", where=CLIENT_SCHEMA)
    if kind != "json_schema":
        raise _bad(
            f"'response_format.type' must be text, json_object or json_schema, not '{kind[:40]}'",
            "response_format.type",
        )
    spec = value.get("json_schema")
    if not isinstance(spec, dict):
        raise _bad("'response_format.json_schema' must be an object", "response_format.json_schema")
    name = spec.get("name")
    if not isinstance(name, str) or not _TOOL_NAME.match(name):
        raise _bad(
            "'response_format.json_schema.name' must match [A-Za-z0-9_-]{1,64}",
            "response_format.json_schema.name",
        )
    strict = spec.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise _bad(
            "'response_format.json_schema.strict' must be a boolean", "response_format.json_schema.strict"
        )
    param = "response_format.json_schema.schema"
    try:
        return client_schema(
            spec.get("schema", {"type": "object"}), name=name, where=CLIENT_SCHEMA, strict=strict
        )
    except SchemaProblem as problem:
        raise _bad(f"'{param}{problem.at()}' is not usable: {problem.message}", param) from None


def _forced_tool(tool_choice: Any, tools: list[dict[str, Any]]) -> str | None:
    """The client tool a ``tool_choice`` of ``{"type": "function", "function": {"name"}}`` names."""
    if not isinstance(tool_choice, dict):
        return None  # "auto", "required", "none" (or absent): the model chooses
    function = tool_choice.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    if tool_choice.get("type") != "function" or not isinstance(name, str):
        raise _bad(
            "'tool_choice' must be none, auto, required or {type: function, function: {name}}", "tool_choice"
        )
    if name not in {tool["function"]["name"] for tool in tools}:
        raise _bad(f"'tool_choice' names '{name[:64]}', which is not in 'tools'", "tool_choice")
    return name


def _answer_call(
    tools: list[dict[str, Any]], forced: str | None, output: OutputSchema | None
) -> tuple[list[dict[str, Any]], OutputSchema | None]:
    """A forced client tool becomes the shape of the answer: the agent keeps its own tools and loop,
    and its checked answer goes back as the call (the tool is not offered to the model)."""
    if forced is None:
        return tools, output
    if output is not None:
        raise _bad(
            "'tool_choice' that forces a tool and 'response_format' ask for the answer in two shapes; "
            "send one of them",
            "tool_choice",
        )
    (tool,) = (tool for tool in tools if tool["function"]["name"] == forced)
    param = f"tools[{tools.index(tool)}].function.parameters"
    try:
        output = client_schema(
            tool["function"]["parameters"], name=forced, where=f"the forced tool_choice '{forced}'"
        )
    except SchemaProblem as problem:
        raise _bad(f"'{param}{problem.at()}' is not usable: {problem.message}", param) from None
    return [t for t in tools if t is not tool], output


def _check_limits(value: Any) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _bad("'limits' must be an object", "limits")
    limits: dict[str, float] = {}
    for key, item in value.items():
        if key not in LIMIT_FIELDS:
            raise _bad(
                f"'limits.{key}' is not a limit a request can set ({', '.join(LIMIT_FIELDS)})", "limits"
            )
        if key == "timeout_s":
            if isinstance(item, bool) or not isinstance(item, int | float) or not 0 < item < math.inf:
                raise _bad("'limits.timeout_s' must be a positive number of seconds", "limits.timeout_s")
            limits[key] = float(item)
        else:
            limits[key] = _positive_int(item, f"limits.{key}")
    return limits


def parse_chat_request(body: Any) -> ChatRequest:
    """Validate a decoded JSON body; raise ``ApiError`` (400) naming the first bad field."""
    if not isinstance(body, dict):
        raise _bad("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("'model' is required", "model")
    messages = _check_messages(body.get("messages"))
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise _bad("'stream' must be a boolean", "stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise _bad("'stream_options' must be an object", "stream_options")
    n = body.get("n")
    if n is not None and n != 1:
        raise _bad("'n' must be 1: an agent gives one answer", "n")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    tools = _check_tools(body.get("tools"), body.get("tool_choice"))
    forced = _forced_tool(body.get("tool_choice"), tools) if tools else None
    tools, output = _answer_call(tools, forced, _check_response_format(body.get("response_format")))
    return ChatRequest(
        model=model,
        messages=messages,
        stream=bool(stream),
        include_usage=bool((options or {}).get("include_usage")),
        client_tools=tools,
        temperature=_number(body, "temperature", low=0.0, high=2.0),
        max_tokens=None if max_tokens is None else _positive_int(max_tokens, "max_tokens"),
        limits=_check_limits(body.get("limits")),
        output=output,
        answer_tool=forced,
    )


def _lower(agent: float | None, request: float | None) -> float | None:
    if request is None:
        return agent
    return request if agent is None else min(agent, request)


def model_params(config: AgentConfig, request: ChatRequest) -> dict[str, Any]:
    """The request's ``temperature`` and ``max_tokens``, never above the agent's own values."""
    params: dict[str, Any] = {}
    model = config.model
    temperature = _lower(model.temperature if model else None, request.temperature)
    if request.temperature is not None and temperature is not None:
        params["temperature"] = temperature
    max_tokens = _lower(model.max_tokens if model else None, request.max_tokens)
    if request.max_tokens is not None and max_tokens is not None:
        params["max_tokens"] = int(max_tokens)
    return params


def request_limits(request: ChatRequest) -> dict[str, Any]:
    """The request's ``limits``: a session applies each only where it is lower than the agent's."""
    return dict(request.limits)
