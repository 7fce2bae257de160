"""Command hooks end with everything they started, and their timeout holds whatever children do."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from runner.agentfile.config import AgentConfig, HookConfig
from runner.runtime.hooks import HookChains, HookEvent

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the reaper is Linux only")

#: Start two detached sleepers (setsid -f, a double fork) that write their pid; wait until both have.
DETACH = (
    "setsid -f sh -c 'echo $$ > p1; exec sleep 300' >/dev/null 2>&1; "
    "(sh -c 'echo $$ > p2; exec sleep 301' >/dev/null 2>&1 &); "
    "while [ ! -s p1 ] || [ ! -s p2 ]; do sleep 0.01; done; "
)


class _Reporter:
    def __init__(self) -> None:
        self.failures: list[str] = []

    def render_message(self, hook: HookConfig, event: HookEvent) -> str:
        raise AssertionError("no message hooks here")

    def failed(self, hook: HookConfig, event: str, message: str) -> None:
        self.failures.append(message)

    def ignored(self, hook: HookConfig, event: str, fields: tuple[str, ...]) -> None:
        pass


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


async def _run(tmp_path: Path, command: str, *, timeout_s: float = 10.0) -> tuple[list[str], list[str]]:
    """Run one ``turn_pre`` command hook; the messages it gave and the failures reported."""
    hook = HookConfig(kind="command", value=command, base_dir=tmp_path, timeout_s=timeout_s)
    config = AgentConfig(name="tester", path=tmp_path / "agent.yaml", hooks={"turn_pre": (hook,)})
    event = HookEvent(event="turn_pre", agent="tester", session_id="s1", turn=1, step=0, messages=[])
    reporter = _Reporter()
    outcome = await HookChains(config).run(event, reporter)
    return [m["content"] for m in outcome.messages], reporter.failures


async def test_detached_children_of_a_command_hook_are_killed_when_it_ends(tmp_path: Path) -> None:
    messages, failures = await _run(tmp_path, DETACH + "echo done")
    assert (messages, failures) == (["done"], [])
    pids = [int((tmp_path / name).read_text()) for name in ("p1", "p2")]
    assert not any(_alive(pid) for pid in pids)


async def test_a_detached_child_holding_stdout_does_not_hold_the_hook(tmp_path: Path) -> None:
    """It used to wait for EOF on a pipe the child kept open: 20-60 s for a 2 s timeout."""
    command = (
        "setsid -f sh -c 'echo $$ > p1; sleep 300'; (sleep 301 &); "
        'while [ ! -s p1 ]; do sleep 0.01; done; echo \'{"messages": ["hi"]}\''
    )
    started = time.monotonic()
    messages, failures = await _run(tmp_path, command, timeout_s=2)
    assert time.monotonic() - started < 10
    assert (messages, failures) == (["hi"], [])
    assert not _alive(int((tmp_path / "p1").read_text()))


async def test_a_hook_past_its_timeout_returns_about_then_with_its_children_gone(tmp_path: Path) -> None:
    command = "setsid -f sh -c 'echo $$ > p1; exec sleep 300'; (sleep 301 &); sleep 60"
    started = time.monotonic()
    messages, failures = await _run(tmp_path, command, timeout_s=2)
    elapsed = time.monotonic() - started
    assert 1.9 < elapsed < 10
    assert messages == []
    assert failures == [f"`{command}` timed out after 2 s"]
    assert not _alive(int((tmp_path / "p1").read_text()))


async def test_a_cancelled_hook_kills_what_it_detached(tmp_path: Path) -> None:
    task = asyncio.ensure_future(_run(tmp_path, DETACH + "touch ready; sleep 60"))
    deadline = time.monotonic() + 10
    while not (tmp_path / "ready").exists():
        assert time.monotonic() < deadline, "the hook never got ready"
        await asyncio.sleep(0.01)
    pids = [int((tmp_path / name).read_text()) for name in ("p1", "p2")]
    assert all(_alive(pid) for pid in pids)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not any(_alive(pid) for pid in pids)


async def test_a_hook_still_reads_its_event_and_reports_its_exit_code(tmp_path: Path) -> None:
    messages, failures = await _run(tmp_path, 'grep -o \'"event": "turn_pre"\'; exit 0')
    assert messages == ['"event": "turn_pre"']
    messages, failures = await _run(tmp_path, "echo broken >&2; exit 5")
    assert failures == ["`echo broken >&2; exit 5` exited with 5: broken"]
