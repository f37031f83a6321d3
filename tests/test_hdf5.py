"""require 'hdf5' (deepmind/torch-hdf5's API) on h5py: what Lua writes h5py reads back exactly, and
the reverse, by type, in part, appended, in groups; bad use gets torch-hdf5's errors. torch-hdf5's
own six test files pass too (tools/corpus: deepmind/torch-hdf5)."""
from __future__ import annotations

import numpy as np
import pytest

import luabridge

h5py = pytest.importorskip("h5py", reason="the hdf5 extra (h5py) is not installed")


@pytest.fixture(scope="module")
def hdf5(lua):
    lua.require("hdf5")
    return lua


@pytest.mark.parametrize("tensor, dtype", [("Byte", "u1"), ("Short", "i2"), ("Int", "i4"), ("Long", "i8"),
                                           ("Float", "f4"), ("Double", "f8")])
def test_lua_writes_what_h5py_reads(hdf5, tmp_path, tensor, dtype):
    path = str(tmp_path / "out.h5")
    hdf5.execute(f"""
      local f = hdf5.open('{path}', 'w')
      local t = torch.{tensor}Tensor(3, 4)
      local k = 0
      t:apply(function() k = k + 1 return k end)
      f:write('/group/data', t)
      f:write('/group/view', t:t())          -- a transposed view: written as the values it shows
      f:close()""")
    with h5py.File(path, "r") as f:
        want = np.arange(1, 13).reshape(3, 4)
        assert f["group/data"].dtype == np.dtype("<" + dtype)
        np.testing.assert_array_equal(f["group/data"][...], want)
        np.testing.assert_array_equal(f["group/view"][...], want.T)


@pytest.mark.parametrize("dtype, tensor", [("u1", "Byte"), ("i1", "Byte"), ("i2", "Short"), ("u2", "Short"),
                                           ("i4", "Int"), ("i8", "Long"), ("f4", "Float"), ("f8", "Double")])
def test_h5py_writes_what_lua_reads(hdf5, tmp_path, rng, dtype, tensor):
    path = str(tmp_path / "in.h5")
    data = (rng.standard_normal((2, 3, 5)) * 20).astype(dtype)
    with h5py.File(path, "w") as f:
        f["x"] = data
    got = hdf5.eval(f"(function() local f = hdf5.open('{path}', 'r') local t = f:read('x'):all() f:close() return t end)()")
    assert hdf5.eval("torch.typename")(got) == f"torch.{tensor}Tensor"
    np.testing.assert_array_equal(luabridge.to_numpy(got), data.astype(luabridge.to_numpy(got).dtype))


def test_partial_all_of_a_group_and_sizes(hdf5, tmp_path, rng):
    path = str(tmp_path / "p.h5")
    a, b = rng.standard_normal((6, 4)), rng.integers(0, 100, 10)
    with h5py.File(path, "w") as f:
        f["top/a"] = a
        f["top/deeper/b"] = b
    hdf5.execute(f"_h5 = hdf5.open('{path}', 'r')")
    part = luabridge.to_numpy(hdf5.eval("_h5:read('/top/a'):partial({2, 4}, 3)"))
    np.testing.assert_array_equal(part, a[1:4, 2:3])
    assert list(hdf5.eval("_h5:read('top/a'):dataspaceSize()").values()) == [6, 4]
    everything = hdf5.eval("_h5:all()")
    np.testing.assert_array_equal(luabridge.to_numpy(everything["top"]["a"]), a)
    np.testing.assert_array_equal(luabridge.to_numpy(everything["top"]["deeper"]["b"]), b)
    hdf5.execute("_h5:close()")


def test_append_extends_a_chunked_dataset(hdf5, tmp_path):
    path = str(tmp_path / "a.h5")
    hdf5.execute(f"""
      local f = hdf5.open('{path}', 'w')
      local options = hdf5.DataSetOptions():setChunked(2, 3):setDeflate(4)
      f:write('rows', torch.range(1, 6):view(2, 3), options)
      f:append('rows', torch.range(7, 15):view(3, 3))
      f:close()""")
    with h5py.File(path, "r") as f:
        np.testing.assert_array_equal(f["rows"][...], np.arange(1, 16).reshape(5, 3))
        assert f["rows"].compression == "gzip"


@pytest.mark.parametrize("code, message", [
    ("hdf5.open('{d}/no/such/dir/x.h5', 'w')", "no such directory"),
    ("hdf5.open('{d}/x.h5', 'q')", "Unknown mode 'q'"),
    ("hdf5.open('{d}/missing.h5', 'r')", "cannot open"),
    ("local f = hdf5.open('{d}/y.h5', 'w') f:write('d', torch.zeros(2, 2)) f:read('nope')", "no such child 'nope'"),
    ("local f = hdf5.open('{d}/z.h5', 'w') f:write('d', torch.zeros(2, 2)) f:read('d'):partial({{1, 3}}, {{1, 2}})",
     "range 1..3 of dimension 1 is outside 1..2"),
    ("local f = hdf5.open('{d}/w.h5', 'w') f:write('d', torch.zeros(2, 2)) f:read('d'):partial({{1, 2}})",
     "dimension mismatch. Expected 2 but 1 were given"),
    ("local f = hdf5.open('{d}/v.h5', 'w') f:write('d', 'text')", "writing data of type string is not supported"),
    ("local f = hdf5.open('{d}/u.h5', 'w') f:close() f:read('d')", "is closed"),
    ("local f = hdf5.open('{d}/t.h5', 'w') f:write('d', torch.zeros(2, 2), hdf5.DataSetOptions():setChunked(1, 1, 1))",
     "Chunk size must have same number of dimensions as data"),
])
def test_bad_use_is_a_clear_error(hdf5, tmp_path, code, message):
    with pytest.raises(luabridge.LuaError, match=message):
        hdf5.execute(code.format(d=tmp_path))


def test_unsupported_stored_types_are_refused_by_name(hdf5, tmp_path):
    path = str(tmp_path / "s.h5")
    with h5py.File(path, "w") as f:
        f["half"] = np.zeros(3, np.float16)
        f["text"] = np.array([b"ab", b"cd"])
    with pytest.raises(luabridge.LuaError, match="float data with size = 2 bytes at /half"):
        hdf5.execute(f"hdf5.open('{path}', 'r'):read('half'):all()")
    with pytest.raises(luabridge.LuaError, match="class STRING is unsupported at /text"):
        hdf5.execute(f"hdf5.open('{path}', 'r'):read('text'):all()")


def test_version_is_the_hdf5_library_underneath(hdf5):
    got = hdf5.eval("hdf5.version")
    assert tuple(got[i] for i in (1, 2, 3)) == h5py.version.hdf5_version_tuple[:3]
