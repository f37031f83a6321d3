"""Notebooks for real: notebooks run through nbclient with real kernels, the %%lua magic in
ipykernel's Python kernel and luabridge's Lua kernel (luabridge/jupyter/), their outputs checked
(text, PNG pixels against numpy), a running cell interrupted with the kernel going on; and the
proxies' rich display (summaries, pictures, dir()) in-process. Waits are on kernel messages with
generous deadlines (a loaded 2-core machine), never sleeps."""
from __future__ import annotations

import base64
import contextlib
import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import luabridge
from luabridge.core import proxy

REPO = Path(__file__).resolve().parents[1]
DEADLINE = 300   # seconds for a cell, a kernel start or a reply: only a broken kernel takes that long


def _needs_jupyter():
    for name in ("ipykernel", "nbclient", "nbformat", "jupyter_client", "IPython"):
        pytest.importorskip(name, reason=f"{name} is not installed (the 'jupyter' extra)")


def png_pixels(data: str) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(base64.b64decode(data))))


# ---- the proxies' display, in-process (no Jupyter needed) ----

@pytest.fixture(autouse=True, scope="module")
def _torch_and_nn():
    luabridge.require("torch")
    luabridge.require("nn")


def test_a_large_tensor_is_summarised_past_the_threshold():
    t = luabridge.wrap(luabridge.eval("torch.range(1, 40000):view(200, 200)"))
    text = repr(t)
    assert len(text) < 1000 and text.endswith("[torch.DoubleTensor of size 200x200]")
    # numpy's own summary of the same values, made in numpy (float64)
    expected = np.array2string(np.arange(1, 40001, dtype=np.float64).reshape(200, 200), threshold=0,
                               edgeitems=3, precision=4, max_line_width=100)
    assert text == expected + "\n[torch.DoubleTensor of size 200x200]"
    assert "..." in text.splitlines()[0] and len(text.splitlines()) == 8
    small = luabridge.wrap(luabridge.eval("torch.range(1, 6):view(2, 3)"))
    assert repr(small) == str(luabridge.eval("tostring(torch.range(1, 6):view(2, 3))"))   # torch7's print


def test_the_threshold_is_configurable():
    before = proxy.set_printoptions()
    try:
        proxy.set_printoptions(threshold=5)
        assert "..." not in repr(luabridge.wrap(luabridge.eval("torch.zeros(2, 2)")))
        text = repr(luabridge.wrap(luabridge.eval("torch.zeros(3, 10)")))
        assert "..." in text and text.endswith("[torch.DoubleTensor of size 3x10]")
        with pytest.raises(ValueError, match="threshold must be an integer >= 0"):
            proxy.set_printoptions(threshold=-1)
    finally:
        proxy.set_printoptions(**before)


def test_an_image_shaped_tensor_is_a_picture():
    rng = np.random.default_rng(3)
    rgb = rng.random((3, 12, 17))
    t = luabridge.wrap(luabridge.from_numpy(rgb))
    assert np.array_equal(png_pixels(base64.b64encode(t._repr_png_()).decode()),
                          np.rint(np.moveaxis(rgb, 0, -1) * 255).astype(np.uint8))
    grey = rng.integers(0, 256, (1, 9, 10), dtype=np.uint8)     # bytes as they are
    assert np.array_equal(png_pixels(base64.b64encode(
        luabridge.wrap(luabridge.from_numpy(grey))._repr_png_()).decode()), grey[0])
    wide = rng.standard_normal((3, 10, 10)) * 5                 # outside 0..1: min to max
    expected = np.rint((wide - wide.min()) / (wide.max() - wide.min()) * 255).astype(np.uint8)
    assert np.array_equal(png_pixels(base64.b64encode(
        luabridge.wrap(luabridge.from_numpy(wide))._repr_png_()).decode()), np.moveaxis(expected, 0, -1))
    for shape in ((5, 10, 10), (3, 4, 10), (10, 10), (2, 3, 10, 10)):   # not pictures
        assert luabridge.wrap(luabridge.from_numpy(np.zeros(shape)))._repr_png_() is None


def test_png_bytes_refuses_what_is_no_picture():
    with pytest.raises(ValueError, match="png_bytes: expected height x width"):
        proxy.png_bytes(np.zeros((4, 4, 2), np.uint8))


def test_dir_of_a_proxy_lists_fields_and_methods():
    m = luabridge.nn.Sequential().add(luabridge.nn.Linear(2, 3))
    names = dir(m)
    for name in ("forward", "backward", "add", "modules", "output", "training", "getParameters"):
        assert name in names
    t = luabridge.wrap(luabridge.eval("torch.zeros(2)"))
    assert {"add", "size", "narrow", "numpy", "shape"} <= set(dir(t))
    assert not [n for n in names if n.startswith("__")]


# ---- the magic, in-process IPython ----

def test_magic_options_are_parsed():
    _needs_jupyter()
    from luabridge.jupyter.magics import parse

    assert parse("-i a,b -o c") == (["a", "b"], ["c"], "")
    assert parse("-i a -o c,d return a:sum()") == (["a"], ["c", "d"], "return a:sum()")
    assert parse("x = {1, 2}") == ([], [], "x = {1, 2}")
    with pytest.raises(ValueError, match="unknown option '-x'"):
        parse("-x a")


# ---- real kernels through nbclient ----

@pytest.fixture(scope="module")
def lua_kernel_path(tmp_path_factory):
    """The kernelspec `python -m luabridge.kernel install --prefix P` writes, found through JUPYTER_PATH."""
    _needs_jupyter()
    import subprocess

    prefix = tmp_path_factory.mktemp("prefix")
    r = subprocess.run([sys.executable, "-m", "luabridge.kernel", "install", "--prefix", str(prefix)],
                       capture_output=True, text=True, timeout=DEADLINE)
    assert r.returncode == 0, r.stderr
    spec = json.loads((prefix / "share/jupyter/kernels/luabridge/kernel.json").read_text())
    assert spec["argv"][:3] == [sys.executable, "-m", "luabridge.kernel"] and spec["language"] == "lua"
    return str(prefix / "share" / "jupyter")


@pytest.fixture
def lua_kernel(lua_kernel_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_PATH", lua_kernel_path)
    return "luabridge"


def run_notebook(sources: list[str], kernel: str, cwd: Path, allow_errors: bool = False):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    NotebookClient(nb, kernel_name=kernel, timeout=DEADLINE, startup_timeout=DEADLINE,
                   allow_errors=allow_errors, resources={"metadata": {"path": str(cwd)}}).execute()
    return [cell.outputs for cell in nb.cells]


def text_of(outputs) -> str:
    """What a cell printed and the text of its result (not its pictures' stand-in text)."""
    return "".join(o["text"] if o["output_type"] == "stream" else o["data"].get("text/plain", "")
                   for o in outputs if o["output_type"] in ("stream", "execute_result"))


def pngs_of(outputs) -> list[np.ndarray]:
    return [png_pixels(o["data"]["image/png"]) for o in outputs if "image/png" in o.get("data", {})]


def test_magic_in_the_python_kernel(tmp_path):
    _needs_jupyter()
    pytest.importorskip("torch", reason="PyTorch is not installed (a PyTorch tensor is handed to Lua)")
    out = run_notebook([
        "%load_ext luabridge\nimport numpy as np\na = np.arange(6.0).reshape(2, 3)",
        "%%lua -i a -o c\nc = a * 2\na[1][1] = 100       -- the numpy array itself (shared)\nprint('sum', c:sum())\nc:sum()",
        "print(a[0, 0], type(c).__name__, np.asarray(c).tolist())",
        "%lua torch.range(1, 3):view(1, 3)",
        "%lua local x = {1, 2}; return #x, 'two'",
        "%%lua\nlocal n = 0\nfor i = 1, 10 do n = n + i end\nn",
        "%lua torch.linspace(0, 1, 16):repeatTensor(3, 16, 1)",
        "%lua torch.zeros(100, 100)",
        "%lua nn = require 'nn'; m = nn.Linear(2, 3)",
        "import luabridge\nm = luabridge.wrap(luabridge.eval('m'))\nprint('forward' in dir(m), 'weight' in dir(m))",
        "luabridge.eval('m')",
        "luabridge.execute('return torch.zeros(3, 8, 8)')",
        "import torch\nt = torch.zeros(2, 3, dtype=torch.float64)[:, 1]   # a strided view",
        "%%lua -i t\nt:fill(7)\nt:stride(1)",
        "print(t.tolist())",
    ], "python3", tmp_path)
    assert text_of(out[1]) == "sum\t30\n30"
    assert text_of(out[2]) == "100.0 Tensor [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]\n"
    assert text_of(out[3]) == " 1  2  3\n[torch.DoubleTensor of size 1x3]"
    assert text_of(out[4]) == "(2, 'two')"
    assert text_of(out[5]) == "55"
    (picture,) = pngs_of(out[6])
    ramp = np.rint(np.linspace(0, 1, 16) * 255).astype(np.uint8)
    assert picture.shape == (16, 16, 3) and all(np.array_equal(picture[i, :, k], ramp) for i in range(16) for k in range(3))
    summary = text_of(out[7])
    assert "..." in summary and summary.endswith("[torch.DoubleTensor of size 100x100]") and len(summary) < 1000
    assert text_of(out[8]) == ""
    assert text_of(out[9]) == "True True\n"
    assert text_of(out[10]) == "nn.Linear(2 -> 3)"   # a raw Lua value shows as its proxy
    (black,) = pngs_of(out[11])
    assert black.shape == (8, 8, 3) and not black.any()
    assert text_of(out[13]) == "3"                    # PyTorch's tensor itself, its strides kept
    assert text_of(out[14]) == "[7.0, 7.0]\n"


def test_lua_kernel_outputs(tmp_path, lua_kernel):
    rgb = "torch.linspace(0, 1, 20):repeatTensor(3, 10, 1)"
    out = run_notebook([
        "print('hi', 1 + 1)\nio.write('written\\n')\nio.stderr:write('to stderr\\n');",
        "t = torch.range(1, 6):view(2, 3)\nt",
        "{a = 1, b = {2, 3}}",
        "torch.randn(200, 200)",
        f"itorch.image({rgb})",
        f"itorch.image({{{rgb}, {rgb}}})",
        "require 'image'\nimage.display(torch.ones(1, 8, 8))",
        "require 'gnuplot'\ngnuplot.plot(torch.range(1, 10))\nprint('plotted')",
        "itorch.Plot():line(torch.range(1, 5), torch.range(1, 5):pow(2), 'red', 'x^2'):title('squares'):draw()",
        "itorch.html('<b>bold</b>')\nitorch.text('plain words')",
        "error('boom')",
        "local x = 1\nx + 1",
        "x = 5;",
    ], lua_kernel, tmp_path, allow_errors=True)
    assert [(o["name"], o["text"]) for o in out[0]] in (
        [("stdout", "hi\t2\nwritten\n"), ("stderr", "to stderr\n")],
        [("stderr", "to stderr\n"), ("stdout", "hi\t2\nwritten\n")])
    assert text_of(out[1]) == " 1  2  3\n 4  5  6\n[torch.DoubleTensor of size 2x3]"
    assert text_of(out[2]) in ("{\n  a : 1\n  b : \n    {\n      1 : 2\n      2 : 3\n    }\n}",
                               "{\n  b : \n    {\n      1 : 2\n      2 : 3\n    }\n  a : 1\n}")
    summary = text_of(out[3])
    assert "..." in summary and summary.endswith("[torch.DoubleTensor of size 200x200]") and len(summary) < 1000
    (picture,) = pngs_of(out[4])
    ramp = np.rint(np.linspace(0, 1, 20) * 255).astype(np.uint8)
    assert picture.shape == (10, 20, 3) and np.array_equal(picture[4, :, 1], ramp)
    (grid,) = pngs_of(out[5])   # side by side in cells of (10 + 2) x (20 + 2), each 1 pixel in (torch7's grid)
    assert grid.shape == (12, 44, 3)
    assert np.array_equal(grid[4, 1:21, 0], ramp) and np.array_equal(grid[4, 23:43, 2], ramp)
    (shown,) = pngs_of(out[6])
    assert shown.shape[:2] == (8, 8) and "saved to" not in text_of(out[6])
    assert not list(tmp_path.glob("image_display_*.png")) and not list(tmp_path.glob("gnuplot_*.png"))
    (figure,) = pngs_of(out[7])
    assert figure.ndim == 3 and figure.shape[0] > 100 and text_of(out[7]) == "plotted\n"
    (plot,) = pngs_of(out[8])
    assert plot.shape[0] > 100 and text_of(out[8]) == ""
    assert out[9][0]["data"]["text/html"] == "<b>bold</b>" and out[9][1]["data"]["text/plain"] == "plain words"
    (error,) = out[10]
    assert (error["ename"], error["evalue"]) == ("LuaError", "cell:1: boom")
    assert text_of(out[11]) == "2" and out[12] == []


@contextlib.contextmanager
def running_kernel(name: str, **options):
    """A started kernel (its manager and client), shut down after."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name=name, startup_timeout=DEADLINE, **options)
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_lua_kernel_completes_as_th(lua_kernel):
    with running_kernel(lua_kernel) as (km, kc):
        kc.execute_interactive("t = torch.ones(2)", timeout=DEADLINE)

        def complete(code):
            kc.complete(code)
            return kc.get_shell_msg(timeout=DEADLINE)["content"]

        r = complete("torch.Ten")
        assert "torch.Tensor." in r["matches"] and r["cursor_start"] == 0
        r = complete("x = t:si")
        assert {"t:size(", "t:sin("} <= set(r["matches"]) and r["cursor_start"] == 4
        assert complete("nothing_here")["matches"] == []


BUSY = {   # each says 'running' from inside its loop, which never ends by itself
    "lua": "require 'nn'\nlocal m, x = nn.Linear(20, 20), torch.randn(20)\nprint('running')\nwhile true do m:forward(x) end",
    "lua-alloc": "print('running')\nwhile true do local t = torch.randn(10) end",
}


def interrupt_when_running(kc, km, code: str) -> dict:
    """Runs `code`, interrupts the kernel once it said 'running', returns the execute reply.
    (stop_on_error=False: else ipykernel aborts the requests that came in meanwhile, for a moment
    after any error, and the next check could be one of them.)"""
    msg_id = kc.execute(code, stop_on_error=False)
    while True:
        m = kc.get_iopub_msg(timeout=DEADLINE)
        if (m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "stream"
                and "running" in m["content"]["text"]):
            break
    km.interrupt_kernel()
    while True:
        reply = kc.get_shell_msg(timeout=DEADLINE)
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply["content"]


def result_of(kc, code: str) -> str:
    found = []
    kc.execute_interactive(code, timeout=DEADLINE, output_hook=lambda m: found.append(m))
    return "".join(m["content"]["data"]["text/plain"] for m in found if m["msg_type"] == "execute_result")


@pytest.mark.parametrize("busy", sorted(BUSY))
def test_interrupting_the_lua_kernel(lua_kernel, busy):
    with running_kernel(lua_kernel) as (km, kc):
        for _ in range(2):   # and again: the kernel goes on
            reply = interrupt_when_running(kc, km, BUSY[busy])
            assert (reply["status"], reply["ename"]) == ("error", "KeyboardInterrupt"), reply
            assert reply["evalue"].endswith("interrupted!")
            assert result_of(kc, "torch.mm(torch.ones(2, 3), torch.ones(3, 2)):sum()") == "12"


def test_interrupting_the_magic(tmp_path):
    _needs_jupyter()
    with running_kernel("python3", cwd=str(tmp_path)) as (km, kc):
        kc.execute_interactive("%load_ext luabridge", timeout=DEADLINE)
        for code in ("%%lua\n" + BUSY["lua"], "%%lua\n" + BUSY["lua-alloc"]):
            reply = interrupt_when_running(kc, km, code)
            assert (reply["status"], reply["ename"]) == ("error", "KeyboardInterrupt"), reply
            assert result_of(kc, "%lua torch.ones(3):sum()") == "3"
            assert result_of(kc, "1 + 1") == "2"


def test_the_quickstart_notebook_runs(tmp_path):
    _needs_jupyter()
    pytest.importorskip("torch", reason="PyTorch is not installed (the quick start's tasks 2 and 3)")
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(REPO / "examples" / "quickstart.ipynb", as_version=4)
    NotebookClient(nb, timeout=DEADLINE, startup_timeout=DEADLINE, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = {c.source.splitlines()[0]: c.outputs for c in nb.cells if c.cell_type == "code"}
    assert "Lua and Model.predict agree" in text_of(outputs["assert np.allclose(np.asarray(y_lua), y)"])
    trained = text_of(outputs["%lua dofile('train.lua')"]).splitlines()
    assert [line.split()[1] for line in trained] == ["50", "100", "150", "200"]
    assert float(text_of(outputs["final = luabridge.eval('final_loss')"])) < 1e-3
    (ramp,) = pngs_of(outputs["%lua torch.linspace(0, 1, 64):repeatTensor(3, 64, 1)"])
    assert ramp.shape == (64, 64, 3)
    assert text_of(outputs["%lua torch.randn(300, 300)"]).endswith("[torch.DoubleTensor of size 300x300]")
    assert (tmp_path / "quickstart_model.t7").exists() and (tmp_path / "train.lua").exists()
