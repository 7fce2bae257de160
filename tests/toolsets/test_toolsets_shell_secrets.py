"""Secrets stay out of shell commands: withheld variables (the widened rule), and the runner's own
``/proc`` files (environ, mem, fd), read by a command through the real shell toolset."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runner.agentfile.interpolate import Interpolator
from runner.tools.base import RunContext

#: A "runner" process: opens the real shell toolset and runs each command given, as the model would.
RUNNER_SCRIPT = r"""
import asyncio, ctypes, json, os, sys
from contextlib import AsyncExitStack
from pathlib import Path
from runner.agentfile.config import AgentConfig, ToolSourceConfig
from runner.errors import ToolError
from runner.tools.base import RunContext
from runner.tools.builtin import load_source
from runner.tools.sources import SourceContext

async def main():
    folder, commands = Path(sys.argv[1]), json.loads(sys.argv[2])
    outputs = []
    async with AsyncExitStack() as stack:
        agent = AgentConfig(name="t", path=folder / "agent.yaml")
        spec = ToolSourceConfig(kind="builtin", target="shell", base_dir=folder, options={"timeout_s": 20})
        tool = (await load_source(spec, SourceContext(agent=agent), stack)).tools[0]
        run = RunContext(session_id="s", agent="t", workspace=folder)
        for command in commands:
            try:
                outputs.append(await tool.call({"command": command}, run))
            except ToolError as exc:
                outputs.append(exc.message)
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    print(json.dumps({
        "pid": os.getpid(),
        "outputs": outputs,
        "own_environ": open("/proc/self/environ", "rb").read().decode(errors="replace"),
        "os_environ": {k: os.environ.get(k) for k in ("OPENAI_API_KEY", "DATABASE_URL")},
        "getenv": {k: (libc.getenv(k.encode()) or b"").decode() for k in ("OPENAI_API_KEY", "DATABASE_URL")},
    }))

asyncio.run(main())
"""

#: The runner's pid, found from the command: $PPID is the reaper, whose parent is the runner.
RUNNER_PID = "R=$(sed 's/.*) //' /proc/$PPID/stat | cut -d' ' -f2); "

#: Reads every readable mapping of the runner's memory and prints what follows each "sk-fake-".
MEM_READ = (
    RUNNER_PID + '{python} -c "import re,sys\n'
    "pid=sys.argv[1]; found=[]\n"
    "try:\n"
    "  maps=open(f'/proc/{{pid}}/maps').read().splitlines(); mem=open(f'/proc/{{pid}}/mem','rb')\n"
    "except OSError as exc:\n"
    "  print('refused', exc); sys.exit()\n"
    "for line in maps:\n"
    "  span, perms = line.split()[:2]\n"
    "  if 'r' not in perms: continue\n"
    "  a, b = (int(x, 16) for x in span.split('-'))\n"
    "  try:\n"
    "    mem.seek(a); data=mem.read(b-a)\n"
    "  except (OSError, ValueError, OverflowError): continue\n"
    "  found += [m.decode(errors='replace') for m in re.findall(rb'sk-fake-[0-9a-f]{{8}}', data)]\n"
    "print('found', sorted(set(found)))\" $R 2>&1"
)

ATTACKS = [
    "tr '\\0' '\\n' < /proc/$PPID/environ",
    "cat /proc/$PPID/environ",
    RUNNER_PID + "tr '\\0' '\\n' < /proc/$R/environ 2>&1",
    RUNNER_PID + "cat /proc/$R/environ /proc/$R/task/*/environ 2>&1",
    RUNNER_PID + "ls -l /proc/$R/fd 2>&1; cat /proc/$R/maps 2>&1 | head -3",
    RUNNER_PID + "head -c 100000 /proc/$R/mem 2>&1 | tr -c '[:print:]' ' ' | grep -o 'sk-fake-........'",
]


def _secrets_env() -> dict[str, str]:
    token = secrets.token_hex(4)
    return {
        "OPENAI_API_KEY": f"sk-fake-{token}",
        "ANTHROPIC_API_KEY": f"sk-fake-{secrets.token_hex(4)}",
        "GITHUB_TOKEN": f"ghp_fake{secrets.token_hex(8)}",
        "MYSQL_PWD": f"mysql-fake-{secrets.token_hex(8)}",
        "DATABASE_URL": f"postgres://app:pg-fake-{secrets.token_hex(8)}@db.internal/app",
    }


def _attack(tmp_path: Path, fake: dict[str, str], *, extra: dict[str, str] | None = None) -> dict[str, Any]:
    commands = [*ATTACKS, MEM_READ.format(python=sys.executable)]
    env = {k: v for k, v in os.environ.items() if k != "RUNNER_UNHARDENED"} | fake | (extra or {})
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, "-c", RUNNER_SCRIPT, str(tmp_path), json.dumps(commands)],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=50,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.skipif(sys.platform != "linux", reason="/proc and the hardening are Linux only")
def test_a_command_cannot_read_the_runners_secrets_through_proc(tmp_path: Path) -> None:
    fake = _secrets_env()
    result = _attack(tmp_path, fake)
    everything = "\n".join(result["outputs"])
    for name, value in fake.items():
        assert value not in everything, f"{name} leaked to a command"
        assert value not in result["own_environ"], f"{name} still in the runner's /proc/PID/environ"
    memory = result["outputs"][-1]
    assert memory.startswith(("refused [Errno 13] Permission denied", "found []")), memory
    assert str(result["pid"]) != ""  # the attacks aimed at the runner itself
    # The runner itself still has every secret, for Python and for C alike.
    assert result["os_environ"] == {k: fake[k] for k in ("OPENAI_API_KEY", "DATABASE_URL")}
    assert result["getenv"] == result["os_environ"]


@pytest.mark.skipif(sys.platform != "linux", reason="/proc and the hardening are Linux only")
@pytest.mark.skipif(os.geteuid() != 0, reason="the same-user reads without hardening need root here")
def test_without_the_hardening_the_same_attacks_do_read_the_secrets(tmp_path: Path) -> None:
    """The control: with ``RUNNER_UNHARDENED=1`` the attacks above work, so they test something."""
    fake = _secrets_env()
    result = _attack(tmp_path, fake, extra={"RUNNER_UNHARDENED": "1"})
    everything = "\n".join(result["outputs"])
    assert fake["OPENAI_API_KEY"] in everything
    assert fake["GITHUB_TOKEN"] in everything
    assert fake["ANTHROPIC_API_KEY"] in result["outputs"][-1]


WIDENED = {
    "MYSQL_PWD": "mysql-pass",
    "GH_PAT": "github-pat",
    "AWS_CREDENTIALS": "aws-creds",
    "GOOGLE_APPLICATION_CREDENTIALS": "/secrets/sa.json",
    "SMTP_PASS": "smtp-pass",
    "NPM_AUTH": "npm-auth",
    "HTTP_COOKIE": "cookie",
    "GPG_PASSPHRASE": "phrase",
    "DB_PASSWD": "passwd",
    "DATABASE_URL": "postgres://app:pg-pass@db/app",
    "CACHE": "redis://:redis-pass@cache:6379/0",
    "AZURE_STORAGE": "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=azure-key",
}
KEPT = {
    "SERVICE_URL": "https://api.example.com:8443/v1",
    "GIT_REMOTE": "ssh://git@github.com:22/org/repo",
    "SSH_AUTH_SOCK": "/tmp/agent.sock",
    "PAGER": "less",
}


async def test_credentials_under_other_names_or_in_urls_are_withheld(
    load_builtin: Any, run_ctx: RunContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {**WIDENED, **KEPT}.items():
        monkeypatch.setenv(name, value)
    tool = (await load_builtin("shell"))["shell"]
    output = await tool.call({"command": "env; echo PWD=$PWD; echo OLDPWD=${OLDPWD-unset}"}, run_ctx)
    for name, value in WIDENED.items():
        assert f"{name}=" not in output and value not in output, f"{name} reached the command"
    for name, value in KEPT.items():
        assert f"{name}={value}" in output
    lines = output.splitlines()
    assert any(line.startswith("PWD=/") for line in lines)
    assert any(line.startswith("PATH=") for line in lines) and any(line.startswith("HOME=") for line in lines)
    named = (await load_builtin("shell", {"env": {"MYSQL_PWD": "given"}}))["shell"]
    assert (await named.call({"command": "echo $MYSQL_PWD"}, run_ctx)).startswith("given\n")


def test_a_url_with_a_password_is_remembered_as_a_secret_for_redaction() -> None:
    url = "postgres://app:pg-pass@db/app"
    interpolator = Interpolator({"DATABASE_URL": url, "SERVICE_URL": "https://api.example.com/v1"})
    interpolator.expand("${DATABASE_URL} ${SERVICE_URL}", ("x",), plain=False)
    assert interpolator.secrets == {url}
