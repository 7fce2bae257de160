"""The suite's own distribution: tests marked ``xdist_group`` run on one worker.

The Ray tests share one cluster per worker, and the browser, prism, aimock and MCP reference-server
modules start their peer once per worker: when grouping breaks, nothing fails, each worker starts
its own copy and the suite gets slower. That happened with pytest 9.2 and pytest-xdist 3.8
(pytest-dev/pytest-xdist#1386: the group travels as a suffix of the node id, which pytest 9.2 no
longer lets a plugin rewrite), hence the pin in pyproject.toml and this check.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.xdist_group("suite-groups")


def test_a_grouped_test_carries_its_group_to_the_scheduler(request: pytest.FixtureRequest) -> None:
    if not request.config.getvalue("loadgroup"):  # plain pytest, or another --dist: nothing to group
        pytest.skip("not running under pytest-xdist's --dist loadgroup")
    assert request.node.nodeid.endswith("@suite-groups"), (
        f"{request.node.nodeid}: xdist_group is not reaching the scheduler; the grouped tests are "
        "spread over the workers (see pytest-dev/pytest-xdist#1386 and the pin in pyproject.toml)"
    )
