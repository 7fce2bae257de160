"""A ``POST /v1/responses`` body as the chat door's request: ``input`` items become chat messages,
the Responses fields become their chat-completions twins, and ``protocol.parse_chat_request`` (the
one validator of both doors) checks the result.

- ``input``: a string (one user message) or items: messages (``user``, ``assistant``, ``system``,
  ``developer``; ``input_text`` / ``output_text`` / ``refusal`` parts; ``input_image`` parts become
  ``image_url`` parts), ``function_call`` / ``function_call_output``, ``mcp_call`` (the agent's own
  tool steps this server answered with: its call and result again), ``reasoning`` (dropped: the
  model's earlier thinking is not replayed, as in the chat door; one carrying a step of the
  agent's in its ``encrypted_content``, ``steps.py``, is that step again). Any other item type is
  a 400.
- ``tools``: ``function`` tools (and those inside a ``namespace`` tool) are client tools; every
  hosted type (``web_search``, ``file_search``, ...) is left out with a warning in the log; a
  ``tool_choice`` that forces one is a 400 naming it.
- ``text.format`` is ``response_format``; ``max_output_tokens`` is ``max_tokens``; both only lower
  the agent's values (``protocol.model_params``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any

from runner.serve.protocol import ApiError, ChatRequest, parse_chat_request
from runner.serve.responses.steps import PREFIX, read_step

__all__ = ["ResponsesRequest", "in_responses_terms", "input_messages", "parse_responses_request"]

log = logging.getLogger("runner.serve")

#: Fields accepted and not acted on (documented in docs/serving.md).
IGNORED = (
    "top_p",
    "reasoning",
    "truncation",
    "user",
    "include",
    "prompt_cache_key",
    "prompt_cache_retention",
    "service_tier",
    "safety_identifier",
    "parallel_tool_calls",
    "background",
    "top_logprobs",
    "stream_options",
    "client_metadata",
)
_TEXT_PARTS = ("input_text", "output_text", "text", "refusal", "summary_text", "reasoning_text")
_ROLES = ("user", "assistant", "system", "developer")


def _bad(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)


@dataclass(frozen=True)
class ResponsesRequest:
    """A validated ``POST /v1/responses`` body: the chat request it runs as, and what it echoes."""

    chat: ChatRequest
    #: This request's input as chat messages (without a previous response's conversation).
    messages: list[dict[str, Any]]
    #: This request's input items as the client sent them (a string input as one message item).
    items: list[dict[str, Any]]
    previous_response_id: str | None = None
    instructions: str | None = None
    store: bool = True
    metadata: dict[str, str] = field(default_factory=dict)
    #: The function tools in the Responses shape (echoed in the response object).
    tools: list[dict[str, Any]] = field(default_factory=list)
    #: The namespace each namespaced function tool came in (its calls say it).
    namespaces: dict[str, str] = field(default_factory=dict)
    tool_choice: Any = "auto"
    parallel_tool_calls: bool = True
    #: The ``text`` field as given (``{"format": {"type": "text"}}`` when absent).
    text: dict[str, Any] = field(default_factory=lambda: {"format": {"type": "text"}})
    echo: dict[str, Any] = field(default_factory=dict)
    #: ``include`` asks for ``reasoning.encrypted_content``: the agent's own steps are also carried
    #: in reasoning items (``steps.py``), for a client that resends those and not ``mcp_call``.
    carry_steps: bool = False


def _text_of_parts(content: Any, where: str) -> list[dict[str, Any]] | str:
    """A message's content as chat content: a string, or parts (``text`` and ``image_url``)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _bad(f"'{where}' must be a string or a list of content parts", where)
    parts: list[dict[str, Any]] = []
    for index, part in enumerate(content):
        at = f"{where}[{index}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(kind, str):
            raise _bad(f"'{at}' must be a content part with a 'type'", at)
        if kind in _TEXT_PARTS:
            text = part.get("refusal" if kind == "refusal" else "text")
            if not isinstance(text, str):
                raise _bad(f"'{at}.text' must be a string", f"{at}.text")
            parts.append({"type": "text", "text": text})
        elif kind == "input_image":
            url = part.get("image_url")
            if not isinstance(url, str) or not url:
                raise _bad(f"'{at}.image_url' must be a URL or a data: URL (file_id is not supported)", at)
            parts.append(
                {"type": "image_url", "image_url": {"url": url, "detail": part.get("detail", "auto")}}
            )
        else:
            raise _bad(f"'{at}.type' '{kind[:40]}' is not a content part this server reads", f"{at}.type")
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def _call_id(item: dict[str, Any], where: str) -> str:
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise _bad(f"'{where}.call_id' is required", f"{where}.call_id")
    return call_id


def _output_text(output: Any, where: str) -> str:
    if isinstance(output, str):
        return output
    content = _text_of_parts(output, f"{where}.output")
    if isinstance(content, str):
        return content
    raise _bad(f"'{where}.output' may hold only text parts", f"{where}.output")


def _add_call(messages: list[dict[str, Any]], call: dict[str, Any], result: dict[str, Any] | None) -> None:
    """A call joins the assistant message right before it (with its results) or starts one."""
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant":
        last.setdefault("tool_calls", []).append(call)
    else:
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
    if result is not None:
        messages.append(result)


def _add_step(
    messages: list[dict[str, Any]], steps: set[str], step_id: str, name: str, arguments: str, output: str
) -> None:
    """The agent's own step as its call and result, once (an ``mcp_call`` and the reasoning item
    carrying the same step both come back from a client that keeps both)."""
    if step_id in steps:
        return
    steps.add(step_id)
    call = {"id": step_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    _add_call(messages, call, {"role": "tool", "tool_call_id": step_id, "content": output})


def _item(messages: list[dict[str, Any]], item: Any, where: str, issued: set[str], steps: set[str]) -> None:
    if not isinstance(item, dict):
        raise _bad(f"'{where}' must be an object", where)
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        role = item.get("role")
        if role not in _ROLES:
            raise _bad(f"'{where}.role' must be one of {', '.join(_ROLES)}", f"{where}.role")
        if "content" not in item:
            raise _bad(f"'{where}.content' is required", f"{where}.content")
        messages.append({"role": role, "content": _text_of_parts(item["content"], f"{where}.content")})
    elif kind == "function_call":
        name, arguments = item.get("name"), item.get("arguments", "{}")
        if not isinstance(name, str) or not name:
            raise _bad(f"'{where}.name' is required", f"{where}.name")
        if not isinstance(arguments, str):
            raise _bad(f"'{where}.arguments' must be a string of JSON", f"{where}.arguments")
        call_id = _call_id(item, where)
        issued.add(call_id)
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        _add_call(messages, call, None)
    elif kind == "function_call_output":
        call_id = _call_id(item, where)
        if call_id not in issued:
            raise _bad(
                f"'{where}.call_id': no function call with call_id '{call_id[:64]}' was issued in this "
                "conversation",
                f"{where}.call_id",
                code="invalid_call_id",
            )
        text = _output_text(item.get("output"), where)
        messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
    elif kind == "mcp_call":  # the agent's own step, as this server showed it: the call and its result
        name, step_id = item.get("name"), item.get("id")
        if not isinstance(name, str) or not isinstance(step_id, str):
            raise _bad(f"'{where}' must have an 'id' and a 'name'", where)
        arguments, output = item.get("arguments"), item.get("output")
        arguments = arguments if isinstance(arguments, str) else "{}"
        output = output if isinstance(output, str) else str(item.get("error") or "")
        _add_step(messages, steps, step_id, name, arguments, output)
    elif kind == "reasoning":  # the model's earlier thinking is not replayed; a step it carries is
        token = item.get("encrypted_content")
        if isinstance(token, str) and token.startswith(PREFIX):
            step = read_step(token)
            if step is None:
                param = f"{where}.encrypted_content"
                raise _bad(f"'{param}' is not a step this server wrote", param)
            _add_step(messages, steps, step["id"], step["name"], step["arguments"], step["output"])
    else:
        shown = kind[:40] if isinstance(kind, str) else repr(kind)[:40]
        raise _bad(f"'{where}.type' '{shown}' is not an input item this server reads", f"{where}.type")


def input_messages(value: Any, *, issued: set[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ``input`` as chat messages and as items; ``issued``: the call ids the conversation holds
    so far (grows with this input's calls)."""
    if isinstance(value, str):
        item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": value}]}
        return [{"role": "user", "content": value}], [item]
    if not isinstance(value, list) or not value:
        raise _bad("'input' must be a string or a non-empty list of items", "input")
    messages: list[dict[str, Any]] = []
    steps: set[str] = set()
    for index, item in enumerate(value):
        _item(messages, item, f"input[{index}]", issued, steps)
    return messages, list(value)


#: Tool types a client groups its functions in: the functions inside are read.
_GROUPS = ("namespace",)


def _function_tool(tool: dict[str, Any], where: str) -> dict[str, Any]:
    """A Responses ``function`` tool, checked (the chat validator checks its name and schema)."""
    name = tool.get("name")
    if not isinstance(name, str):
        raise _bad(f"'{where}.name' is required", f"{where}.name")
    parameters = tool.get("parameters")
    if parameters is None:
        parameters = {"type": "object", "properties": {}}
    if not isinstance(parameters, dict):
        raise _bad(f"'{where}.parameters' must be a JSON Schema object", f"{where}.parameters")
    strict = tool.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise _bad(f"'{where}.strict' must be a boolean", f"{where}.strict")
    echoed: dict[str, Any] = {"type": "function", "name": name, "parameters": parameters, "strict": strict}
    if isinstance(tool.get("description"), str):
        echoed["description"] = tool["description"]
    return echoed


def _tools(value: Any, report: Any) -> tuple[list[dict[str, Any]], dict[str, str], set[str]]:
    """The function tools (Responses shape), each namespaced one's namespace, the hosted types left out."""
    if value is None:
        return [], {}, set()
    if not isinstance(value, list):
        raise _bad("'tools' must be a list", "tools")
    functions: list[dict[str, Any]] = []
    namespaces: dict[str, str] = {}
    hosted: set[str] = set()
    for index, tool in enumerate(value):
        where = f"tools[{index}]"
        kind = tool.get("type") if isinstance(tool, dict) else None
        if not isinstance(kind, str):
            raise _bad(f"'{where}' must be a tool object with a 'type'", where)
        if kind == "function":
            functions.append(_function_tool(tool, where))
        elif kind in _GROUPS:
            inner = tool.get("tools")
            group = tool.get("name") if isinstance(tool.get("name"), str) else ""
            if not isinstance(inner, list):
                raise _bad(f"'{where}.tools' must be a list", f"{where}.tools")
            for position, member in enumerate(inner):
                at = f"{where}.tools[{position}]"
                if not isinstance(member, dict) or member.get("type", "function") != "function":
                    continue  # a hosted tool in a group: left out like the others
                function = _function_tool(member, at)
                functions.append(function)
                namespaces[function["name"]] = group
        else:
            hosted.add(kind)
    if hosted:
        line = f"responses: leaving out tool types this server cannot run: {', '.join(sorted(hosted))}"
        log.warning(line)
        report(f"warning: {line}")
    return functions, namespaces, hosted


def _tool_choice(value: Any, functions: list[dict[str, Any]], hosted: set[str]) -> Any:
    """The chat ``tool_choice``: a forced function stays forced; a forced hosted tool is a 400."""
    if value is None or value in ("auto", "none", "required"):
        return value
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise _bad("'tool_choice' must be none, auto, required or a tool object", "tool_choice")
    kind = value["type"]
    if kind == "function":
        name = value.get("name")
        if not isinstance(name, str) or name not in {f["name"] for f in functions}:
            raise _bad(
                f"'tool_choice' names the function '{str(name)[:64]}', which is not in 'tools'", "tool_choice"
            )
        return {"type": "function", "function": {"name": name}}
    if kind == "allowed_tools":
        mode = value.get("mode", "auto")
        return mode if mode in ("auto", "required") else "auto"
    shown = value.get("name") if isinstance(value.get("name"), str) else kind
    raise _bad(
        f"'tool_choice' forces the tool '{str(shown)[:64]}' ({kind[:40]}), which this server cannot run: "
        "only function tools can be forced",
        "tool_choice",
        code="unsupported_tool",
    )


def _response_format(text: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The ``text`` field echoed, and its ``format`` as a chat ``response_format`` (None: text)."""
    if text is None:
        return {"format": {"type": "text"}}, None
    if not isinstance(text, dict):
        raise _bad("'text' must be an object", "text")
    fmt = text.get("format")
    if fmt is None:
        return {**text, "format": {"type": "text"}}, None
    if not isinstance(fmt, dict) or not isinstance(fmt.get("type"), str):
        raise _bad("'text.format' must be an object with a 'type'", "text.format")
    if fmt["type"] == "json_schema":
        spec = {key: fmt[key] for key in ("name", "schema", "strict", "description") if key in fmt}
        return text, {"type": "json_schema", "json_schema": spec}
    return text, {"type": fmt["type"]}


def in_responses_terms(error: ApiError) -> ApiError:
    """A chat validator's error in this door's words (``response_format`` is ``text.format``)."""

    def rename(value: str) -> str:
        return (
            value.replace("response_format.json_schema", "text.format")
            .replace("response_format", "text.format")
            .replace("max_tokens", "max_output_tokens")
            .replace("messages", "input")
        )

    param = rename(error.param) if error.param else error.param
    renamed = ApiError(error.status, rename(error.message), type=error.type, param=param, code=error.code)
    renamed.retry = error.retry
    return renamed


def _flag(body: dict[str, Any], key: str, default: bool) -> bool:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _bad(f"'{key}' must be a boolean", key)
    return value


def _metadata(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > 16:
        raise _bad("'metadata' must be an object of at most 16 string values", "metadata")
    for key, item in value.items():
        if not isinstance(item, str) or len(key) > 64 or len(item) > 512:
            raise _bad(f"'metadata.{key[:64]}' must be a string of at most 512 characters", "metadata")
    return dict(value)


def _issued(messages: list[dict[str, Any]]) -> set[str]:
    return {call["id"] for message in messages for call in message.get("tool_calls") or ()}


def parse_responses_request(
    body: Any,
    *,
    prior: list[dict[str, Any]] | None = None,
    issued: frozenset[str] | None = None,
    report: Any = print,
) -> ResponsesRequest:
    """Validate a decoded body (``prior``: the conversation of ``previous_response_id``); 400s name
    the field in this API's words. With ``issued`` (the call ids ``prior`` holds), ``prior`` was
    checked already (``prior.prepared``): only this request's messages are."""
    if not isinstance(body, dict):
        raise _bad("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("'model' is required", "model")
    if "input" not in body:
        raise _bad("'input' is required", "input")
    prior = prior or []
    checked = issued is not None
    known = set(issued) if issued is not None else _issued(prior)
    messages, items = input_messages(body["input"], issued=known)
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise _bad("'instructions' must be a string", "instructions")
    functions, namespaces, hosted = _tools(body.get("tools"), report)
    choice = _tool_choice(body.get("tool_choice"), functions, hosted)
    text, response_format = _response_format(body.get("text"))
    lead = [{"role": "system", "content": instructions}] if instructions else []
    checked = checked and bool(lead or messages)  # nothing of its own: the whole is checked, as before
    chat_body: dict[str, Any] = {
        "model": model,
        "messages": [*lead, *messages] if checked else [*lead, *prior, *messages],
        "stream": _flag(body, "stream", False),
        "temperature": body.get("temperature"),
        "max_tokens": body.get("max_output_tokens"),
        "response_format": response_format,
        "limits": body.get("limits"),
    }
    if functions:
        chat_body["tools"] = [
            {"type": "function", "function": {k: v for k, v in f.items() if k not in ("type", "strict")}}
            for f in functions
        ]
        chat_body["tool_choice"] = choice
    try:
        chat = parse_chat_request(chat_body)
    except ApiError as error:
        raise in_responses_terms(error) from None
    if checked and prior:
        chat = replace(chat, messages=[*lead, *prior, *messages])
    previous = body.get("previous_response_id")
    echo = {key: body.get(key) for key in IGNORED if key in body}
    return ResponsesRequest(
        chat=chat,
        messages=messages,
        items=items,
        previous_response_id=previous,
        instructions=instructions,
        store=_flag(body, "store", True),
        metadata=_metadata(body.get("metadata")),
        tools=functions,
        namespaces=namespaces,
        tool_choice=body.get("tool_choice") or "auto",
        parallel_tool_calls=_flag(body, "parallel_tool_calls", True),
        text=text,
        echo=echo,
        carry_steps=_asks_encrypted_reasoning(body.get("include")),
    )


def _asks_encrypted_reasoning(include: Any) -> bool:
    """Whether ``include`` (a list of strings the API defines; others are ignored) asks for it."""
    return isinstance(include, list) and "reasoning.encrypted_content" in include
