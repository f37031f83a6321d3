"""luabridge.load / luabridge.save: Lua's torch.load / torch.save from Python, with Python values
converted on the way in and proxies on the way out."""
import struct
import subprocess
import sys

import numpy as np
import pytest

import luabridge
from helpers import T7_FIXTURES as FIXTURES, needs_t7_fixtures as needs_fixtures

DTYPES = [np.uint8, np.int8, np.int16, np.int32, np.int64, np.float32, np.float64]


@pytest.fixture(scope="module", autouse=True)
def nn():
    luabridge.require("nn")


@pytest.mark.parametrize("fmt", ["binary", "ascii", "b32", "b64"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_arrays_round_trip(tmp_path, rng, fmt, dtype):
    a = (rng.standard_normal((3, 5)) * 50).astype(dtype)
    views = {"whole": a, "transposed": a.T, "strided": a[::2, 1::2], "empty": a[:0]}
    luabridge.save(tmp_path / "a.t7", views, format=fmt)
    back = luabridge.load(tmp_path / "a.t7", format=fmt)
    assert set(back) == set(views)
    for name, view in views.items():
        got = np.asarray(back[name])
        assert got.dtype == dtype and got.shape == view.shape, name
        np.testing.assert_array_equal(got, view)


def test_views_of_one_array_share_a_storage_after_loading(tmp_path):
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    luabridge.save(tmp_path / "s.t7", {"a": a, "column": a[:, 2], "again": a})
    back = luabridge.load(tmp_path / "s.t7")
    whole, column = np.asarray(back["a"]), np.asarray(back["column"])
    assert np.shares_memory(whole, column) and not np.shares_memory(whole, a)
    whole[1, 2] = -1  # one storage: the column sees the change
    assert column[1] == -1
    assert np.shares_memory(np.asarray(back["again"]), whole)


def test_views_that_are_not_element_aligned_are_copied(tmp_path):
    # a float32 view starting 2 bytes into a float32 array cannot be a tensor over its storage
    root = np.arange(8, dtype=np.float32)
    odd = np.ndarray((3,), np.float32, buffer=root, offset=2)
    fortran = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    luabridge.save(tmp_path / "odd.t7", {"odd": odd, "f": fortran, "row": fortran[1]})
    back = luabridge.load(tmp_path / "odd.t7")
    assert np.array_equal(np.asarray(back["odd"]), odd, equal_nan=True)
    assert np.array_equal(np.asarray(back["f"]), fortran) and np.array_equal(np.asarray(back["row"]), fortran[1])
    assert np.shares_memory(np.asarray(back["f"]), np.asarray(back["row"]))


def test_values_and_nesting(tmp_path):
    obj = {"n": 3, "x": 2.5, "s": "text", "flag": True, "list": [1, "two", [3.0]], 7: "seven"}
    luabridge.save(tmp_path / "v.t7", obj)
    assert luabridge.load(tmp_path / "v.t7") == obj


def test_module_round_trip_predicts_the_same(tmp_path, rng):
    model = luabridge.nn.Sequential().add(luabridge.nn.Linear(4, 6)).add(luabridge.nn.Tanh()) \
        .add(luabridge.nn.Linear(6, 2))
    x = rng.standard_normal((5, 4))
    expected = np.array(model.forward(x))
    luabridge.save(str(tmp_path / "m.t7"), model)
    loaded = luabridge.load(str(tmp_path / "m.t7"))
    assert isinstance(loaded, luabridge.LuaObject) and "nn.Sequential" in str(loaded)
    np.testing.assert_array_equal(np.asarray(loaded.forward(x)), expected)
    w = np.asarray(model.modules[0].weight)  # the numbers, not shared with the saved model
    assert not np.shares_memory(np.asarray(loaded.modules[0].weight), w)
    np.testing.assert_array_equal(np.asarray(loaded.modules[0].weight), w)


def test_load_requires_the_packages_a_file_needs(tmp_path):
    """In a new process nothing but torch is loaded: nn (then nngraph, for a gModule) come on demand."""
    luabridge.save(tmp_path / "m.t7", luabridge.nn.Linear(2, 3))
    code = ("import sys, luabridge; m = luabridge.load(sys.argv[1]); "
            "print(m, luabridge.eval('package.loaded.nngraph ~= nil'))")
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path / "m.t7")], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["nn.Linear(2", "->", "3)", "False"]
    # a GPU checkpoint's cudnn.ReLU (its fields: an empty table) is read as nn.ReLU; no CUDA package needed
    (tmp_path / "cudnn.t7").write_bytes(struct.pack("<3i3s", 4, 1, 3, b"V 1") + struct.pack("<i10s", 10, b"cudnn.ReLU")
                                        + struct.pack("<3i", 3, 2, 0))
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path / "cudnn.t7")], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["nn.ReLU", "False"]
    if FIXTURES.is_dir():
        run = subprocess.run([sys.executable, "-c", code, str(FIXTURES / "gmodule_with_linear_identity.t7")],
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        assert run.stdout.split() == ["nn.gModule", "True"]


def test_files_torchfile_reads(tmp_path, rng):
    """An independent reader (the torchfile package) agrees with what luabridge.save wrote."""
    torchfile = pytest.importorskip("torchfile")
    a = rng.standard_normal((2, 3)).astype(np.float32)
    luabridge.save(tmp_path / "t.t7", {"a": a, "b": [1, 2]})
    back = torchfile.load(str(tmp_path / "t.t7"))
    np.testing.assert_array_equal(back[b"a"], a)
    assert list(back[b"b"]) == [1, 2]


@needs_fixtures
def test_real_torch7_files():
    t = luabridge.load(FIXTURES / "doubletensor.t7")
    np.testing.assert_array_equal(np.asarray(t), [[1, 2, 3], [4, 5, 6.9]])
    assert luabridge.load(FIXTURES / "list_table.t7") == ["hello", "world", "third item", 123]
    assert luabridge.load(FIXTURES / "hello=123.t7") == {"hello": 123}


@needs_fixtures
def test_options_reach_the_reader():
    with pytest.raises(luabridge.LuaError, match="function.t7"):
        luabridge.load(FIXTURES / "function.t7")
    assert luabridge.load(FIXTURES / "function.t7", functions="skip") is None
    with pytest.raises(luabridge.LuaError, match="Blah"):
        luabridge.load(FIXTURES / "custom_class.t7")
    assert luabridge.load(FIXTURES / "custom_class.t7", unknownClasses="table")["__typename"] == "Blah"


def test_errors_name_the_file(tmp_path):
    missing = tmp_path / "missing.t7"
    with pytest.raises(luabridge.LuaError, match=f"no such file {missing}"):
        luabridge.load(missing)
    ascii_file = tmp_path / "ascii.t7"
    luabridge.save(ascii_file, [1, 2], format="ascii")
    with pytest.raises(luabridge.LuaError, match=str(ascii_file)):
        luabridge.load(ascii_file)  # read as binary
    with pytest.raises(luabridge.LuaError, match="unknown format 'xml'"):
        luabridge.load(ascii_file, format="xml")
    truncated = tmp_path / "truncated.t7"
    luabridge.save(truncated, np.zeros(100))
    truncated.write_bytes(truncated.read_bytes()[:-7])
    with pytest.raises(luabridge.LuaError, match=str(truncated)):
        luabridge.load(truncated)
    with pytest.raises(luabridge.LuaError, match="nowhere"):
        luabridge.save(tmp_path / "nowhere" / "x.t7", [1])


def test_strings_that_are_not_utf8(tmp_path):
    """Bytes that are not UTF-8 come to Python as surrogate escapes (as os.fsdecode gives) and go
    back to Lua as the same bytes; t7.read gives them as bytes."""
    path = tmp_path / "latin1.t7"
    path.write_bytes(struct.pack("<5i", 3, 1, 1, 2, 1) + b"\xff" + struct.pack("<2i", 2, 2) + b"\xfe\x00")
    loaded = luabridge.load(path)
    assert loaded == {"\udcff": "\udcfe\x00"}
    assert "\udcff".encode("utf-8", "surrogateescape") == b"\xff"
    luabridge.save(tmp_path / "again.t7", loaded)
    assert (tmp_path / "again.t7").read_bytes() == path.read_bytes()
    assert luabridge.t7.read(path) == {b"\xff": b"\xfe\x00"}


def test_values_without_a_torch7_form_are_refused(tmp_path):
    with pytest.raises(TypeError, match=r"obj\['a'\]\[1\] is a set"):
        luabridge.save(tmp_path / "x.t7", {"a": [1, {2}]})
    cyclic: dict = {}
    cyclic["me"] = cyclic
    with pytest.raises(TypeError, match="contains itself"):
        luabridge.save(tmp_path / "x.t7", cyclic)
    assert not (tmp_path / "x.t7").exists()
