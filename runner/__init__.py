"""runner: a declarative agent runner. An agent is a YAML file; one generic loop runs it."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
