"""What one request runs, decided once for ``runner serve`` and the Open WebUI pipe: the served
workflow of that name (a ``WorkflowRun``), or the agent's turn (a ``ChatRun``); 404 for neither."""

from __future__ import annotations

from collections.abc import Callable

from runner.serve.engine import ChatRun, RequestRun
from runner.serve.history import ChatHistory
from runner.serve.protocol import ApiError, ChatRequest
from runner.serve.reload import CatalogHolder
from runner.serve.workflow_run import open_workflow_run
from runner.store.transcript import Transcript

__all__ = ["open_request_run"]


def open_request_run(
    holder: CatalogHolder,
    chat: ChatRequest,
    history: ChatHistory,
    *,
    name: str | None = None,
    report: Callable[[str], None] | None = None,
    tool_details: bool = True,
    where: str = "",
    resume: Transcript | None = None,
) -> RequestRun:
    """The run of model ``name`` (the request's ``model`` when None); ``where`` says, in a 404, where
    the agents were looked for; ``resume``: the transcript an agent's turn continues (a door's
    conversation id; a workflow is one-shot and never continues)."""
    name = name or chat.model
    workflow = holder.workflow(name)
    if workflow is not None:
        return open_workflow_run(holder, workflow, chat, on_done=report)
    agent, host = holder.get(name), holder.host(name)
    if agent is None or host is None:
        served = ", ".join(sorted(holder.current.names())) or "none"
        raise ApiError(
            404,
            f"The model '{name}' does not exist{where} (served: {served})",
            param="model",
            code="model_not_found",
        )
    return ChatRun.for_request(host, history, chat, on_done=report, tool_details=tool_details, resume=resume)
