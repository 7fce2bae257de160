"""A turn's structured answer (``output:``, or a served client's ``response_format``).

When the session's ``OutputPlan`` reads a reply as the final answer (``Turn._after_reply``), the
answer is accepted (the turn ends with it: ``OutputReady``, an ``output`` transcript event), sent
back with the validator's message (the model tries again), or, after ``limits.output_retries``
more tries, refused for good (``OutputError``). Every call of the reply is answered in call order:
the final-answer call with the verdict, a call that started while the reply streamed with its real
result, the others "not executed".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from runner.agentfile.config import LimitsConfig
from runner.errors import ModelError, OutputError
from runner.models.base import Reply, ToolCall
from runner.modes.base import ReplyReader
from runner.modes.structured import OutputPlan, Verdict, plan_output, refuses_schema
from runner.session.conversation import NOTE_PREFIX, Conversation
from runner.session.decisions import EndTurn
from runner.session.events import OutputReady
from runner.session.view import SessionView
from runner.text import counted, one_line
from runner.tools.base import ToolResult

__all__ = ["REFUSED_ANSWER_CHARS", "AnsweringTurn", "TurnAnswers", "next_plan", "session_plan"]

#: How much of a refused answer's text stays in the history that goes back to the model.
REFUSED_ANSWER_CHARS = 20_000


def session_plan(session: SessionView) -> OutputPlan | None:
    """How ``session`` asks for its structured answer: the agent's ``output:``, else the caller's
    (``RunOptions.output``), in the runtime's mode, with what the runtime learned of its model."""
    runtime, model = session.runtime, session.model
    output = runtime.output or session.options.output
    if output is None:
        return None
    return plan_output(
        output,
        mode=runtime.mode.kind,
        model=model,
        tool_names=[*runtime.registry.names(), *session.client_names],
        learned=runtime.learned_output.get(model.name),
    )


def next_plan(session: SessionView, error: ModelError) -> OutputPlan | None:
    """The plan after the provider refused the current one (``error``: a 400 about schemas), told to
    the user and the transcript, and learned by the runtime; None when ``error`` is no such refusal
    or no strategy is left."""
    plan = session.output_plan
    if plan is None or not refuses_schema(error.status, error.message):
        return None
    new = plan.fallback()
    if new is None:
        return None
    session.runtime.learned_output[session.model.name] = new.strategy
    session.note(
        f"the model refused {plan.describe()} ({one_line(error.message, 160)}); "
        f"the answer now comes as {new.describe()}",
        "warning",
    )
    session.record_event(
        "output_fallback", refused=plan.strategy, now=new.strategy, error=one_line(error.message, 300)
    )
    return new


def _answered(call: ToolCall, content: str, *, error: bool = False) -> ToolResult:
    return ToolResult(call.id, call.name, content, is_error=error)


class AnsweringTurn(Protocol):
    """What ``TurnAnswers`` uses of its turn (``turn.Turn``, named so this module need not import it)."""

    output: str

    @property
    def session(self) -> SessionView: ...
    @property
    def limits(self) -> LimitsConfig: ...
    @property
    def conversation(self) -> Conversation: ...
    def _give_results(self, reader: ReplyReader | None, results: Sequence[ToolResult]) -> None: ...


class TurnAnswers:
    """The structured answer of one turn: at most one accepted, after at most ``output_retries``
    refused ones."""

    def __init__(self, turn: AnsweringTurn) -> None:
        self.turn = turn
        self.ready: OutputReady | None = None
        """The accepted answer (None until one matched)."""
        self.data: Any = None
        """The accepted answer as Python callers get it (a pydantic instance for a ``python:`` model)."""
        self.failures = 0

    @property
    def plan(self) -> OutputPlan:
        """The session's plan of the moment (a provider's refusal may change it during the turn)."""
        plan = self.turn.session.output_plan
        assert plan is not None
        return plan

    def final(
        self, reader: ReplyReader, reply: Reply, verdict: Verdict, ran: dict[str, ToolResult]
    ) -> EndTurn | None:
        """A final answer under ``output:``: accepted (the turn ends), sent back with the validator's
        message (the model tries again), or refused for good after ``limits.output_retries``.
        ``ran`` holds the results of the reply's other calls that started while it streamed."""
        session, plan = self.turn.session, self.plan
        if verdict.ok:
            if verdict.call is not None:
                self._answer_calls(
                    reader, reply, verdict, ran, "Accepted: this is the final answer.", "was given"
                )
            self._accept(verdict.value, spoken=verdict.call is not None)
            return EndTurn("done")
        self.failures += 1
        tries_left = self.turn.limits.output_retries - self.failures + 1
        problems = list(verdict.problems)
        session.record_event("output_invalid", attempt=self.failures, problems=problems)
        if tries_left <= 0:
            self._answer_calls(
                reader, reply, verdict, ran, f"The answer was refused: {problems[0]}", "was refused"
            )
            tries = counted(self.failures, "try", "tries")
            raise OutputError(
                f"the answer did not match {plan.output.where} after {tries}: {problems[0]}",
                problems=problems,
                hint="the transcript keeps every answer; `runner resume ID -p ...` gives the model more "
                "tries; or raise limits.output_retries, or make the schema or the prompt clearer",
            )
        message = plan.repair(verdict, tries_left)
        # A refused answer goes back cut short: a model that wrote megabytes need not read them again.
        self.turn.conversation.cut_last(REFUSED_ANSWER_CHARS, "runner: a refused answer")
        if verdict.call is not None:
            self._answer_calls(reader, reply, verdict, ran, message, "was refused")
        else:
            self.turn.conversation.append({"role": "user", "content": NOTE_PREFIX + message})
        more = counted(tries_left, "more try", "more tries")
        session.note(
            f"the answer does not match {plan.output.where} ({problems[0]}); asking again ({more})", "warning"
        )
        return None

    def _answer_calls(
        self,
        reader: ReplyReader,
        reply: Reply,
        verdict: Verdict,
        ran: dict[str, ToolResult],
        answer: str,
        given: str,
    ) -> None:
        """One result per call of ``reply``, in call order: ``answer`` for the final-answer call (an
        error unless the answer was accepted), the real result of a call that started while the
        reply streamed, "not executed" for the other calls beside it."""
        results = [
            _answered(call, answer, error=not verdict.ok)
            if call is verdict.call
            else ran.get(call.id) or _answered(call, f"Not executed: the final answer {given}.", error=True)
            for call in reply.tool_calls
        ]
        self.turn._give_results(reader, results)

    def _accept(self, value: Any, *, spoken: bool) -> None:
        """The answer matched: the turn's output. An answer given as a final-answer call is also said
        as the assistant's text, so the history ends with the answer, as a client's would."""
        text = json.dumps(value, ensure_ascii=False)
        if spoken:
            self.turn.conversation.append({"role": "assistant", "content": text})
        self.turn.output = text
        self.ready = OutputReady(value, text)
        self.data = self.plan.output.instance(value)
        self.turn.session.record_event("output", value=value)
        self.turn.session.sink(self.ready)
