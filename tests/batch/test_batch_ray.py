"""`runner batch --backend ray` against a real local Ray cluster (``ray_cluster``: `ray start --head`
on 127.0.0.1, 2 CPUs, started from a folder that holds none of these agents) and the scripted server
on 127.0.0.1, which the Ray workers reach on loopback."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from runner.batch import run_batch
from tests.batch.conftest import RayCluster
from tests.batch.helpers import Raw, adder, last_user, make_agent, read_out, write_inputs
from tests.cli_run.conftest import Cli, write_agent

if importlib.util.find_spec("ray") is None:  # not imported here: runner sets its environment first
    pytest.skip(
        "ray is not installed (the project's ray extra: pip install -e '.[ray]')", allow_module_level=True
    )
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]  # one cluster, one worker

TIMING = ("duration_s", "session_id")


def _comparable(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in line.items() if k not in TIMING} for line in lines]


def test_ray_gives_the_lines_the_local_backend_gives(
    cli: Cli, serve: Any, tmp_path: Path, ray_cluster: RayCluster
) -> None:
    server = serve(adder(), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    items = ["one", {"id": "two", "input": "second", "vars": {"x": 1}}, Raw("{bad"), "fail me", "five"]
    inputs = write_inputs(tmp_path / "in.jsonl", items)
    local = cli("batch", str(agent), str(inputs), "-o", "local.jsonl", "--concurrency", "3")
    assert local.returncode == 1, local.stderr
    ray = cli(
        "batch", str(agent), str(inputs), "-o", "ray.jsonl", "--concurrency", "3",
        "--backend", "ray", "--address", ray_cluster.address, "--json",
    )  # fmt: skip
    assert ray.returncode == 1, ray.stderr
    local_lines, ray_lines = read_out(tmp_path / "local.jsonl"), read_out(tmp_path / "ray.jsonl")
    assert _comparable(ray_lines) == _comparable(local_lines)
    assert [line["status"] for line in ray_lines] == ["ok", "ok", "error", "error", "ok"]
    assert ray_lines[0]["answer"] == "ANSWER one: 5"
    # the workers wrote each item's transcript where the driver's RUNNER_HOME says (one machine here)
    for line in ray_lines:
        if line["session_id"]:
            assert (cli.home / "sessions" / f"{line['session_id']}.jsonl").is_file()
    summary = json.loads(ray.stdout)
    assert summary["ok"] == 3 and summary["failed"] == 2 and summary["tokens"] > 0
    # a rerun resumes on Ray as it does locally: the ok items are kept, the failed run again
    again = cli("batch", str(agent), str(inputs), "-o", "ray.jsonl", "--backend", "ray",
                "--address", ray_cluster.address)  # fmt: skip
    assert again.returncode == 1 and "3 items done before are kept" in again.stderr
    assert len(read_out(tmp_path / "ray.jsonl")) == 5


def test_an_unreachable_cluster_is_a_clear_error_at_once(cli: Cli, tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed once the block ends: nothing listens there
    agent = make_agent(tmp_path / "a", "http://127.0.0.1:9/v1")
    write_inputs(tmp_path / "in.jsonl", ["x"])
    started = time.monotonic()
    result = cli("batch", str(agent), "in.jsonl", "-o", "out.jsonl", "--backend", "ray",
                 "--address", f"127.0.0.1:{port}")  # fmt: skip
    elapsed = time.monotonic() - started
    assert result.returncode == 1, result.stderr
    assert f"cannot reach the Ray cluster at 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr
    assert elapsed < 30  # ray.init alone would wait for minutes
    assert not (tmp_path / "out.jsonl").exists() or read_out(tmp_path / "out.jsonl") == []


JOB_TOOLS = '''
import os
import time
from pathlib import Path


def where() -> str:
    """Where this tool module was imported from, and what the worker's environment holds."""
    return f"file={__file__} cwd={os.getcwd()} other={os.environ.get('OTHER_SECRET_TOKEN')}"


def hold(path: str) -> str:
    """The first call writes this process's id to path and waits to be killed; later calls return."""
    target = Path(path)
    if target.exists():
        return "again"
    target.write_text(str(os.getpid()))
    time.sleep(50)
    return "survived"
'''


def test_the_job_carries_the_agent_folder_and_its_variables_and_a_killed_worker_reruns_its_item_once(
    cli: Cli, serve: Any, tmp_path: Path, ray_cluster: RayCluster
) -> None:
    """One Ray job for two things a job must get right: what travels with it (the agent's folder,
    its extends chain and tool module, the variables the agent reads and no others), and a worker
    killed mid-item (its item runs again once on the restarted actor, none lost)."""
    pid_file = tmp_path / "worker.pid"

    def step(body: dict[str, Any]) -> dict[str, Any]:
        prompt, last = last_user(body), body["messages"][-1]
        if last["role"] == "tool":
            return {"content": f"{body['messages'][0]['content']} | {prompt}: {last['content']}"}
        if prompt == "doomed":
            return {"tool_calls": [{"name": "hold", "arguments": {"path": str(pid_file)}}]}
        if prompt == "where":
            return {"tool_calls": [{"name": "where", "arguments": {}}]}
        return {"content": f"{prompt}: plain", "delay_s": 0.2}

    server = serve(step, repeat=True)
    folder = tmp_path / "agent"
    (folder / "prompts").mkdir(parents=True)
    (folder / "prompts" / "base.yaml").write_text(
        f"version: 1\nname: base\nmodel:\n  id: openai/scripted\n  api_base: {server.base_url}\n"
        "  api_key: ${TEST_API_KEY:-sk-none}\n  retries: 0\nprompts:\n  system: 'tone=${TONE_FOR_TEST}'\n",
        encoding="utf-8",
    )
    (folder / "ray_job_tools.py").write_text(JOB_TOOLS, encoding="utf-8")
    body = "extends: prompts/base.yaml\nname: where\ntools:\n  - python: ray_job_tools\n"
    agent = write_agent(folder, body)
    names = ["a", "b", "doomed", "where", "c", "d", "e", "f"]
    write_inputs(tmp_path / "in.jsonl", names)
    env = {"TONE_FOR_TEST": "dry", "OTHER_SECRET_TOKEN": "s3cr3t-not-referenced"}
    proc = cli.popen("batch", str(agent), "in.jsonl", "-o", "out.jsonl", "--backend", "ray",
                     "--address", ray_cluster.address, "--concurrency", "4", extra_env=env)  # fmt: skip
    try:
        deadline = time.monotonic() + 45
        while not pid_file.exists() or not pid_file.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        worker = int(pid_file.read_text())
        assert worker != proc.pid
        os.kill(worker, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=50)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    lines = read_out(tmp_path / "out.jsonl")
    assert [line["id"] for line in lines] == list(range(1, 9))  # each item once, none lost
    assert lines[2]["status"] == "ok" and lines[2]["answer"] == "tone=dry | doomed: again"
    answer = lines[3]["answer"]
    assert answer.startswith("tone=dry | where: ")  # the extended file's ${TONE_FOR_TEST} reached the workers
    fields = dict(part.split("=", 1) for part in answer.removeprefix("tone=dry | where: ").split())
    # the module came from the job's shipped working_dir under the cluster's temp dir, not the
    # agent's folder, and not the folder the cluster was started from
    assert fields["file"].startswith(str(ray_cluster.temp_dir)) and "working_dir_files" in fields["file"]
    assert not fields["file"].startswith(str(folder)) and fields["cwd"] != str(ray_cluster.cwd)
    assert fields["other"] == "None"  # a variable the agent does not read stays on the driver


def test_ctrl_c_exits_130_and_a_rerun_resumes(
    cli: Cli, serve: Any, tmp_path: Path, ray_cluster: RayCluster
) -> None:
    server = serve(adder(delay_s=0.3), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    write_inputs(tmp_path / "in.jsonl", [f"item {n}" for n in range(12)])
    argv = ["batch", str(agent), "in.jsonl", "-o", "out.jsonl", "--backend", "ray",
            "--address", ray_cluster.address, "--concurrency", "2"]  # fmt: skip
    proc = cli.popen(*argv)
    try:
        deadline = time.monotonic() + 45
        out = tmp_path / "out.jsonl"
        while not (out.exists() and out.read_text(encoding="utf-8").count("\n") >= 2):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    done = read_out(tmp_path / "out.jsonl")
    assert 2 <= len(done) < 12 and {line["status"] for line in done} == {"ok"}
    again = cli(*argv)
    assert again.returncode == 0, again.stderr
    lines = read_out(tmp_path / "out.jsonl")
    assert [line["id"] for line in lines] == list(range(1, 13))
    assert [line["answer"] for line in lines] == [f"ANSWER item {n}: 5" for n in range(12)]


async def test_the_python_api_on_ray_shares_one_rate_limit_across_the_actors(
    serve: Any, tmp_path: Path, ray_cluster: RayCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner.batch import ray_backend

    stamps: list[float] = []
    script = adder()

    def step(body: dict[str, Any]) -> dict[str, Any]:
        stamps.append(time.monotonic())
        return script(body)

    server = serve(step, repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    monkeypatch.setattr(ray_backend, "LIMIT_WINDOW_S", 3.0)  # 2 requests in 3 s, not a minute
    began = time.monotonic()  # the same clock in every process of this machine (CLOCK_MONOTONIC)
    results = [
        result
        async for result in run_batch(
            agent, ["p", "q", "r"], concurrency=4, rpm=2, backend="ray", address=ray_cluster.address
        )
    ]
    assert [(r.id, r.status, r.answer) for r in results] == [
        (1, "ok", "ANSWER p: 5"),
        (2, "ok", "ANSWER q: 5"),
        (3, "ok", "ANSWER r: 5"),
    ]
    assert len(stamps) == 6
    # the items ran on two actors (4 items over 2 CPUs); with a limiter per actor, 4 requests
    # would start at once. With the one shared limiter the k-th request is let go no earlier than
    # k // 2 windows after the batch began, and it reaches the server later still (how much later
    # varies with the load, which is why the bound is on the start, not between arrivals).
    assert all(stamp - began >= (k // 2) * 3.0 for k, stamp in enumerate(stamps)), [s - began for s in stamps]


def _local_ray_pids() -> set[int]:
    pids = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"runner-ray-" in (entry / "cmdline").read_bytes():
                pids.add(int(entry.name))
        except OSError:
            continue
    return pids


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_without_an_address_a_local_ray_is_started_and_stopped(cli: Cli, serve: Any, tmp_path: Path) -> None:
    server = serve(adder(), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    write_inputs(tmp_path / "in.jsonl", ["one", "two"])
    before = _local_ray_pids()
    result = cli("batch", str(agent), "in.jsonl", "-o", "out.jsonl", "--backend", "ray")
    assert result.returncode == 0, result.stderr
    assert [line["answer"] for line in read_out(tmp_path / "out.jsonl")] == ["ANSWER one: 5", "ANSWER two: 5"]
    assert "Token authentication" not in result.stderr and "WARNING" not in result.stderr
    deadline = time.monotonic() + 15  # the local Ray's processes are gone once the command is
    while (
        left := {pid for pid in _local_ray_pids() - before if _alive(pid)}
    ) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == set()


async def test_a_token_budget_is_counted_on_the_driver_from_the_results(
    serve: Any, tmp_path: Path, ray_cluster: RayCluster
) -> None:
    from runner.agentfile import load_agent
    from runner.batch import BatchLimits, as_items
    from runner.batch.ray_backend import RayBatch
    from runner.runtime.settings import RuntimeSettings

    server = serve(adder(), repeat=True)
    config = load_agent(make_agent(tmp_path / "a", server.base_url))
    limits = BatchLimits(concurrency=1, max_tokens=1)  # spent by the first item
    batch = RayBatch(
        config,
        as_items(["p", "q", "r", "s"]),
        address=ray_cluster.address,
        limits=limits,
        settings=RuntimeSettings(write_transcript=False),
    )
    results = [result async for result in batch.results()]
    assert [(r.id, r.status) for r in results] == [(1, "ok")]
    assert batch.stats.stopped is not None and "token" in batch.stats.stopped
    assert batch.stats.tokens == results[0].usage["total_tokens"] > 0
    assert len(server.requests) == 2  # the other items never reached the cluster's model


def test_a_local_ray_is_private_shows_its_start_has_no_dashboard_and_a_kill_9_leaves_nothing(
    cli: Cli, serve: Any, tmp_path: Path
) -> None:
    import threading

    from runner.batch.ray_reaper import PREFIX, folder_pids

    server = serve(adder(delay_s=60), repeat=True)  # the items wait on the model: still running at the kill
    agent = make_agent(tmp_path / "a", server.base_url)
    write_inputs(tmp_path / "in.jsonl", ["one", "two"])
    proc = cli.popen("batch", str(agent), "in.jsonl", "-o", "out.jsonl", "--backend", "ray", "-c", "2")
    stderr: list[str] = []
    reader = threading.Thread(target=lambda: stderr.extend(iter(proc.stderr.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while len(server.requests) < 2:  # Ray is up, both actors run an item
            assert proc.poll() is None and time.monotonic() < deadline, "".join(stderr)
            time.sleep(0.2)
        (folder,) = [
            path
            for path in Path("/tmp").glob(PREFIX + "*")
            if (path / "owner").is_file() and (path / "owner").read_text() == str(proc.pid)
        ]
        assert folder.stat().st_mode & 0o777 == 0o700  # Ray's own temp dir inside is 0777
        pids = folder_pids(folder)
        commands = [
            Path(f"/proc/{pid}/cmdline").read_bytes() for pid in pids if Path(f"/proc/{pid}").exists()
        ]
        assert any(b"raylet" in command for command in commands)
        assert not any(b"dashboard.py" in command for command in commands)  # no dashboard process
        proc.kill()  # kill -9 of the driver
        proc.wait(timeout=10)
        deadline = time.monotonic() + 30  # the watcher reaps at once; Ray's agents alone took minutes
        while (folder.exists() or folder_pids(folder)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert folder_pids(folder) == [] and not folder.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(timeout=10)
    shown = "".join(stderr)
    assert "batch: starting a local Ray ... 0 s" in shown and "batch: starting 2 Ray actors ..." in shown
