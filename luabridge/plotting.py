"""Figures for the Lua `gnuplot` package, drawn with matplotlib's Agg canvas (no pyplot, no global
state) into PNG, EPS, SVG or PDF files. lua/gnuplot/ keeps each figure's state and hands the whole
of it to plot_draw after every change; series are contiguous double tensors, read in place."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from .pyside import lua_list, tensor_view

if TYPE_CHECKING:
    from .runtime import Bridge

# gnuplot styles (torch7's short forms and gnuplot's names) -> matplotlib format strings; 'boxes'
# and 'vectors' are drawn as bars and arrows. csplines/acsplines ('~') are drawn as plain lines.
_STYLES = {"": ".-", "+": "+", "points": "+", ".": ".", "dots": ".", "-": "-", "lines": "-",
           "+-": "+-", "linespoints": "+-", "~": "-", "csplines": "-", "acsplines": "-"}
_BARS = ("|", "boxes")
_ARROWS = ("v", "V", "vectors")
# gnuplot's palettes: 'color' is its default (rgbformulae 7,5,15), matplotlib's 'gnuplot' map
_PALETTES = {"gray": "gray", "grey": "gray", "color": "gnuplot"}
# movelegend's 'h v' -> matplotlib's legend location
_VERTICAL = {"top": "upper", "bottom": "lower", "middle": "center"}


def missing() -> str | None:
    """None when matplotlib imports, else what to install."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "gnuplot: matplotlib is not installed; install the extra: pip install 'luabridge[plot]'"
    return None


def _legend_location(place: str) -> str:
    horizontal, vertical = place.split()
    location = f"{_VERTICAL[vertical]} {horizontal}"
    return {"center center": "center"}.get(location, location)


def _curves(ax: Any, series: list, view: Any) -> bool:
    labelled = False
    for s in series:
        x, y, style, label = view(s.x), view(s.y), str(s.style), str(s.legend) or None
        labelled = labelled or label is not None
        if style in _BARS:
            width = float(np.min(np.diff(np.sort(x)))) if x.size > 1 else 0.8
            ax.bar(x, y, width=width or 0.8, label=label, edgecolor="black", linewidth=0.5)
        elif style in _ARROWS:
            ax.quiver(x[:, 0], y[:, 0], x[:, 1], y[:, 1], angles="xy", scale_units="xy", scale=1, label=label)
        else:
            ax.plot(x, y, _STYLES.get(style, ".-"), label=label, markersize=4 if style == "" else 6)
    return labelled


def draw(bridge: "Bridge", fig: Any) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    def view(t: Any) -> np.ndarray:
        return tensor_view(bridge, t)

    figure = Figure(figsize=(8, 6), dpi=100)
    FigureCanvasAgg(figure)
    kind = str(fig.kind)
    three_d = kind in ("splot", "scatter3")
    ax = figure.add_subplot(projection="3d" if three_d else None)
    series = lua_list(fig.series) if fig.series is not None else []
    labelled = False
    if kind == "plot":
        labelled = _curves(ax, series, view)
    elif kind == "splot":
        for s in series:
            ax.plot_wireframe(view(s.x), view(s.y), view(s.z), label=str(s.legend) or None, linewidth=0.8)
            labelled = labelled or bool(str(s.legend))
    elif kind == "scatter3":
        for s in series:
            ax.scatter(view(s.x), view(s.y), view(s.z), label=str(s.legend) or None)
            labelled = labelled or bool(str(s.legend))
    elif kind == "imagesc":
        palette = str(fig.palette)
        shown = ax.imshow(view(fig.matrix), cmap=_PALETTES.get(palette, palette), interpolation="nearest",
                          aspect="auto")
        figure.colorbar(shown, ax=ax)
    for key, setter in (("title", ax.set_title), ("xlabel", ax.set_xlabel), ("ylabel", ax.set_ylabel)):
        if fig[key] is not None:
            setter(str(fig[key]))
    if three_d and fig.zlabel is not None:
        ax.set_zlabel(str(fig.zlabel))
    if fig.grid:
        ax.grid(True)
    if fig.logscale and not three_d:
        ax.set_yscale("log")
    if fig.limits is not None:
        xmin, xmax, ymin, ymax = lua_list(fig.limits)
        ax.set_xlim(xmin, xmax)
        ax.set_ylim(ymin, ymax)
    if fig.aspect == "equal" and not three_d:
        ax.set_aspect("equal")
    elif fig.aspect == "square":
        ax.set_box_aspect(1)
    if labelled:
        ax.legend(loc=_legend_location(str(fig.legend)) if fig.legend is not None else "best")
    # PostScript has no transparency: legend frames and 3D shading are drawn opaque, which is fine
    logging.getLogger("matplotlib.backends.backend_ps").setLevel(logging.ERROR)
    figure.savefig(str(fig.path), format=str(fig.format))


def palette_known(name: str) -> bool:
    from matplotlib import colormaps

    return _PALETTES.get(name, name) in colormaps


def callbacks(bridge: "Bridge") -> dict:
    return {"plot_missing": missing, "plot_palette_known": palette_known, "plot_draw": lambda fig: draw(bridge, fig)}
