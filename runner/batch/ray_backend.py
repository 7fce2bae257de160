"""``--backend ray``: a batch whose items run on a Ray cluster, in a pool of actors.

``RayBatch`` is a ``Batch`` (feeding, order, resuming, budgets and stats stay on the driver) whose
``start`` / ``run_item`` / ``stop`` run items elsewhere:

- ``start`` connects to the cluster at ``address`` (probed first: ``ray.init`` against a dead
  address waits for minutes), or starts a local Ray bound to 127.0.0.1 without a dashboard, and
  creates ``actors`` ``ItemActor``s, each holding one agent runtime and running up to ``per_actor``
  items at once (``split``). The agent's folder travels as the job's ``working_dir`` and the
  environment variables the agent file reads as its ``env_vars`` (``runtime_env``).
- ``run_item`` sends the item to the actor with the fewest items in flight; an actor that dies
  mid-item (its process killed, its node lost) is restarted by Ray and the item is sent again, up to
  ``WORKER_RETRIES`` times, then it fails with that reason. Only the driver writes results, so an
  item is never written twice.
- ``--rpm`` / ``--tpm``: one ``LimiterActor`` that every actor's model asks before each request.
- Budgets count each item's usage when its result arrives (the local backend counts each model call).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import logging
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import runner.telemetry as telemetry
from runner.agentfile.config import AgentConfig
from runner.batch.batch import Batch
from runner.batch.inputs import BatchItem
from runner.batch.item_result import ItemResult
from runner.batch.ray_actors import ItemActor, LimiterActor
from runner.batch.ray_reaper import GRACE_S, make_folder, reap_stale, watch
from runner.errors import ConfigError, RunnerError, StorageError
from runner.models.base import Usage
from runner.store.transcript import file_sha256

__all__ = ["WORKER_RETRIES", "RayBatch", "job_folder", "probe", "referenced_env", "split"]

log = logging.getLogger("runner.batch")

#: How many times an item is sent again after the actor running it died.
WORKER_RETRIES = 2
#: How long an item waits for actors that are unavailable (restarting after a death) before it fails.
UNAVAILABLE_S = 60.0
#: Seconds the actors have to start (runtime environment, imports, the agent's runtime).
READY_TIMEOUT_S = 300.0
#: Seconds the actors have to close their runtimes at the end.
CLOSE_TIMEOUT_S = 10.0
#: The window of ``--rpm`` / ``--tpm`` (seconds; tests shorten it).
LIMIT_WINDOW_S = 60.0
#: Not shipped with the agent's folder.
EXCLUDES = [".git", ".venv", "venv", "__pycache__", "node_modules", "*.pyc"]
#: Ray on loopback without phoning home (SPEC section 15; /work/shared/PEERS.md "Ray on loopback").
#: Ray's own default excludes are off: ``EXCLUDES`` (a superset) is passed with every job, and with
#: Ray's defaults on, every agent folder holding a ``__pycache__`` got a warning that it is ignored.
RAY_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_OVERRIDE_RUNTIME_ENV_DEFAULT_EXCLUDES": "",
}


def import_ray() -> Any:
    """``ray``, with this module's environment set first; a clear error when it is not installed."""
    for name, value in RAY_ENV.items():
        os.environ.setdefault(name, value)
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(
            "--backend ray needs Ray, which is not installed", hint="pip install 'runner[ray]'"
        ) from exc
    return ray


def probe(address: str, *, timeout_s: float = 3.0) -> None:
    """Raise ``RunnerError`` unless something listens at ``address`` (``HOST:PORT`` or ``ray://...``)."""
    if address in ("auto", "local"):
        return
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"--address {address!r} is not HOST:PORT", hint="e.g. --address 10.0.0.5:6379")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise RunnerError(
            f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}",
            hint="check the address (ray start --head prints it), or leave out --address for a local Ray",
        ) from None


def split(concurrency: int, cpus: int) -> tuple[int, int]:
    """``(actors, items in flight per actor)`` for ``concurrency``: an actor per CPU, at most one
    per item (an actor is one event loop; items mostly wait on the model)."""
    actors = max(1, min(concurrency, cpus))
    return actors, -(-concurrency // actors)


def _paths(value: Any) -> Iterator[Path]:
    if isinstance(value, Path):
        yield value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _paths(getattr(value, f.name))
    elif isinstance(value, list | tuple | frozenset | set):
        for entry in value:
            yield from _paths(entry)
    elif isinstance(value, dict):
        for entry in value.values():
            yield from _paths(entry)


def job_folder(config: AgentConfig) -> tuple[Path, str]:
    """The folder that travels with the job (the agent's, or the one holding every file the agent
    names: tool modules, templates, hooks) and the agent file's path in it."""
    folders = {config.directory.resolve()}
    for path in _paths(config):
        if path.is_absolute():
            folders.add((path if path.is_dir() else path.parent).resolve())
    root = Path(os.path.commonpath([str(f) for f in folders]))
    if root == Path(root.anchor) or root == Path.home():
        raise ConfigError(
            f"the agent's files are spread over {root}: too much to ship to the Ray workers",
            hint="keep the agent file, its extends chain, templates and tool modules in one folder",
        )
    return root, config.path.resolve().relative_to(root).as_posix()


class _Seen(Mapping[str, str]):
    """An environment that notes the names looked up in it."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env, self.names = env, set[str]()

    def __getitem__(self, name: str) -> str:
        self.names.add(name)
        return self.env[name]

    def get(self, name: str, default: Any = None) -> Any:
        self.names.add(name)
        return self.env.get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self.env)

    def __len__(self) -> int:
        return len(self.env)


def referenced_env(
    config: AgentConfig, extra_vars: Iterable[str] = (), *, agent_name: str | None = None
) -> dict[str, str]:
    """The environment variables the agent file (and its extends chain) reads, with their values:
    only those, never the whole environment (it holds secrets the agent does not use).
    ``agent_name``: the team agent the batch runs (None: the file's first or only agent)."""
    from runner.agentfile import load_agent

    seen = _Seen(os.environ)
    load_agent(config.path, agent=agent_name, env=seen, extra_vars=extra_vars)
    return {name: os.environ[name] for name in sorted(seen.names) if name in os.environ}


class RayBatch(Batch):
    """A ``Batch`` whose items run on Ray actors; ``address`` None: a local Ray, stopped at the end."""

    def __init__(
        self,
        config: AgentConfig,
        items: Iterable[BatchItem],
        *,
        address: str | None = None,
        agent_name: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(config, items, **kwargs)
        self.address = address
        self.agent_name = agent_name
        """The team agent the actors load from the shipped file (``--agent``; None: its first or only)."""
        self.agent_sha256 = self.agent_sha256 or file_sha256(config.path)
        self.actors = 0
        self.per_actor = 0
        self.worker_deaths = 0
        """Items sent again because the actor running them died."""
        self._ray: Any = None
        self._connected = False  # this batch called ray.init (and calls ray.shutdown)
        self._pool: list[Any] = []
        self._busy: list[int] = []
        #: Actors seen unavailable (restarting), until when they are passed over.
        self._down: dict[int, float] = {}
        self._limiter_actor: Any = None
        self._folder: Path | None = None  # the local Ray's private folder (none with --address)
        self._watcher: subprocess.Popen[bytes] | None = None  # reaps it if this process dies

    def interrupt(self) -> None:
        super().interrupt()
        for actor in self._pool:
            actor.interrupt.remote()

    # ----------------------------------------------------------------- start

    async def start(self) -> None:
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        ray = self._ray = import_ray()
        root, agent = job_folder(self.config)
        runtime_env = {
            "working_dir": str(root),
            "excludes": EXCLUDES,
            "env_vars": {
                **referenced_env(self.config, self.variables.keys(), agent_name=self.agent_name),
                **telemetry.worker_environment(),  # the workers trace as the driver does
            },
        }
        # ray.init took the job's runtime_env; the caller's own Ray session keeps its job's
        # working_dir, and the actors get the variables
        where = f"connecting to the Ray cluster at {self.address}" if self.address else "starting a local Ray"
        self.stats.enter(where)
        ours = self._connect(ray, runtime_env)
        runtime_env = {} if ours else {"env_vars": runtime_env["env_vars"]}
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.actors, self.per_actor = split(max(1, self.limits.concurrency), cpus)
        if self.limits.rpm or self.limits.tpm:
            remote = ray.remote(LimiterActor).options(num_cpus=0, max_concurrency=10_000)
            self._limiter_actor = remote.remote(
                self.limits.rpm or None, self.limits.tpm or None, window_s=LIMIT_WINDOW_S
            )
        remote = ray.remote(ItemActor).options(
            num_cpus=1,
            max_concurrency=self.per_actor + 2,  # room for interrupt() beside the items
            max_restarts=-1,
            max_task_retries=0,  # the driver sends a lost item again itself (it counts the attempts)
            **({"runtime_env": runtime_env} if runtime_env else {}),
        )
        for _ in range(self.actors):
            self._pool.append(
                remote.remote(
                    agent,
                    agent_name=self.agent_name,
                    settings=self.settings,
                    variables=self.variables,
                    retries=self.limits.retries,
                    assume_yes=self.assume_yes,
                    agent_sha256=self.agent_sha256,
                    in_flight=self.per_actor,
                    model=self.model,
                    limiter=self._limiter_actor,
                )
            )
            self._busy.append(0)
        self.stats.enter(f"starting {self.actors} Ray actor{'s' if self.actors > 1 else ''}")
        await self._ready(ray)
        self.stats.enter(None)
        if self.interrupted:
            self.interrupt()

    def _connect(self, ray: Any, runtime_env: dict[str, Any]) -> bool:
        """Connect (or start a local Ray) with the job's ``runtime_env``; False: Ray was connected
        already (the caller's ``ray.init``, Python API), and its job's runtime environment stays."""
        if ray.is_initialized():
            return False
        # a local Ray turns token authentication on and says so on stderr each time: keep it on, quietly
        logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
        options: dict[str, Any] = {
            "logging_level": logging.WARNING,
            "log_to_driver": False,
            "runtime_env": runtime_env,
        }
        try:
            if self.address is not None:
                probe(self.address)
                ray.init(address=self.address, **options)
            else:
                self._start_local(ray, options)
        except RunnerError:
            raise
        except Exception as exc:
            where = f"the Ray cluster at {self.address}" if self.address else "a local Ray"
            hint = None
            if self.address and os.environ.get("RAY_AUTH_MODE") is None:
                hint = "a cluster with token authentication needs RAY_AUTH_MODE=token here (Ray's rule)"
            raise RunnerError(
                f"cannot start or reach {where}: {type(exc).__name__}: {exc}", hint=hint
            ) from None
        self._connected = True
        return True

    def _start_local(self, ray: Any, options: dict[str, Any]) -> None:
        """A local Ray in a private folder (0700: nothing shared with another Ray or user of this
        machine), reaped if this process dies; without the dashboard's API server process."""
        reap_stale()  # what drivers killed before left behind
        self._folder, temp_dir = make_folder()
        self._watcher = watch(self._folder)
        with _no_api_server():
            ray.init(
                include_dashboard=False, _node_ip_address="127.0.0.1", _temp_dir=str(temp_dir), **options
            )

    async def _ready(self, ray: Any) -> None:
        try:
            problems = await asyncio.wait_for(
                asyncio.gather(*(actor.ready.remote() for actor in self._pool)), READY_TIMEOUT_S
            )
        except TimeoutError:
            raise RunnerError(
                f"the Ray actors did not start within {READY_TIMEOUT_S:.0f} s",
                hint=f"the batch needs {self.actors} free CPUs on the cluster (ray status)",
            ) from None
        except ray.exceptions.RayError as exc:
            raise RunnerError(
                f"the Ray workers could not start: {_last_line(exc)}",
                hint="the cluster needs runner[ray] installed (the same version as here)",
            ) from None
        problem = next((p for p in problems if p), None)
        if problem is not None:
            raise RunnerError(f"the Ray workers cannot open the agent: {problem}")

    # ----------------------------------------------------------------- items

    def _pick(self) -> int:
        """The least busy actor, passing over those seen restarting (unless all are)."""
        now = time.monotonic()
        up = [i for i in range(len(self._busy)) if self._down.get(i, 0.0) <= now] or list(
            range(len(self._busy))
        )
        return min(up, key=lambda i: self._busy[i])

    async def run_item(self, item: BatchItem) -> ItemResult:
        """The item on the least busy actor; again on another when the one running it dies.

        An actor that died is restarted by Ray; until it is back, calls to it fail as unavailable.
        Those are not counted as more deaths: the item waits (up to ``UNAVAILABLE_S``) and goes to
        an actor that is up, or to the restarted one.
        """
        ray = self._ray
        started = time.monotonic()
        lost, deaths, pause = "", 0, 0.1
        while deaths <= WORKER_RETRIES and not (lost and self.interrupted):
            index = self._pick()
            self._busy[index] += 1
            try:
                record = await self._pool[index].run.remote(item, telemetry.trace_headers())
            except ray.exceptions.ActorUnavailableError as exc:
                lost = _first_line(exc)
                if self._down.get(index, 0.0) <= time.monotonic():  # newly down: it died
                    deaths += 1
                    self.worker_deaths += 1
                    log.warning("batch item %s: its Ray worker died (%s); sending it again", item.id, lost)
                self._down[index] = time.monotonic() + 1.0
                if time.monotonic() - started > UNAVAILABLE_S:
                    return self._failed(
                        item, started, f"its Ray workers were unavailable for {UNAVAILABLE_S:.0f} s ({lost})"
                    )
                await asyncio.sleep(pause)
                pause = min(1.0, pause * 2)
                continue
            except ray.exceptions.RayActorError as exc:
                lost, deaths = _first_line(exc), deaths + 1
                self.worker_deaths += 1
                log.warning("batch item %s: its Ray worker died (%s); sending it again", item.id, lost)
                continue
            except ray.exceptions.RayError as exc:
                cause = getattr(exc, "cause", None)
                if isinstance(cause, StorageError):  # a transcript cannot be written: the batch stops
                    raise StorageError(cause.message, path=cause.path, hint=cause.hint) from None
                return self._failed(item, started, f"the Ray worker failed: {_first_line(exc)}")
            finally:
                self._busy[index] -= 1
            interrupted = bool(record.pop("interrupted", False))
            result = ItemResult.from_record(record)
            result.interrupted = interrupted
            self._count(_usage(result))
            return result
        message = f"its Ray worker died {deaths} times ({lost})"
        return self._failed(item, started, message, interrupted=self.interrupted)

    def _failed(
        self, item: BatchItem, started: float, message: str, *, interrupted: bool = False
    ) -> ItemResult:
        return ItemResult(
            id=item.id,
            line=item.line,
            status="error",
            error=message,
            duration_s=round(time.monotonic() - started, 4),
            input_sha256=item.sha256,
            agent_sha256=self.agent_sha256,
            interrupted=interrupted,
        )

    # ----------------------------------------------------------------- stop

    async def stop(self) -> None:
        ray, pool, self._pool = self._ray, self._pool, []
        if ray is None:
            return
        if pool:
            closing = asyncio.gather(*(actor.close.remote() for actor in pool), return_exceptions=True)
            try:
                await asyncio.wait_for(closing, CLOSE_TIMEOUT_S)
            except TimeoutError:
                log.warning("the Ray actors did not close within %s s", CLOSE_TIMEOUT_S)
        for actor in [*pool, self._limiter_actor]:
            if actor is not None:
                with contextlib.suppress(Exception):  # gone already
                    ray.kill(actor)
        self._limiter_actor = None
        if self._connected:
            self._connected = False
            ray.shutdown()
        folder, self._folder = self._folder, None
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        watcher, self._watcher = self._watcher, None
        if watcher is not None:  # its stdin closes: it reaps what is left (nothing, normally) and ends
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                assert watcher.stdin is not None
                watcher.stdin.close()
                watcher.wait(timeout=GRACE_S * 2 + 5)


@contextlib.contextmanager
def _no_api_server() -> Iterator[None]:
    """Start no dashboard process: with ``include_dashboard=False`` Ray 2.x still starts its API
    server (``dashboard.py --minimal``, for usage statistics, which are off here); the batch needs
    none of it. Only while this process starts its own Ray; Ray's node keeps running without it."""
    try:
        node: Any = importlib.import_module("ray._private.node")
    except ImportError:
        node = None
    original = getattr(getattr(node, "Node", None), "start_api_server", None)
    if original is None:  # another Ray version: it starts what it starts
        yield
        return

    def start_no_api_server(self: Any, **_: Any) -> None:
        self._webui_url = None

    node.Node.start_api_server = start_no_api_server
    try:
        yield
    finally:
        node.Node.start_api_server = original


def _usage(result: ItemResult) -> Usage:
    usage = result.usage
    return Usage(
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        completion_tokens=int(usage.get("completion_tokens", 0)),
        total_tokens=int(usage.get("total_tokens", 0)),
        cost_usd=result.cost_usd,
    )


def _last_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[-1].strip() if lines else type(exc).__name__


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
