"""Settings come from RUNNER_* variables and .env, with clear errors for bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.env_settings import load_settings
from runner.errors import ConfigError


def test_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RUNNER_HOME")  # the suite's conftest sets one for every test
    settings = load_settings()
    assert settings.home == Path(".runner")
    assert settings.serve_host == "127.0.0.1"
    assert settings.serve_api_keys == []
    assert settings.local_cost_map is True


def test_environment_and_dotenv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("RUNNER_DEFAULT_MODEL=ollama/qwen3:0.6b\nRUNNER_SERVE_PORT=9001\n")
    monkeypatch.setenv("RUNNER_SERVE_API_KEYS", "k1, k2")
    monkeypatch.setenv("RUNNER_FSYNC", "1")
    monkeypatch.setenv("RUNNER_LOG_LEVEL", "debug")
    settings = load_settings()
    assert settings.default_model == "ollama/qwen3:0.6b"
    assert settings.serve_port == 9001
    assert settings.serve_api_keys == ["k1", "k2"]
    assert settings.fsync is True
    assert settings.log_level == "DEBUG"


def test_invalid_value_names_the_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RUNNER_SERVE_PORT", "eighty")
    with pytest.raises(ConfigError, match="RUNNER_SERVE_PORT"):
        load_settings()


@pytest.mark.parametrize(
    ("value", "keys"),
    [('["k1"]', ["k1"]), ('["k1", " k2 "]', ["k1", "k2"]), ("k1,k2", ["k1", "k2"]), ("k1", ["k1"])],
)
def test_api_keys_are_a_json_list_or_commas(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str, keys: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RUNNER_SERVE_API_KEYS", value)
    assert load_settings().serve_api_keys == keys


@pytest.mark.parametrize("value", ['["k1"', "[1, 2]", '{"k": 1}', 'k1,"k2"'])
def test_api_keys_that_look_like_neither_are_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RUNNER_SERVE_API_KEYS", value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "RUNNER_SERVE_API_KEYS" in str(caught.value)
