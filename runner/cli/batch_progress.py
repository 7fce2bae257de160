"""What ``runner batch`` shows on stderr while it runs: a rich progress bar on a terminal, plain
periodic lines otherwise, and the summary at the end.

The display runs on a thread of its own: while the batch's event loop is held (``ray.init``
starting a local Ray holds it for seconds), it still shows what the batch is doing
(``BatchStats.phase``) with the seconds spent on it."""

from __future__ import annotations

import re
import sys
import threading
import time
from typing import IO, Any

from runner.batch import BatchStats

__all__ = ["BatchProgress", "summary_line"]


def _counts(stats: BatchStats) -> str:
    parts = [f"{stats.ok} ok", f"{stats.failed} failed"]
    if stats.limited:
        parts.append(f"{stats.limited} limit")
    parts.append(f"{stats.in_flight} running")
    return ", ".join(parts)


def _usage(stats: BatchStats) -> str:
    if stats.unpriced and not stats.cost_usd:
        return f"{stats.tokens} tokens, cost unknown"
    unknown = f" (+{stats.unpriced} calls of unknown cost)" if stats.unpriced else ""
    return f"{stats.tokens} tokens, ${stats.cost_usd:.4f}{unknown}"


class BatchProgress:
    """Shows ``stats`` every ``interval_s`` (plain) or live (rich) until ``stop``."""

    def __init__(
        self,
        stats: BatchStats,
        *,
        total: int,
        err: IO[str] | None = None,
        interval_s: float = 10.0,
        phase_interval_s: float = 2.0,
    ):
        self.stats = stats
        self.total = total
        self.err = err or sys.stderr
        self.interval_s = interval_s
        self.phase_interval_s = phase_interval_s
        """Plain: how often a phase (``starting a local Ray``) is shown again while it lasts."""
        self.started = time.monotonic()
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self._live: Any = None

    def start(self) -> None:
        if self.err.isatty():
            self._start_rich()
        self._thread = threading.Thread(target=self._tick, name="runner-batch-progress", daemon=True)
        self._thread.start()

    def _start_rich(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._live = Progress(
            TextColumn("batch"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[counts]} · {task.fields[rate]} · {task.fields[usage]}"),
            TimeRemainingColumn(),
            console=Console(file=self.err),
            transient=False,
        )
        self._bar = self._live.add_task("batch", total=self.total, counts="", rate="", usage="")
        self._live.start()

    def _rate(self) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        return f"{self.stats.finished / elapsed:.1f} items/s"

    def _eta(self) -> str:
        stats, elapsed = self.stats, time.monotonic() - self.started
        left = self.total - stats.finished - stats.skipped
        if stats.finished == 0 or left <= 0:
            return ""
        return f", about {left * elapsed / stats.finished:.0f} s left"

    def _phase(self) -> str | None:
        stats = self.stats
        if stats.phase is None:
            return None
        return f"{stats.phase} ... {time.monotonic() - stats.phase_since:.0f} s"

    def show(self) -> None:
        stats = self.stats
        phase = self._phase()
        if self._live is not None and phase is not None:
            self._live.update(self._bar, counts=phase, rate="", usage="")
            return
        if phase is not None:
            self._write(f"batch: {phase}")
            return
        if self._live is not None:
            self._live.update(
                self._bar,
                completed=stats.finished + stats.skipped,
                counts=_counts(stats),
                rate=self._rate(),
                usage=_usage(stats),
            )
            return
        done = stats.finished + stats.skipped
        self._write(
            f"batch: {done}/{self.total} ({_counts(stats)}) {self._rate()}, {_usage(stats)}{self._eta()}"
        )

    def _write(self, line: str) -> None:
        self.err.write(line + "\n")
        self.err.flush()

    def _tick(self) -> None:
        """Live: redraw five times a second. Plain: a line every ``interval_s`` or tenth of the items;
        while a phase lasts, a line when it starts and every ``phase_interval_s``."""
        if self._live is not None:
            while not self._stopped.wait(0.2):
                self.show()
            return
        shown_at, shown_tenth, shown_phase = time.monotonic(), 0, None
        while not self._stopped.wait(0.25):
            stats, now = self.stats, time.monotonic()
            if stats.phase is not None:
                if stats.phase != shown_phase or now - shown_at >= self.phase_interval_s:
                    shown_at, shown_phase = now, stats.phase
                    self.show()
                continue
            shown_phase = None
            tenth = (stats.finished + stats.skipped) * 10 // max(self.total, 1)
            if tenth > shown_tenth or now - shown_at >= self.interval_s:
                shown_at, shown_tenth = now, tenth
                self.show()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._live is not None:
            self.show()
            self._live.stop()


#: The budget sentence of ``BatchBudget.spent``: the total it gives is the one when the budget ran out.
_SPENT = re.compile(r"the batch (?:used \d+ tokens|cost \$[0-9.]+) (\(--max-[a-z-]+ [^)]*\))")


def _spent(stopped: str) -> str:
    """Why the batch stopped, without a second total: the items running then went on to their end,
    so the summary's total (above) is larger than the one at the moment the budget ran out."""
    found = _SPENT.fullmatch(stopped)
    return f"its budget was spent {found.group(1)}" if found else stopped


def summary_line(
    stats: BatchStats, *, total: int, elapsed_s: float, out: str, interrupted: bool = False
) -> str:
    """The last lines on stderr: what ran, what it cost, why it stopped."""
    rate = stats.finished / elapsed_s if elapsed_s > 0 else 0.0
    parts = [f"{stats.ok} ok", f"{stats.failed} failed", f"{stats.limited} limit"]
    if stats.skipped:
        parts.append(f"{stats.skipped} done before (skipped)")
    text = (
        f"batch: {total} items: {', '.join(parts)}; {_usage(stats)}; "
        f"{elapsed_s:.1f} s ({rate:.1f} items/s) → {out}"
    )
    left = total - stats.finished - stats.skipped
    if stats.stopped is not None:
        text += (
            f"\nbatch stopped: {_spent(stats.stopped)}; {left} items not started. Run the same command again"
        )
        text += " (with a higher budget) to continue."
    elif interrupted:
        text += f"\nbatch interrupted: {left} items not done. Run the same command again to continue."
    elif stats.failed or stats.limited:
        text += "\nrun the same command again to retry the items that did not end ok."
    return text
