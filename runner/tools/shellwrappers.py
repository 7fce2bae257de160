"""Programs that run another command, as permission rules look into them (``runner.tools.shellwords``).

Two kinds, reviewed against what Debian ships (``docs/decisions.md`` has the list and why):

- ``WRAPPERS`` run the rest of their words as a command after options (``sudo -u root rm x``,
  ``prlimit --nofile=10 rm x``): a deny or ask glob is tried on every tail of the command, so their
  option grammar, values included, need not be known;
- ``command_scripts`` reads the few whose command is a shell line, or that run commands through a
  language of their own: ``ssh HOST CMD`` (the remote shell parses ``CMD``, and ``-o ProxyCommand=``
  runs locally), ``tmux`` (``new``, ``new-window``, ``split-window`` ... ``CMD``, ``-c CMD``), ``sg
  GROUP CMD``, ``screen``, ``gdb``. Where a line cannot be read with certainty (an unknown option, an
  expansion where the host or an option should be, a tmux command that is not on the list, a
  ``#(...)`` format, a configuration file named on the line), the command is opaque (every deny and ask
  glob matches it) and no allow glob vouches for the line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from runner.tools.shellparse import Word

__all__ = ["WRAPPERS", "Scripts", "command_scripts"]

WRAPPERS = frozenset(
    {
        # privileges, users and groups
        "sudo", "doas", "pkexec", "runuser", "su", "sg", "setpriv", "setuidgid", "envuidgid", "gosu",
        "su-exec", "chpst", "capsh", "fakeroot", "fakechroot",
        # the environment, the shell's own builtins
        "env", "command", "builtin", "exec", "time", "envdir", "softlimit", "faketime", "eatmydata",
        "nocache",
        # scheduling, limits, sessions
        "nice", "ionice", "chrt", "taskset", "numactl", "cgexec", "prlimit", "choom", "setsid", "nohup",
        "timeout", "flock", "setlock", "lckdo", "stdbuf", "unbuffer", "chronic", "ifne", "tsp",
        "cpulimit", "trickle", "systemd-run", "systemd-inhibit", "dbus-run-session", "start-stop-daemon",
        "daemon", "pgrphack", "run-one", "run-this-one", "keep-one-running", "tini", "dumb-init",
        "caffeinate", "xvfb-run", "sshpass", "rlwrap", "dtach", "abduco", "script", "watch", "xargs",
        # namespaces, containers, sandboxes
        "chroot", "unshare", "nsenter", "schroot", "proot", "firejail", "bwrap", "systemd-nspawn",
        "flatpak-spawn", "setarch", "linux32", "linux64", "i386", "x86_64", "uname26",
        # network wrappers
        "torsocks", "proxychains", "proxychains4", "tsocks",
        # tracers, profilers, debuggers
        "strace", "ltrace", "valgrind", "catchsegv", "perf", "heaptrack", "gdb",
        # terminal multiplexers (``screen -dm CMD``; tmux is read by ``command_scripts``)
        "screen",
        # multi-call binaries
        "busybox",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Scripts:
    """The shell lines a command hands over, why it runs code no rule can read, and why no allow
    glob may vouch for it (each None when there is no such reason)."""

    scripts: tuple[str, ...] = ()
    opaque: str | None = None
    allow_blocker: str | None = None

    @staticmethod
    def unreadable(why: str) -> Scripts:
        """A command the rules cannot read with certainty: deny and ask match it, allow never does."""
        return Scripts(opaque=why, allow_blocker=why)


def command_scripts(name: str | None, rest: Sequence[Word]) -> Scripts | None:
    """What ``name`` with arguments ``rest`` runs, for the programs read here; None for the others."""
    reader = _READERS.get(name or "")
    return reader(rest) if reader is not None else None


def _literals(rest: Sequence[Word]) -> list[str] | None:
    texts = [word.literal for word in rest]
    return None if any(text is None for text in texts) else [t for t in texts if t is not None]


# -- ssh -----------------------------------------------------------------------------------------

_SSH_FLAGS = frozenset("46AaCfGgKkMNnqsTtVvXxYy")
_SSH_VALUED = frozenset("BbcDEeFIiJLlmOoPpQRSWw")
_SSH_NO_COMMAND = frozenset("NWOGVQ")  # modes that run no remote shell reading stdin
#: ``-o`` options whose value is a command ssh runs locally through the shell.
_SSH_LOCAL_COMMANDS = ("proxycommand", "localcommand", "knownhostscommand", "match")
_SSH_CONFIG_LINE = re.compile(r"\s*([A-Za-z]+)\s*(?:=|\s)\s*(.*)", re.DOTALL)  # Key=Value, Key Value


def _ssh(rest: Sequence[Word]) -> Scripts:
    """``ssh [options] HOST [options] [CMD ...]``: CMD is a shell line for the remote shell."""
    texts = _literals(rest)
    if texts is None:
        return Scripts.unreadable("ssh gets an argument the rules cannot read")
    scripts: list[str] = []
    seen: set[str] = set()
    index, host, terminated = 0, None, False
    while index < len(texts):
        text = texts[index]
        if text == "--" and not terminated:
            index, terminated = index + 1, True
            continue
        if text.startswith("-") and len(text) > 1 and not terminated:
            step = _ssh_option(texts, index, seen, scripts)
            if step is None:
                return Scripts.unreadable(f"ssh has an option the rules cannot read ({text})")
            index += step
            continue
        if host is not None:
            break
        host, index = text, index + 1  # ssh reads options after the host too (until --)
    if host is None:
        return Scripts(tuple(scripts))
    if "F" in seen:
        return Scripts.unreadable("ssh -F reads a configuration that can run commands")
    command = texts[index:]
    if command:
        scripts.append(" ".join(command))  # ssh joins its words with spaces for the remote shell
    elif not seen & _SSH_NO_COMMAND:
        return Scripts(tuple(scripts), opaque="ssh runs a remote shell that reads its input")
    return Scripts(tuple(scripts))


def _ssh_option(texts: list[str], index: int, seen: set[str], scripts: list[str]) -> int | None:
    """How many words the option cluster at ``index`` takes; its local commands go to ``scripts``."""
    text = texts[index]
    for position in range(1, len(text)):
        letter = text[position]
        seen.add(letter)
        if letter in _SSH_FLAGS:
            continue
        if letter not in _SSH_VALUED:
            return None
        value = text[position + 1 :]
        taken = 1
        if not value:
            if index + 1 >= len(texts):
                return None
            value, taken = texts[index + 1], 2
        option = _SSH_CONFIG_LINE.match(value) if letter == "o" else None
        if option is not None and option.group(1).lower() in _SSH_LOCAL_COMMANDS:
            scripts.append(option.group(2))
        return taken
    return 1


# -- tmux ----------------------------------------------------------------------------------------

_TMUX_FLAGS = frozenset("2CDlNuVv")
_TMUX_VALUED = frozenset("cfLST")
#: tmux commands that run a shell command, by name and alias: (flags, options with a value).
_TMUX_RUNNERS: dict[str, tuple[str, str]] = {
    "new-session": ("AdDEPX", "cefFnstxy"),
    "new-window": ("abdkPS", "ceFnt"),
    "split-window": ("bdfhIvPZ", "celptF"),
    "respawn-pane": ("k", "cet"),
    "respawn-window": ("k", "cet"),
    "pipe-pane": ("IOo", "t"),
    "display-popup": ("BCEkN", "bcdehsStTwxy"),
}
_TMUX_ALIASES = {
    "new": "new-session", "neww": "new-window", "splitw": "split-window", "respawnp": "respawn-pane",
    "respawnw": "respawn-window", "pipep": "pipe-pane", "popup": "display-popup",
}  # fmt: skip
#: tmux commands that run nothing (their arguments are names, targets and formats).
_TMUX_QUIET = frozenset(
    {
        "ls", "list-sessions", "lsw", "list-windows", "lsp", "list-panes", "lsc", "list-clients",
        "lsb", "list-buffers", "lscm", "list-commands", "has", "has-session", "kill-server",
        "kill-session", "killw", "kill-window", "killp", "kill-pane", "attach", "a", "at",
        "attach-session", "detach", "detach-client", "selectw", "select-window", "selectp",
        "select-pane", "rename", "rename-session", "renamew", "rename-window", "capturep",
        "capture-pane", "show", "show-options", "showw", "show-window-options", "showenv",
        "show-environment", "display", "display-message", "wait", "wait-for", "start",
        "start-server", "info", "server-info", "resizep", "resize-pane", "showb", "show-buffer",
        "clearhist", "clear-history", "lastw", "last-window", "next", "next-window", "prev",
        "previous-window",
    }
)  # fmt: skip


def _tmux(rest: Sequence[Word]) -> Scripts:
    """``tmux [options] [COMMAND [args]] [; COMMAND ...]``: the shell commands its commands run."""
    texts = _literals(rest)
    if texts is None:
        return Scripts.unreadable("tmux gets an argument the rules cannot read")
    if any("#(" in text for text in texts):
        return Scripts.unreadable("a tmux format runs a shell command (#(...))")
    scripts: list[str] = []
    index = 0
    while index < len(texts) and texts[index].startswith("-") and len(texts[index]) > 1:
        text = texts[index]
        if text == "--":
            index += 1
            break
        letter = next((c for c in text[1:] if c not in _TMUX_FLAGS), None)
        if letter is None:
            index += 1
            continue
        if letter not in _TMUX_VALUED:
            return Scripts.unreadable(f"tmux has an option the rules cannot read ({text})")
        value_at = text.index(letter) + 1
        value = text[value_at:] or (texts[index + 1] if index + 1 < len(texts) else None)
        if value is None:
            return Scripts.unreadable(f"tmux {text} has no value")
        if letter == "f":
            return Scripts.unreadable("tmux -f reads a configuration that can run commands")
        if letter == "c":
            scripts.append(value)
        index += 1 if text[value_at:] else 2
    for command in _tmux_commands(texts[index:]):
        found = _tmux_command(command)
        if found is None:
            return Scripts.unreadable(f"the tmux command {command[0]!r} is not one the rules can read")
        scripts.extend(found)
    return Scripts(tuple(scripts))


def _tmux_commands(texts: list[str]) -> list[list[str]]:
    """tmux's command sequence split at ``;`` (a word of its own, or the end of a word)."""
    commands: list[list[str]] = [[]]
    for text in texts:
        if text == ";":
            commands.append([])
        elif text.endswith(";"):  # "\\;" too: read as a separator, the stricter reading
            commands[-1].append(text[:-1])
            commands.append([])
        else:
            commands[-1].append(text)
    return [command for command in commands if command]


def _tmux_command(words: list[str]) -> list[str] | None:
    """The shell commands of one tmux command, or None when it is not one the rules can read."""
    name = _TMUX_ALIASES.get(words[0], words[0])
    if name in _TMUX_QUIET:
        return []
    if name not in _TMUX_RUNNERS:  # tmux takes unique prefixes: read one as the command it names
        matches = [full for full in _TMUX_RUNNERS if full.startswith(name)]
        if len(matches) != 1:
            return None
        name = matches[0]
    flags, valued = _TMUX_RUNNERS[name]
    index = 1
    while index < len(words) and words[index].startswith("-") and len(words[index]) > 1:
        text = words[index]
        if text == "--":
            index += 1
            break
        letter = next((c for c in text[1:] if c not in flags), None)
        if letter is None:
            index += 1
        elif letter in valued:
            index += 1 if text[text.index(letter) + 1 :] else 2
        else:
            return None
    command = words[index:]
    return [" ".join(command)] if command else []


# -- sg, screen, gdb -----------------------------------------------------------------------------


def _sg(rest: Sequence[Word]) -> Scripts:
    """``sg [-] GROUP [-c] CMD``: CMD runs through ``/bin/sh -c``."""
    texts = _literals(rest)
    if texts is None:
        return Scripts.unreadable("sg gets an argument the rules cannot read")
    words = texts[1:] if texts[:1] == ["-"] else texts
    command = words[1:]
    if command[:1] == ["-c"]:
        command = command[1:]
    if not command:
        return Scripts(opaque="sg without a command runs a shell that reads its input")
    return Scripts((" ".join(command),))


def _screen(rest: Sequence[Word]) -> Scripts | None:
    """``screen -X`` / ``-Q`` send commands (``stuff`` types into a shell), ``-c`` reads a configuration:
    unreadable; otherwise a wrapper."""
    for word in rest:
        text = word.literal
        if text is None:
            return Scripts.unreadable("screen gets an argument the rules cannot read")
        if text.startswith("-") and not text.startswith("--") and set(text[1:]) & {"X", "Q", "c"}:
            return Scripts.unreadable("screen -X and -c (a configuration) run commands the rules cannot read")
    return Scripts()


def _gdb(rest: Sequence[Word]) -> Scripts:
    """gdb runs its own commands (``-ex 'shell ...'``, a command file, its input): never readable."""
    return Scripts.unreadable("gdb runs commands (-ex, -x, its input) the rules cannot read")


_READERS: dict[str, Callable[[Sequence[Word]], Scripts | None]] = {
    "ssh": _ssh,
    "tmux": _tmux,
    "sg": _sg,
    "screen": _screen,
    "gdb": _gdb,
}
