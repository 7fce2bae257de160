"""The ``time`` toolset: the current time in a timezone, and a time converted between timezones.

Tools: ``time_now`` and ``time_convert``. Timezones are IANA names (``Europe/Paris``, ``UTC``) or
``local`` (the machine's timezone). Option ``timezone`` sets the zone used when a call names none
(default: ``local``); an unknown name there is a configuration error, in a call a tool error.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import zoneinfo
from datetime import datetime, time, timedelta, tzinfo
from typing import TYPE_CHECKING, Any

from runner.errors import ConfigError, ToolError
from runner.tools.base import RunContext, Tool

if TYPE_CHECKING:
    from runner.tools.toolset import ToolsetContext

__all__ = ["OPTIONS_SCHEMA", "build"]

OPTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "timezone": {
            "type": "string",
            "minLength": 1,
            "default": "local",
            "description": "the IANA timezone used when a call names none, or 'local'",
        },
    },
    "additionalProperties": False,
}

_LOCAL = "local"


def build(options: dict[str, Any], ctx: ToolsetContext) -> list[Tool]:
    """The ``time_now`` and ``time_convert`` tools, defaulting to the ``timezone`` option."""
    default = str(options["timezone"])
    try:
        _zone(default)
    except ToolError as exc:
        raise ConfigError(exc.message, path="timezone") from None

    async def time_now(arguments: dict[str, Any], run: RunContext) -> dict[str, Any]:
        zone_name = arguments.get("timezone") or default
        return _describe(datetime.now(_zone(zone_name)), zone_name)

    async def time_convert(arguments: dict[str, Any], run: RunContext) -> dict[str, Any]:
        source_name = arguments.get("from_timezone") or default
        target_name = str(arguments["to_timezone"])
        moment = _parse_time(str(arguments["time"]), _zone(source_name))
        converted = moment.astimezone(_zone(target_name))
        source_offset = moment.utcoffset() or timedelta()
        target_offset = converted.utcoffset() or timedelta()
        return {
            "source": _describe(moment, source_name),
            "target": _describe(converted, target_name),
            "time_difference": _format_hours(target_offset - source_offset),
        }

    zone_hint = f"an IANA timezone such as 'Europe/Paris' or 'UTC', or 'local'; default {default!r}"
    return [
        Tool(
            name="time_now",
            description=(
                "Get the current date and time (ISO 8601, weekday and UTC offset) in a timezone. "
                "Use it whenever the answer depends on today's date or the time of day."
            ),
            parameters={
                "type": "object",
                "properties": {"timezone": {"type": "string", "description": zone_hint}},
            },
            source_kind="builtin",
            source_id="time",
            call=time_now,
        ),
        Tool(
            name="time_convert",
            description=(
                "Convert a date and time from one timezone to another. Give the time as ISO 8601 "
                "('2025-03-14T15:30') or as a time of day ('15:30', meaning today in from_timezone)."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "time": {
                        "type": "string",
                        "description": "the time to convert: 'YYYY-MM-DDTHH:MM[:SS]' or 'HH:MM[:SS]'",
                    },
                    "from_timezone": {
                        "type": "string",
                        "description": f"the timezone the time is in: {zone_hint}",
                    },
                    "to_timezone": {"type": "string", "description": f"the timezone wanted: {zone_hint}"},
                },
                "required": ["time", "to_timezone"],
            },
            source_kind="builtin",
            source_id="time",
            call=time_convert,
        ),
    ]


def _zone(name: str) -> tzinfo:
    """The tzinfo of an IANA name or ``local``; an unknown name is a ToolError with a suggestion."""
    if name.strip().lower() == _LOCAL:
        local = datetime.now().astimezone().tzinfo
        assert local is not None  # astimezone() always attaches a zone
        return local
    with contextlib.suppress(zoneinfo.ZoneInfoNotFoundError, ValueError):
        return zoneinfo.ZoneInfo(name.strip())
    close = difflib.get_close_matches(name, _zone_names(), n=1, cutoff=0.6)
    suggestion = f" Did you mean {close[0]!r}?" if close else ""
    raise ToolError(
        f"Unknown timezone {name!r}: use an IANA name such as 'Europe/Paris', 'America/New_York' "
        f"or 'UTC', or 'local'.{suggestion}"
    )


@functools.cache
def _zone_names() -> list[str]:
    return sorted(zoneinfo.available_timezones())


def _parse_time(text: str, zone: tzinfo) -> datetime:
    """An ISO 8601 date-time or a time of day (today); a naive value is taken to be in ``zone``."""
    value = text.strip()
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        try:
            clock = time.fromisoformat(value)
        except ValueError:
            raise ToolError(
                f"Cannot read the time {text!r}: write 'YYYY-MM-DDTHH:MM[:SS]' or 'HH:MM[:SS]'."
            ) from None
        moment = datetime.combine(datetime.now(zone).date(), clock)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    return moment


def _describe(moment: datetime, zone_name: str) -> dict[str, Any]:
    """A time as the model reads it: ISO string, zone, weekday and UTC offset."""
    offset = moment.utcoffset() or timedelta()
    return {
        "datetime": moment.isoformat(timespec="seconds"),
        "timezone": moment.tzname() if zone_name.strip().lower() == _LOCAL else zone_name.strip(),
        "weekday": moment.strftime("%A"),
        "utc_offset": _format_hours(offset, clock=True),
        "is_dst": bool(moment.dst()),
    }


def _format_hours(delta: timedelta, *, clock: bool = False) -> str:
    """``+05:30`` (clock) or ``+5.5h`` (difference) for a signed timedelta."""
    minutes = int(delta.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    minutes = abs(minutes)
    if clock:
        return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"
    hours = minutes / 60
    return f"{sign}{hours:g}h"
