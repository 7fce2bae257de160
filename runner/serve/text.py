"""Text that is valid Unicode, for everything serve reads from a client or writes out.

JSON lets a client (or a model, through a provider's JSON) send a lone surrogate (``"\\udcff"``),
which Python keeps in a ``str`` but cannot encode as UTF-8: each such character becomes U+FFFD
before it reaches anything that encodes (the transcript, the model request, the answer).
"""

from __future__ import annotations

import re

__all__ = ["utf8", "valid_text"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (it can then be encoded as UTF-8)."""
    return _SURROGATE.sub("\ufffd", text)


def utf8(text: str) -> bytes:
    """``text`` as UTF-8, lone surrogates written as U+FFFD (never a ``UnicodeEncodeError``)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return valid_text(text).encode("utf-8")
