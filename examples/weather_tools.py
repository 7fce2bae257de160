"""Tools of the weather example (offline data, so the example runs anywhere)."""

from __future__ import annotations

from typing import Literal, TypedDict


class Forecast(TypedDict):
    city: str
    temperature: float
    units: str
    conditions: str


_CITIES = {
    "vancouver": (11.0, "light rain"),
    "paris": (17.5, "sunny"),
    "tokyo": (21.0, "cloudy"),
    "nairobi": (24.5, "clear"),
}


def get_weather(city: str, units: Literal["metric", "imperial"] = "metric") -> Forecast:
    """Current weather of a city.

    Args:
        city: The city name, e.g. "Vancouver".
        units: metric (°C) or imperial (°F).
    """
    known = _CITIES.get(city.strip().lower())
    if known is None:
        raise ValueError(f"no weather data for {city!r}; known cities: {', '.join(sorted(_CITIES))}")
    celsius, conditions = known
    if units == "imperial":
        return Forecast(
            city=city, temperature=round(celsius * 9 / 5 + 32, 1), units="°F", conditions=conditions
        )
    return Forecast(city=city, temperature=celsius, units="°C", conditions=conditions)
