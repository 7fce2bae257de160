"""The runner's pytest plugin, seen from a project that installs the runner: no fixture runs unless a
test asks for it, the no-network guard holds (``connect``, ``connect_ex``, sockets made before it) when
a marker or the ini option turns it on, and the sync and async fixtures are named so.

Each project runs in a pytest subprocess: this suite's own guard (``runner_no_network = true``) is on
in this process and would hide whether the inner run installed one."""

from __future__ import annotations

import socket
import textwrap

import pytest

pytest_plugins = ["pytester"]

AGENT = "version: 1\nname: echo\nmodel:\n  id: openai/gpt-4o-mini\nprompts:\n  system: You answer.\n"

#: Shared by both projects: a socket made at import time, before any test or guard.
COMMON = """
import asyncio
import socket
import tempfile

import pytest

PATCHED = ("connect", "connect_ex", "sendto", "sendmsg")
EARLY = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
FAR = ("10.255.255.1", 80)
REFUSED = r"tried to reach \\('10\\.255\\.255\\.1', 80\\): only loopback"


def patched():
    return [name for name in PATCHED if name in vars(socket.socket)]


def assert_refused():
    for sock in (EARLY, socket.socket(socket.AF_INET, socket.SOCK_STREAM)):
        with pytest.raises(AssertionError, match=REFUSED):
            sock.connect(FAR)
        with pytest.raises(AssertionError, match=REFUSED):
            sock.connect_ex(FAR)
        sock.close() if sock is not EARLY else None
    with pytest.raises(AssertionError, match=REFUSED):
        socket.create_connection(FAR, timeout=1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        with pytest.raises(AssertionError, match="10.255.255.1"):
            udp.sendto(b"x", ("10.255.255.1", 53))
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as six:
        with pytest.raises(AssertionError, match="2001:db8::1"):
            six.connect_ex(("2001:db8::1", 80, 0, 0))
    with socket.socket() as named:
        with pytest.raises(AssertionError, match="example.com"):
            named.connect(("example.com", 80))  # refused before any name lookup
    with pytest.raises(AssertionError, match=REFUSED):
        asyncio.run(asyncio.open_connection(*FAR))


def assert_loopback_works():
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        with socket.socket() as client:
            assert client.connect_ex(("localhost", port)) == 0
    if socket.has_ipv6:
        with socket.create_server(("::1", 0), family=socket.AF_INET6) as server:
            with socket.socket(socket.AF_INET6) as client:
                client.connect(("::1", server.getsockname()[1]))
    with tempfile.TemporaryDirectory() as folder:  # short: a Unix socket's path has a length limit
        with socket.socket(socket.AF_UNIX) as server, socket.socket(socket.AF_UNIX) as client:
            server.bind(f"{folder}/s")
            server.listen()
            client.connect(f"{folder}/s")
"""


def run(pytester: pytest.Pytester, ini: str, tests: str) -> pytest.RunResult:
    pytester.makeini(f"[pytest]\nasyncio_default_fixture_loop_scope = function\n{ini}")
    pytester.makepyfile(common=COMMON, test_project=textwrap.dedent(tests))
    (pytester.path / "echo.yaml").write_text(AGENT, encoding="utf-8")
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")


def test_a_project_without_the_option_gets_no_guard_and_no_fixture_unless_asked(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        "",
        """
        import pytest
        from common import EARLY, assert_loopback_works, assert_refused, patched

        from runner.testing import text


        def test_an_unmarked_test_runs_untouched(request):
            assert patched() == []
            # event_loop_policy is pytest-asyncio's autouse fixture; the runner adds none
            runner_fixtures = [f for f in request.fixturenames if f not in {"request", "event_loop_policy"}]
            assert runner_fixtures == []


        @pytest.mark.no_network
        def test_the_marker_refuses_connect_and_connect_ex_even_on_earlier_sockets():
            assert_refused()


        @pytest.mark.no_network
        def test_the_marker_lets_loopback_through():
            assert_loopback_works()


        def test_the_fixture_still_works(no_network):
            assert_refused()


        def test_the_guard_is_gone_after_a_guarded_test():
            assert patched() == []
            EARLY.close()


        def test_run_agent_sync_is_the_sync_fixture(run_agent_sync):
            assert run_agent_sync("echo.yaml", "Hi?", script=[text("Hello.")]).output == "Hello."


        @pytest.mark.asyncio
        async def test_run_agent_is_the_async_fixture(run_agent):
            assert (await run_agent("echo.yaml", "Hi?", script=[text("Hello.")])).output == "Hello."


        def test_the_async_fixture_called_as_before(run_agent):
            run_agent("echo.yaml", "Hi?", script=[text("Hello.")])
        """,
    )
    result.assert_outcomes(passed=8, errors=1)
    assert "PytestUnknownMarkWarning" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*run_agent(...) was never awaited: the run_agent fixture is async*"])


def test_the_ini_option_guards_every_test_and_its_fixtures(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        "runner_no_network = true\n",
        """
        import socket

        import pytest
        from common import FAR, assert_loopback_works, assert_refused


        @pytest.fixture
        def reaches_out():
            with socket.socket() as sock:
                sock.connect(FAR)
            yield


        def test_an_unmarked_test_is_guarded():
            assert_refused()


        def test_loopback_still_works():
            assert_loopback_works()


        def test_a_fixture_that_reaches_out_fails_in_setup(reaches_out):
            pass
        """,
    )
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at setup of test_a_fixture_that_reaches_out_fails_in_setup*"])
    result.stdout.fnmatch_lines(["*AssertionError: a test tried to reach ('10.255.255.1', 80)*"])


def test_this_suite_runs_guarded_by_its_ini_option() -> None:
    # pyproject.toml sets runner_no_network = true: every test here, under xdist too, is guarded.
    with socket.socket() as sock, pytest.raises(AssertionError, match="only loopback"):
        sock.connect_ex(("10.255.255.1", 80))
