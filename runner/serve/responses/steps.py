"""The agent's own tool steps carried in a ``reasoning`` item's ``encrypted_content``.

A client that keeps no state on the server (``store: false``) and asks for
``include: ["reasoning.encrypted_content"]`` — the Codex CLI does both — resends the reasoning
items it was given with its history, but not the ``mcp_call`` items that show the agent's own
steps (it keeps only the item types it knows). For such a client each step's ``mcp_call`` is
followed by a reasoning item (no summary) whose ``encrypted_content`` is this token: the step's
id, name, arguments and output. Resent, it becomes the call and its result again, as an
``mcp_call`` does. The token is not secret (it holds what the ``mcp_call`` beside it shows) nor
signed: a client resending its history can state any earlier step either way.
"""

from __future__ import annotations

import base64
import binascii
import json

__all__ = ["PREFIX", "read_step", "step_token"]

#: What a token of this server starts with (others' ``encrypted_content`` is left alone).
PREFIX = "runner.step.1:"


def step_token(step_id: str, name: str, arguments: str, output: str) -> str:
    """The token of one step."""
    data = json.dumps({"id": step_id, "name": name, "arguments": arguments, "output": output})
    return PREFIX + base64.urlsafe_b64encode(data.encode()).decode()


def read_step(token: str) -> dict[str, str] | None:
    """The step a token holds (``id``, ``name``, ``arguments``, ``output``); None when the token
    is not one this server wrote well (the caller says which item)."""
    try:
        step = json.loads(base64.urlsafe_b64decode(token.removeprefix(PREFIX).encode()))
    except (binascii.Error, ValueError):
        return None
    keys = ("id", "name", "arguments", "output")
    if not isinstance(step, dict) or not all(isinstance(step.get(key), str) for key in keys):
        return None
    return {key: step[key] for key in keys}
