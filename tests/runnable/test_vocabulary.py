"""One vocabulary for text deltas: the model's stream, the loop's events and the server's pieces."""

from __future__ import annotations

import runner
from runner.models.base import ReasoningDelta, TextDelta
from runner.serve.engine import ReasoningPiece, TextPiece


def test_a_text_delta_is_one_class_at_every_layer() -> None:
    assert runner.TextChunk is TextDelta and TextPiece is TextDelta
    assert runner.ReasoningChunk is ReasoningDelta and ReasoningPiece is ReasoningDelta


def test_the_public_api_is_its_type_checking_block_and_nothing_test_only() -> None:
    names = set(runner.__all__)
    assert {"Agent", "Outcome", "WorkflowResult", "WorkflowStep", "RunResult", "RuntimeSettings"} <= names
    assert not names & {"AgentRuntime", "RuntimeHost", "open_runtime", "build_request"}
    for name in names:
        assert getattr(runner, name) is not None
