"""Deny rules see through the command-taking wrappers a Debian system ships (issue 23, item 12):
``prlimit``, ``setpriv``, ``eatmydata``, ``ssh HOST CMD``, ``tmux new CMD`` ... and a wrapper the rules
cannot read with certainty is matched by every deny rule and allowed by none
(``runner.tools.shellwrappers``; the real-shell oracle is ``test_permissions_oracle.py``)."""

from __future__ import annotations

import pytest

from runner.agentfile.config import PermissionsConfig
from runner.tools.permissions import Permissions
from runner.tools.shellwrappers import WRAPPERS
from tests.tools.permission_checks import verdict

DENY = Permissions(PermissionsConfig(deny=["shell(command=rm *)", "shell(command=touch *)"]))
ALLOW_WRAPPERS = Permissions(
    PermissionsConfig(allow=[f"shell(command={name} *)" for name in ("ssh", "tmux", "gdb", "screen", "sg")])
)


def _deny(line: str) -> str | None:
    return verdict(DENY, "shell", {"command": line})


@pytest.mark.parametrize(
    "line",
    [
        "prlimit --nofile=10 rm -f V",
        "prlimit --nofile=64:64 -- touch M",
        "setpriv --reuid=0 --regid=0 --clear-groups rm -f V",
        "eatmydata rm -f V",
        "eatmydata -- touch M",
        "choom -n 5 -- rm -f V",
        "setarch x86_64 -R rm -f V",
        "linux64 rm -f V",
        "dbus-run-session -- rm -f V",
        "systemd-inhibit --what=idle rm -f V",
        "start-stop-daemon --start --exec /bin/rm -- -f V",
        "cpulimit -l 50 -- rm -f V",
        "faketime '2020-01-01' rm -f V",
        "systemd-nspawn -D /srv/c rm -f V",
        "ssh host rm -f V",
        "ssh host 'ls; rm -f V'",
        "ssh -p 22 -i key host 'ls && touch M'",
        "ssh -tt -p22 host ls \\; rm -f V",
        "ssh host -p 22 'ls || rm -f V'",  # ssh reads options after the host too
        "ssh -- host rm -f V",
        "ssh -o ProxyCommand='rm -f V' host",
        "ssh -oProxyCommand=touch\\ M host ls",
        "ssh -o 'ProxyCommand touch M' host",
        "ssh -o 'LocalCommand=rm -f V' -o PermitLocalCommand=yes host",
        "tmux new 'rm -f V'",
        "tmux new-session -d -s work 'ls; touch M'",
        "tmux new -d rm -f V",
        "tmux -L sock neww -t x 'rm -f V'",
        "tmux splitw -h -l 5 'touch M'",
        "tmux new -d ls \\; split-window 'rm -f V'",
        "tmux new -d ls\\; neww 'rm -f V'",
        "tmux respawnp -k -t x 'rm -f V'",
        "tmux new-w 'rm -f V'",
        "tmux -c 'ls; rm -f V'",
        "tmux ls '\\;' new 'rm -f V'",  # however tmux reads an escaped ';', the rules see what follows
        "sg root 'ls; touch M'",
        "sg - root -c 'rm -f V'",
        "screen -dmS x rm -f V",
        "sudo -u root prlimit --cpu=1 ssh host 'rm -f V'",
    ],
)
def test_a_deny_rule_sees_the_command_behind_the_wrapper(line: str) -> None:
    assert _deny(line) == "deny"


@pytest.mark.parametrize(
    "line",
    [
        "ssh -F ./config host ls",  # a configuration file can run commands (ProxyCommand, Match exec)
        "ssh -Z host ls",  # an option ssh does not have: its grammar is not what the rules think
        "ssh $HOST ls",
        "ssh host $CMD",
        "tmux send-keys -t x 'rm -f V' Enter",  # typed into a shell
        "tmux if-shell true 'run-shell \"rm -f V\"'",
        "tmux display -p '#(rm -f V)'",
        "tmux -f ./tmux.conf ls",
        "tmux source-file x.conf",
        "gdb -batch -ex 'shell rm -f V'",
        "screen -S x -X stuff 'rm -f V\n'",
        "screen -c ./screenrc",
    ],
)
def test_a_wrapper_the_rules_cannot_read_is_denied_and_never_allowed(line: str) -> None:
    assert _deny(line) == "deny"
    assert verdict(ALLOW_WRAPPERS, "shell", {"command": line}) is None


@pytest.mark.parametrize(
    "line",
    [
        "ssh host ls -l",
        "ssh -N -L 8080:localhost:80 host",
        "ssh -l rm host uptime",  # -l takes a value: the login name, not a program
        "ssh -o User=rm host uptime",
        "tmux ls",
        "tmux kill-session -t rm",
        "tmux new -d -s rm 'ls -l'",
        "prlimit --pid 1",
        "screen -ls",
    ],
)
def test_what_the_wrapper_does_not_run_does_not_trigger_a_deny(line: str) -> None:
    assert _deny(line) is None
    assert verdict(ALLOW_WRAPPERS, "shell", {"command": line}) in ("allow", None)


def test_the_reviewed_list_holds_the_issues_wrappers() -> None:
    for name in ("prlimit", "setpriv", "eatmydata", "nice", "ionice", "chrt", "taskset", "timeout",
                 "stdbuf", "nohup", "setsid", "unshare", "nsenter", "chroot", "flock", "runuser", "su",
                 "sg", "doas", "firejail", "bwrap", "systemd-run", "script", "watch", "time", "strace",
                 "ltrace", "valgrind", "gdb", "catchsegv", "numactl", "cgexec", "proot", "faketime",
                 "torsocks", "proxychains", "caffeinate"):  # fmt: skip
        assert name in WRAPPERS, name
