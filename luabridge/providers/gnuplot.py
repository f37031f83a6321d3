"""Figures for the Lua `gnuplot` package, drawn with matplotlib's Agg canvas (no pyplot, no global
state) into PNG, EPS, SVG or PDF files. lua/gnuplot/ keeps each figure's state and hands the whole
of it to plot_draw after every change. A drawing takes about 0.1 s where gnuplot's took
milliseconds, and scripts plot every epoch (optim.Logger does), so a file is drawn at most once a
second: later changes wait, as a snapshot, for a timer or the end of the process, and
gnuplot.plotflush() draws at once."""
from __future__ import annotations

import atexit
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.memory import lua_list

if TYPE_CHECKING:
    from ..core.runtime import Bridge

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


@dataclass
class Series:
    x: np.ndarray | None
    y: np.ndarray | None
    z: np.ndarray | None
    style: str
    legend: str | None


@dataclass
class Spec:
    """What a figure shows, copied out of Lua: it can be drawn later, from another thread."""
    path: str
    format: str
    kind: str
    series: list[Series] = field(default_factory=list)
    matrix: np.ndarray | None = None
    palette: str = "color"
    labels: dict[str, str] = field(default_factory=dict)   # title, xlabel, ylabel, zlabel
    grid: bool = False
    logscale: bool = False
    limits: list[float] | None = None
    aspect: str | None = None
    legend: str | None = None


def snapshot(bridge: "Bridge", fig: Any) -> Spec:
    def copy(t: Any) -> np.ndarray | None:
        return None if t is None else np.array(bridge.buffers.tensor_view(t))

    series = [Series(copy(s.x), copy(s.y), copy(s.z), str(s.style), str(s.legend) or None)
              for s in (lua_list(fig.series) if fig.series is not None else [])]
    labels = {key: str(fig[key]) for key in ("title", "xlabel", "ylabel", "zlabel") if fig[key] is not None}
    return Spec(str(fig.path), str(fig.format), str(fig.kind), series, copy(fig.matrix), str(fig.palette),
                labels, bool(fig.grid), bool(fig.logscale),
                None if fig.limits is None else [float(v) for v in lua_list(fig.limits)],
                None if fig.aspect is None else str(fig.aspect), None if fig.legend is None else str(fig.legend))


def _curves(ax: Any, series: list[Series]) -> bool:
    labelled = False
    for s in series:
        labelled = labelled or s.legend is not None
        if s.style in _BARS:
            width = float(np.min(np.diff(np.sort(s.x)))) if s.x.size > 1 else 0.8
            ax.bar(s.x, s.y, width=width or 0.8, label=s.legend, edgecolor="black", linewidth=0.5)
        elif s.style in _ARROWS:
            ax.quiver(s.x[:, 0], s.y[:, 0], s.x[:, 1], s.y[:, 1], angles="xy", scale_units="xy", scale=1,
                      label=s.legend)
        else:
            ax.plot(s.x, s.y, _STYLES.get(s.style, ".-"), label=s.legend, markersize=4 if s.style == "" else 6)
    return labelled


def render(spec: Spec) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 6), dpi=100)
    FigureCanvasAgg(figure)
    three_d = spec.kind in ("splot", "scatter3")
    ax = figure.add_subplot(projection="3d" if three_d else None)
    labelled = False
    if spec.kind == "plot":
        labelled = _curves(ax, spec.series)
    elif spec.kind == "splot":
        for s in spec.series:
            ax.plot_wireframe(s.x, s.y, s.z, label=s.legend, linewidth=0.8)
            labelled = labelled or s.legend is not None
    elif spec.kind == "scatter3":
        for s in spec.series:
            ax.scatter(s.x, s.y, s.z, label=s.legend)
            labelled = labelled or s.legend is not None
    elif spec.kind == "imagesc":
        shown = ax.imshow(spec.matrix, cmap=_PALETTES.get(spec.palette, spec.palette), interpolation="nearest",
                          aspect="auto")
        figure.colorbar(shown, ax=ax)
    for key, setter in (("title", ax.set_title), ("xlabel", ax.set_xlabel), ("ylabel", ax.set_ylabel)):
        if key in spec.labels:
            setter(spec.labels[key])
    if three_d and "zlabel" in spec.labels:
        ax.set_zlabel(spec.labels["zlabel"])
    if spec.grid:
        ax.grid(True)
    if spec.logscale and not three_d:
        ax.set_yscale("log")
    if spec.limits is not None:
        xmin, xmax, ymin, ymax = spec.limits
        ax.set_xlim(xmin, xmax)
        ax.set_ylim(ymin, ymax)
    if spec.aspect == "equal" and not three_d:
        ax.set_aspect("equal")
    elif spec.aspect == "square":
        ax.set_box_aspect(1)
    if labelled:
        ax.legend(loc=_legend_location(spec.legend) if spec.legend is not None else "best")
    # PostScript has no transparency: legend frames and 3D shading are drawn opaque, which is fine
    logging.getLogger("matplotlib.backends.backend_ps").setLevel(logging.ERROR)
    figure.savefig(spec.path, format=spec.format)


class Drawer:
    """Draws each file at most once per `interval` seconds; the newest waiting snapshot of a file
    is drawn by a timer, by flush, or at exit."""

    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self.last: dict[str, float] = {}
        self.waiting: dict[str, Spec] = {}
        self.lock = threading.Lock()
        self.timer: threading.Timer | None = None
        atexit.register(self.flush)

    def draw(self, spec: Spec, now: bool) -> None:
        with self.lock:
            if now or time.monotonic() - self.last.get(spec.path, -self.interval) >= self.interval:
                self.waiting.pop(spec.path, None)
                self._render(spec)
                return
            self.waiting[spec.path] = spec
            if self.timer is None:
                self.timer = threading.Timer(self.interval, self.flush)
                self.timer.daemon = True
                self.timer.start()

    def flush(self) -> None:
        with self.lock:
            self.timer = None
            for spec in self.waiting.values():
                self._render(spec)
            self.waiting.clear()

    def _render(self, spec: Spec) -> None:
        render(spec)
        self.last[spec.path] = time.monotonic()


def palette_known(name: str) -> bool:
    from matplotlib import colormaps

    return _PALETTES.get(name, name) in colormaps


def callbacks(bridge: "Bridge") -> dict:
    drawer = Drawer()
    return {"plot_missing": missing, "plot_palette_known": palette_known,
            "plot_draw": lambda fig, now: drawer.draw(snapshot(bridge, fig), bool(now))}
