"""Files that are not .t7: luabridge.t7.read, luabridge.load (Lua's torch.load) and
`luabridge info` say what they look like instead of an unknown type code. The files are made by
the tools that make them (numpy, gzip, zipfile, pickle) or from their published magic bytes."""
from __future__ import annotations

import gzip
import io
import pickle
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest

import luabridge
from helpers import lua_fn
from luabridge import LuaError, t7
from luabridge.th import cli


def npy(path: Path) -> None:
    with open(path, "wb") as f:  # (a path not ending in .npy would get one)
        np.save(f, np.arange(6.0))


def npz(path: Path) -> None:
    with open(path, "wb") as f:
        np.savez(f, a=np.arange(3))


def pytorch_zip(path: Path) -> None:
    """The layout of torch.save since PyTorch 1.6: a zip holding archive/data.pkl and data/."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({"w": 1}, protocol=2))
        z.writestr("archive/version", "3\n")


def pytorch_legacy(path: Path) -> None:
    """torch.save before 1.6: a pickled magic number (0x1950a86a20f9469cfc6c), then more pickles."""
    path.write_bytes(pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2) + pickle.dumps(1001, protocol=2))


def gzipped_t7(path: Path) -> None:
    buf = io.BytesIO()
    t7.write(buf, {"w": np.ones(3)})
    path.write_bytes(gzip.compress(buf.getvalue()))


KINDS = {
    "npy": (npy, r"a numpy \.npy file"),
    "npz": (npz, r"a zip archive \(a PyTorch file .* or a numpy \.npz\)"),
    "pytorch_zip": (pytorch_zip, r"a zip archive \(a PyTorch file saved by torch\.save since PyTorch 1\.6"),
    "pytorch_legacy": (pytorch_legacy, r"a PyTorch file in the legacy format"),
    "pickle": (lambda p: p.write_bytes(pickle.dumps([1, 2], protocol=4)), r"a Python pickle \(protocol 4\)"),
    "gzip": (gzipped_t7, r"a gzip file \(decompress it first\)"),
    "hdf5": (lambda p: p.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(504)), r"an HDF5 file"),
    "text": (lambda p: p.write_text("epoch,loss\n1,0.5\n"), r'text \(it begins "epoch,loss"\)'),
    "html": (lambda p: p.write_text("<!DOCTYPE html>\n<html>"), r'text \(it begins "<!DOCTYPE html>"\)'),
    "lfs": (lambda p: p.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:ab\nsize 9\n"),
            r"a Git LFS pointer, not the file itself \(run git lfs pull\)"),
    "empty": (lambda p: p.write_bytes(b""), r"an empty file"),
}


@pytest.fixture(params=list(KINDS))
def case(request, tmp_path):
    make, said = KINDS[request.param]
    path = tmp_path / f"{request.param}.t7"
    make(path)
    return path, said


def test_t7_read(case):
    path, said = case
    with pytest.raises(t7.T7Error, match=rf"^t7\.read: not a \.t7 file: it looks like {said}"):
        t7.read(path)
    with pytest.raises(t7.T7Error, match=rf"not a \.t7 file: it looks like {said}"):
        t7.read(io.BytesIO(path.read_bytes()))


def test_luabridge_load_and_torch_load(case):
    path, said = case
    with pytest.raises(LuaError, match=rf"^torch\.load: not a \.t7 file: it looks like {said}.*\(file {path}\)"):
        luabridge.load(path)
    luabridge.require("torch")
    with pytest.raises(LuaError, match=rf"torch\.deserialize: not a \.t7 file: it looks like {said}"):
        lua_fn("function(p) local f = io.open(p, 'rb') local s = f:read('*a') f:close() "
               "return torch.deserialize(s) end")(str(path))


def test_luabridge_info(case, capsys):
    path, said = case
    assert cli.main(["info", str(path)]) == 1
    assert re.search(rf"not a \.t7 file: it looks like {said}", capsys.readouterr().err)


def test_the_other_encoding_is_named(tmp_path):
    path = tmp_path / "model.t7"
    t7.write(path, {"w": np.arange(3.0)}, format="ascii")
    with pytest.raises(t7.T7Error, match=r"it looks like an ascii \.t7 file \(read it in the ascii format\)"):
        t7.read(path)
    with pytest.raises(LuaError, match=r"it looks like an ascii \.t7 file \(read it in the ascii format\)"):
        luabridge.load(path)
    np.testing.assert_array_equal(t7.read(path, "ascii")["w"], [0, 1, 2])
    t7.write(path, {"w": np.arange(3.0)})
    with pytest.raises(t7.T7Error, match=r"it looks like a binary \.t7 file \(read it in the binary format\)"):
        t7.read(path, "ascii")
    with pytest.raises(LuaError, match=r"it looks like a binary \.t7 file \(read it in the binary format\)"):
        luabridge.load(path, "ascii")


@pytest.mark.parametrize("fmt", ["binary", "ascii"])
def test_damaged_t7_files_keep_their_own_errors(tmp_path, fmt):
    """A real .t7 file cut short or with a bad value later on is not called something else."""
    buf = io.BytesIO()
    t7.write(buf, {"name": "x", "w": np.arange(4.0)}, format=fmt)
    data = buf.getvalue()
    for damaged in (data[:len(data) // 2], data[:12] + b"\xff" * 8 + data[20:]):
        path = tmp_path / "damaged.t7"
        path.write_bytes(damaged)
        with pytest.raises(t7.T7Error) as e:
            t7.read(path, fmt)
        assert "not a .t7 file" not in str(e.value)
        with pytest.raises(LuaError) as e:
            luabridge.load(path, fmt)
        assert "not a .t7 file" not in e.value.message
