"""The ``time`` toolset: now in a timezone, conversions between zones, clear errors."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from runner.errors import ConfigError, ToolError
from runner.tools.base import RunContext


async def test_now_gives_the_current_time_in_the_named_timezone(
    load_builtin: Any, run_ctx: RunContext
) -> None:
    tools = await load_builtin("time")
    result = await tools["time_now"].call({"timezone": "Asia/Tokyo"}, run_ctx)
    reported = datetime.fromisoformat(result["datetime"])
    assert abs(reported - datetime.now(ZoneInfo("Asia/Tokyo"))) < timedelta(seconds=5)
    assert result["utc_offset"] == "+09:00"
    assert result["timezone"] == "Asia/Tokyo"
    assert result["weekday"] == reported.strftime("%A")


async def test_convert_applies_both_offsets(load_builtin: Any, run_ctx: RunContext) -> None:
    tools = await load_builtin("time")
    arguments = {
        "time": "2024-01-15T12:00",
        "from_timezone": "Europe/Paris",
        "to_timezone": "America/New_York",
    }
    result = await tools["time_convert"].call(arguments, run_ctx)
    assert result["source"]["datetime"] == "2024-01-15T12:00:00+01:00"
    assert result["target"]["datetime"] == "2024-01-15T06:00:00-05:00"
    assert result["time_difference"] == "-6h"


async def test_convert_follows_daylight_saving_time(load_builtin: Any, run_ctx: RunContext) -> None:
    tools = await load_builtin("time")
    arguments = {"time": "2024-07-01 12:00", "from_timezone": "Europe/Paris", "to_timezone": "UTC"}
    result = await tools["time_convert"].call(arguments, run_ctx)
    assert result["target"]["datetime"] == "2024-07-01T10:00:00+00:00"
    assert result["source"]["is_dst"] is True


async def test_convert_a_time_of_day_to_a_half_hour_zone(load_builtin: Any, run_ctx: RunContext) -> None:
    tools = await load_builtin("time")
    arguments = {"time": "09:30", "from_timezone": "UTC", "to_timezone": "Asia/Kolkata"}
    result = await tools["time_convert"].call(arguments, run_ctx)
    assert result["target"]["datetime"].endswith("T15:00:00+05:30")
    assert result["time_difference"] == "+5.5h"


async def test_the_timezone_option_is_the_default_for_calls(load_builtin: Any, run_ctx: RunContext) -> None:
    tools = await load_builtin("time", {"timezone": "America/Sao_Paulo"})
    now = await tools["time_now"].call({}, run_ctx)
    assert now["timezone"] == "America/Sao_Paulo"
    converted = await tools["time_convert"].call({"time": "2024-03-01T10:00", "to_timezone": "UTC"}, run_ctx)
    assert converted["target"]["datetime"] == "2024-03-01T13:00:00+00:00"


async def test_unknown_timezone_is_a_tool_error_with_a_suggestion(
    load_builtin: Any, run_ctx: RunContext
) -> None:
    tools = await load_builtin("time")
    with pytest.raises(ToolError, match=r"Unknown timezone 'Europe/Pariss'.*Did you mean 'Europe/Paris'"):
        await tools["time_now"].call({"timezone": "Europe/Pariss"}, run_ctx)
    with pytest.raises(ToolError, match="Unknown timezone"):
        await tools["time_convert"].call({"time": "10:00", "to_timezone": "../../etc/passwd"}, run_ctx)


async def test_unreadable_time_is_a_tool_error(load_builtin: Any, run_ctx: RunContext) -> None:
    tools = await load_builtin("time")
    with pytest.raises(ToolError, match="Cannot read the time 'half past nine'"):
        await tools["time_convert"].call({"time": "half past nine", "to_timezone": "UTC"}, run_ctx)


async def test_unknown_default_timezone_is_a_config_error_at_the_option(load_builtin: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        await load_builtin("time", {"timezone": "Mars/Olympus"})
    assert caught.value.path == "tools[0].with.timezone"
    assert "builtin toolset 'time'" in caught.value.message
    assert "Mars/Olympus" in caught.value.message
