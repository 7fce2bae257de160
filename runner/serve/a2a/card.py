"""The Agent Card of one served agent or workflow (``GET /a2a/NAME/.well-known/agent-card.json``).

Everything on it is derived from the file and from the request it answers: the name, description
and version; one skill (the agent's description, its tools' names as tags); streaming; text and JSON
in and out; four interfaces — JSON-RPC and HTTP+JSON at protocol 1.0, and the same two at 0.3 (the
SDK's compatibility mode) — each at the scheme and host the card was asked on (never ``0.0.0.0``);
a bearer ``securitySchemes`` entry when the server has API keys.
"""

from __future__ import annotations

from typing import Any

from a2a.types import a2a_pb2 as pb

from runner.serve.catalog import ServedAgent, ServedWorkflow
from runner.serve.outward import outward
from runner.version import __version__

__all__ = ["INPUT_MODES", "OUTPUT_MODES", "agent_card", "interface_paths"]

INPUT_MODES = ("text/plain", "application/json")
OUTPUT_MODES = ("text/plain", "application/json")

#: Where each interface lives under ``/a2a/NAME``: (binding, version, path suffix).
_INTERFACES = (
    ("JSONRPC", "1.0", ""),
    ("HTTP+JSON", "1.0", "/rest"),
    ("JSONRPC", "0.3", "/v0.3"),
    ("HTTP+JSON", "0.3", "/v0.3/rest"),
)


def interface_paths() -> tuple[tuple[str, str, str], ...]:
    """The interfaces every served agent has: (binding, protocol version, path under its prefix)."""
    return _INTERFACES


def _tool_names(served: ServedAgent | ServedWorkflow, registry: Any) -> list[str]:
    """The tools' names (the runtime's when it is built; else what the file says of its sources)."""
    if registry is not None:
        return sorted(registry.names())[:50]
    if isinstance(served, ServedWorkflow):
        return sorted(served.configs)[:50]
    names = [
        source.id or (source.target if source.kind == "builtin" else source.kind)
        for source in served.config.tools
    ]
    return names[:50]


def agent_card(
    served: ServedAgent | ServedWorkflow,
    *,
    base_url: str,
    secured: bool,
    registry: Any = None,
) -> pb.AgentCard:
    """The card of ``served`` for a client that reached the server at ``base_url`` (scheme://host)."""
    prefix = f"{base_url.rstrip('/')}/a2a/{served.name}"
    if isinstance(served, ServedWorkflow):
        secrets = frozenset().union(*(config.secrets for config in served.configs.values()))
        description = outward(served.description(), secrets)
        kind, version = "workflow", __version__
    else:
        description = outward(served.config.description, served.config.secrets) or f"the agent {served.name}"
        kind, version = "agent", __version__
    skill = pb.AgentSkill(
        id=served.name,
        name=served.name,
        description=description,
        tags=[kind, *_tool_names(served, registry)],
        input_modes=list(INPUT_MODES),
        output_modes=list(OUTPUT_MODES),
    )
    card = pb.AgentCard(
        name=served.name,
        description=description,
        version=version,
        capabilities=pb.AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=list(INPUT_MODES),
        default_output_modes=list(OUTPUT_MODES),
        skills=[skill],
        supported_interfaces=[
            pb.AgentInterface(url=prefix + path, protocol_binding=binding, protocol_version=proto)
            for binding, proto, path in _INTERFACES
        ],
    )
    if secured:
        card.security_schemes["bearer"].CopyFrom(
            pb.SecurityScheme(
                http_auth_security_scheme=pb.HTTPAuthSecurityScheme(
                    scheme="bearer", description="one of the server's API keys (RUNNER_SERVE_API_KEYS)"
                )
            )
        )
        requirement = pb.SecurityRequirement()
        requirement.schemes["bearer"].SetInParent()
        card.security_requirements.append(requirement)
    return card
