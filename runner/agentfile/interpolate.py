"""``${VAR}`` / ``${VAR:-default}`` interpolation of string values (SPEC section 4).

- ``$${`` writes a literal ``${``.
- A *plain* (unquoted) scalar that is exactly one ``${...}`` is read again as a YAML scalar after
  substitution, so ``max_steps: ${MAX_STEPS:-10}`` is the integer 10. A quoted one stays text,
  and so does a ``${...}`` inside longer text. A value over 1,000 characters, or an integer too
  big to print (over 4,300 digits), stays text too (``--var`` values are read the same way).
- Values of secret variables (``is_secret_name``: names with KEY, TOKEN, SECRET, PASSWORD ...,
  values that are URLs with a password) are remembered as secrets (never written to transcripts,
  cassettes or logs) and are never re-typed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from runner.errors import ConfigError
from runner.redact import environment_secrets, is_secret_name

__all__ = [
    "MAX_INT_BITS",
    "MAX_RETYPE_CHARS",
    "Interpolator",
    "PathKey",
    "environment_secrets",
    "is_secret_name",
    "retype",
]

_TOKEN = re.compile(r"\$\$\{|\$\{([^}]*)\}|\$\{")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

PathKey = tuple[str | int, ...]

#: Longer substituted values are never re-typed: they stay text.
MAX_RETYPE_CHARS = 1000
#: Integers of more bits stay text (more than about 4,200 digits: Python cannot print them).
MAX_INT_BITS = 14_000


class Interpolator:
    """Expands ``${...}`` against an environment, recording secrets and interpolated paths."""

    def __init__(self, env: Mapping[str, str], *, expand: bool = True) -> None:
        self.env = env
        self.active = expand  # False: values are kept as written (data files that are not agent files)
        self.secrets: set[str] = set()
        self.interpolated: set[PathKey] = set()

    def _lookup(self, expr: str) -> tuple[str, str]:
        name, sep, default = expr.partition(":-")
        if not _NAME.fullmatch(name):
            raise ConfigError(
                f"malformed variable reference '${{{expr}}}'",
                hint="write ${NAME} or ${NAME:-default}; write $${ for a literal ${",
            )
        if "${" in default:
            raise ConfigError(
                f"the default of ${{{name}:-...}} contains another '${{': nesting is not supported",
                hint=f"give a plain default (${{{name}:-value}}), or write $${{ for a literal ${{",
            )
        value = self.env.get(name)
        if value is None or (sep and value == ""):  # as in the shell, `:-` also covers an empty value
            if not sep:
                raise ConfigError(
                    f"environment variable {name} is not set",
                    hint=f"set {name}, or give a default: ${{{name}:-default}}",
                )
            value = default
        if value and is_secret_name(name, value):
            self.secrets.add(value)
        return name, value

    def expand(self, text: str, path: PathKey, *, plain: bool) -> Any:
        """The value of ``text`` with every reference substituted."""
        names: list[str] = []
        whole = False

        def replace(match: re.Match[str]) -> str:
            token = match.group(0)
            if token == "$${":
                return "${"
            if match.group(1) is None:
                raise ConfigError(
                    "unclosed '${' in a value", hint="close it with '}', or write $${ for a literal ${"
                )
            name, value = self._lookup(match.group(1))
            names.append(name)
            return value

        if "${" not in text or not self.active:
            return text
        result = _TOKEN.sub(replace, text)
        if not names:
            return result
        self.interpolated.add(path)
        whole = plain and _TOKEN.fullmatch(text) is not None and text.startswith("${")
        if whole and not is_secret_name(names[0]):
            return retype(result)
        return result


def retype(text: str) -> Any:
    """Read a substituted value again as a YAML scalar; anything that is not a scalar stays text.

    A value longer than ``MAX_RETYPE_CHARS`` stays text too, and so does an integer too big to print
    (Python refuses to convert integers of more than 4,300 digits to text): no setting needs such a
    number, and reading or printing one would fail or be slow.
    """
    if text == "" or len(text) > MAX_RETYPE_CHARS:
        return text
    try:
        value = yaml.safe_load(text)
    except (yaml.YAMLError, ValueError, OverflowError):
        return text
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
        return text
    if value is None or isinstance(value, bool | int | float):
        return value
    return text
