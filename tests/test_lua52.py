"""LUA52COMPAT, as Torch7's LuaJIT was built: `#` calls __len on tables (so `#` of an
nn.Sequential is its module count), pairs/ipairs honour __pairs/__ipairs, a call's `(` may open a
new line; setup.py builds luabridge._luajit21 with it (luabridge/lua52.py), and the stock lupa says
what it lacks."""
from __future__ import annotations

import importlib.metadata
import os
import pty
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import luabridge
from helpers import assert_lua_error, lua_fn
from luabridge import lua52
from luabridge.core.runtime import LUA52COMPAT_FIX, lua52compat_message, luajit21

ROOT = Path(__file__).resolve().parents[1]
requires_flag = pytest.mark.skipif(
    not luabridge.LUA52COMPAT, reason=f"lupa's stock LuaJIT lacks LUA52COMPAT ({LUA52COMPAT_FIX} adds it)")


def test_probe_agrees_with_the_module_that_runs():
    """luabridge._luajit21 (built by setup.py) has the flag; lupa's stock module has not."""
    from lupa import luajit21 as stock
    stock_len = stock.LuaRuntime().eval("#setmetatable({}, {__len = function() return 7 end})")
    if luajit21.__name__ == "luabridge._luajit21":
        assert luabridge.LUA52COMPAT
    elif "+lua52compat" not in importlib.metadata.version("lupa"):
        assert stock_len == 0 and not luabridge.LUA52COMPAT


def test_make_builds_luabridges_own_luajit():
    if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        pytest.skip("checks the venv that `make` sets up (.venv beside the Makefile)")
    assert luajit21.__name__ == "luabridge._luajit21", f"make left luabridge on the stock lupa: {LUA52COMPAT_FIX}"
    assert luabridge.LUA52COMPAT


# a VGG-like stack as neural-style loads it: (layer constructor, arguments)
VGG_LIKE = [("SpatialConvolution", "3, 8, 3, 3, 1, 1, 1, 1"), ("ReLU", ""),
            ("SpatialConvolution", "8, 8, 3, 3, 1, 1, 1, 1"), ("ReLU", ""), ("SpatialMaxPooling", "2, 2, 2, 2"),
            ("SpatialConvolution", "8, 16, 3, 3, 1, 1, 1, 1"), ("ReLU", ""), ("SpatialMaxPooling", "2, 2, 2, 2")]


@requires_flag
def test_neural_style_loop_over_hash_cnn_copies_every_layer():
    """neural-style builds its network with `for i = 1, #cnn do ... net:add(layer) end`: every
    layer arrives, and the copy computes what the original does."""
    adds = "".join(f"cnn:add(nn.{name}({args}))\n" for name, args in VGG_LIKE)
    got = lua_fn(f"""function()
      require 'nn'
      local cnn = nn.Sequential()
      {adds}
      local net, names = nn.Sequential(), {{}}
      for i = 1, #cnn do
        local layer = cnn:get(i)
        net:add(layer)
        names[i] = torch.typename(layer)
      end
      local x = torch.randn(1, 3, 16, 16)
      local same = net:forward(x):clone():add(-1, cnn:forward(x)):abs():max()
      return #cnn, #net.modules, table.concat(names, ' '), same
    end""")()
    assert got == (len(VGG_LIKE), len(VGG_LIKE), " ".join(f"nn.{name}" for name, _ in VGG_LIKE), 0)


@requires_flag
def test_hash_of_a_sequential_counts_its_own_children():
    got = lua_fn("""function()
      require 'nn'
      local inner = nn.Sequential():add(nn.Linear(2, 2)):add(nn.Tanh())
      local outer = nn.Sequential():add(nn.Linear(2, 2)):add(inner):add(nn.Linear(2, 1))
      return #outer, #inner, #nn.Sequential()
    end""")()
    assert got == (3, 2, 0)


@requires_flag
@pytest.mark.parametrize("make", ["nn.Concat(1)", "nn.ConcatTable()", "nn.Linear(2, 2)"])
def test_hash_of_a_module_without_len_is_luaTs_error(make):
    """torch/nn defines __len on Sequential alone; luaT's default __len raises for the rest."""
    name = make.split("(")[0]
    assert_lua_error(f"require 'nn'; local m = {make}; return #m", f"{name} has no length operator")


@requires_flag
def test_torch_class_len_hook_and_plain_table_len():
    got = lua_fn("""function()
      local Bag = torch.class('lua52test.Bag')
      function Bag:__init(n) self.n = n end
      function Bag:__len__() return self.n end
      local t = setmetatable({1, 2}, {__len = function() return 42 end})
      return #lua52test.Bag(5), #t, rawlen(t)
    end""")()
    assert got == (5, 42, 2)


@requires_flag
def test_pairs_and_ipairs_honour_their_metamethods():
    """Without tds, which installs its own pairs on the stock lupa."""
    got = lua_fn("""function()
      local backing = {10, 20, 30}
      local view = setmetatable({}, {
        __pairs = function() return next, {a = 1}, nil end,
        __ipairs = function() return ipairs(backing) end})
      local keys, sum = {}, 0
      for k in pairs(view) do keys[#keys + 1] = k end
      for _, v in ipairs(view) do sum = sum + v end
      return table.concat(keys, ','), sum
    end""")()
    assert got == ("a", 60)


@requires_flag
def test_a_call_whose_paren_opens_a_new_line_parses():
    assert luabridge.execute("local function f(x) return x + 1 end\nlocal x = f\n(1)\nreturn x") == 2


@requires_flag
def test_lua52_library_functions_are_luajits_own():
    """rawlen is LuaJIT's C function (boot.lua's stand-in only on the stock lupa), and
    coroutine.running says whether it is the main coroutine, as Lua 5.2."""
    got = lua_fn("""function()
      local co = coroutine.create(function() return select('#', coroutine.running()), select(2, coroutine.running()) end)
      local _, count, main = coroutine.resume(co)
      return debug.getinfo(rawlen).what, count, main
    end""")()
    assert got == ("C", 2, False)


def test_stock_lupa_message_names_what_is_missing_and_the_fix():
    message = lua52compat_message(False)
    assert message is not None
    for missing in ("`#` of an nn container is 0", "__pairs/__ipairs", "'(' opens a new line",
                    f"Fix: {LUA52COMPAT_FIX}"):
        assert missing in message
    assert lua52compat_message(True) is None


def _th_stderr(code: str, terminal: bool) -> tuple[str, str]:
    """stdout and stderr of `luabridge th -e code`, its stderr a terminal (a pty) or a pipe."""
    main, side = pty.openpty() if terminal else (None, subprocess.PIPE)
    run = subprocess.run([sys.executable, "-m", "luabridge", "th", "-e", code],
                         stdout=subprocess.PIPE, stderr=side, text=True, timeout=120, cwd=ROOT)
    if main is None:
        return run.stdout, run.stderr
    os.set_blocking(main, False)   # our end of the terminal stays open: nothing written, nothing read
    try:
        return run.stdout, os.read(main, 65536).decode()
    except BlockingIOError:
        return run.stdout, ""
    finally:
        os.close(main)
        os.close(side)


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "pipe"])
def test_th_says_it_once_on_a_terminal_only_on_the_stock_lupa(terminal):
    """A script's stderr is often parsed: th says it to a person at a terminal only."""
    stdout, stderr = _th_stderr("print(#setmetatable({}, {__len = function() return 4 end}))", terminal)
    assert stdout.strip() == ("4" if luabridge.LUA52COMPAT else "0")
    assert stderr.count("LUA52COMPAT") == (1 if terminal and not luabridge.LUA52COMPAT else 0)


def _fake_sdist(tmp_path: Path, makefile: str = "libluajit.a:\n\ttouch libluajit.a\n") -> Path:
    """A lupa sdist's layout in small: the Cython source files and a LuaJIT whose make is `makefile`."""
    tree = tmp_path / "tree" / "lupa-9.1"
    for lua in ("lua54", "luajit20", "luajit21"):
        (tree / "third-party" / lua / "src").mkdir(parents=True)
        (tree / "third-party" / lua / "src" / "Makefile").write_text(makefile)
    (tree / "lupa").mkdir()
    for name in ("_lupa.pyx", "luaapi.pxd", "lock.pxi"):
        (tree / "lupa" / name).write_text(f"# {name}\n")
    (tree / "setup.py").write_text("raise SystemExit('never run')\n")
    sdist = tmp_path / "lupa-9.1.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        tar.add(tree, arcname="lupa-9.1")
    return sdist


def test_unpack_keeps_the_cython_source_and_luajit21_only(tmp_path):
    source = lua52.unpack(_fake_sdist(tmp_path), tmp_path / "work")
    assert sorted(p.name for p in (source / "third-party").iterdir()) == ["luajit21"]
    assert sorted(p.name for p in (source / "lupa").iterdir()) == ["_lupa.pyx", "lock.pxi", "luaapi.pxd"]
    assert not (source / "setup.py").exists()


def test_staged_source_is_the_module_luabridge_luajit21(tmp_path):
    source = lua52.unpack(_fake_sdist(tmp_path), tmp_path / "work")
    pyx = lua52.stage_cython(source, tmp_path / "stage")
    assert pyx == tmp_path / "stage" / "luabridge" / "_luajit21.pyx"
    assert pyx.read_text() == "# _lupa.pyx\n"
    # `from . cimport luaapi` and `include "lock.pxi"` resolve beside it, in a package Cython knows
    assert sorted(p.name for p in pyx.parent.iterdir()) == ["__init__.pxd", "_luajit21.pyx", "lock.pxi", "luaapi.pxd"]
    assert lua52.EXTENSION == "luabridge._luajit21"


def test_prepare_builds_luajit_once_with_the_flag(tmp_path, monkeypatch):
    # the fake make records its command line: the flag must reach LuaJIT's XCFLAGS, and -fPIC its CFLAGS
    makefile = "libluajit.a:\n\techo \"$(XCFLAGS) $(CFLAGS)\" > flags && touch libluajit.a\n"
    monkeypatch.setenv(lua52.SDIST_VARIABLE, str(_fake_sdist(tmp_path, makefile)))
    parts = lua52.prepare(tmp_path / "cache", tmp_path / "stage")
    (library,) = parts["extra_objects"]
    assert Path(library).is_file()
    flags = (Path(library).parent / "flags").read_text().split()
    assert "-DLUAJIT_ENABLE_LUA52COMPAT" in flags and "-fPIC" in flags
    assert parts["include_dirs"] == [str(tmp_path / "stage"), str(Path(library).parent)]
    monkeypatch.setenv(lua52.SDIST_VARIABLE, str(tmp_path / "gone.tar.gz"))   # cached: no sdist needed
    assert lua52.prepare(tmp_path / "cache", tmp_path / "stage2")["extra_objects"] == [library]


def test_a_failed_luajit_build_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv(lua52.SDIST_VARIABLE, str(_fake_sdist(tmp_path, "libluajit.a:\n\techo no compiler; exit 3\n")))
    with pytest.raises(lua52.BuildFailed, match="(?s)building LuaJIT failed:\n.*no compiler"):
        lua52.prepare(tmp_path / "cache", tmp_path / "stage")
    assert not list((tmp_path / "cache").glob("lupa-*-lua52compat"))   # nothing half-built is kept


def test_a_missing_named_sdist_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(lua52.SDIST_VARIABLE, str(tmp_path / "nowhere.tar.gz"))
    with pytest.raises(lua52.BuildFailed, match="LUABRIDGE_LUPA_SDIST=.*nowhere.tar.gz is not a file"):
        lua52.lupa_sdist(tmp_path / "cache")


@pytest.mark.slow
def test_setup_falls_back_to_the_stock_lupa_when_the_build_cannot_run(tmp_path):
    """No LuaJIT build (here: make fails) is a warning, not a failed install: the package builds
    without luabridge._luajit21 and runs on lupa's own module."""
    env = {**os.environ, lua52.SDIST_VARIABLE: str(_fake_sdist(tmp_path, "libluajit.a:\n\texit 2\n")),
           "LUABRIDGE_LUA52_CACHE": str(tmp_path / "cache")}
    work = tmp_path / "checkout"
    (work / "luabridge").mkdir(parents=True)
    for name in ("setup.py", "pyproject.toml", "README.md", "LICENSE"):
        (work / name).write_bytes((ROOT / name).read_bytes())
    (work / "luabridge" / "lua52.py").write_bytes((ROOT / "luabridge" / "lua52.py").read_bytes())
    run = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=work, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "luabridge builds without luabridge._luajit21 (LuaJIT with LUA52COMPAT): building LuaJIT failed" in run.stderr
    assert not list((work / "luabridge").glob("_luajit21*"))
    # asked for explicitly (python -m luabridge.lua52 build), the same failure fails the build
    required = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=work,
                              env={**env, lua52.REQUIRED_VARIABLE: "1"}, capture_output=True, text=True, timeout=120)
    assert required.returncode != 0 and "building LuaJIT failed" in required.stderr


def test_status_exit_code_says_whether_the_flag_is_there(capsys):
    assert lua52.main(["status"]) == (0 if luabridge.LUA52COMPAT else 1)
    assert capsys.readouterr().out.endswith(f"LUA52COMPAT {'on' if luabridge.LUA52COMPAT else 'off'}\n")
