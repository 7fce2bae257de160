"""What the server says of its own accord never shows a secret (issue 23, item 9).

``description: "uses key ${OPENAI_API_KEY}"`` was served by ``/v1/models`` with the real key. The
descriptions (and errors) go through ``runner.serve.outward``: the agent's secrets and the
environment's credentials are masked, as ``runner``'s own stdout and stderr mask them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest

from runner.serve.outward import outward
from runner.testing import ScriptedServer
from tests.workflow.helpers import team

KEY = "sk-live-0123456789abcdefDEADBEEF"
PASTED = "ghp_pastedTokenValue0123456789"


@pytest.fixture
def described(
    scripted: Callable[..., ScriptedServer],
    agent_files: Any,
    serve_app: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> Any:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("DEPLOY_TOKEN", PASTED)
    server = scripted([{"content": "hi"}], repeat=True)
    agent_files.write("keyed", server, 'description: "uses key ${OPENAI_API_KEY}"')
    # a value pasted into the file: not a ${VAR}, but the environment's credential all the same
    agent_files.write("pasted", server, f'description: "deploys with {PASTED}"')
    return serve_app([agent_files.root])


def test_the_models_list_masks_a_key_interpolated_into_a_description(described: Any) -> None:
    with described.http() as http:
        listed = http.get("/v1/models")
        one = http.get("/v1/models/keyed")
        other = http.get("/v1/models/pasted")
    assert listed.status_code == 200 and KEY not in listed.text and PASTED not in listed.text
    cards = {card["id"]: card for card in listed.json()["data"]}
    assert cards["keyed"]["description"] == "uses key ***"
    assert cards["pasted"]["description"] == "deploys with ***"
    assert one.json()["description"] == "uses key ***" and KEY not in one.text
    assert other.json()["description"] == "deploys with ***"
    # through the openai SDK, as a client reads it
    (card,) = [m for m in described.openai().models.list() if m.id == "keyed"]
    assert card.model_extra["description"] == "uses key ***"


def test_a_workflow_card_masks_its_agents_secrets(
    scripted: Callable[..., ScriptedServer],
    agent_files: Any,
    serve_app: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEAM_API_KEY", KEY)
    server = scripted([{"content": "hi"}], repeat=True)
    # a step id cannot hold a secret, but the name of an agent is shown too: mask the whole card
    team(agent_files.root, server.base_url, {"writer": "description: 'key ${TEAM_API_KEY}'"}, WORKFLOW)
    with serve_app([agent_files.root]).http() as http:
        listed = http.get("/v1/models")
    assert KEY not in listed.text
    cards = {card["id"]: card for card in listed.json()["data"]}
    assert cards["writer"]["description"] == "key ***"
    assert cards["team"]["description"].startswith("a workflow of 1 step (write)")


WORKFLOW = """workflow:
  - id: write
    agent: writer
"""


def test_outward_masks_given_secrets_and_the_environments_credentials_only() -> None:
    environ = {"SERVICE_PASSWORD": "hunter2hunter2", "HOME": "/home/me", "EDITOR_KEY": "none"}
    text = "pw hunter2hunter2, home /home/me, key none, agent secret s3cr3t-value"
    assert (
        outward(text, {"s3cr3t-value"}, environ=environ)
        == "pw ***, home /home/me, key none, agent secret ***"
    )


def test_an_error_message_masks_an_environment_credential_the_agent_never_named(
    scripted: Callable[..., ScriptedServer],
    agent_files: Any,
    serve_app: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server = scripted([{"status": 400, "error": f"the key {KEY} is not valid here"}], repeat=True)
    agent_files.write("plain", server)  # its api_key is the file's own: KEY is not among its secrets
    client = serve_app([agent_files.root]).openai()
    with pytest.raises(openai.APIStatusError) as failed:
        client.chat.completions.create(model="plain", messages=[{"role": "user", "content": "hi"}])
    assert KEY not in failed.value.message and "the key *** is not valid here" in failed.value.message
