"""``runner serve --watch``: edits reach new requests; running requests finish on the old config."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.serve.watch_common import reply, wait_for, wait_until_watching

TOOLS_V1 = '''
import time


def version() -> str:
    """Which version of the tool code runs."""
    time.sleep(1.0)
    return "v1"
'''


def test_watch_swaps_new_agents_in_and_keeps_the_last_good_config(
    scripted: Callable[..., Any], agent_files: Any, serve_app: Callable[..., Any]
) -> None:
    server = scripted(reply)
    path = agent_files.write("watched", server, "prompts:\n  system: Old prompt.", tools=TOOLS_V1)
    lines: list[str] = []
    served = serve_app([agent_files.root], watch=True, report=lines.append)
    client = served.openai()
    wait_until_watching(agent_files.root, lines)  # an edit before the watcher started would be missed

    # an edit during a request: the running request finishes on the old config
    answers: list[Any] = []
    running = threading.Thread(
        target=lambda: answers.append(
            client.chat.completions.create(model="watched", messages=[{"role": "user", "content": "which?"}])
        )
    )
    running.start()
    wait_for(lambda: len(server.requests) == 1, what="the first step")
    path.write_text(path.read_text().replace("Old prompt.", "New prompt."), encoding="utf-8")
    wait_for(lambda: any("reloaded" in line for line in lines), what="the reload line")
    running.join(timeout=15)
    assert [r["messages"][0]["content"] for r in server.requests] == ["Old prompt.", "Old prompt."]
    assert answers[0].choices[0].message.content.endswith("tool said v1")
    client.chat.completions.create(model="watched", messages=[{"role": "user", "content": "which?"}])
    assert server.requests[-1]["messages"][0]["content"] == "New prompt."

    # edited tool code is imported again
    module = next(agent_files.root.glob("serve_tools_*.py"))
    lines.clear()
    module.write_text(TOOLS_V1.replace('"v1"', '"v2"').replace("time.sleep(1.0)", "pass"), encoding="utf-8")
    wait_for(lambda: any("~watched" in line for line in lines), what="the tool reload")
    answer = client.chat.completions.create(model="watched", messages=[{"role": "user", "content": "which?"}])
    assert answer.choices[0].message.content.endswith("tool said v2")

    # a new file is a new model; a broken edit keeps the last good config
    agent_files.write("newcomer", server)
    wait_for(lambda: "newcomer" in [m.id for m in client.models.list()], what="the new agent")
    lines.clear()
    path.write_text("version: 1\nname: watched\nmodel: [oops\n", encoding="utf-8")
    wait_for(
        lambda: any("keeping the last good config of watched" in line for line in lines),
        what=f"the error {lines}",
    )
    assert sorted(m.id for m in client.models.list()) == ["newcomer", "watched"]
    assert str(path.name) in " ".join(lines)

    # removing a file removes its model
    Path(agent_files.root / "newcomer.yaml").unlink()
    wait_for(lambda: [m.id for m in client.models.list()] == ["watched"], what="the removal")
