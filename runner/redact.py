"""Which values are secrets, and how they are masked: ``is_secret_name`` and ``Redactor``.

A leaf module (it imports nothing of the runner's), so that the guard of the ``runner`` command's
output (``cli/guard.py``) knows the environment's secrets without loading the agent-file package or
the transcript store: ``runner --help`` stays fast (SPEC section 14). ``agentfile.interpolate``
(``${VAR}`` values) and ``store.transcript`` (everything written) use the same two.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["REDACTED", "Redactor", "environment_secrets", "is_secret_name"]

REDACTED = "***"

_SECRET_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL")
_SECRET_WORDS = frozenset({"CREDS", "COOKIE"})
_SECRET_LAST_WORDS = frozenset({"PWD", "PAT", "PASS", "AUTH"})
_WORD_BREAK = re.compile(r"[^A-Z0-9]+")
#: A URL whose userinfo has a password, or a connection string's password or key part.
_SECRET_VALUE = re.compile(
    r"[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:]*:[^\s/?#@]+@"
    r"|(?:^|;)\s*(?:password|pwd|accountkey|sharedaccesskey)\s*=\s*[^;\s]",
    re.IGNORECASE,
)


def is_secret_name(name: str, value: str | None = None) -> bool:
    """Whether a variable's value must be treated as a secret, by its name or (given) its value.

    The name (upper-cased) contains KEY, TOKEN, SECRET, PASSWORD, PASSWD, PASSPHRASE or CREDENTIAL;
    or one of its words (split at ``_``, ``-``, ``.``) is CREDS or COOKIE; or its last word is PWD,
    PAT, PASS or AUTH (``MYSQL_PWD``, ``GH_PAT``, ``SMTP_PASS``, ``NPM_AUTH``; not ``PWD``,
    ``OLDPWD``, ``PATH`` or ``SSH_AUTH_SOCK``). The value is a URL with a password in it
    (``postgres://user:pw@host/db``) or a connection string with a Password, Pwd, AccountKey or
    SharedAccessKey part.
    """
    upper = name.upper()
    if any(part in upper for part in _SECRET_PARTS):
        return True
    words = [word for word in _WORD_BREAK.split(upper) if word]
    if any(word in _SECRET_WORDS for word in words):
        return True
    if words and words[-1] in _SECRET_LAST_WORDS and upper not in ("PWD", "OLDPWD"):
        return True
    return bool(value) and _SECRET_VALUE.search(value or "") is not None


def _credential_like(value: str) -> bool:
    """Whether a secret-named variable's value looks like a credential: at least 8 characters,
    not a path, not a plain lowercase word (``OPENAI_API_KEY=none`` masks nothing)."""
    if len(value) < 8 or value.startswith(("/", "~", ".")):
        return False
    return not (value.isalpha() and value.islower())


def environment_secrets(environ: Mapping[str, str]) -> set[str]:
    """The values of ``environ`` that are secrets wherever they appear (named like secrets, and
    looking like credentials): what the runner masks in everything it writes or sends out."""
    return {v for k, v in environ.items() if is_secret_name(k, v) and _credential_like(v)}


class Redactor:
    """Replaces every secret by ``***`` in text and in the strings of a record.

    Besides the secret itself, its JSON-escaped forms are replaced, so a secret inside JSON text
    (a tool's JSON output, a hook's payload) is caught too.
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        forms: set[str] = set()
        for secret in secrets:
            if not secret or len(secret) < 4:
                continue
            forms.add(secret)
            forms.add(json.dumps(secret, ensure_ascii=False)[1:-1])
            forms.add(json.dumps(secret)[1:-1])
        # Longest first, so a secret that contains another is replaced whole.
        self.patterns = sorted(forms, key=len, reverse=True)
        # How each form looks once a record holding it is serialized (escaped once more).
        self._in_lines = forms | {json.dumps(f, ensure_ascii=False)[1:-1] for f in forms}

    def __call__(self, text: str) -> str:
        for pattern in self.patterns:
            if pattern in text:
                text = text.replace(pattern, REDACTED)
        return text

    def found_in(self, text: str) -> bool:
        """Whether any form of any secret occurs in ``text`` (a fast check before redacting)."""
        return any(pattern in text for pattern in self._in_lines)

    def record(self, value: Any) -> Any:
        """``value`` with every string in it (keys too) redacted; the structure is kept."""
        if not self.patterns:
            return value
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            return {self.record(k): self.record(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.record(item) for item in value]
        return value
