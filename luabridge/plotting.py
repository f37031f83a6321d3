"""Figures for the Lua `gnuplot` package, drawn with matplotlib (Agg) into files."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .runtime import Bridge


def callbacks(bridge: "Bridge") -> dict:
    return {}
