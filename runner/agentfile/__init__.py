"""Loading agent files: YAML with positions, ``${ENV}``, ``extends``, JSON Schema, checks, AgentConfig."""

from __future__ import annotations

from runner.agentfile.config import AgentConfig
from runner.agentfile.files import AgentFile, check_file, config_from_file, find_agent, load_agent, load_file

__all__ = [
    "AgentConfig",
    "AgentFile",
    "check_file",
    "config_from_file",
    "find_agent",
    "load_agent",
    "load_file",
]
