"""``tools: - a2a: URL``: a runner agent calling remote A2A agents (runner itself, the a2a-sdk's own
server helpers), and what it does with bad cards and remotes that misbehave."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2 as pb
from starlette.applications import Starlette

from runner.errors import RunnerError
from runner.testing.model import text, tool_call
from runner.testing.run import run_agent
from tests.a2a.conftest import Served

pytestmark = pytest.mark.anyio


def caller(root: Path, url: str, body: str = "") -> Path:
    path = root / "caller.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            name: caller
            model: openai/scripted
            tools:
              - a2a: {url}
            """
        )
        + textwrap.dedent(body),
        encoding="utf-8",
    )
    return path


def tool_results(run: Any) -> list[str]:
    return [m["content"] for m in run.history if m.get("role") == "tool"]


# ----------------------------------------------------------------- runner calling runner


async def test_a_runner_agent_calls_another_over_a2a_and_continues_its_context(
    agents, scripted, serve, tmp_path
) -> None:
    remote_model = scripted([{"content": "The capital is Paris."}, {"content": "About two million."}])
    served = serve([agents.write("geo", remote_model)])
    path = caller(tmp_path, served.agent_url("geo"))
    script = [
        tool_call("geo", message="Capital of France?"),
        text("Paris."),
        tool_call("geo", message="And how many live there?"),
        text("Two million."),
    ]
    run = await run_agent(path, "capital?", "population?", script=script)
    assert tool_results(run) == ["The capital is Paris.", "About two million."]
    second = remote_model.requests[1]["messages"]
    assert any("Capital of France?" in str(m.get("content")) for m in second)  # same remote context
    assert "The capital is Paris." in [m.get("content") for m in second]


def test_runner_tools_and_audit_list_the_remote_agent_and_its_url(agents, scripted, serve, tmp_path) -> None:
    from typer.testing import CliRunner

    from runner.cli.main import app

    served = serve([agents.write("geo", scripted([]))])
    path = caller(tmp_path, served.agent_url("geo"))
    cli = CliRunner()
    listed = cli.invoke(app, ["tools", str(path)])
    assert listed.exit_code == 0, listed.output
    assert "geo" in listed.output and served.agent_url("geo") in listed.output
    audited = cli.invoke(app, ["audit", str(path), "--json"])
    assert audited.exit_code == 0, audited.output
    assert served.agent_url("geo") in audited.output and '"a2a"' in audited.output


# ----------------------------------------------------------------- an agent on the a2a-sdk's own server


class Scripted(AgentExecutor):
    """An agent built with the a2a-sdk alone: it answers from a script, as a task with one artifact,
    or asks for input first when the message says "book"."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = answers
        self.seen: list[tuple[str, str]] = []

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id and context.message
        said = context.get_user_input()
        self.seen.append((context.context_id, said))
        if context.current_task is None:
            await event_queue.enqueue_event(
                pb.Task(id=context.task_id, context_id=context.context_id, status=pb.TaskStatus(state=1))
            )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work(updater.new_agent_message([pb.Part(text="thinking")]))
        if said == "book":
            await updater.requires_input(updater.new_agent_message([pb.Part(text="Which date?")]))
            return
        await updater.add_artifact([pb.Part(text=self.answers.pop(0))], name="answer", last_chunk=True)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        return None


def sdk_app(executor: AgentExecutor, *, version: str, binding: str, card_host: str = "") -> Starlette:
    """An A2A server made with the a2a-sdk's helpers; its card's URL is filled in once the port is known."""
    card = pb.AgentCard(
        name="sdk-agent",
        description="an agent served by the a2a-sdk",
        version="1.0.0",
        capabilities=pb.AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[pb.AgentSkill(id="answer", name="answer", description="answers", tags=["test"])],
    )
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card)
    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, "/rpc", enable_v0_3_compat=True),
        *create_rest_routes(handler, enable_v0_3_compat=True, path_prefix="/api"),
    ]
    app = Starlette(routes=routes)
    app.state.card = card
    app.state.version, app.state.binding, app.state.card_host = version, binding, card_host
    return app


def start_sdk(app: Starlette) -> Served:
    served = Served(app).start()
    card = app.state.card
    host = app.state.card_host or served.url
    path = "/rpc" if app.state.binding == "JSONRPC" else "/api"
    card.supported_interfaces.append(
        pb.AgentInterface(
            url=host + path, protocol_binding=app.state.binding, protocol_version=app.state.version
        )
    )
    return served


@pytest.mark.parametrize(
    ("binding", "version"), [("JSONRPC", "1.0"), ("HTTP+JSON", "0.3"), ("JSONRPC", "0.3")]
)
async def test_runner_calls_an_agent_served_with_the_a2a_sdk(tmp_path, binding: str, version: str) -> None:
    executor = Scripted(["forty-two", "still forty-two"])
    served = start_sdk(sdk_app(executor, version=version, binding=binding))
    try:
        path = caller(tmp_path, served.url)  # the base URL: the card is at the well-known path
        script = [
            tool_call("sdk-agent", message="meaning?"),
            text("42"),
            tool_call("sdk-agent", message="sure?"),
            text("yes"),
        ]
        run = await run_agent(path, "ask it", "again", script=script)
        assert tool_results(run) == ["forty-two", "still forty-two"]
        (first, _), (second, _) = executor.seen
        assert first == second  # the remote contextId was kept for the session
    finally:
        served.stop()


async def test_input_required_comes_back_as_a_question_and_the_next_call_answers_it(tmp_path) -> None:
    executor = Scripted(["booked for Monday"])
    served = start_sdk(sdk_app(executor, version="1.0", binding="JSONRPC"))
    try:
        path = caller(tmp_path, served.url)
        script = [
            tool_call("sdk-agent", message="book"),
            tool_call("sdk-agent", message="Monday"),
            text("Booked."),
        ]
        run = await run_agent(path, "book it", script=script)
        asked, done = tool_results(run)
        assert "needs more input" in asked and "Which date?" in asked
        assert done == "booked for Monday"
    finally:
        served.stop()


async def test_a_slow_streamed_answer_arrives_and_its_status_messages_are_progress_lines(tmp_path) -> None:
    from runner.agentfile.files import load_agent
    from runner.runnable import AgentRunner
    from runner.runtime import RuntimeSettings
    from runner.session.opening import open_runtime
    from runner.testing.model import ScriptedModel

    class Slow(Scripted):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            await asyncio.sleep(0.3)  # slow, but well within the tool's timeout
            await super().execute(context, event_queue)

    executor = Slow(["eventually"])
    served = start_sdk(sdk_app(executor, version="1.0", binding="JSONRPC"))
    lines: list[tuple[str, str]] = []
    try:
        path = caller(tmp_path, served.url)
        path.write_text(path.read_text(encoding="utf-8") + "    timeout_s: 10\n", encoding="utf-8")
        model = ScriptedModel([tool_call("sdk-agent", message="take your time"), text("ok")])
        settings = RuntimeSettings(home=tmp_path / "home", write_transcript=False)
        runtime = await open_runtime(
            load_agent(path), settings, model=model, on_progress=lambda *line: lines.append(line)
        )
        runner = AgentRunner(runtime.config, settings, runtime=runtime)
        outcome = await runner.run(["go"])
        await runtime.aclose()
        assert outcome.status == "ok" and outcome.tools == ("sdk-agent",)
        assert model.requests[1].messages[-1]["content"] == "eventually"  # the tool's result
        assert any("sdk-agent: thinking" in text for _, text in lines), lines
    finally:
        served.stop()


def test_validate_refuses_an_a2a_source_that_is_not_an_http_url(tmp_path) -> None:
    from typer.testing import CliRunner

    from runner.cli.main import app

    path = caller(tmp_path, "ftp://agents.example.com/travel")
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert "tools[0]" in result.output and "a2a" in result.output
    good = caller(tmp_path, "https://agents.example.com/a2a/travel")
    assert CliRunner().invoke(app, ["validate", str(good)]).exit_code == 0


async def test_headers_take_env_secrets_and_reach_a_server_with_keys(
    agents, scripted, serve, tmp_path, monkeypatch
) -> None:
    remote_model = scripted([{"content": "behind a key"}])
    served = serve([agents.write("locked", remote_model)], api_keys=["s3cret-key"])
    monkeypatch.setenv("LOCKED_KEY", "s3cret-key")
    path = caller(tmp_path, served.agent_url("locked"))
    path.write_text(
        path.read_text(encoding="utf-8") + "    headers:\n      Authorization: Bearer ${LOCKED_KEY}\n",
        encoding="utf-8",
    )
    run = await run_agent(path, "go", script=[tool_call("locked", message="open"), text("ok")])
    assert tool_results(run) == ["behind a key"]
    monkeypatch.setenv("LOCKED_KEY", "wrong")
    with pytest.raises(RunnerError, match="401"):
        await run_agent(path, "go", script=[tool_call("locked", message="open"), text("ok")])


async def test_the_card_is_fetched_once_per_runtime_and_again_on_reload(tmp_path) -> None:
    from runner.agentfile.files import load_agent
    from runner.runtime import RuntimeSettings
    from runner.session.opening import runtime_host
    from runner.testing.model import ScriptedModel

    executor = Scripted(["one", "two"])
    app = sdk_app(executor, version="1.0", binding="JSONRPC")
    fetched: list[str] = []

    async def count(request: Any, call_next: Any) -> Any:
        if request.url.path.endswith("agent-card.json"):
            fetched.append(request.url.path)
        return await call_next(request)

    from starlette.middleware.base import BaseHTTPMiddleware

    app.add_middleware(BaseHTTPMiddleware, dispatch=count)
    served = start_sdk(app)
    try:
        path = caller(tmp_path, served.url)
        config = load_agent(path)
        settings = RuntimeSettings(home=tmp_path / "home", write_transcript=False)
        host = runtime_host(config, settings, model=ScriptedModel([]))
        async with host.lease():
            pass
        async with host.lease():  # the same runtime: no second fetch
            pass
        assert len(fetched) == 1
        await host.reload(load_agent(path))
        async with host.lease():
            pass
        assert len(fetched) == 2
        await host.aclose()
    finally:
        served.stop()
