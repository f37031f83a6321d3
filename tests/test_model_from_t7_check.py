"""Model.from_t7 checks the file at once (issue 26): bytes that do not begin as a .t7 file are
refused at construction with the .t7 reader's own words, not at the first predict."""
from __future__ import annotations

import re

import numpy as np
import pytest

import luabridge
from luabridge import LuaError, Model


def _reader_says(path) -> str:
    """What luabridge.load (the Lua reader, File.lua) says of the file: the part after 'not a .t7 file'."""
    with pytest.raises(LuaError) as e:
        luabridge.load(path, "ascii" if path.suffix == ".asc" else "binary")
    m = re.search(r"not a \.t7 file: it looks like .*", e.value.message)
    assert m, e.value.message
    return re.sub(r" \(file [^()]*\)$", "", m.group(0))   # less the file's name, which it adds


@pytest.mark.parametrize("name, contents, looks", [
    ("notes.txt", b"hello world\nsecond line\n", 'text (it begins "hello world")'),
    ("empty.t7", b"", "an empty file"),
    ("model.pt", b"PK\x03\x04" + bytes(60), None),
])
def test_a_file_that_is_not_t7_is_refused_at_construction(tmp_path, name, contents, looks) -> None:
    path = tmp_path / name
    path.write_bytes(contents)
    said = _reader_says(path)
    with pytest.raises(LuaError) as e:
        Model.from_t7(path)
    assert e.value.message == f"Model.from_t7: {path}: {said}"
    if looks:
        assert said == f"not a .t7 file: it looks like {looks}"
    with pytest.raises(LuaError, match=re.escape(f"Model.from_t7: {said}")):
        Model.from_t7(contents)   # the bytes themselves


def test_a_binary_file_read_as_ascii_is_refused(tmp_path) -> None:
    luabridge.require("nn")
    path = tmp_path / "m.t7"
    luabridge.save(path, luabridge.eval("nn.Linear(2, 1)"))
    with pytest.raises(LuaError, match=r"not a \.t7 file: it looks like a binary \.t7 file \(read it in the binary"):
        Model.from_t7(path, "ascii")


@pytest.mark.parametrize("fmt", ["binary", "ascii"])
def test_a_good_file_still_loads_and_predicts(tmp_path, fmt) -> None:
    luabridge.require("nn")
    path = tmp_path / "m.t7"
    luabridge.save(path, luabridge.eval("(function() local m = nn.Linear(2, 1); m.weight:fill(0.5); "
                                        "m.bias:fill(-1); return m end)()"), fmt)
    model = Model.from_t7(path, fmt)
    x = np.array([[1.0, 2.0], [4.0, -6.0]])
    np.testing.assert_allclose(model.predict(x), x @ np.array([[0.5], [0.5]]) - 1, rtol=0, atol=1e-12)


def test_a_missing_file_is_said_at_once(tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        Model.from_t7(tmp_path / "absent.t7")
