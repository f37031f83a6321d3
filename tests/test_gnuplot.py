"""The `gnuplot` package: torch7's argument forms (checked on the figure state they leave), histc
against numpy, and the files matplotlib writes (PNG read back with Pillow, EPS and SVG headers)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import luabridge
from helpers import N, T, assert_lua_errors, lua_fn, require_error_without

pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed: pip install 'luabridge[plot]'")

gp = lua_fn("function(name, ...) require 'gnuplot'; return gnuplot[name](...) end")
current = lua_fn("function() require 'gnuplot'; return gnuplot._current() end")
rng = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    """Each test draws in its own folder and starts without figures."""
    monkeypatch.chdir(tmp_path)
    gp("closeall")
    yield
    gp("closeall")


def series(fig) -> list:
    return [fig.series[i] for i in range(1, len(fig.series) + 1)]


def png_size(path) -> tuple[int, int]:
    from matplotlib.image import imread
    picture = imread(str(path))
    assert picture[..., :3].std() > 0.01   # something is drawn
    return picture.shape[1], picture.shape[0]


def test_plot_vector_uses_positions_as_x(tmp_path):
    y = rng.normal(size=12)
    gp("plot", T(y))
    (s,) = series(current())
    np.testing.assert_array_equal(N(s.x), np.arange(1, 13))
    np.testing.assert_array_equal(N(s.y), y)
    assert s.legend == "" and s.style == ""
    assert png_size(tmp_path / "gnuplot_1.png") == (800, 600)


def test_plot_argument_forms():
    x, y = rng.normal(size=6), rng.normal(size=6)
    gp("plot", T(x), T(y), "+")
    (s,) = series(current())
    assert s.style == "+" and (N(s.x) == x).all() and (N(s.y) == y).all()
    two_columns = np.stack([x, y], axis=1)
    gp("plot", T(two_columns))   # an N x 2 matrix: x and y columns
    (s,) = series(current())
    assert (N(s.x) == x).all() and (N(s.y) == y).all()
    wide = rng.normal(size=(6, 4))
    gp("plot", "many", T(wide), "-")   # N x k: the first column against the others
    (s,) = series(current())
    assert s.legend == "many" and (N(s.x) == wide[:, 0]).all() and (N(s.y) == wide[:, 1:]).all()
    lua = luabridge.runtime()
    first = lua.table_from(["sin", T(x), T(np.sin(x)), "-"])
    second = lua.table_from(["cos", T(x), T(np.cos(x))])
    gp("plot", first, second)
    names = [s.legend for s in series(current())]
    assert names == ["sin", "cos"]
    gp("plot", lua.table_from([first, second, lua.table_from([T(y)])]))   # one table of tables
    assert [s.legend for s in series(current())] == ["sin", "cos", ""]
    np.testing.assert_array_equal(N(series(current())[1].y), np.cos(x))


def test_plot_errors():
    assert_lua_errors([
        ("function() require 'gnuplot'; gnuplot.plot() end", "gnuplot.plot: no inputs"),
        ("function() require 'gnuplot'; gnuplot.plot('name') end", r"expecting \[string,\] tensor"),
        ("function() require 'gnuplot'; gnuplot.plot(torch.rand(3), torch.rand(4)) end", "x and y dims are wrong"),
        ("function() require 'gnuplot'; gnuplot.imagesc(torch.rand(2, 2, 2)) end", "expected to be a matrix"),
        ("function() require 'gnuplot'; gnuplot.movelegend('up', 'top') end", "horizontal location"),
        ("function() require 'gnuplot'; gnuplot.axis('sideways') end", "gnuplot.axis"),
        ("function() require 'gnuplot'; gnuplot.pngfigure('/no/such/dir/x.png') end", "directory does not exist"),
        ("function() require 'gnuplot'; gnuplot.splot(torch.rand(4)) end", "z must be a matrix"),
        ("function() require 'gnuplot'; gnuplot.hist(torch.Tensor()) end", r"^\(eval\):1: gnuplot.hist: the tensor is empty"),
        ("function() require 'gnuplot'; gnuplot.histc('x') end", r"usage: gnuplot.histc \(tensor"),
    ])


def test_settings_are_kept_and_drawn(tmp_path):
    gp("pngfigure", str(tmp_path / "out.png"))
    x = np.linspace(0, 1, 20)
    gp("plot", "line", T(x), T(x ** 2))
    gp("title", "Squares")
    gp("xlabel", "x")
    gp("ylabel", "x^2")
    gp("grid", True)
    gp("movelegend", "left", "top")
    lua = luabridge.runtime()
    gp("axis", lua.table_from([0, 2, 0.01, 1]))
    gp("logscale", "on")
    fig = current()
    assert (fig.title, fig.xlabel, fig.ylabel, fig.grid, fig.legend, fig.logscale) == \
        ("Squares", "x", "x^2", True, "left top", True)
    assert [fig.limits[i] for i in range(1, 5)] == [0, 2, 0.01, 1]
    gp("grid", "off")
    assert current().grid is False
    gp("plotflush")
    assert png_size(tmp_path / "out.png") == (800, 600)
    assert not (tmp_path / "gnuplot_1.png").exists()   # a file figure has no window stand-in


def test_file_formats(tmp_path):
    for maker, name, head in (("epsfigure", "a.eps", b"%!PS"), ("svgfigure", "a.svg", b"<?xml"),
                              ("pdffigure", "a.pdf", b"%PDF")):
        gp(maker, str(tmp_path / name))
        gp("plot", T(rng.normal(size=5)))
        gp("close")
        assert (tmp_path / name).read_bytes().startswith(head), name
    gp("figure")
    gp("imagesc", T(rng.uniform(size=(4, 6))), "color")
    gp("figprint", str(tmp_path / "copy.png"))
    assert png_size(tmp_path / "copy.png") == (800, 600)


def test_histc_matches_numpy():
    data = rng.normal(size=500)
    h = gp("histc", T(data), 10)
    counts, edges = np.histogram(data, bins=10, range=(data.min(), data.max()))
    np.testing.assert_array_equal(N(h.raw), counts)
    centres = (edges[:-1] + edges[1:]) / 2
    np.testing.assert_allclose([h[i].val for i in range(1, 11)], centres, atol=1e-12)
    assert h.max == int(np.argmax(counts)) + 1 and h.min == int(np.argmin(counts)) + 1
    text = lua_fn("function(h) return tostring(h) end")(h)
    assert text.startswith("nsamples:") and "centers" in text
    np.testing.assert_array_equal(N(gp("histc", T(data), 10, -1, 1, True)),
                                  np.histogram(data[(data >= -1) & (data <= 1)], bins=10, range=(-1, 1))[0])


def test_hist_draws_bars(tmp_path):
    gp("hist", T(rng.normal(size=300)), 15)
    (s,) = series(current())
    assert s.style == "|" and N(s.y).sum() == 300
    assert png_size(tmp_path / "gnuplot_1.png") == (800, 600)


def test_surfaces_and_scatter(tmp_path):
    z = np.outer(np.linspace(-1, 1, 6), np.linspace(0, 2, 5))
    gp("splot", T(z))
    (s,) = series(current())
    np.testing.assert_array_equal(N(s.z), z)
    np.testing.assert_array_equal(N(s.x), np.repeat(np.arange(1, 7)[:, None], 5, axis=1))
    np.testing.assert_array_equal(N(s.y), np.repeat(np.arange(1, 6)[None, :], 6, axis=0))
    gp("zlabel", "height")
    gp("figure", 2)
    gp("scatter3", "pts", T(rng.normal(size=9)), T(rng.normal(size=9)), T(rng.normal(size=9)))
    assert current().kind == "scatter3" and series(current())[0].legend == "pts"
    assert png_size(tmp_path / "gnuplot_1.png") == (800, 600)
    assert png_size(tmp_path / "gnuplot_2.png") == (800, 600)


def test_logger_plot_and_raw_through_th(tmp_path):
    script = tmp_path / "train.lua"
    script.write_text("""
require 'optim'
local logger = optim.Logger('train.log')
logger:setNames{'train', 'test'}
for i = 1, 10 do logger:add{1 / i, 1 / i + 0.1} end
logger:style{'-', '+-'}
logger:plot()
require 'gnuplot'
gnuplot.raw('set xrange [0:1]')
gnuplot.raw('set yrange [0:1]')
""")
    out = subprocess.run([sys.executable, "-m", "luabridge", "th", str(script)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "figure 1 is drawn into gnuplot_1.png" in out.stdout
    assert out.stdout.count("gnuplot.raw: gnuplot commands are ignored") == 1
    assert png_size(tmp_path / "gnuplot_1.png") == (800, 600)
    assert (tmp_path / "train.log.eps").read_bytes().startswith(b"%!PS")


def test_require_without_matplotlib_names_the_extra():
    out = require_error_without("matplotlib", "gnuplot")
    assert "pip install 'luabridge[plot]'" in out


def test_a_file_is_drawn_at_most_once_a_second(tmp_path, monkeypatch):
    """Plotting every step (optim.Logger each epoch) must not draw every time: the first change
    draws, later ones within the interval wait and the newest is drawn by the timer or at exit;
    plotflush draws at once. The drawer's clock and timer are the test's: no loaded machine's
    pause reaches into the interval."""
    import threading
    from types import SimpleNamespace

    from luabridge.providers import gnuplot as plotting

    drawn: list = []
    path = str(tmp_path / "a.png")
    # only this file's drawings: an earlier test's figure may still be waiting for the shared timer
    monkeypatch.setattr(plotting, "render", lambda spec: spec.path == path and drawn.append((spec.path, spec.labels.get("title"))))
    clock, timers = [1000.0], []

    class Timer:
        def __init__(self, interval: float, fire) -> None:
            self.interval, self.fire, self.daemon = interval, fire, False
            timers.append(self)

        def start(self) -> None:
            self.started = True

    monkeypatch.setattr(plotting, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    monkeypatch.setattr(plotting, "threading", SimpleNamespace(Lock=threading.Lock, Timer=Timer))
    drawer = plotting.Drawer(interval=0.3)
    spec = lambda title: plotting.Spec(path, "png", "plot", labels={"title": title})
    for i in range(50):
        drawer.draw(spec(f"step {i}"), now=False)
    assert drawn == [(str(tmp_path / "a.png"), "step 0")]
    assert [(t.interval, t.started, t.daemon) for t in timers] == [(0.3, True, True)]   # one, for what waits
    drawer.draw(spec("forced"), now=True)
    assert drawn[-1][1] == "forced" and len(drawn) == 2
    drawer.draw(spec("late"), now=False)
    timers[0].fire()                                   # the timer draws what waited
    assert drawn[-1][1] == "late" and len(drawn) == 3
    clock[0] += 0.5
    drawer.draw(spec("an interval later"), now=False)  # drawn at once
    assert drawn[-1][1] == "an interval later" and len(drawn) == 4
    drawer.flush()
    assert len(drawn) == 4                             # nothing left waiting


def test_waiting_drawings_keep_their_folder(tmp_path, monkeypatch):
    gp("plot", T(np.arange(5.0)))                      # drawn at once into tmp_path/gnuplot_1.png
    gp("title", "second")                              # waits (within a second of the first)
    other = tmp_path / "elsewhere"
    other.mkdir()
    monkeypatch.chdir(other)
    gp("plotflush")
    assert (tmp_path / "gnuplot_1.png").exists() and not (other / "gnuplot_1.png").exists()


def test_imagesc_draws_the_first_row_on_top_in_the_palette(tmp_path):
    """gnuplot's imagesc shows row 1 at the top, the smallest value at the palette's low end:
    for [[0, 0], [1, 1]] in 'color' (gnuplot's own palette) the image is black above yellow."""
    from matplotlib import colormaps
    from matplotlib.image import imread

    gp("pngfigure", str(tmp_path / "m.png"))
    gp("imagesc", T(np.array([[0.0, 0.0], [1.0, 1.0]])), "color")
    gp("plotflush")
    rgb = (imread(str(tmp_path / "m.png"))[..., :3] * 255).round()
    low, high = (np.round(np.array(colormaps["gnuplot"](v)[:3]) * 255) for v in (0.0, 1.0))
    black, top = (np.abs(rgb - c).max(axis=-1) <= 1 for c in (low, high))
    # the image's columns hold both colours; the colour bar has few exact ends, the frame no yellow
    columns = (black.sum(axis=0) > 100) & (top.sum(axis=0) > 100)
    assert columns.sum() > 300
    rows = np.arange(rgb.shape[0])[:, None]
    assert (rows * black)[:, columns].sum() / black[:, columns].sum() < \
        (rows * top)[:, columns].sum() / top[:, columns].sum()


def test_imagesc_unknown_palette_is_drawn_gray(capfd):
    """torch7 pipes 'set palette NAME' to gnuplot, which complains and keeps drawing: no Lua error.
    The matrix is drawn in gray and the complaint goes to stderr."""
    m = rng.uniform(size=(3, 4))
    gp("imagesc", T(m), "rainbowish")
    fig = current()
    assert fig.kind == "imagesc" and fig.palette == "gray"
    np.testing.assert_array_equal(N(fig.matrix), m)
    assert "unknown palette 'rainbowish'" in capfd.readouterr().err
