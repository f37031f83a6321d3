"""The command line's frictions (issue 26): `luabridge th -` reads the script from standard input
as `lua -` does, and `luabridge info` describes every value a .t7 file can hold (a function by its
bytecode's kind and size; nil, booleans and table keys in Lua's words)."""
from __future__ import annotations

import re
import struct
import subprocess
import sys
from pathlib import Path

import luabridge
from luabridge.th.cli import main

DEADLINE = 120


def run(*args: str, stdin: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "luabridge", *args], input=stdin, capture_output=True, text=True,
                          cwd=cwd, timeout=DEADLINE)


def test_th_dash_reads_the_script_from_stdin() -> None:
    r = run("th", "-", "a", "b c", stdin="print(arg[0], #arg, arg[1], arg[2], select('#', ...), ...)\n"
                                         "print(torch.Tensor{1, 2, 3}:sum())\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["-\t2\ta\tb c\t2\ta\tb c", "6"]


def test_th_dash_after_options_and_its_errors() -> None:
    r = run("th", "-l", "nn", "-e", "x = 4", "-", stdin="print(x * 2, nn.Linear ~= nil)")
    assert (r.returncode, r.stdout) == (0, "8\ttrue\n"), r.stderr
    r = run("th", "-", stdin="local t = {}\nerror('boom')\n")
    assert r.returncode == 1 and "stdin:2: boom" in r.stderr
    r = run("th", "-", stdin="x = = 1")
    assert r.returncode == 1 and "stdin:1: unexpected symbol near '='" in r.stderr


def test_th_dash_with_empty_stdin_runs_nothing_and_exits() -> None:
    r = run("th", "-", stdin="")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def _info(capsys, tmp_path: Path, lua_value: str) -> list[str]:
    luabridge.require("nn")
    path = tmp_path / "v.t7"
    luabridge.execute(f"torch.save({str(path)!r}, {lua_value})")
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{path}:"
    return out[1:]


def _bytecode_size(path: Path) -> int:
    """The size torch7's binary format writes before a top-level function's bytecode: the type
    code (8, torch7's TYPE_RECUR_FUNCTION), the reference index, then the size."""
    data = path.read_bytes()
    kind, index, size = struct.unpack_from("<3i", data)
    assert (kind, index, data[12:15]) == (8, 1, b"\x1bLJ") and len(data) > 12 + size
    return size


def test_info_of_a_function_says_so_and_its_size(capsys, tmp_path) -> None:
    f = "function(x) return x * 2 + 1 end"
    lines = _info(capsys, tmp_path, f)
    size = _bytecode_size(tmp_path / "v.t7")
    assert lines == [f"  <Lua function (LuaJIT 2.1 bytecode, {size:,} bytes), not loaded>"]
    lines = _info(capsys, tmp_path, f"{{{f}, 3}}")
    assert lines == ["  list of 2", f"    1: <Lua function (LuaJIT 2.1 bytecode, {size:,} bytes), not loaded>",
                     "    2: 3"]


def test_info_describes_plain_values(capsys, tmp_path) -> None:
    assert _info(capsys, tmp_path, "nil") == ["  nil"]
    assert _info(capsys, tmp_path, "true") == ["  true"]
    assert _info(capsys, tmp_path, "false") == ["  false"]
    assert _info(capsys, tmp_path, "2.5") == ["  2.5"]
    assert _info(capsys, tmp_path, "'hi'") == ["  'hi'"]
    assert _info(capsys, tmp_path, "torch.FloatTensor(2, 3)") == ["  array float32 2x3"]
    lines = _info(capsys, tmp_path, "{[{}] = 1}")
    assert lines == ["  table of 1 entries", "    <key: table of 0 entries>: 1"]
    lines = _info(capsys, tmp_path, "{[torch.zeros(4)] = 'k'}")
    assert lines == ["  table of 1 entries", "    <key: array float64 4>: 'k'"]
    assert not any(re.search(r"0x[0-9a-f]+|None", line) for line in lines)


def test_convert_and_export_name_a_folder_they_cannot_write_into(tmp_path, capsys) -> None:
    luabridge.require("nn")
    model = tmp_path / "m.t7"
    luabridge.save(model, luabridge.eval("nn.Linear(2, 2)"))
    assert main(["convert", str(model), str(tmp_path / "no" / "out.pt")]) == 1
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"luabridge convert: {tmp_path / 'no' / 'out.pt'}: no such folder {tmp_path / 'no'}\n")
    assert main(["export", str(model), str(model / "sub")]) == 1   # a file where the folder must be
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"luabridge export: {model / 'sub'}: cannot make the folder (Not a directory)\n")
    assert main(["export", str(model), str(tmp_path / "new" / "deeper")]) == 0   # a missing one is made
    assert (tmp_path / "new" / "deeper" / "model.py").is_file()
