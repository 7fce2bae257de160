"""ScriptedServer: an OpenAI-compatible chat-completions server on loopback that answers from a script."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import selectors
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from runner.testing.model import pieces

__all__ = ["ScriptedServer", "ServerStep", "main"]

ServerStep = Mapping[str, Any] | Callable[[dict[str, Any]], Mapping[str, Any]]
_ERROR_TYPES = {401: "authentication_error", 404: "not_found_error", 429: "rate_limit_error"}


class ScriptedServer:
    """An OpenAI-compatible chat-completions server on loopback that answers from a script.

    Each entry is a dict: ``content``, ``reasoning``, ``tool_calls`` (``[{"name", "arguments",
    "id"}]``; ``"id": None`` sends none), ``usage``, ``finish_reason``, ``response_id`` (the
    answer's ``id``, ``chatcmpl-scripted`` by default), ``status`` with ``error``
    (an error answer in OpenAI's shape, with ``headers`` such as ``{"Retry-After": "1"}``),
    ``delay_s`` (before answering), ``chunk_delay_s`` (between stream chunks) and ``linger_s``
    (how long a stream stays open after ``[DONE]``); or a callable ``(body) -> dict``. ``script``
    itself may be such a callable. ``repeat=True`` cycles the script forever. ``requests`` holds the
    parsed JSON bodies, ``peers`` the client address of each (one address for many requests: the
    client reused its connection).

    Malformed answers, sent as they are: ``frames`` (a list of chunk dicts streamed as the stream's
    ``data:`` events, then ``[DONE]``) and ``body`` (the whole answer of a request without
    streaming). ``open_connections`` counts the client connections open right now (a kept-alive
    idle one too): a client that leaks connections makes it grow.
    """

    def __init__(
        self,
        script: Sequence[ServerStep] | Callable[[dict[str, Any]], Mapping[str, Any]],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        repeat: bool = False,
        model: str = "scripted",
        chunks: int = 3,
    ) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []  # the headers of each request in ``requests``
        self.peers: list[tuple[str, int]] = []  # the client address of each request
        self.unexpected = 0
        self.call_ids = itertools.count(1)  # unscripted tool-call ids are unique across requests
        self.model = model
        self.chunks = chunks
        self._script = script if callable(script) else list(script)
        self._repeat = repeat
        self._position = 0
        self._lock = threading.Lock()
        self._open = 0
        # Binding happens in the constructor: once it returns, connections queue in the backlog.
        self._httpd = _HTTPServer((host, port), _Handler)
        self._httpd.scripted = self
        self.host, self.port = str(self._httpd.server_address[0]), int(self._httpd.server_address[1])
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            name="scripted-server",
            daemon=True,
        )
        self._thread.start()
        self._closed = False

    @property
    def url(self) -> str:
        """``http://HOST:PORT``."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, ``http://HOST:PORT/v1``."""
        return self.url + "/v1"

    @property
    def open_connections(self) -> int:
        """How many client connections are open now (answering, or kept alive and idle)."""
        with self._lock:
            return self._open

    def _opened(self, change: int) -> None:
        with self._lock:
            self._open += change

    def assert_complete(self) -> None:
        """Fail if scripted entries were never requested, or a request came after the script ended."""
        if self.unexpected:
            raise AssertionError(
                f"ScriptedServer: {self.unexpected} request(s) arrived after the script ended"
            )
        if not callable(self._script) and not self._repeat and self._position < len(self._script):
            left = len(self._script) - self._position
            raise AssertionError(
                f"ScriptedServer: {left} of {len(self._script)} scripted entries never requested"
            )

    def close(self) -> None:
        """Stop serving and release the port."""
        if self._closed:
            return
        self._closed = True
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def wait(self) -> None:
        """Block until the server stops (or Ctrl+C)."""
        self._thread.join()

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def next_step(self, body: dict[str, Any], headers: Mapping[str, str] | None = None) -> Mapping[str, Any]:
        """Record ``body`` and return the script entry that answers it."""
        with self._lock:
            self.requests.append(body)
            self.headers.append({key.lower(): value for key, value in (headers or {}).items()})
            script = self._script
            if callable(script):
                step: ServerStep = script
            elif self._position < len(script) or (self._repeat and script):
                step = script[self._position % len(script)]
                self._position += 1
            else:
                self.unexpected += 1
                return {
                    "status": 400,
                    "error": f"ScriptedServer: script exhausted after {len(script)} replies "
                    f"(request #{len(self.requests)}); use --repeat (repeat=True) to cycle it",
                }
        if callable(step):
            try:
                return step(body)
            except Exception as exc:
                return {"status": 500, "error": f"ScriptedServer: the script raised {exc!r}"}
        return step


class StoppableHTTPServer(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` whose ``shutdown`` returns at once.

    ``serve_forever`` selects on the listening socket and a wake-up pair, which ``shutdown`` writes
    to; the standard one looks at its stop flag once per ``poll_interval`` (0.5 s by default), which
    every test that stops a server pays. A drop-in: the same ``serve_forever`` / ``shutdown`` /
    ``server_close``.
    """

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._stopping = False
        self._stopped = threading.Event()
        self._wake_read, self._wake_write = socket.socketpair()

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Answer connections until ``shutdown`` (``poll_interval`` is accepted and not needed)."""
        self._stopped.clear()
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self, selectors.EVENT_READ)
                selector.register(self._wake_read, selectors.EVENT_READ)
                while not self._stopping:
                    for key, _ in selector.select():
                        if key.fileobj is self._wake_read:
                            self._wake_read.recv(64)
                        elif not self._stopping:
                            self._handle_request_noblock()  # type: ignore[attr-defined]  # socketserver's own step, not in typeshed
                    self.service_actions()
        finally:
            self._stopping = False
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop ``serve_forever`` and wait until it has returned (called before it starts, it
        ends at once when it does, as the standard one)."""
        self._stopping = True
        self._wake_write.send(b"\0")
        self._stopped.wait()

    def server_close(self) -> None:
        super().server_close()
        self._wake_read.close()
        self._wake_write.close()


class _HTTPServer(StoppableHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    scripted: ScriptedServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-answer is normal (cancelled runs); report anything else."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: tests and benchmarks read stdout."""

    def setup(self) -> None:
        super().setup()
        self.server.scripted._opened(1)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.scripted._opened(-1)

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            model = {"id": self.server.scripted.model, "object": "model", "created": 0, "owned_by": "runner"}
            self._send_json(200, {"object": "list", "data": [model]})
        else:
            self._send_error(404, f"no route for GET {self.path}")

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_error(404, f"no route for POST {self.path}")
            return
        try:
            body = json.loads(raw)
        except ValueError as exc:
            self._send_error(400, f"invalid JSON body: {exc}")
            return
        self.server.scripted.peers.append(self.client_address[:2])
        step = self.server.scripted.next_step(body, dict(self.headers.items()))
        if step.get("delay_s"):
            time.sleep(float(step["delay_s"]))
        status = int(step.get("status") or 200)
        if status != 200:
            headers = {str(k): str(v) for k, v in (step.get("headers") or {}).items()}
            self._send_error(status, str(step.get("error") or f"scripted error {status}"), headers)
        elif body.get("stream"):
            self._send_stream(body, step)
        elif "body" in step:
            self._send_json(200, step["body"])
        else:
            self._send_json(200, self._completion(body, step))

    def _send_json(
        self, status: int, payload: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        kind = "server_error" if status >= 500 else _ERROR_TYPES.get(status, "invalid_request_error")
        error = {"error": {"message": message, "type": kind, "param": None, "code": None}}
        self._send_json(status, error, headers)

    def _send_stream(self, body: dict[str, Any], step: Mapping[str, Any]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        delay = float(step.get("chunk_delay_s") or 0.0)
        chunks = step["frames"] if "frames" in step else self._chunks(body, step)
        frames = [_sse(chunk) for chunk in chunks] + [b"data: [DONE]\n\n"]
        if delay:
            for frame in frames:
                self.wfile.write(_http_chunk(frame))
                time.sleep(delay)
            self.wfile.write(b"0\r\n\r\n")
        elif step.get("linger_s"):
            self.wfile.write(b"".join(_http_chunk(frame) for frame in frames))
            self.wfile.flush()
            time.sleep(float(step["linger_s"]))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.wfile.write(b"".join(_http_chunk(frame) for frame in frames) + b"0\r\n\r\n")

    def _chunks(self, body: dict[str, Any], step: Mapping[str, Any]) -> list[dict[str, Any]]:
        count = self.server.scripted.chunks
        base = {"id": _response_id(step), "object": "chat.completion.chunk", "created": int(time.time())}
        base["model"] = body.get("model") or self.server.scripted.model
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        deltas += [{"reasoning_content": piece} for piece in pieces(step.get("reasoning") or "", count)]
        deltas += [{"content": piece} for piece in pieces(step.get("content") or "", count)]
        for index, call in enumerate(_wire_calls(step, self.server.scripted.call_ids)):
            first: dict[str, Any] = {"index": index, "type": "function", "function": {"name": call["name"]}}
            first["function"]["arguments"] = ""
            if call["id"] is not None:
                first["id"] = call["id"]
            deltas.append({"tool_calls": [first]})
            for piece in pieces(call["arguments"], count):
                deltas.append({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        chunks = [
            {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]} for delta in deltas
        ]
        finish = {"index": 0, "delta": {}, "finish_reason": _finish_reason(step)}
        chunks.append({**base, "choices": [finish]})
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append({**base, "choices": [], "usage": _usage(body, step)})
        return chunks

    def _completion(self, body: dict[str, Any], step: Mapping[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": step.get("content")}
        calls = _wire_calls(step, self.server.scripted.call_ids)
        if calls:
            message["tool_calls"] = [
                {
                    **({"id": call["id"]} if call["id"] is not None else {}),
                    "type": "function",
                    "function": {"name": call["name"], "arguments": call["arguments"]},
                }
                for call in calls
            ]
        if step.get("reasoning"):
            message["reasoning_content"] = step["reasoning"]
        return {
            "id": _response_id(step),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.server.scripted.model,
            "choices": [{"index": 0, "message": message, "finish_reason": _finish_reason(step)}],
            "usage": _usage(body, step),
        }


def _wire_calls(step: Mapping[str, Any], ids: Iterator[int]) -> list[dict[str, Any]]:
    calls = []
    for call in step.get("tool_calls") or ():
        arguments = call.get("arguments", {})
        calls.append(
            {
                "id": call["id"] if "id" in call else f"call_{next(ids)}",
                "name": call["name"],
                "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
            }
        )
    return calls


def _response_id(step: Mapping[str, Any]) -> str:
    return str(step.get("response_id") or "chatcmpl-scripted")


def _finish_reason(step: Mapping[str, Any]) -> str:
    return str(step.get("finish_reason") or ("tool_calls" if step.get("tool_calls") else "stop"))


def _usage(body: Mapping[str, Any], step: Mapping[str, Any]) -> dict[str, int]:
    if step.get("usage"):
        usage = dict(step["usage"])
        usage.setdefault("total_tokens", usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
        return usage
    prompt = max(1, len(json.dumps(body.get("messages") or [])) // 4)
    completion = max(1, (len(step.get("content") or "") + len(json.dumps(step.get("tool_calls") or []))) // 4)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _sse(chunk: Mapping[str, Any]) -> bytes:
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _http_chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _load_script(path: Path) -> tuple[list[dict[str, Any]], bool]:
    text_ = path.read_text(encoding="utf-8")
    if path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text_)
        except yaml.YAMLError as exc:
            raise ValueError(str(exc)) from exc
    else:
        data = json.loads(text_)
    repeat = False
    if isinstance(data, dict):
        repeat = bool(data.get("repeat", False))
        data = data.get("script")
    if not isinstance(data, list) or not all(isinstance(entry, dict) for entry in data):
        raise ValueError("a script is a list of reply mappings (or a mapping with `script:` and `repeat:`)")
    return data, repeat


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m runner.testing serve SCRIPT [--port N]``: serve a script until Ctrl+C."""
    parser = argparse.ArgumentParser(prog="python -m runner.testing", description="Runner test helpers.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve a scripted OpenAI-compatible endpoint")
    serve.add_argument("script", type=Path, help="JSON or YAML list of reply mappings")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=0, help="0 picks a free port")
    serve.add_argument("--repeat", action="store_true", help="cycle the script forever")
    args = parser.parse_args(argv)
    try:
        script, repeat = _load_script(args.script)
    except (OSError, ValueError) as exc:
        print(f"error: {args.script}: {exc}", file=sys.stderr)
        return 2
    with ScriptedServer(script, host=args.host, port=args.port, repeat=repeat or args.repeat) as server:
        print(server.base_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
