"""``runner diff`` runs no code of the agent: tools and models are read from their source (issue 23, 5).

Reviewing someone's branch with ``runner diff`` must not execute it. Every module here writes a
marker file when imported (a package ``__init__`` too); the diff must leave none, on either side,
and still report what changed in a tool's parameters and docstring. ``--import-code`` is the opt-in
for exact schemas, and it does import.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from runner.agentdiff.pysource import note_of, tools_from_source
from runner.agentfile.config import ToolSourceConfig
from runner.tools.python import tools_from_module_path

from .conftest import Repo

Cli = Callable[..., Result]

AGENT = """\
version: 1
name: reviewed
model: {id: openai/m, api_base: "http://127.0.0.1:9/v1"}
prompts:
  system: "Tools: {{ tools | map(attribute='name') | join(', ') }}"
tools:
  - python: shop.orders
hooks:
  turn_pre:
    - python: shop.hooks:before
output:
  python: shop.models:Answer
"""


def _marking(name: str, body: str) -> str:
    """A module that leaves ``imported-NAME`` beside itself when it runs."""
    marker = f"Path(__file__).with_name('imported-{name}').write_text('ran')\n"
    return "from pathlib import Path\n" + marker + textwrap.dedent(body)


ORDERS = '''
from typing import TypedDict


class Filter(TypedDict):
    """Not a plain type: only the code knows its schema."""

    text: str


def refund(order_id: str, amount: float = 0.0) -> str:
    """Refund an order.

    Args:
        order_id: the order to refund
        amount: how much
    """
    return order_id


def search(query: Filter) -> list[str]:
    """Search orders."""
    return []
'''

ORDERS_V2 = ORDERS.replace(
    "amount: float = 0.0) -> str:", "amount: float = 0.0, reason: str = 'other') -> str:"
)
ORDERS_V2 = ORDERS_V2.replace("Refund an order.", "Refund a paid order.").replace(
    "amount: how much", "amount: how much\n        reason: why"
)


MODEL = "from pydantic import BaseModel\n\n\nclass Answer(BaseModel):\n    text: str\n"
MODEL_V2 = MODEL + "    score: float = 0.0\n"


def _files(orders: str, model: str = MODEL) -> dict[str, str]:
    return {
        "reviewed.yaml": AGENT,
        "shop/__init__.py": _marking("package", ""),
        "shop/orders.py": _marking("orders", orders),
        "shop/hooks.py": _marking("hooks", "def before(event):\n    return None\n"),
        "shop/models.py": _marking("models", model),
    }


def _markers(*roots: Path) -> list[Path]:
    return sorted(p for root in roots if root.exists() for p in root.rglob("imported-*"))


def test_diff_runs_no_code_and_reports_the_changed_tool(cli: Cli, repo: Repo, home: Path) -> None:
    repo.commit(_files(ORDERS))
    repo.write({"shop/orders.py": _marking("orders", ORDERS_V2)})
    agent = str(repo.path / "reviewed.yaml")
    result = cli("diff", agent, "--json")
    assert result.exit_code == 0, result.output
    assert _markers(repo.path, home) == [], "runner diff imported a module of the agent"
    data = json.loads(result.stdout)
    assert data["same"] is False and data["compared"]["python"] == "source"
    changes = {c["path"]: c for c in data["tools"]["changed"]["refund"]}
    assert changes["description"] == {
        "path": "description",
        "before": "Refund an order.",
        "after": "Refund a paid order.",
    }
    assert changes["parameters.properties.reason"]["after"] == {
        "type": "string",
        "description": "why",
        "default": "other",
    }
    text = cli("diff", agent).stdout
    assert "  ~ refund\n" in text and 'description: "Refund an order." -> "Refund a paid order."' in text
    assert "Python tools and models read from their source, not run" in text
    assert "reviewed.search: signature not read: parameter 'query' is typed Filter" in text
    assert _markers(repo.path, home) == []


def test_two_revisions_run_no_code_either(cli: Cli, repo: Repo, home: Path) -> None:
    first = repo.commit(_files(ORDERS))
    repo.commit(
        {"shop/orders.py": _marking("orders", ORDERS_V2), "shop/models.py": _marking("models", MODEL_V2)}
    )
    data = json.loads(cli("diff", first, "HEAD", str(repo.path / "reviewed.yaml"), "--json").stdout)
    assert "parameters.properties.reason" in {c["path"] for c in data["tools"]["changed"]["refund"]}
    settings = {c["path"]: c for c in data["settings"]}  # the output model, read as written
    assert settings["output.fields.score"] == {"path": "output.fields.score", "after": "float = 0.0"}
    assert _markers(repo.path, home) == []


def test_import_code_is_the_opt_in_for_exact_schemas(cli: Cli, repo: Repo, home: Path) -> None:
    repo.commit(_files(ORDERS))
    repo.write(
        {"shop/orders.py": _marking("orders", ORDERS_V2), "shop/models.py": _marking("models", MODEL_V2)}
    )
    result = cli("diff", str(repo.path / "reviewed.yaml"), "--json", "--import-code")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["compared"] == {
        "agents": ["reviewed"],
        "workflow": False,
        "python": "imported",
        "not_read": [],
    }
    assert "parameters.properties.reason" in {c["path"] for c in data["tools"]["changed"]["refund"]}
    settings = {c["path"]: c for c in data["settings"]}
    assert settings["output.schema.properties.score"]["after"]["type"] == "number"
    assert _markers(repo.path) != [], "--import-code imports the modules (that is what it is for)"


PLAIN = '''
import typing
from typing import Annotated, Literal, Optional
import typing as t

LIMIT = 10


def plain(
    name: str,
    count: int,
    ratio: float = 0.5,
    on: bool = False,
    tags: list[str] | None = None,
    weights: dict[str, float] = {},
    mode: Literal["fast", "slow"] = "fast",
    pair: tuple[int, ...] = (1, 2),
    note: Optional[str] = None,
    level: "int" = LIMIT,
    seq: typing.Sequence[int] = (),
    maybe: t.Union[int, str] = 1,
    sized: Annotated[int, "a size"] = 3,
    untyped=7,
    *rest,
    flag: bool = True,
    __vars__=None,
    **extra,
) -> str:
    """Do plain things.

    :param name: who
    :param count: how many
    Args:
        ratio: a share
    """
    return name


async def later(when: "typing.Optional[float]" = None) -> None:
    """Wait."""


def _private(x: int) -> int:
    return x
'''


def test_plain_hints_give_the_schema_an_import_gives(tmp_path: Path) -> None:
    (tmp_path / "plain_tools_for_ast.py").write_text(PLAIN, encoding="utf-8")
    spec = ToolSourceConfig(kind="python", target="plain_tools_for_ast", base_dir=tmp_path)
    read = tools_from_source(spec, folder=tmp_path)
    imported = tools_from_module_path("plain_tools_for_ast", base_dir=tmp_path)
    assert [t.name for t in read] == [t.name for t in imported] == ["plain", "later"]
    for ours, theirs in zip(read, imported, strict=True):
        assert (ours.description, ours.parameters) == (theirs.description, theirs.parameters)
        assert note_of(ours) is None


@pytest.mark.parametrize(
    ("source", "note"),
    [
        ("from pydantic import Field\nfrom typing import Annotated\n\n\n"
         "def f(x: Annotated[int, Field(gt=0)]) -> int:\n    return x\n",
         "signature not read: parameter 'x' is typed Annotated[int, Field(gt=0)]"),
        ("import enum\n\n\nclass Color(enum.Enum):\n    RED = 'r'\n\n\n"
         "def f(c: Color = Color.RED) -> str:\n    return ''\n",
         "signature not read: parameter 'c' is typed Color; the default of 'c' is Color.RED"),
        ("import functools\n\n\n@functools.cache\ndef f(x: int) -> int:\n    return x\n",
         "read as written, without its decorators (@functools.cache)"),
    ],
)  # fmt: skip
def test_what_cannot_be_read_says_so(tmp_path: Path, source: str, note: str) -> None:
    (tmp_path / "odd_tools_for_ast.py").write_text(source, encoding="utf-8")
    spec = ToolSourceConfig(kind="python", target="odd_tools_for_ast:f", base_dir=tmp_path)
    (tool,) = tools_from_source(spec, folder=tmp_path)
    assert note_of(tool) == note


def test_a_module_that_cannot_be_read_is_a_tool_failure_not_a_crash(cli: Cli, repo: Repo) -> None:
    files = _files(ORDERS)
    repo.commit(files)
    repo.write({"shop/orders.py": "def broken(:\n"})
    data = json.loads(cli("diff", str(repo.path / "reviewed.yaml"), "--json").stdout)
    (failure,) = [c for c in data["settings"] if c["path"] == "tool_failures"]
    assert "cannot read" in failure["after"][0]["error"] and "SyntaxError" in failure["after"][0]["error"]
