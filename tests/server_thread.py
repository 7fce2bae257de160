"""An ASGI app on uvicorn in a background thread, started and stopped the way the tests need.

The suite starts and stops several hundred servers. A plain ``uvicorn.Server`` takes ~0.2 s to
stop: its main loop looks at ``should_exit`` every 0.1 s, and its shutdown waits a fixed 0.1 s for
open connections to close even when there are none. ``PromptServer`` wakes its main loop when
asked to stop and skips that wait when no connection and no request task is left (otherwise it
shuts down exactly as uvicorn does), so a stop costs what the app's own shutdown costs.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import uvicorn

__all__ = ["PromptServer", "ServerThread", "stop_all"]


class PromptServer(uvicorn.Server):
    """uvicorn that stops as soon as ``request_exit`` is called (see the module's docstring)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        counter = 0
        while not await self.on_tick(counter):  # the ticks as uvicorn's: date header, limits
            counter = (counter + 1) % 864000
            try:
                await asyncio.wait_for(self._wake.wait(), 0.1)
            except TimeoutError:
                pass

    def request_exit(self) -> None:
        """Ask the server to stop (from any thread); it stops at once instead of at its next tick."""
        self.should_exit = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._wake.set)
            except RuntimeError:  # the loop closed in between: it has stopped anyway
                pass

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.server_state.connections or self.server_state.tasks:
            await super().shutdown(sockets)  # connections to close: uvicorn's own grace period
            return
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        if not self.force_exit:
            await self.lifespan.shutdown()


class ServerThread:
    """``config`` served by a ``PromptServer`` in a daemon thread; ``url`` once ``start`` returns."""

    def __init__(
        self,
        config: uvicorn.Config,
        *,
        sockets: list[socket.socket] | None = None,
        name: str = "uvicorn-test",
    ) -> None:
        self.server = PromptServer(config)
        self.sockets = sockets
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": sockets}, name=name, daemon=True
        )
        self.url = ""

    def start(self, timeout: float = 15) -> str:
        """Start and wait until the server listens (a bounded poll of an observable state)."""
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive():
                raise AssertionError("uvicorn stopped while starting")
            if time.monotonic() > deadline:
                raise AssertionError(f"uvicorn did not start within {timeout:g} s")
            time.sleep(0.002)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    def request_exit(self) -> None:
        self.server.request_exit()

    def join(self, timeout: float = 15) -> None:
        self.thread.join(timeout=timeout)
        for sock in self.sockets or []:
            sock.close()

    def stop(self) -> None:
        self.request_exit()
        self.join()


def stop_all(threads: list[Any]) -> None:
    """Stop several servers together: all are asked first, then each is waited for."""
    for thread in threads:
        thread.request_exit()
    for thread in threads:
        thread.join()
