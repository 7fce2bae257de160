"""The runner's version: a leaf at the bottom of the layers, so any module may name it."""

from __future__ import annotations

__version__ = "0.1.0"
