"""Loading agent files: YAML with positions, ``${ENV}``, ``extends``, JSON Schema, checks, AgentSpec."""

from __future__ import annotations

from runner.spec.agentfile import AgentFile, check_file, find_agent, load_agent, load_file, spec_from_file
from runner.spec.model import AgentSpec

__all__ = ["AgentFile", "AgentSpec", "check_file", "find_agent", "load_agent", "load_file", "spec_from_file"]
