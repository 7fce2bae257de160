"""The typed agent definition that the rest of the runner uses.

These dataclasses are built only from data that already passed ``schemas/agent.schema.json``
(see ``runner.agentfile.build``); they hold no validation of their own. Paths are absolute,
resolved against the file that wrote them (which matters with ``extends``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from runner.agentfile.skills import Skill

__all__ = [
    "BUILTIN_TOOLSETS",
    "HOOK_EVENTS",
    "HOOK_EVENT_RULES",
    "HOOK_KINDS",
    "MESSAGE_EVENTS",
    "SOURCE_KINDS",
    "AgentConfig",
    "ExpectConfig",
    "FunctionCalling",
    "HookConfig",
    "HookEventRules",
    "HookKind",
    "LimitsConfig",
    "McpServerConfig",
    "ModelConfig",
    "OutputConfig",
    "PermissionsConfig",
    "PromptsConfig",
    "SelectorConfig",
    "SourceKind",
    "TemplateSource",
    "TestCaseConfig",
    "ToolFormat",
    "ToolSourceConfig",
]

FunctionCalling = Literal["auto", "native", "prompt", "inline"]
ToolFormat = Literal["xml", "markdown"]
SourceKind = Literal["python", "openapi", "mcp", "builtin", "agent", "a2a"]
HookKind = Literal["python", "command", "message"]

SOURCE_KINDS: tuple[SourceKind, ...] = ("python", "openapi", "mcp", "builtin", "agent", "a2a")
HOOK_KINDS: tuple[HookKind, ...] = ("python", "command", "message")


@dataclass(frozen=True)
class HookEventRules:
    """What a hook's answer does at one event (SPEC 6); the one table every part of the runner reads.

    ``messages``: where returned messages go (the history, the prompt queue, or nowhere); ``stop``:
    what ``stop`` ends (the turn, the session, or the run of queued inputs); ``deny`` / ``arguments``
    / ``output``: whether the event can refuse a call, replace its arguments, replace its result.
    """

    messages: Literal["history", "queue"] | None = None
    stop: Literal["turn", "session", "run"] | None = None
    deny: bool = False
    arguments: bool = False
    output: bool = False


#: The hook events in loop order, and what a hook can do at each. Adding an event is one row here
#: (plus the place in the loop that runs its chain, and its entry in the schema).
HOOK_EVENT_RULES: dict[str, HookEventRules] = {
    "session_start": HookEventRules(messages="history", stop="session"),
    "turn_pre": HookEventRules(messages="history", stop="turn"),
    "step_pre": HookEventRules(messages="history", stop="turn"),
    "generation_post": HookEventRules(stop="turn"),
    "tool_pre": HookEventRules(stop="turn", deny=True, arguments=True),
    "tool_post": HookEventRules(stop="turn", output=True),
    "turn_post": HookEventRules(messages="queue", stop="run"),
    "loop_continue": HookEventRules(messages="queue", stop="run"),
    "session_end": HookEventRules(),
}
HOOK_EVENTS: tuple[str, ...] = tuple(HOOK_EVENT_RULES)
#: Events whose hooks may add messages: to the history, or to the prompt queue.
MESSAGE_EVENTS: tuple[str, ...] = tuple(e for e, rules in HOOK_EVENT_RULES.items() if rules.messages)
BUILTIN_TOOLSETS: tuple[str, ...] = ("time", "files", "shell", "fetch", "todo", "skills")


#: ``model.total_timeout_s`` when the file sets none (a longer ``model.timeout_s`` raises it).
DEFAULT_TOTAL_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class ModelConfig:
    """Which model to call and how (``model:``)."""

    id: str
    api_base: str | None = None
    api_key: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    stream: bool = True
    timeout_s: float = 120.0
    #: The longest one request may take from start to its answer's end; None: the default
    #: (``DEFAULT_TOTAL_TIMEOUT_S``, or ``timeout_s`` when that is longer).
    total_timeout_s: float | None = None
    retries: int = 2
    params: dict[str, Any] = field(default_factory=dict)
    fallbacks: tuple[str, ...] = ()

    @property
    def total_bound_s(self) -> float:
        """The bound on one request's whole duration: ``total_timeout_s``, else its default."""
        if self.total_timeout_s is not None:
            return self.total_timeout_s
        return max(DEFAULT_TOTAL_TIMEOUT_S, self.timeout_s)


@dataclass(frozen=True)
class SelectorConfig:
    """The tool selector of ``function_calling: prompt``."""

    model: str | None = None
    rounds: int = 1
    history: int = 4


@dataclass(frozen=True)
class TemplateSource:
    """A Jinja template, written inline or kept in a file.

    ``line`` is the 1-based line in ``origin`` where an inline template's first line is, so that
    template errors point into the agent file.
    """

    text: str
    origin: Path
    line: int = 1
    file: Path | None = None
    #: A file template's path as the agent file wrote it (``file`` is that path resolved).
    written: str | None = None

    @property
    def name(self) -> str:
        return str(self.file or self.origin)


@dataclass(frozen=True)
class PromptsConfig:
    """The prompt templates (``prompts:``)."""

    system: TemplateSource | None = None
    user: TemplateSource | None = None
    status: TemplateSource | None = None
    tool_selection: TemplateSource | None = None


@dataclass(frozen=True)
class McpServerConfig:
    """How to reach an MCP server: a URL (streamable HTTP or legacy SSE) or a command (stdio)."""

    url: str | None = None
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None

    @property
    def transport(self) -> Literal["stdio", "http", "sse"]:
        if self.command is not None:
            return "stdio"
        assert self.url is not None
        return "sse" if self.url.rstrip("/").endswith("/sse") else "http"


@dataclass(frozen=True)
class ToolSourceConfig:
    """One entry of ``tools:``. ``target`` is the kind's value (module path, URL, toolset name...)."""

    kind: SourceKind
    target: str
    base_dir: Path
    id: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    prefix: bool = False
    confirm: bool | None = None
    timeout_s: float | None = None
    headers: dict[str, str] = field(default_factory=dict)
    base_url: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    mcp: McpServerConfig | None = None
    description: str | None = None
    index: int = 0
    line: int = 0
    column: int = 0

    @property
    def label(self) -> str:
        """A short human name for messages: the id, else ``kind:target``."""
        return self.id or f"{self.kind}:{self.target}"


@dataclass(frozen=True)
class HookConfig:
    """One hook of a chain."""

    kind: HookKind
    value: str
    base_dir: Path
    role: Literal["user", "system"] = "user"
    timeout_s: float = 30.0
    required: bool = False


@dataclass(frozen=True)
class PermissionsConfig:
    """``permissions:`` patterns; ``deny`` wins over ``ask``, which wins over ``allow``."""

    allow: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()


@dataclass(frozen=True)
class LimitsConfig:
    """``limits:`` (SPEC section 9)."""

    max_steps: int = 25
    max_turns: int = 50
    max_tool_calls: int = 200
    max_repeat: int = 3
    max_parallel: int = 8
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    timeout_s: float | None = None
    tool_timeout_s: float = 60.0
    tool_output_chars: int = 20000
    context_tokens: int | None = None
    max_queue: int = 100
    output_retries: int = 2


@dataclass(frozen=True)
class OutputConfig:
    """``output:``: the JSON Schema the final answer must match (inline or a file), or a pydantic model.

    ``schema`` is the schema as written (None for ``python``: it comes from the model when the
    runtime imports it); ``where`` names it in messages.
    """

    schema: dict[str, Any] | None = None
    python: str | None = None
    file: Path | None = None
    base_dir: Path = Path(".")

    @property
    def where(self) -> str:
        """Where the schema comes from, for messages."""
        if self.python is not None:
            return f"the pydantic model {self.python}"
        if self.file is not None:
            return f"the output schema in {self.file.name}"
        return "the output schema"


@dataclass(frozen=True)
class ExpectConfig:
    """What a test case checks."""

    output_contains: tuple[str, ...] = ()
    output_matches: str | None = None
    tools_called: tuple[str, ...] = ()
    ordered: bool = False
    max_steps: int | None = None
    #: A JSON Schema the structured output must satisfy.
    output_schema: dict[str, Any] | None = None
    #: Values the structured output must have, by dotted path (``temps.0``).
    output_json: dict[str, Any] = field(default_factory=dict)
    #: A rubric the judge model grades the answer against (``runner eval`` only).
    judge: str | None = None
    #: Tools whose calls must have been refused for want of a confirmation.
    tools_refused: tuple[str, ...] = ()
    #: How the run must end (an ``Outcome`` status); None: ``ok`` or ``stopped``.
    status: str | None = None


@dataclass(frozen=True)
class TestCaseConfig:
    """One entry of ``tests:``."""

    __test__ = False  # not a pytest class

    name: str
    input: str
    cassette: Path | None = None
    vars: dict[str, Any] = field(default_factory=dict)
    expect: ExpectConfig = field(default_factory=ExpectConfig)
    #: How many times ``runner eval`` runs the case.
    repeat: int = 1
    #: Allow the tools that ask for confirmation (``--yes``); else they are refused, as for a user.
    yes: bool = False


@dataclass(frozen=True)
class AgentConfig:
    """A validated agent: everything ``runner run`` needs, with absolute paths."""

    name: str
    path: Path
    model: ModelConfig | None = None
    description: str = ""
    function_calling: FunctionCalling = "auto"
    tool_format: ToolFormat = "xml"
    selector: SelectorConfig = field(default_factory=SelectorConfig)
    prompts: PromptsConfig = field(default_factory=PromptsConfig)
    vars: dict[str, Any] = field(default_factory=dict)
    tools: tuple[ToolSourceConfig, ...] = ()
    permissions: PermissionsConfig = field(default_factory=PermissionsConfig)
    hooks: dict[str, tuple[HookConfig, ...]] = field(default_factory=dict)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    #: ``output:``: the shape of the final answer (None: free text).
    output: OutputConfig | None = None
    #: ``serve.tool_details``: tool calls shown as ``<details>`` blocks in served answers.
    tool_details: bool = True
    tests: tuple[TestCaseConfig, ...] = ()
    #: ``evals:``: the cases ``runner eval`` runs live (empty: it runs ``tests:``).
    evals: tuple[TestCaseConfig, ...] = ()
    #: ``judge:``: the model that grades ``expect.judge`` rubrics.
    judge: ModelConfig | None = None
    secrets: frozenset[str] = frozenset()
    team: tuple[str, ...] = ()
    #: ``skills:``: the Agent Skills found in its folders (checked; the bodies are read on demand).
    skills: tuple[Skill, ...] = ()

    @property
    def directory(self) -> Path:
        return self.path.parent
