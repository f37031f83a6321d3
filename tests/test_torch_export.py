"""luabridge.torch.export: model.py (plain torch.nn) and model.safetensors that need PyTorch alone.

Every case of the converter's tests (layers, cudnn layers, table layers, criterions), nngraph
graphs and the real Torch7 file of ../shared/fixtures/t7 is exported; then a fresh venv holding
torch, numpy and safetensors but not luabridge (no system site-packages) imports each model.py,
loads the weights, puts the model in evaluation and compares its outputs with the Lua module's
(evaluate()d): float64 to 1e-10, float32 to 1e-5. model.pt2 loads there too; model.onnx runs under
onnxruntime (float32, 1e-5) where it is installed. A class that cannot be exported is an error
naming it and its path.
"""
from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any, Callable
from unittest import mock

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is missing (pip install torch): luabridge.torch needs it")
pytest.importorskip("safetensors", reason="export writes safetensors: pip install safetensors (luabridge[export])")

import luabridge  # noqa: E402
import test_torch_convert as layer_cases  # noqa: E402
import test_torch_convert_criterions as criterion_cases  # noqa: E402
import test_torch_convert_graph as graph_cases  # noqa: E402
import test_torch_convert_tables as table_cases  # noqa: E402
from helpers import T7_FIXTURES, needs_t7_fixtures  # noqa: E402
from luabridge.torch import ConversionError, export  # noqa: E402
from luabridge.torch.convert import CONVERTERS  # noqa: E402
from luabridge.torch.export import main as export_main  # noqa: E402
from luabridge.torch.export_source import ExportError  # noqa: E402

pytestmark = pytest.mark.slow

# nngraph graphs (Lua function bodies returning a gModule) and their inputs
GRAPHS: list[tuple[str, str, Callable[[], Any]]] = [
    ("lstm cell", graph_cases.LSTM,
     lambda: [np.random.default_rng(1).standard_normal(s) for s in ((2, 3), (2, 5), (2, 5))]),
    ("residual", """
      local x = nn.Identity()()
      local branch = nn.Linear(4, 4)(nn.Tanh()(nn.Linear(4, 4)(x)))
      return nn.gModule({x}, {nn.Tanh()(nn.CAddTable()({branch, x}))})""",
     lambda: np.random.default_rng(2).standard_normal((3, 4))),
    ("split and shared", """
      local inp = nn.Identity()()
      local x, y = inp:split(2)
      local lin = nn.Linear(3, 3)
      local prod = nn.CMulTable()({lin(nn.Tanh()(lin(x))), y})   -- lin twice in a row (its output is reused)
      local joined = nn.Linear(3, 2)(nn.NarrowTable(2, 1)(inp):split(1))
      return nn.gModule({inp}, {prod, joined})""",
     lambda: [np.random.default_rng(3).standard_normal((2, 3)) for _ in range(2)]),
    ("inside a container", """
      local x = nn.Identity()()
      local inner = nn.gModule({x}, {nn.Tanh()(nn.Linear(3, 2)(x):annotate{name = 'class'})})
      return nn.Sequential():add(nn.Linear(4, 3)):add(inner):add(nn.Sigmoid())""",
     lambda: np.random.default_rng(4).standard_normal((5, 4))),
    ("criterion node", """   -- nn.Exp and nn.MSECriterion: two classes named Pointwise (one is renamed)
      local x, target = nn.Identity()(), nn.Identity()()
      local loss = nn.MSECriterion()({nn.Exp()(nn.Linear(3, 2)(x)), target})
      return nn.gModule({x, target}, {loss})""",
     lambda: [np.random.default_rng(5).standard_normal(s) for s in ((4, 3), (4, 2))]),
]

# float32 models (checked to 1e-5) and torch7's shared weights
MORE = [
    ("nn.Sequential():add(nn.SpatialConvolution(3, 4, 3, 3)):add(nn.ReLU()):add(nn.View(-1):setNumInputDims(3))"
     ":add(nn.Linear(4 * 4 * 4, 5)):add(nn.LogSoftMax()):float()", "R(2, 3, 6, 6):float()"),
    ("nn.Sequential():add(nn.LinearWeightNorm(3, 4)):add(nn.Tanh()):float()", "R(2, 3):float()"),
    ("(function() local a = nn.Linear(3, 3); return nn.Sequential():add(a):add(nn.Tanh()):add(a)"
     ":add(a:clone('weight', 'bias')) end)()", "R(4, 3)"),
]

# what runs in the venv without luabridge: each case folder holds model.py, model.safetensors and
# io.pt ({"args": [...], "output": ...}); prints {case: "ok" or what went wrong} as JSON
CHECKER = r"""
import importlib.util, json, sys, traceback
from pathlib import Path
import torch, safetensors.torch

def leaves(x):
    return [v for e in x for v in leaves(e)] if isinstance(x, (list, tuple)) else [x]

def compare(got, want):
    got, want = leaves(got), leaves(want)
    assert len(got) == len(want), f"{len(got)} outputs, Lua gave {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g = g.detach().reshape(w.shape) if g.numel() == w.numel() else g
        tol = 1e-10 if w.dtype == torch.float64 else 1e-5
        assert g.dtype == w.dtype, f"output {i + 1}: {g.dtype}, Lua gave {w.dtype}"
        torch.testing.assert_close(g, w, rtol=tol, atol=tol, msg=lambda m: f"output {i + 1}: {m}")

results = {}
for folder in sorted(Path(sys.argv[1]).iterdir()):
    try:
        spec = importlib.util.spec_from_file_location(f"model_{folder.name}", folder / "model.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        model = module.Model()
        model.load_state_dict(safetensors.torch.load_file(folder / "model.safetensors"))
        model.eval()
        io = torch.load(folder / "io.pt", weights_only=True)
        with torch.no_grad():
            compare(model(*io["args"]), io["output"])
            if (folder / "model.pt").exists():
                again = module.Model()
                again.load_state_dict(torch.load(folder / "model.pt", weights_only=True))
                compare(again.eval()(*io["args"]), io["output"])
            if (folder / "model.pt2").exists():
                compare(torch.export.load(folder / "model.pt2").module()(*io["args"]), io["output"])
        results[folder.name] = "ok"
    except Exception:
        results[folder.name] = traceback.format_exc(limit=-3)
assert not any(name == "luabridge" or name.startswith("luabridge.") for name in sys.modules)
try:
    import luabridge
    results["luabridge importable"] = "the venv can import luabridge"
except ImportError:
    pass
print(json.dumps(results))
"""


def _run(cmd: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "LUA_PATH")}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def clean_python(tmp_path_factory) -> Path:
    """A fresh venv (no system site-packages, so no luabridge) with this session's torch, numpy
    and safetensors, installed from the local wheels and index."""
    home = tmp_path_factory.mktemp("venv-export")
    r = _run([sys.executable, "-m", "venv", "--without-pip", str(home / "v")], home)
    assert r.returncode == 0, r.stderr
    py = home / "v" / "bin" / "python"
    deps = [f"{name}=={metadata.version(name)}" for name in ("torch", "numpy", "safetensors")]
    r = _run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--disable-pip-version-check",
              *deps], home)
    if r.returncode != 0:
        pytest.skip(f"cannot install {deps} into a fresh venv (no local wheels or index?): {r.stderr[-500:]}")
    return py


def _torch(x: Any) -> Any:
    if isinstance(x, list):
        return [_torch(v) for v in x]
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x.copy())
    return torch.from_numpy(np.array(luabridge.to_numpy(x), copy=True))


def _lua(x: Any) -> Any:
    if isinstance(x, list):
        return [_lua(v) for v in x]
    return luabridge.from_numpy(np.array(x, copy=True))


def _case(folder: Path, module: Any, args: list[Any], output: Any, **options: Any) -> None:
    """Exports the Lua module into folder with the inputs and Lua's output beside it."""
    export(module, folder, **options)
    torch.save({"args": args, "output": output}, folder / "io.pt")


def _layer_case(folder: Path, ctor: str, inp: str) -> None:
    module, x = (luabridge.wrap(v) for v in layer_cases._BUILD(ctor, inp))
    module.evaluate()
    args = [_torch(x)]
    output = _torch(module.forward(x))
    _case(folder, module, args, output)


def _table_case(folder: Path, ctor: str, inputs: Callable[[], Any]) -> None:
    luabridge.require("nn")
    module = luabridge.wrap(luabridge.eval(ctor))
    module.evaluate()
    x = inputs()
    output = _torch(module.forward(_lua(x)))
    _case(folder, module, [_torch(x)], output)


def _criterion_case(folder: Path, ctor: str, make: Callable[[], Any]) -> None:
    luabridge.require("nn")
    module = luabridge.wrap(luabridge.eval(ctor))
    x, t = make()
    if t is None:
        loss = module.forward(_lua(x))
        args = [_torch(x)]
    else:
        loss = module.forward(_lua(x), _lua(t) if isinstance(t, (np.ndarray, list)) else t)
        args = [_torch(x), _torch(t) if isinstance(t, (np.ndarray, list)) else t]
    loss = loss[0] if isinstance(loss, tuple) else loss
    _case(folder, module, args, torch.tensor(float(loss), dtype=torch.float64))


def _graph_case(folder: Path, code: str, inputs: Callable[[], Any], **options: Any) -> None:
    g = graph_cases.graph(code)
    g.evaluate()
    x = inputs()
    _case(folder, g, [_torch(x)], _torch(g.forward(_lua(x))), example=_torch(x), **options)


def _cases() -> list[tuple[str, Callable[[Path], None], bool]]:
    """(id, what writes the case's folder, whether it runs in the cudnn thread)."""
    out = []
    for ctor, inp, *_ in layer_cases.CASES + MORE:
        out.append((f"{ctor} {inp}", lambda f, c=ctor, i=inp: _layer_case(f, c, i), False))
    for ctor, inp, *_ in layer_cases.CUDNN_CASES:
        out.append((f"{ctor} {inp}", lambda f, c=ctor, i=inp: _layer_case(f, c, i), True))
    for _, ctor, inputs in table_cases.CASE_LIST:
        out.append((ctor, lambda f, c=ctor, i=inputs: _table_case(f, c, i), False))
    for _, ctor, make in criterion_cases.CASE_LIST:
        out.append((ctor, lambda f, c=ctor, m=make: _criterion_case(f, c, m), False))
    for _, ctor, make in criterion_cases.CUDNN_CASE_LIST:
        out.append((ctor, lambda f, c=ctor, m=make: _criterion_case(f, c, m), True))
    for name, code, inputs in GRAPHS:
        out.append((f"graph: {name}", lambda f, c=code, i=inputs: _graph_case(f, c, i, pt2=True, pt=True), False))
    if T7_FIXTURES.is_dir():
        def real(folder: Path) -> None:
            g = luabridge.load(T7_FIXTURES / "gmodule_with_linear_identity.t7")
            x = [np.random.default_rng(6).standard_normal(s) for s in ((3, 1), (3, 2))]
            export(T7_FIXTURES / "gmodule_with_linear_identity.t7", folder, pt2=True, input_size=[(3, 1), (3, 2)])
            torch.save({"args": [_torch(x)], "output": _torch(g.forward(_lua(x)))}, folder / "io.pt")
        out.append(("fixture: gmodule_with_linear_identity.t7", real, False))
    return out


CASES = _cases()
IDS = [case_id for case_id, _, _ in CASES]


@pytest.fixture(scope="module")
def exported(tmp_path_factory, clean_python) -> dict[str, str]:
    """Every case exported (failures kept by case), then checked in one run of the clean venv."""
    base = tmp_path_factory.mktemp("exported")
    pool = ThreadPoolExecutor(max_workers=1)
    with mock.patch.dict(os.environ, {"LUABRIDGE_CUDA_ON_CPU": "1"}):
        for package in ("cudnn", "cunn"):
            pool.submit(luabridge.require, package).result()
    results: dict[str, str] = {}
    folders = {}
    try:
        for n, (case_id, write, cudnn) in enumerate(CASES):
            folder = base / f"{n:03d}"
            folders[folder.name] = case_id
            try:
                pool.submit(write, folder).result() if cudnn else write(folder)
            except Exception as e:   # reported by the case's own test
                results[case_id] = f"export failed: {type(e).__name__}: {e}"
                if folder.exists():
                    for f in folder.iterdir():
                        f.unlink()
                    folder.rmdir()
    finally:
        pool.shutdown()
    script = base.parent / "check_exports.py"
    script.write_text(CHECKER)
    r = _run([str(clean_python), str(script), str(base)], base.parent)
    assert r.returncode == 0, r.stderr[-3000:]
    checked = json.loads(r.stdout.strip().splitlines()[-1])
    assert "luabridge importable" not in checked
    results.update({folders[name]: outcome for name, outcome in checked.items()})
    return results


@pytest.mark.parametrize("case_id", IDS)
def test_exported_model_matches_lua_without_luabridge(exported, case_id):
    assert exported.get(case_id) == "ok", exported.get(case_id, "not checked")


def test_every_converter_is_exported() -> None:
    """The cases cover every class the converter knows (the converters' own case lists)."""
    named = " ".join(IDS)
    assert sorted(name for name in CONVERTERS if f"{name}(" not in named
                  and name not in ("nn.gModule", "nngraph.JustElement", "nngraph.JustTable",
                                   "nn.ModuleFromCriterion")) == []


@needs_t7_fixtures
def test_the_real_fixture_is_among_the_cases() -> None:
    assert "fixture: gmodule_with_linear_identity.t7" in IDS


# ---- the files

def test_model_py_imports_torch_only_and_reads_as_torch7_did(tmp_path) -> None:
    written = export("nn.Sequential():add(nn.Linear(3, 4)):add(nn.Tanh()):add(nn.View(-1)):add(nn.LogSoftMax())",
                     tmp_path)
    assert set(written) == {"source", "weights"}
    source = written["source"].read_text()
    tree = ast.parse(source)
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= {"torch", "__future__", "math", "typing", "collections", "functools"}, imported
    assert "luabridge" not in {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert "class Model(torch.nn.Module):" in source
    assert 'self.add_module("1", torch.nn.Linear(3, 4, bias=True, dtype=torch.float64))' in source
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    assert classes == ["View", "SoftMax", "Model"]   # torch7's layers torch.nn lacks, then the model


def test_graph_forward_is_one_local_per_node(tmp_path) -> None:
    g = graph_cases.graph("""
      local x = nn.Identity()()
      local h = nn.Tanh()(nn.Linear(3, 3)(x):annotate{name = 'i2h'})
      return nn.gModule({x}, {nn.CAddTable()({h, x})})""")
    source = export(g, tmp_path)["source"].read_text()
    forward = source[source.index("    def forward(self, x):"):]
    assert forward.splitlines()[1:] == [
        '        identity = getattr(self, "1")(x)',
        "        i2h = self.i2h(identity)",
        '        tanh = getattr(self, "3")(i2h)',
        '        c_add_table = getattr(self, "4")([tanh, identity])',
        "        return c_add_table"]


def test_weights_pt_loads_with_weights_only(tmp_path) -> None:
    written = export("nn.Sequential():add(nn.Linear(3, 2)):add(nn.BatchNormalization(2))", tmp_path, pt=True)
    state = torch.load(written["pt"], weights_only=True)
    assert list(state) == ["1.weight", "1.bias", "2.weight", "2.bias", "2.running_mean", "2.running_var",
                           "2.num_batches_tracked"]
    import safetensors.torch
    again = safetensors.torch.load_file(written["weights"])
    assert all(torch.equal(state[k], again[k]) for k in state)


def test_shared_weights_stay_tied(tmp_path) -> None:
    lua = luabridge.eval("(function() local a = nn.Linear(3, 3); return nn.Sequential():add(a):add(nn.Tanh())"
                         ":add(a:clone('weight', 'bias')) end)()")
    source = export(lua, tmp_path)["source"].read_text()
    assert 'self.get_submodule("3").weight = self.get_submodule("1").weight' in source


def test_pt2_and_onnx_need_an_input_size_where_the_first_layer_does_not_tell(tmp_path) -> None:
    with pytest.raises(ValueError, match="pass input_size"):
        export("nn.Sequential():add(nn.SpatialConvolution(1, 2, 3, 3))", tmp_path, pt2=True)


ONNX_MODELS = [
    ("nn.Sequential():add(nn.SpatialConvolution(3, 4, 3, 3)):add(nn.SpatialBatchNormalization(4)):add(nn.ReLU())"
     ":add(nn.SpatialMaxPooling(2, 2, 2, 2)):add(nn.View(-1):setNumInputDims(3)):add(nn.Linear(4 * 3 * 3, 5))"
     ":add(nn.LogSoftMax())", [(2, 3, 8, 8)]),
    ("nn.Sequential():add(nn.Concat(2):add(nn.Linear(3, 2)):add(nn.Linear(3, 4))):add(nn.Tanh())", [(4, 3)]),
    ("graph", [(2, 3), (2, 5), (2, 5)]),
]


@pytest.mark.parametrize("ctor,sizes", ONNX_MODELS, ids=[c[:40] for c, _ in ONNX_MODELS])
def test_onnx_runs_under_onnxruntime_as_lua(tmp_path, ctor, sizes) -> None:
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install 'luabridge[export]')")
    pytest.importorskip("onnxscript", reason="torch.onnx.export needs onnxscript (pip install 'luabridge[export]')")
    lua = graph_cases.graph(graph_cases.LSTM) if ctor == "graph" else luabridge.wrap(luabridge.eval(ctor))
    lua.evaluate()
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal(s) for s in sizes]
    x = xs if len(xs) > 1 else xs[0]
    written = export(lua, tmp_path, onnx=True, input_size=sizes if len(sizes) > 1 else sizes[0])
    assert "onnx_unchecked" not in written
    session = ort.InferenceSession(str(written["onnx"]), providers=["CPUExecutionProvider"])
    got = session.run(None, {i.name: a.astype(np.float32) for i, a in zip(session.get_inputs(), xs)})
    want = _torch(lua.forward(_lua(x)))
    want = want if isinstance(want, list) else [want]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy().astype(np.float32), rtol=1e-5, atol=1e-5)


# ---- bad input

def test_a_class_without_counterpart_names_itself_and_its_path(tmp_path) -> None:
    luabridge.require("nn")
    luabridge.execute("if not nn.ExportUnknown then torch.class('nn.ExportUnknown', 'nn.Module') end")
    with pytest.raises(ConversionError, match=r"^nn\.ExportUnknown at 2\.1 has no PyTorch counterpart$"):
        export("nn.Sequential():add(nn.Linear(2, 2)):add(nn.Sequential():add(nn.ExportUnknown()))", tmp_path)
    assert not (tmp_path / "model.py").exists()


def test_constructors_are_put_back_after_a_failed_export(tmp_path) -> None:
    """export records constructor calls by wrapping __init__ meanwhile: afterwards every class has
    its own again (an inherited one stays inherited), whatever went wrong."""
    from luabridge.torch import layers
    linear = torch.nn.Linear.__init__
    assert "__init__" not in vars(layers.TemporalConvolution)   # Conv1d's
    luabridge.require("nn")
    luabridge.execute("if not nn.ExportUnknown then torch.class('nn.ExportUnknown', 'nn.Module') end")
    with pytest.raises(ConversionError):
        export("nn.Sequential():add(nn.Linear(2, 2)):add(nn.ExportUnknown())", tmp_path)
    assert torch.nn.Linear.__init__ is linear and not hasattr(linear, "__wrapped__")
    assert "__init__" not in vars(layers.TemporalConvolution)


class _Private(torch.nn.Module):
    """A module class of no library (as a converter could make): export cannot write it."""

    def forward(self, x):
        return x


def test_a_module_export_cannot_write_names_its_class_and_path(tmp_path) -> None:
    with mock.patch.dict(CONVERTERS, {"nn.Tanh": lambda m, ctx: _Private()}):
        with pytest.raises(ExportError, match=r"^_Private at 2\.1 has no plain torch.nn counterpart"):
            export("nn.Sequential():add(nn.Linear(2, 2)):add(nn.Sequential():add(nn.Tanh()))", tmp_path)


def test_a_missing_file_is_named_not_read_as_lua(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="export: no such file 'model.t7', and as Lua code: "):
        export("model.t7", tmp_path)
    with pytest.raises(FileNotFoundError, match="no such file"):
        export(tmp_path / "absent.t7", tmp_path)


def test_not_a_module(tmp_path) -> None:
    with pytest.raises(TypeError, match="export expects an nn module.*got a torch.DoubleTensor"):
        export(luabridge.wrap(luabridge.eval("torch.zeros(2)")), tmp_path)


# ---- luabridge export

def test_command_writes_the_files(tmp_path, capsys) -> None:
    model = tmp_path / "model.t7"
    luabridge.save(str(model), luabridge.eval("nn.Sequential():add(nn.Linear(3, 2)):add(nn.SoftMax())"))
    assert export_main([str(model), str(tmp_path / "out" / "deeper"), "--pt", "--pt2"]) == 0
    printed = capsys.readouterr().out.split()
    assert [Path(p).name for p in printed] == ["model.py", "model.safetensors", "model.pt", "model.pt2"]
    assert export_main([str(tmp_path / "missing.t7"), str(tmp_path / "o")]) == 1
    assert "missing.t7: no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        export_main([str(model), str(tmp_path / "o"), "--input-size", "2xa"])
    assert "is not a size such as 1x3x32x32" in capsys.readouterr().err


def test_luabridge_export_command_in_a_fresh_process(tmp_path) -> None:
    """`luabridge export` through the command line's main, as the console script runs it."""
    model = tmp_path / "net.t7"
    luabridge.save(str(model), luabridge.eval("nn.Sequential():add(nn.Linear(3, 2)):add(nn.LogSoftMax())"))
    code = "import sys\nfrom luabridge.th.cli import main\nsys.exit(main(sys.argv[1:]))"
    onnx = importlib.util.find_spec("onnxscript") is not None   # torch.onnx.export needs it
    r = subprocess.run([sys.executable, "-c", code, "export", str(model), str(tmp_path / "out"),
                        "--onnx" if onnx else "--pt"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "model.onnx" if onnx else "model.pt", "model.py", "model.safetensors"]
    r = subprocess.run([sys.executable, "-c", code, "--help"], capture_output=True, text=True, timeout=300)
    assert "export MODEL.t7 OUTDIR" in r.stdout
