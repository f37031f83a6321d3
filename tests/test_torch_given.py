"""A path is read as a .t7 file wherever a constructor string is accepted (LuaModule, convert,
export: luabridge/torch/given.py), and a string that is neither a file nor Lua says both."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

import luabridge
from luabridge.core.errors import LuaError
from luabridge.torch import LuaModule, convert
from luabridge.torch.export import export
from luabridge.torch.given import SourceError, module_value

W = np.arange(6, dtype=np.float64).reshape(2, 3) / 10
B = np.array([0.5, -0.25])


@pytest.fixture
def model_file(tmp_path) -> Path:
    luabridge.require("nn")
    m = luabridge.eval("(function() local m = nn.Linear(3, 2); "
                       "m.weight:copy(torch.Tensor({{0, 0.1, 0.2}, {0.3, 0.4, 0.5}})); "
                       "m.bias:copy(torch.Tensor({0.5, -0.25})); return m end)()")
    path = tmp_path / "model.t7"
    luabridge.save(path, m)
    return path


def _want(x: np.ndarray) -> np.ndarray:
    return x @ W.T + B   # nn.Linear's output, in float64


@pytest.mark.parametrize("as_str", [False, True])
def test_lua_module_reads_a_file(model_file, as_str) -> None:
    m = LuaModule(str(model_file) if as_str else model_file)
    x = np.array([[1.0, 2.0, 3.0], [-1.0, 0.0, 4.0]])
    np.testing.assert_allclose(m(torch.from_numpy(x)).detach().numpy(), _want(x), rtol=0, atol=1e-12)


def test_lua_module_reads_a_relative_name(model_file, monkeypatch) -> None:
    monkeypatch.chdir(model_file.parent)
    got = dict(LuaModule("model.t7").named_parameters())
    np.testing.assert_array_equal(got["weight"].detach().numpy(), W)


@pytest.mark.parametrize("as_str", [False, True])
def test_convert_reads_a_file(model_file, as_str) -> None:
    m = convert(str(model_file) if as_str else model_file)
    assert isinstance(m, torch.nn.Linear)
    np.testing.assert_array_equal(m.weight.detach().numpy(), W)
    np.testing.assert_array_equal(m.bias.detach().numpy(), B)


def test_export_reads_a_path_through_the_same_helper(model_file, tmp_path) -> None:
    written = export(model_file, tmp_path / "out")
    assert written["source"].read_text().count("class Model") == 1
    assert "from model.t7" in written["source"].read_text()


def test_constructor_strings_still_run_as_lua() -> None:
    m = convert("nn.Linear(3, 2)")
    assert isinstance(m, torch.nn.Linear) and tuple(m.weight.shape) == (2, 3)
    assert len(list(LuaModule("nn.Tanh()").parameters())) == 0


@pytest.mark.parametrize("make", [LuaModule, convert, lambda s: export(s, "unused-outdir")],
                         ids=["LuaModule", "convert", "export"])
def test_a_name_neither_file_nor_lua_says_both(make, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SourceError) as e:
        make("model.t7")
    text = str(e.value)
    op = {"LuaModule": "LuaModule", "convert": "convert"}.get(getattr(make, "__name__", ""), "export")
    assert text.startswith(f"{op}: no such file 'model.t7', and as Lua code: ")
    assert "attempt to index global 'model' (a nil value)" in text
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, LuaError)
    assert not (tmp_path / "unused-outdir").exists()


def test_bad_lua_says_both_too() -> None:
    with pytest.raises(SourceError, match=r"^convert: no such file 'nn\.Linear\(3,', and as Lua code: .*"):
        convert("nn.Linear(3,")


@pytest.mark.parametrize("make", [LuaModule, convert])
def test_a_missing_path_object_is_a_missing_file(make, tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match=f"no such file '{tmp_path / 'absent.t7'}'$") as e:
        make(tmp_path / "absent.t7")
    assert not isinstance(e.value, LuaError)   # a Path is never read as Lua


def test_a_file_not_holding_a_module_says_so(tmp_path) -> None:
    luabridge.save(tmp_path / "data.t7", {"w": np.zeros(3)})
    with pytest.raises(TypeError, match=r"LuaModule expects a Lua nn module or its constructor string \(or a .t7 file"):
        LuaModule(tmp_path / "data.t7")
    with pytest.raises(TypeError, match="convert expects a Lua module"):
        convert(os.fspath(tmp_path / "data.t7"))


def test_module_value_passes_other_values_through() -> None:
    sentinel = object()
    assert module_value(sentinel, "op") == (sentinel, None)
