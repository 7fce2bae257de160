"""The three pages: a session's (or a workflow run's) timeline, an eval, a batch; and writing one."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from runner.batch.outfile import read_results
from runner.errors import ConfigError
from runner.evals.stats import wilson
from runner.redact import Redactor, environment_secrets
from runner.report.page import render_page
from runner.report.timeline import clip, session_timeline
from runner.store.disk import replace_atomically, storage_error
from runner.store.transcript import read_what_can_be_read

__all__ = ["batch_data", "batch_page", "eval_data", "eval_page", "session_page", "write_page"]


def _redactor(redactor: Redactor | None) -> Redactor:
    """The secrets to mask: those given, else the environment's (as the command's output guard)."""
    return redactor if redactor is not None else Redactor(environment_secrets(os.environ))


def session_page(path: Path, *, redactor: Redactor | None = None) -> str:
    """The timeline page of the transcript at ``path``; what it could not read is named on the page."""
    transcript, skipped = read_what_can_be_read(path)
    data = session_timeline(transcript, skipped)
    header = data["header"]
    title = f"{header.get('workflow') or header.get('agent') or 'session'} · {header.get('session_id')}"
    return render_page(title, data, script="session.js", redactor=_redactor(redactor))


# ----------------------------------------------------------------- eval


def _runs(runs: Any) -> dict[str, list[dict[str, Any]]]:
    """Each case's runs (``RunOutcome`` values or their dicts), for the drill-down."""
    by_case: dict[str, list[dict[str, Any]]] = {}
    for run in runs or ():
        item = run if isinstance(run, dict) else _run_dict(run)
        by_case.setdefault(str(item.get("case")), []).append(item)
    return by_case


def _run_dict(run: Any) -> dict[str, Any]:
    return {
        "case": run.case,
        "index": run.index,
        "status": run.status,
        "problems": [clip(p) for p in run.problems],
        "judge_reason": clip(run.judge_reason),
        "tokens": run.usage.total_tokens + run.judge_usage.total_tokens,
        "cost_usd": run.usage.cost_usd,
        "seconds": round(run.seconds, 3),
        "session_id": run.session_id,
    }


def eval_data(
    now: dict[str, Any], *, before: dict[str, Any] | None = None, runs: Any = None, before_runs: Any = None
) -> dict[str, Any]:
    """The page data of an eval: ``EvalReport.as_dict()`` (and, for ``--against``, the other side's
    and ``Comparison.as_dict()`` under ``before["comparison"]``), with each case's runs."""
    if not isinstance(now, dict) or not isinstance(now.get("cases"), list):
        raise ConfigError("not an eval report: it has no cases (runner eval --json writes one)")
    data: dict[str, Any] = {"kind": "eval", "now": now, "runs": _runs(runs)}
    if before is not None:
        data["before"] = before
        data["before_runs"] = _runs(before_runs)
    return data


def eval_page(data: dict[str, Any], *, redactor: Redactor | None = None) -> str:
    """The eval page: pass rates with their 95% Wilson intervals, per case, and each case's runs."""
    now = data["now"]
    before = data.get("before")
    against = f" against {before.get('revision')}" if isinstance(before, dict) else ""
    title = f"eval · {now.get('agent', '?')}{against}"
    return render_page(title, data, script="eval.js", redactor=_redactor(redactor))


# ----------------------------------------------------------------- batch

_ITEM_KEYS = ("id", "line", "status", "reason", "error", "cost_usd", "duration_s", "tools", "refused")
_ITEM_MORE = ("steps", "session_id", "attempts", "transient")


def batch_data(path: Path) -> dict[str, Any]:
    """The page data of a batch output file: totals, the ok rate with its interval, every item."""
    results, skipped = read_results(path)
    items: list[dict[str, Any]] = []
    statuses: Counter[str] = Counter()
    tokens = 0
    cost: float | None = None
    for result in results:
        record = result.as_record()
        item = {key: record.get(key) for key in (*_ITEM_KEYS, *_ITEM_MORE)}
        used = (result.usage or {}).get("total_tokens")
        count = int(used) if isinstance(used, int | float) else 0
        item["tokens"] = count
        item["answer"] = clip(result.answer)
        if result.output is not None:
            item["output"] = clip(result.output)
        if result.error:
            item["error"] = clip(result.error)
        items.append(item)
        statuses[result.status] += 1
        tokens += count
        if isinstance(result.cost_usd, int | float):
            cost = (cost or 0.0) + float(result.cost_usd)
    ok = sum(1 for r in results if r.ok)
    low, high = wilson(ok, len(results))
    totals = {
        "items": len(results),
        "ok": ok,
        "rate": ok / len(results) if results else None,
        "ci95": [round(low, 4), round(high, 4)],
        "statuses": dict(statuses.most_common()),
        "tokens": tokens,
        "cost_usd": cost,
        "duration_s": round(sum(r.duration_s for r in results), 3),
    }
    return {"kind": "batch", "file": str(path), "totals": totals, "items": items, "skipped": skipped}


def batch_page(path: Path, *, redactor: Redactor | None = None) -> str:
    """The batch page of the output file at ``path``."""
    data = batch_data(path)
    return render_page(f"batch · {path.name}", data, script="batch.js", redactor=_redactor(redactor))


# ----------------------------------------------------------------- writing


def write_page(path: Path, text: str) -> None:
    """Write a page whole (a temporary file renamed over ``path``); a disk error is a ``StorageError``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise storage_error(exc, path, what="the page") from None
    replace_atomically(path, [text.encode("utf-8")], what="the page")
