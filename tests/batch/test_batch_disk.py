"""A full disk and a read-only folder (issue 23 item 23): one line naming the path, exit 1, nothing
half-written, and refused before a model call where it can be. A full disk is a tiny tmpfs mounted
for the test (root only); a read-only folder is ``chattr +i`` (root) or mode 0555."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.errors import StorageError
from runner.store.disk import LineFile
from tests.batch.helpers import adder, make_agent, read_out, write_inputs
from tests.cli_run.conftest import Cli

PAGE = 4096


def _fill(folder: Path, *, leave_pages: int) -> None:
    """Fill the tmpfs at ``folder`` until only ``leave_pages`` pages are free."""
    stats = os.statvfs(folder)
    free = stats.f_bavail * stats.f_frsize
    (folder / "filler").write_bytes(b"\0" * max(0, free - leave_pages * PAGE))


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Callable[[int], Path]]:
    """``small_disk(free_pages)``: a 256 KiB tmpfs with only that many pages left free."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs (a disk that can be full) needs root and mount(8)")
    mounted: list[Path] = []

    def make(free_pages: int) -> Path:
        folder = tmp_path / f"disk{len(mounted)}"
        folder.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(folder)], capture_output=True
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
        mounted.append(folder)
        _fill(folder, leave_pages=free_pages)
        return folder

    yield make
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.fixture
def read_only() -> Iterator[Callable[[Path], Path]]:
    """``read_only(folder)``: no file can be created in ``folder`` any more (even by root)."""
    locked: list[Path] = []

    def lock(folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(folder)]).returncode:
                pytest.skip("a read-only folder as root needs chattr +i (e2fsprogs) on this file system")
        else:
            folder.chmod(0o555)
        locked.append(folder)
        return folder

    yield lock
    for folder in locked:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(folder)], check=False)
        else:
            folder.chmod(0o755)


def _leftovers(folder: Path) -> list[str]:
    return sorted(
        p.name
        for p in folder.rglob("*")
        if p.name.endswith(".tmp") or (p.is_file() and p.stat().st_size == 0)
    )


def test_a_full_disk_under_the_output_is_refused_before_any_model_call(
    cli: Cli, serve: Any, tmp_path: Path, small_disk: Callable[[int], Path]
) -> None:
    server = serve(adder(), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    inputs = write_inputs(tmp_path / "in.jsonl", ["a", "b"])
    disk = small_disk(0)
    result = cli("batch", str(agent), str(inputs), "-o", str(disk / "out.jsonl"), timeout=60)
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: cannot write the batch output's folder {disk}: no space left on the device "
        "(hint: free some space (or point it elsewhere), then run the command again)"
    ]
    assert server.requests == [] and _leftovers(disk) == [] and not (disk / "out.jsonl").exists()


def test_the_output_disk_filling_mid_batch_stops_it_with_one_line_and_whole_lines(
    cli: Cli, serve: Any, tmp_path: Path, small_disk: Callable[[int], Path]
) -> None:
    server = serve(adder(delay_s=0.05), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    inputs = write_inputs(tmp_path / "in.jsonl", [f"item {n}" for n in range(60)])
    disk = small_disk(2)  # room for about ten lines
    out = disk / "out.jsonl"
    # before the fix, the command hung for ever cancelling its tasks: the timeout is that failure
    result = cli("batch", str(agent), str(inputs), "-o", str(out), "-c", "8", timeout=90)
    assert result.returncode == 1, result.stderr
    assert f"error: cannot write the batch output {out}: no space left on the device" in result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    lines = read_out(out)  # every line whole (read_out parses each)
    assert 3 <= len(lines) < 60 and out.read_bytes().endswith(b"\n")
    assert _leftovers(disk) == []
    # with room again, the same command resumes and ends with one line per item
    (disk / "filler").unlink()
    again = cli("batch", str(agent), str(inputs), "-o", str(out), "-c", "8", timeout=90)
    assert again.returncode == 0, again.stderr
    assert [line["id"] for line in read_out(out)] == list(range(1, 61))


def test_transcripts_on_a_full_disk_are_refused_before_any_model_call(
    cli: Cli, serve: Any, tmp_path: Path, small_disk: Callable[[int], Path]
) -> None:
    server = serve(adder(), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    inputs = write_inputs(tmp_path / "in.jsonl", ["a", "b", "c"])
    home = small_disk(0) / "home"
    env = {"RUNNER_HOME": str(home)}
    batch = cli("batch", str(agent), str(inputs), "-o", "out.jsonl", extra_env=env, timeout=60)
    assert batch.returncode == 1, batch.stderr
    assert f"error: cannot write the transcripts folder {home / 'sessions'}: no space left" in batch.stderr
    assert "Traceback" not in batch.stderr and batch.stderr.count("error:") == 1
    run = cli("run", str(agent), "-p", "hello", extra_env=env, timeout=60)
    assert run.returncode == 1, run.stderr
    assert f"cannot write the transcript {home / 'sessions'}" in run.stderr and "no space left" in run.stderr
    assert "internal error" not in run.stderr and "Traceback" not in run.stderr
    assert server.requests == []
    assert list((home / "sessions").iterdir()) == [] and _leftovers(home.parent) == []  # no empty transcript


def test_transcripts_filling_the_disk_mid_batch_stop_it_with_one_line(
    cli: Cli, serve: Any, tmp_path: Path, small_disk: Callable[[int], Path]
) -> None:
    server = serve(adder(delay_s=0.05), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    inputs = write_inputs(tmp_path / "in.jsonl", [f"item {n}" for n in range(40)])
    home = small_disk(6) / "home"  # a page per transcript: a few items get theirs
    result = cli(
        "batch",
        str(agent),
        str(inputs),
        "-o",
        "out.jsonl",
        "-c",
        "2",
        extra_env={"RUNNER_HOME": str(home)},
        timeout=90,
    )
    assert result.returncode == 1, result.stderr
    assert "error: cannot write the transcript" in result.stderr and "no space left" in result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("error:") == 1
    for transcript in (home / "sessions").iterdir():  # no empty transcript, no torn line
        assert transcript.stat().st_size > 0 and transcript.read_bytes().endswith(b"\n")
    assert len(read_out(tmp_path / "out.jsonl")) < 40


def test_a_read_only_output_folder_is_refused_before_the_model_is_called(
    cli: Cli, serve: Any, tmp_path: Path, read_only: Callable[[Path], Path]
) -> None:
    server = serve(adder(), repeat=True)
    agent = make_agent(tmp_path / "a", server.base_url)
    inputs = write_inputs(tmp_path / "in.jsonl", ["a", "b", "c"])
    folder = tmp_path / "results"
    folder.mkdir()
    assert (
        cli("batch", str(agent), str(inputs), "-o", str(folder / "out.jsonl"), "--limit", "2").returncode == 0
    )
    before = len(server.requests)
    read_only(folder)  # the file can still be appended to, but not put in order (a new file beside it)
    result = cli("batch", str(agent), str(inputs), "-o", str(folder / "out.jsonl"))
    assert result.returncode == 1, result.stderr
    assert f"error: cannot write the batch output's folder {folder}:" in result.stderr
    assert "internal error" not in result.stderr
    assert len(server.requests) == before  # refused before the model was called for item 3
    assert len(read_out(folder / "out.jsonl")) == 2


def test_a_line_that_cannot_be_written_whole_is_taken_back(small_disk: Callable[[int], Path]) -> None:
    disk = small_disk(1)
    path = disk / "lines.jsonl"
    file = LineFile(path, what="the test file")
    file.write(b"x" * 3000 + b"\n")  # fits the one free page
    with pytest.raises(StorageError) as raised:
        file.write(b"y" * 6000 + b"\n")  # part of it would fit: none of it stays
    file.close()
    assert raised.value.path == str(path) and "no space left on the device" in raised.value.message
    assert path.read_bytes() == b"x" * 3000 + b"\n"
    lonely = LineFile(disk / "never.jsonl", what="the test file")
    (disk / "more").write_bytes(b"\0" * os.statvfs(disk).f_bavail * PAGE)  # full now
    with pytest.raises(StorageError):
        lonely.write(b"z\n")
    assert not (disk / "never.jsonl").exists()  # a file that never got a line is removed


def test_errno_words_name_the_path() -> None:
    from runner.store.disk import storage_error

    error = storage_error(
        OSError(errno.EROFS, "Read-only file system"), Path("/x/out.jsonl"), what="the batch output"
    )
    assert error.message == "cannot write the batch output /x/out.jsonl: the file system is read-only"
