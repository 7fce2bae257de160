"""The body of ``runner batch``: inputs checked up front, the output file resumed, the batch run
with a progress display, Ctrl+C handled, the summary and the exit code."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import typer

from runner.batch import Batch, BatchLimits, check_unique, parse_lines
from runner.batch.outfile import InputIndex, OutFile
from runner.cli.batch_progress import BatchProgress, summary_line
from runner.cli.common import display_path
from runner.cli.guard import note_secrets
from runner.errors import ConfigError, StorageError
from runner.store.disk import check_writable, storage_error
from runner.store.transcript import Redactor, sessions_dir

__all__ = ["BatchCommand", "run_batch_command"]


@dataclass(frozen=True)
class BatchCommand:
    """What the command line asked for."""

    agent: str
    inputs: str
    out: Path
    limits: BatchLimits
    variables: Mapping[str, Any]
    agent_name: str | None = None
    """``--agent NAME``: one agent of a team file per item, instead of the file's workflow."""
    backend: str = "local"
    address: str | None = None
    ordered: bool = True
    force: bool = False
    yes: bool = False
    json_output: bool = False


def _check_backend(command: BatchCommand) -> None:
    if command.backend not in ("local", "ray"):
        raise ConfigError(f"--backend must be local or ray, not '{command.backend}'")
    if command.address is not None and command.backend != "ray":
        raise ConfigError("--address names a Ray cluster: it goes with --backend ray")
    if command.limits.concurrency < 1:
        raise ConfigError("--concurrency must be at least 1")
    if command.out.is_dir():
        raise ConfigError(f"-o {command.out} is a folder; give the output file's path")
    if command.inputs != "-" and Path(command.inputs).resolve() == command.out.resolve():
        raise ConfigError("-o names the input file: the results would overwrite the inputs")


def _open_inputs(ref: str, stack: ExitStack) -> tuple[Path, str]:
    """The input file (standard input spooled to a temporary file: it is read twice) and its name."""
    if ref != "-":
        path = Path(ref)
        if not path.is_file():
            raise ConfigError(f"no input file {ref}")
        return path, display_path(ref)
    try:
        spool = stack.enter_context(tempfile.NamedTemporaryFile("w+b", suffix=".jsonl"))  # noqa: SIM115
        shutil.copyfileobj(sys.stdin.buffer, spool)
        spool.flush()
    except OSError as exc:
        raise storage_error(exc, tempfile.gettempdir(), what="standard input (spooled) in") from None
    return Path(spool.name), "standard input"


def _lines(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8", errors="replace") as file:
        yield from file


def _index(path: Path, name: str) -> tuple[InputIndex, int]:
    """Every item's line and hash by id, duplicates refused up front, and how many items there are."""
    entries: dict[str, tuple[int, str]] = {}

    def noted() -> Iterator[Any]:
        for item in parse_lines(_lines(path)):
            entries.setdefault(str(item.id), (item.line, item.sha256))
            yield item

    count = check_unique(noted(), source=name)
    if count == 0:
        raise ConfigError(f"{name} has no items (one JSON string or object per line)")
    return InputIndex(entries), count


def _make_batch(command: BatchCommand) -> tuple[Any, str, frozenset[str]]:
    """A factory of the batch (given its items), the hash resuming checks, and the secrets to redact:
    what runs per item is resolved (``runner.runnable.resolve``) and dispatched (``open_batch``) as
    ``runner.batch.run_batch`` does."""
    from runner.batch.dispatch import open_batch
    from runner.runnable import resolve

    target = resolve(command.agent, agent=command.agent_name, extra_vars=command.variables.keys())
    if target.workflow is not None and command.backend == "ray":
        open_batch(target, (), backend="ray")  # refused: before the inputs are read
    for config in target.configs.values():
        note_secrets(config)

    def make(items: Any, **options: Any) -> Batch:
        return open_batch(
            target,
            items,
            backend=command.backend,
            address=command.address,
            agent_name=command.agent_name,
            **options,
        )

    return make, target.sha256, target.secrets


def run_batch_command(command: BatchCommand, settings: Any) -> int:
    """``runner batch``: the exit code (0 all ok, 1 some failed, 3 a budget stopped it, 130 Ctrl+C)."""
    _check_backend(command)
    make, agent_sha, secrets = _make_batch(command)
    with ExitStack() as stack:
        path, name = _open_inputs(command.inputs, stack)
        index, count = _index(path, name)
        out = OutFile(command.out, fsync=settings.fsync, redact=Redactor(secrets).record)
        _check_writable(out, settings)
        out.resume(index, agent_sha256=agent_sha, force=command.force)
        if out.kept:
            note = f"{out.path}: {out.kept} items done before are kept"
            typer.echo(
                note + (f", {out.dropped} lines dropped to run again" if out.dropped else ""), err=True
            )
        total = min(count, command.limits.limit) if command.limits.limit else count
        batch = make(
            parse_lines(_lines(path)),
            settings=settings,
            variables=command.variables,
            limits=command.limits,
            ordered=False,  # written as they finish; put in order at the end
            assume_yes=command.yes,
            skip=out.skip,
            agent_sha256=agent_sha,
        )
        started = time.monotonic()
        out.open()
        try:
            interrupted = _run(batch, out, total, command.agent)
        finally:
            out.close()
        if command.ordered:
            _put_in_order(out, index)
    elapsed = time.monotonic() - started
    return _report(command, batch, total=total, elapsed_s=elapsed, interrupted=interrupted)


def _check_writable(out: OutFile, settings: Any) -> None:
    """Refuse, before any model call, an output file or a transcripts folder that cannot be written
    (a full disk, a read-only folder): one line naming it, exit 1."""
    out.check()
    if settings.write_transcript:
        check_writable(sessions_dir(settings.home), what="the transcripts folder")


def _put_in_order(out: OutFile, index: InputIndex) -> None:
    try:
        out.put_in_order(index)
    except StorageError as exc:
        raise StorageError(
            f"{exc.message}; its lines are whole, in the order the items finished",
            path=exc.path,
            hint="free some space, then run the same command again: it puts the file in order",
        ) from None


def _run(batch: Batch, out: OutFile, total: int, name: str = "") -> bool:
    """Run the batch on an event loop; Ctrl+C stops it (a second one at once). Whether it was."""

    async def main() -> None:
        import runner.telemetry as telemetry

        progress = BatchProgress(batch.stats, total=total)
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        presses = 0

        def on_sigint() -> None:
            nonlocal presses
            presses += 1
            if presses == 1:
                typer.echo("\nstopping: running items are interrupted (Ctrl+C again to quit now)", err=True)
                batch.interrupt()
            elif task is not None:
                task.cancel()

        loop.add_signal_handler(signal.SIGINT, on_sigint)
        progress.start()
        try:
            # closed at once when a write fails: the workers stop before the error is shown
            with telemetry.batch(name, items=total):
                async with contextlib.aclosing(batch.results()) as results:
                    async for result in results:
                        if not result.interrupted:
                            out.write(result)
        finally:
            progress.stop()
            loop.remove_signal_handler(signal.SIGINT)

    try:
        asyncio.run(main())
    except asyncio.CancelledError:
        return True
    return batch.interrupted


def _report(command: BatchCommand, batch: Batch, *, total: int, elapsed_s: float, interrupted: bool) -> int:
    stats = batch.stats
    if interrupted:
        code = 130
    elif stats.stopped is not None:
        code = 3
    elif stats.failed or stats.limited:
        code = 1
    else:
        code = 0
    out = display_path(str(command.out))
    typer.echo(
        summary_line(stats, total=total, elapsed_s=elapsed_s, out=out, interrupted=interrupted), err=True
    )
    if command.json_output:
        summary = {
            "items": total,
            "ok": stats.ok,
            "failed": stats.failed,
            "limit": stats.limited,
            "skipped": stats.skipped,
            "not_started": total - stats.finished - stats.skipped,
            "tokens": stats.tokens,
            "cost_usd": stats.cost_usd,
            "duration_s": round(elapsed_s, 3),
            "stopped": stats.stopped,
            "interrupted": interrupted,
            "output": str(command.out),
            "exit_code": code,
        }
        _write(sys.stdout, json.dumps(summary, ensure_ascii=False))
    return code


def _write(stream: IO[str], text: str) -> None:
    stream.write(text + "\n")
    stream.flush()
