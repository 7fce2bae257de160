"""The guard on the command's stdout and stderr: valid text, secrets redacted even when split."""

from __future__ import annotations

import io

from runner.cli.guard import GuardedStream, Secrets
from runner.text import valid_record, valid_text

SECRET = "sk-live-0123456789abcdef"


def _stream() -> tuple[GuardedStream, io.StringIO]:
    known = Secrets()
    known.add([SECRET])
    out = io.StringIO()
    return GuardedStream(out, known), out


def test_a_secret_split_over_many_writes_is_redacted() -> None:
    stream, out = _stream()
    for piece in ["key=", SECRET[:3], SECRET[3:10], SECRET[10:], " done"]:
        stream.write(piece)
    stream.drain()
    assert out.getvalue() == "key=*** done"


def test_a_prefix_of_a_secret_is_held_back_only_until_the_output_shows_it_is_not_one() -> None:
    stream, out = _stream()
    stream.write("starts sk-li")
    assert out.getvalue() == "starts "
    stream.write("ke this\n")
    assert out.getvalue() == "starts sk-like this\n"
    stream.write("sk")
    stream.drain()  # the end of the output: what was held back is written
    assert out.getvalue().endswith("\nsk")


def test_lone_surrogates_are_written_as_replacement_characters() -> None:
    stream, out = _stream()
    stream.write("a\udcffb")
    stream.drain()
    assert out.getvalue() == "a\ufffdb"
    out.getvalue().encode("utf-8")


def test_environment_secrets_are_those_that_look_like_credentials() -> None:
    known = Secrets()
    known.from_environment(
        {"OPENAI_API_KEY": SECRET, "TOKENIZERS_PARALLELISM": "false", "SSH_KEY_PATH": "/root/.ssh/id"}
    )
    assert known.redactor(f"{SECRET} false /root/.ssh/id") == "*** false /root/.ssh/id"


def test_valid_text_keeps_pairs_and_valid_record_keeps_unchanged_objects() -> None:
    assert valid_text("\ud83d\ude00") == "\U0001f600"
    assert valid_text("x\ud800") == "x\ufffd"
    record = {"a": ["b", {"c": 1}]}
    assert valid_record(record) is record
    assert valid_record({"a\udcff": ("x\ud800",)}) == {"a\ufffd": ("x\ufffd",)}


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_shows_what_the_run_waits_for_with_the_time_spent() -> None:
    import time

    from runner.cli.output import ConsoleOutput
    from runner.session.events import StepStarted, TextChunk

    err, out = _Terminal(), io.StringIO()
    output = ConsoleOutput(stdout=out, stderr=err, color=True)
    output(StepStarted(1, 1))
    deadline = time.monotonic() + 20  # the spinner shows after a quiet moment, drawn by its own thread
    while "waiting for the model" not in err.getvalue():
        assert time.monotonic() < deadline, f"no spinner: {err.getvalue()!r}"
        time.sleep(0.02)
    output(TextChunk("hello"))
    output.finish()
    shown = err.getvalue()
    assert "waiting for the model" in shown and " s" in shown
    assert out.getvalue() == "hello\n" or out.getvalue().startswith("hello")


def test_off_a_terminal_progress_stays_plain_lines() -> None:
    from runner.cli.output import ConsoleOutput
    from runner.session.events import StepStarted

    err = io.StringIO()
    output = ConsoleOutput(stdout=io.StringIO(), stderr=err, color=False)
    output(StepStarted(1, 1))
    assert err.getvalue() == "· turn 1 step 1\n"


def test_a_note_printed_while_the_chat_waits_redraws_its_prompt() -> None:
    from runner.cli.output import ConsoleOutput
    from runner.session.events import Note

    err, out = io.StringIO(), io.StringIO()
    output = ConsoleOutput(stdout=out, stderr=err, color=False)
    output.reading = "agent> "
    output(Note("reloaded: prompts"))
    assert err.getvalue() == "\nnote: reloaded: prompts\nagent> "
    output.reading = None
    output(Note("later"))
    assert err.getvalue().endswith("agent> note: later\n")


def test_a_call_refused_before_it_ran_still_shows_what_the_model_sent() -> None:
    from runner.cli.output import ConsoleOutput
    from runner.session.events import AssistantMessage, ToolFinished
    from runner.tools.base import ToolResult

    err = io.StringIO()
    output = ConsoleOutput(stdout=io.StringIO(), stderr=err, color=False)
    raw = '{"a": 2, '
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": raw}}
    output(AssistantMessage({"role": "assistant", "content": None, "tool_calls": [call]}))
    output(ToolFinished(ToolResult("c1", "add", "Invalid arguments for tool 'add'", is_error=True)))
    bad = ToolResult("c2", "add", "Invalid arguments", is_error=True, arguments={"a": "two"})
    output(ToolFinished(bad))
    lines = err.getvalue().splitlines()
    assert lines[0] == '→ add {"a": 2,' and lines[1].startswith("✗ add")
    assert lines[2] == '→ add {"a": "two"}'
