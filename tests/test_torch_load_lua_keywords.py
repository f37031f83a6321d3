"""load_lua takes PyTorch 0.4's keywords (torch.utils.serialization.read_lua_file's T7Reader:
list_heuristic, int_heuristic, unknown_classes, long_size) with their meaning there."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import luabridge
from helpers import T7_FIXTURES, needs_t7_fixtures
from luabridge import t7
from luabridge.t7 import TorchObject
from luabridge.torch import load_lua


def test_list_heuristic(tmp_path) -> None:
    t7.write(tmp_path / "l.t7", {"xs": [10, 20, 30], "n": 1})
    assert load_lua(tmp_path / "l.t7") == {"xs": [10, 20, 30], "n": 1}
    got = load_lua(tmp_path / "l.t7", list_heuristic=False)
    assert got == {"xs": {1: 10, 2: 20, 3: 30}, "n": 1} and isinstance(got["xs"], dict)


def test_int_heuristic(tmp_path) -> None:
    t7.write(tmp_path / "n.t7", {"whole": 3.0, "half": 2.5, "big": 2.0 ** 60})
    got = load_lua(tmp_path / "n.t7")
    assert type(got["whole"]) is int and got["whole"] == 3 and got["big"] == 2 ** 60
    assert got["half"] == 2.5
    got = load_lua(tmp_path / "n.t7", int_heuristic=False)
    assert {k: (type(v), v) for k, v in got.items()} == {"whole": (float, 3.0), "half": (float, 2.5),
                                                          "big": (float, 2.0 ** 60)}


def test_unknown_classes(tmp_path) -> None:
    t7.write(tmp_path / "c.t7", {"thing": TorchObject("Zork", 2, {"a": 1, "w": np.arange(3.0)})})
    with pytest.raises(luabridge.LuaError, match="unknown Torch class <Zork>"):
        load_lua(tmp_path / "c.t7")
    thing = load_lua(tmp_path / "c.t7", unknown_classes=True)["thing"]
    assert isinstance(thing, TorchObject) and thing.typename == "Zork" and thing.version == 2
    assert sorted(thing.keys()) == ["a", "w"] and thing.a == 1
    assert torch.equal(thing.w, torch.arange(3, dtype=torch.float64))
    # luabridge's own option still gives the table, with __typename
    assert load_lua(tmp_path / "c.t7", unknownClasses="table")["thing"]["__typename"] == "Zork"


@needs_t7_fixtures
def test_unknown_classes_on_torch7_files() -> None:
    blah = load_lua(T7_FIXTURES / "custom_class.t7", unknown_classes=True)
    assert isinstance(blah, TorchObject) and blah.typename == "Blah"
    obj = load_lua(T7_FIXTURES / "recursive_class.t7", unknown_classes=True)
    assert obj.typename == "A" and obj.a is obj   # the cycle stays a cycle


@pytest.mark.parametrize("size, fmt", [(4, "b32"), (8, "b64")])
def test_long_size(tmp_path, size, fmt) -> None:
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    t7.write(tmp_path / "t.t7", {"a": a, "w": np.linspace(0, 1, 5)}, fmt)
    got = load_lua(tmp_path / "t.t7", long_size=size)
    assert torch.equal(got["a"], torch.from_numpy(a))
    assert torch.equal(got["w"], torch.from_numpy(np.linspace(0, 1, 5)))
    assert load_lua(tmp_path / "t.t7", "binary" if size == 8 else "b32", long_size=size).keys() == {"a", "w"}


def test_long_size_4_is_needed_for_a_b32_file(tmp_path) -> None:
    t7.write(tmp_path / "t.t7", {"a": np.arange(4.0)}, "b32")
    with pytest.raises(luabridge.LuaError):
        load_lua(tmp_path / "t.t7")


def test_bad_long_size(tmp_path) -> None:
    t7.write(tmp_path / "t.t7", 1)
    with pytest.raises(ValueError, match="long_size must be None, 4 or 8, not 2"):
        load_lua(tmp_path / "t.t7", long_size=2)
    with pytest.raises(ValueError, match="long_size=4 reads the binary format, which format='ascii' is not"):
        load_lua(tmp_path / "t.t7", "ascii", long_size=4)


@needs_t7_fixtures
def test_tds_vec_stays_a_list_without_the_list_heuristic() -> None:
    luabridge.require("tds")
    assert load_lua(T7_FIXTURES / "tds_vec.t7", list_heuristic=False) == [123, 456]
    assert load_lua(T7_FIXTURES / "tds_hash.t7", list_heuristic=False) == {1: 2, 2: 3, 10: 11}
