"""One verifying TLS context for every HTTP client of the process.

httpx builds a new ``ssl.SSLContext`` for every client and transport it makes, and building one
loads the whole CA bundle (about 20 ms of CPU). runner makes clients per runtime, per source, per
reload and per ``fetch`` toolset, so each paid it again. One context, made on first use with
httpx's own rules (certifi, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set), serves them all: an
``SSLContext`` may be shared by any number of connections. The environment is read once, at that
first use.
"""

from __future__ import annotations

import functools
import ssl

__all__ = ["tls_context"]


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The process's verifying TLS context (httpx's defaults, built once)."""
    import httpx

    return httpx.create_ssl_context()
