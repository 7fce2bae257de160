"""The tool of the weather_report example: a few days of forecast (offline data, so it runs anywhere)."""

from __future__ import annotations

from typing import TypedDict


class Day(TypedDict):
    day: str
    high_c: float
    low_c: float
    conditions: str
    rain_mm: float


_FORECASTS: dict[str, list[tuple[float, float, str, float]]] = {
    "vancouver": [(11.0, 6.0, "light rain", 4.2), (9.5, 5.0, "showers", 7.8), (12.0, 4.5, "cloudy", 0.0)],
    "paris": [(17.5, 9.0, "sunny", 0.0), (18.0, 10.5, "sunny", 0.0), (15.0, 9.5, "light rain", 1.5)],
    "tokyo": [(21.0, 14.0, "cloudy", 0.0), (19.5, 13.0, "rain", 12.0), (22.0, 15.5, "sunny", 0.0)],
}
_DAYS = ("today", "tomorrow", "the day after tomorrow")


def get_forecast(city: str, days: int = 2) -> list[Day]:
    """The forecast of a city for the next days, in °C and mm of rain.

    Args:
        city: The city name, e.g. "Vancouver".
        days: How many days, from today (1 to 3).
    """
    known = _FORECASTS.get(city.strip().lower())
    if known is None:
        raise ValueError(f"no forecast for {city!r}; known cities: {', '.join(sorted(_FORECASTS))}")
    if not 1 <= days <= len(_DAYS):
        raise ValueError(f"days must be 1 to {len(_DAYS)}, not {days}")
    return [
        Day(day=name, high_c=high, low_c=low, conditions=conditions, rain_mm=rain)
        for name, (high, low, conditions, rain) in zip(_DAYS, known[:days], strict=False)
    ]
