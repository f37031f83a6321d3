"""require 'matio' (soumith/matio-ffi.torch's API) on scipy.io: values, types, MATLAB's sizes and
column-major layout, cells, structs and strings as matio-ffi gave them, and saving that MATLAB (here
scipy) reads back. matio-ffi's own test.lua passes too (tools/corpus)."""
from __future__ import annotations

import numpy as np
import pytest

import luabridge

scipy_io = pytest.importorskip("scipy.io", reason="the matio extra (scipy) is not installed")


@pytest.fixture(scope="module")
def matio(lua):
    lua.execute("matio = require 'matio'")
    return lua


def load(lua, path, name=None, strings=False):
    lua.execute(f"matio.use_lua_strings = {'true' if strings else 'false'}")
    arg = "" if name is None else f", {name!r}" if isinstance(name, str) else ", {" + ", ".join(map(repr, name)) + "}"
    return lua.eval(f"matio.load('{path}'{arg})")


@pytest.mark.parametrize("dtype, tensor", [(np.float64, "Double"), (np.float32, "Float"), (np.int8, "Char"),
                                           (np.uint8, "Byte"), (np.int16, "Short"), (np.int32, "Int"),
                                           (np.int64, "Long")])
def test_arrays_keep_matlabs_sizes_values_and_type(matio, tmp_path, rng, dtype, tensor):
    path = tmp_path / "a.mat"
    a = (rng.standard_normal((2, 3, 4)) * 50).astype(dtype)
    scipy_io.savemat(path, {"a": a})
    t = load(matio, path, "a")
    assert matio.eval("torch.typename")(t) == f"torch.{tensor}Tensor"
    np.testing.assert_array_equal(luabridge.to_numpy(t), a)
    # MATLAB's column-major strides, as matio-ffi's transposes left them: a(2,1,1) is next to a(1,1,1)
    assert list(matio.eval("function(t) return t:stride():totable() end")(t).values()) == [1, 2, 6]


def test_unsigned_and_logical_keep_their_bits(matio, tmp_path):
    path = tmp_path / "u.mat"
    scipy_io.savemat(path, {"u": np.array([[65535, 1]], np.uint16), "b": np.array([[True, False]])})
    got = load(matio, path)
    np.testing.assert_array_equal(luabridge.to_numpy(got["u"]), [[-1, 1]])   # 0xffff as a ShortTensor
    assert matio.eval("torch.typename")(got["b"]) == "torch.ByteTensor"
    np.testing.assert_array_equal(luabridge.to_numpy(got["b"]), [[1, 0]])


def test_cells_structs_and_strings(matio, tmp_path):
    path = tmp_path / "s.mat"
    m = np.array([[1.0, 1, 2], [3, 5, 8], [13, 21, 34]])
    cell = np.empty((1, 3), dtype=object)
    cell[0, 0], cell[0, 1], cell[0, 2] = "one", "two", np.array([[3.0]])
    scipy_io.savemat(path, {"m": m, "c": cell, "s": {"matrix": m, "scalar": 2.0, "name": "abc"}})
    got = load(matio, path, strings=True)
    assert got["c"][1] == "one" and got["c"][2] == "two"
    assert luabridge.to_numpy(got["c"][3]).tolist() == [[3.0]]
    np.testing.assert_array_equal(luabridge.to_numpy(got["s"]["matrix"]), m)
    assert got["s"]["name"] == "abc"
    chars = load(matio, path, "c", strings=False)
    assert luabridge.to_numpy(chars[1]).tolist() == [[ord("o"), ord("n"), ord("e")]]


def test_missing_names_and_files_print_and_give_nil(matio, tmp_path, capfd):
    path = tmp_path / "m.mat"
    scipy_io.savemat(path, {"a": np.ones((2, 2))})
    assert load(matio, path, "nope") is None
    assert "Could not find variable with name: nope" in capfd.readouterr().out
    got = load(matio, path, ["a", "nope"])
    assert list(got.keys()) == ["a"]
    assert load(matio, tmp_path / "absent.mat") is None
    assert "File could not be opened" in capfd.readouterr().out


def test_save_is_what_scipy_reads(matio, tmp_path):
    path = str(tmp_path / "out.mat")
    matio.execute(f"""
      local t = torch.range(1, 24):view(2, 3, 4)
      matio.save('{path}', {{ t = t, v = torch.FloatTensor({{1, 2, 3}}), n = 4.5, flag = true,
                              nested = {{ k = torch.IntTensor({{{{7, 8}}}}) }} }})
      matio.save('{path}.x.mat', t)""")
    got = scipy_io.loadmat(path)
    np.testing.assert_array_equal(got["t"], np.arange(1, 25).reshape(2, 3, 4))
    assert got["v"].shape == (3, 1) and got["v"].dtype == np.float32      # a vector is a column in MATLAB
    assert got["n"].tolist() == [[4.5]] and got["flag"].tolist() == [[1]]
    assert got["nested"]["k"][0, 0].tolist() == [[7, 8]]
    np.testing.assert_array_equal(scipy_io.loadmat(path + ".x.mat")["x"], np.arange(1, 25).reshape(2, 3, 4))


@pytest.mark.parametrize("code, message", [
    ("matio.load(3)", "matio.load: expected a file name"),
    ("matio.save('{d}/a.mat', 'text')", "expected a tensor or a table"),
    ("matio.save('{d}/a.mat', {{ f = print }})", "unsupported type function at f"),
    ("matio.save('{d}/no/dir/a.mat', torch.zeros(2))", "matio.save: cannot write"),
])
def test_bad_use_is_a_clear_error(matio, tmp_path, code, message):
    with pytest.raises(luabridge.LuaError, match=message):
        matio.execute(code.format(d=tmp_path))
