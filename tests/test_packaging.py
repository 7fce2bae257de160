"""The wheel carries the schemas and packaged agents: build it, install it elsewhere, use it."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding only the built wheel; the suite's dependencies are reached through a .pth."""
    tmp = tmp_path_factory.mktemp("wheel")
    dist = tmp / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    wheel = next(dist.glob("runner-*.whl"))
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # Dependencies only: a .pth line adds the directory without running the .pth files in it,
    # so the suite's editable install of runner does not leak in.
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
    )
    return env_dir


def _run(env_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    code = "import sys; from runner.cli.main import main; sys.argv = ['runner', *sys.argv[1:]]; main()"
    return subprocess.run(
        [str(env_dir / "bin" / "python"), "-c", code, *args], cwd=cwd, capture_output=True, text=True
    )


@pytest.mark.slow
def test_wheel_runs_schema_and_validates_packaged_agent(installed_wheel: Path, tmp_path: Path) -> None:
    located = subprocess.run(
        [str(installed_wheel / "bin" / "python"), "-c", "import runner; print(runner.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(installed_wheel) in located, located  # the wheel's copy, not the checkout

    schema = _run(installed_wheel, "schema", cwd=tmp_path)
    assert schema.returncode == 0, schema.stderr
    assert schema.stdout == (ROOT / "schemas" / "agent.schema.json").read_text(encoding="utf-8")
    assert json.loads(schema.stdout)["$schema"].endswith("2020-12/schema")

    result = _run(installed_wheel, "validate", "assistant", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "ok (assistant)" in result.stdout
    assert "_data/agents/assistant.yaml" in result.stdout


@pytest.mark.slow
def test_wheel_rejects_invalid_file_with_location(installed_wheel: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nname: x\nlimits: {max_stepz: 3}\n")
    result = _run(installed_wheel, "validate", str(bad), cwd=tmp_path)
    assert result.returncode == 2
    assert (
        "bad.yaml:3:10: limits.max_stepz: unknown key 'max_stepz' (did you mean 'max_steps'?)"
        in result.stderr
    )
    assert "Traceback" not in result.stderr
