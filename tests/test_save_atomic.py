"""Saving replaces a file only once the whole object is written: a torch.save, luabridge.save,
t7.write or `luabridge convert` that fails midway leaves the file that was there byte for byte
(or none) and no temporary file; one that succeeds keeps the old file's permissions. Special
files (/dev/null) are written in place."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

import luabridge
from luabridge import t7


@pytest.fixture(autouse=True, scope="module")
def _nn():
    luabridge.require("nn")


def lua_save(path: Path, expr: str) -> None:
    luabridge.execute(f"torch.save({str(path)!r}, {expr})")


def old_file(folder: Path) -> tuple[Path, bytes]:
    """A file written before, private (0600), and its bytes."""
    path = folder / "model.t7"
    lua_save(path, "nn.Linear(3, 2)")
    path.chmod(0o600)
    return path, path.read_bytes()


# saves failing after part of the file is written: a C function (no bytecode to write) or a
# coroutine deep inside the object, after a module's tensors
LUA_FAILURES = ["{nn.Linear(30, 20), {deep = {print}}}",
                "{nn.Linear(30, 20), {deep = {coroutine.create(function() end)}}}"]


@pytest.mark.parametrize("expr", LUA_FAILURES)
def test_a_failed_torch_save_leaves_the_old_file(tmp_path, expr):
    path, before = old_file(tmp_path)
    with pytest.raises(luabridge.LuaError, match="torch.save: Unwritable object"):
        lua_save(path, expr)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["model.t7"]
    with pytest.raises(luabridge.LuaError, match="Unwritable object"):
        lua_save(tmp_path / "new.t7", expr)
    assert os.listdir(tmp_path) == ["model.t7"]   # none made


def test_a_failed_luabridge_save_leaves_the_old_file(tmp_path):
    path, before = old_file(tmp_path)
    bad = luabridge.eval("{coroutine.create(function() end)}")
    with pytest.raises(luabridge.LuaError, match="Unwritable object"):
        luabridge.save(path, {"weights": np.ones((50, 50)), "deep": [1, {"x": bad}]})
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["model.t7"]


def test_a_failed_t7_write_leaves_the_old_file(tmp_path):
    path, before = old_file(tmp_path)
    with pytest.raises(t7.T7Error):
        t7.write(path, {"weights": np.ones((50, 50)), "deep": [1, {"x": object()}]})
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["model.t7"]


def test_a_successful_save_replaces_the_file_and_keeps_its_permissions(tmp_path):
    path, before = old_file(tmp_path)
    lua_save(path, "{1, 2, 3}")
    assert luabridge.load(path) == [1, 2, 3]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and os.listdir(tmp_path) == ["model.t7"]
    t7.write(path, {"a": 1})
    assert t7.read(path) == {"a": 1}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and os.listdir(tmp_path) == ["model.t7"]


def test_a_missing_folder_names_the_file_not_a_temporary_one(tmp_path):
    target = tmp_path / "absent" / "m.t7"
    with pytest.raises(luabridge.LuaError, match=f"cannot open <{target}> in mode w"):
        lua_save(target, "1")
    with pytest.raises(FileNotFoundError) as caught:
        t7.write(target, 1)
    assert caught.value.filename == str(target)


def test_special_files_are_written_in_place():
    lua_save(Path(os.devnull), "nn.Linear(3, 2)")
    t7.write(os.devnull, [1, 2])
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_convert_command_leaves_the_old_output_when_saving_fails(tmp_path, capsys, monkeypatch):
    torch = pytest.importorskip("torch", reason="PyTorch is missing: luabridge convert needs it")
    from luabridge.th import cli

    model = tmp_path / "model.t7"
    lua_save(model, "nn.Sequential():add(nn.Linear(3, 2))")
    out = tmp_path / "model.pt"
    out.write_bytes(b"the old output")

    def disk_full(module, f):   # writes part of the file, then the disk is full
        f.write(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_full)
    assert cli.main(["convert", str(model), str(out)]) == 1
    assert capsys.readouterr().err == f"luabridge convert: {out}: No space left on device\n"
    assert out.read_bytes() == b"the old output" and sorted(os.listdir(tmp_path)) == ["model.pt", "model.t7"]
