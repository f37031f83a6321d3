"""The torch distribution's helper packages: paths, sys, xlua (lua/paths, lua/sys, lua/xlua) and the
CUDA packages cutorch / cunn / cudnn without a GPU (LUABRIDGE_CUDA_ON_CPU=1). threads: see
test_threads_parallel.py."""
from __future__ import annotations

import gc
import os
import sys as pysys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import luabridge
from luabridge.providers.torch_cuda import arrays as cuda
from helpers import lua_fn

L = lua_fn("""function(code, ...)
  require 'xlua'
  return loadstring(code)(...)
end""")


# ---- paths ----

def test_concat_makes_absolute_normalised_names(lua):
    cwd = os.getcwd()
    assert L("return paths.concat()") == cwd
    assert L("return paths.concat('a', '../b', './c/')") == os.path.normpath(os.path.join(cwd, "b", "c"))
    assert L("return paths.concat('x', '/abs//y', 'z/..', 'w')") == "/abs/y/w"
    assert L("return paths.concat('/', '..')") == "/"
    assert L("return paths.cwd()") == cwd


@pytest.mark.parametrize("name, base, base_no_suffix, dirname", [
    ("/a/b.lua", "b.lua", "b", "/a"),
    ("a/b/", "b", "b", "a"),
    ("file.lua", "file.lua", "file", "."),
    ("/top", "top", "top", "/"),
    ("/", "/", "/", "/"),
    ("a//b.lua.lua", "b.lua.lua", "b.lua", "a/"),
    (".lua", ".lua", ".lua", "."),
])
def test_basename_dirname(lua, name, base, base_no_suffix, dirname):
    assert L("local s = ...; return paths.basename(s), paths.basename(s, 'lua'), paths.basename(s, '.lua'), "
             "paths.dirname(s)", name) == (base, base_no_suffix, base_no_suffix, dirname)


def test_extname(lua):
    assert L("return paths.extname('a/b.tar.gz')") == "gz"
    assert L("return paths.extname('noext') == nil") is True


def test_file_and_directory_functions(lua, tmp_path: Path):
    (tmp_path / "f.txt").write_text("x")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "g.lua").write_text("")
    root = str(tmp_path)
    assert L("local r = ...; return paths.filep(r .. '/f.txt'), paths.dirp(r .. '/f.txt'), paths.filep(r), "
             "paths.dirp(r), paths.filep(r .. '/none'), paths.dirp(r .. '/none')", root) == \
        (True, False, False, True, False, False)
    listing = L("local t = {}; for f in paths.files(...) do t[#t + 1] = f end; table.sort(t); return table.concat(t, ' ')", root)
    assert listing.split() == sorted([".", "..", "d", "f.txt"])
    assert L("local t = {}; for f in paths.files(..., '%.txt$') do t[#t + 1] = f end; return table.concat(t, ' ')", root) == "f.txt"
    assert L("local t = {}; for f in paths.iterdirs(...) do t[#t + 1] = f end; return table.concat(t, ' ')", root) == "d"
    assert L("local t = {}; for f in paths.iterfiles(...) do t[#t + 1] = f end; return table.concat(t, ' ')", root) == "f.txt"
    assert L("return paths.dir(...)", root + "/missing") is None


def test_mkdir_and_rmall(lua, tmp_path: Path):
    deep = tmp_path / "a" / "b" / "c"
    assert L("return paths.mkdir(...)", str(deep)) is True
    assert deep.is_dir()
    (deep / "file").write_text("x")
    ok, msg, _ = L("return paths.mkdir(...)", str(deep))
    assert ok is None and "exists" in msg
    assert L("return paths.rmall(...)", str(tmp_path / "a")) == (None, "missing second argument ('yes')")
    assert L("return paths.rmall(..., 'yes')", str(tmp_path / "a")) is True
    assert not (tmp_path / "a").exists()
    assert L("return paths.rmall(..., 'yes')", str(tmp_path / "none"))[1] == "not a file or directory"


def test_dofile_and_thisfile_relative_to_the_calling_file(lua, tmp_path: Path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "main.lua").write_text("return paths.dofile('sub/helper.lua') + 1, paths.thisfile(), paths.thisfile('x.t7')")
    (tmp_path / "sub" / "helper.lua").write_text("return 41")
    value, here, rel = L("return dofile(...)", str(tmp_path / "main.lua"))
    assert value == 42 and here == str(tmp_path / "main.lua") and rel == str(tmp_path / "x.t7")


def test_tmpname_files_go_with_the_runtime(lua):
    names: list[str] = []

    def run() -> None:
        luabridge.require("paths")
        names.extend([luabridge.eval("paths.tmpname()"), luabridge.eval("paths.tmpname()")])
        assert all(os.path.isfile(n) for n in names)
    t = threading.Thread(target=run)
    t.start()
    t.join()
    gc.collect()                                   # the thread's runtime closes
    assert len(set(names)) == 2 and all(os.path.isabs(n) for n in names)
    assert not any(os.path.exists(n) for n in names)


def test_misc(lua):
    assert L("return paths.home") == os.environ.get("HOME", ".")
    assert L("return paths.findprogram('sh')") in ("/bin/sh", "/usr/bin/sh")
    assert L("return paths.is_win()") is False


def test_paths_errors(lua):
    with pytest.raises(luabridge.LuaError, match="paths.concat: argument #2 must be a string, got number"):
        L("return paths.concat('a', 3)")
    with pytest.raises(luabridge.LuaError, match="paths.files: the filter must be a pattern string or a function"):
        L("return paths.files('.', 3)")


# ---- sys ----

def test_sys(lua):
    assert abs(L("return sys.clock()") - time.time()) < 5
    assert L("return sys.execute([[sh -c 'echo hi; echo err 1>&2']])") == "hi\nerr"
    assert L("return sys.fexecute('echo  spaced  ')") == "spaced"
    assert L("return sys.uname()") == ("linux" if pysys.platform.startswith("linux") else "macos")
    assert L("return sys.COLORS.red, sys.COLORS.Red, sys.COLORS._red, sys.COLORS.none") == \
        ("\x1b[0;31m", "\x1b[1;31m", "\x1b[41m", "\x1b[0m")
    assert L("return sys.dirname('/a/b'), sys.isNaN(0/0), sys.isNaN(1)") == ("/a", True, False)
    start = time.perf_counter()
    dt = L("sys.tic(); sys.sleep(0.02); return sys.toc()")
    assert 0.015 < dt <= time.perf_counter() - start   # within the wall time around it, whatever the load


# ---- xlua ----

@pytest.mark.parametrize("s, sep, parts", [
    ("a,b,,c", ",", ["a", "b", "", "c"]),
    (",a,", ",", ["a"]),
    ("a  b c", " +", ["a", "b", "c"]),
    ("abc", ",", ["abc"]),
    ("", ",", []),
])
def test_string_split(lua, s, sep, parts):
    got = L("local t = (...):split(select(2, ...)); return #t, table.concat(t, '|')", s, sep)
    assert got == (len(parts), "|".join(parts))


def test_progress_bar(lua, capfd):
    L("for i = 1, 20 do xlua.progress(i, 20) end")
    out = capfd.readouterr().out
    frames = out.split("\r")
    last = [f for f in frames if f.strip()][-1]
    assert "20/20" in last and "Tot:" in last and out.endswith("\n")
    bar = last[last.index("[") + 1:last.index("]")]
    assert set(bar) == {"="} | {">"} and bar.endswith(">")
    assert sum("ETA:" in f for f in frames) == 19


def test_xlua_require_and_helpers(lua, capfd):
    assert L("return xlua.require('no_such_package_xyz')") is False
    assert "could not be loaded" in capfd.readouterr().out
    assert L("return xlua.require('paths') == paths")
    assert L("return xlua.formatTime(3725.5), xlua.formatTime(0.25), xlua.formatTime(0)") == ("1h2m", "250ms", "0ms")
    assert L("local a, b = table.splice({1, 2, 3, 4}, 2, 2); return #a, a[2], #b, b[1]") == (2, 4, 2, 2)
    with pytest.raises(luabridge.LuaError, match="<Logger> bad"):
        L("xlua.error('bad', 'Logger')")


# ---- cutorch / cunn / cudnn without a GPU ----

def _device_present() -> bool:
    try:
        cuda.array_module()
    except RuntimeError:
        return False
    return True


def _in_fresh_runtime(code: str) -> Any:
    """Runs code in a new thread's runtime (the CUDA switch is read when cutorch loads) and
    returns its string result or the LuaError."""
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(luabridge.execute(code))
        except luabridge.LuaError as e:
            result.append(e)
    t = threading.Thread(target=run)
    t.start()
    t.join()
    return result[0]


@pytest.fixture
def no_device(monkeypatch):
    monkeypatch.delenv(cuda.ENV_VAR, raising=False)
    monkeypatch.delenv("LUABRIDGE_CUDA_ON_CPU", raising=False)
    cuda.use_array_module(None)
    if _device_present():
        pytest.skip("a CUDA device is present: cutorch uses it")
    return monkeypatch


@pytest.mark.parametrize("package", ["cutorch", "cunn", "cudnn"])
def test_cuda_packages_need_a_device_or_the_switch(no_device, package):
    err = _in_fresh_runtime(f"require '{package}'")
    assert isinstance(err, luabridge.LuaError)
    assert "cutorch: no CUDA device" in err.message and "LUABRIDGE_CUDA_ON_CPU=1" in err.message
    # a failed require leaves no sentinel: the next ones fail the same way (not "loop or previous error")
    again = _in_fresh_runtime(f"""
      local ok1, e1 = pcall(require, '{package}')
      local ok2, e2 = pcall(require, '{package}')
      local ok3, e3 = pcall(require, 'cutorch')
      return tostring(ok1 or ok2 or ok3) .. '|' .. e1 .. '|' .. e2 .. '|' .. e3""")
    ok, e1, e2, e3 = again.split("|")
    assert ok == "false" and e1 == e2 == e3 and e1.endswith(err.message.split(": ", 1)[1])
    err = _in_fresh_runtime("require 'nn'; return nn.Linear(2, 2):cuda()")
    assert isinstance(err, luabridge.LuaError) and "no CUDA device" in err.message


_ON_CPU = """
require 'cudnn'
torch.manualSeed(1)
local net = nn.Sequential():add(cudnn.SpatialConvolution(1, 2, 3, 3)):add(cudnn.ReLU(true))
local ref = net:clone():float()
net:cuda()
local x = torch.randn(1, 5, 5)
local y = net:forward(x:cuda())
local f = torch.FloatTensor(2)
local crit = nn.MSECriterion():cuda()
return table.concat({
  torch.type(net.modules[1].weight), torch.type(y), torch.type(torch.CudaTensor(2)),
  torch.type(torch.CudaLongTensor(2)), torch.type(torch.Tensor(2):cuda()), torch.type(torch.Tensor(2):cudaDouble()),
  torch.type(torch.Tensor(2):type('torch.CudaTensor')), tostring(f:cuda() == f),
  tostring((y - ref:forward(x:float())):abs():max() == 0), tostring(cudnn.convert(net, cudnn) == net),
  tostring(cudnn.benchmark), tostring(cudnn.fastest), torch.type(cudnn.SpatialConvolution(1, 1, 1, 1)),
  tostring(cutorch.getDeviceCount()), tostring(cutorch.onCPU), torch.type(crit.gradInput),
  tostring(pcall(cutorch.setDevice, 2)),
}, ' ')
"""


def test_cuda_on_cpu_switch(no_device):
    no_device.setenv("LUABRIDGE_CUDA_ON_CPU", "1")
    out = _in_fresh_runtime(_ON_CPU)
    assert not isinstance(out, Exception), out
    assert out.split() == [
        "torch.FloatTensor", "torch.FloatTensor", "torch.FloatTensor", "torch.LongTensor",
        "torch.FloatTensor", "torch.DoubleTensor", "torch.FloatTensor", "true", "true", "true",
        "false", "false", "cudnn.SpatialConvolution", "1", "true", "torch.FloatTensor", "false",
    ]


def test_cutorch_with_the_numpy_device(monkeypatch):
    # with a device (here numpy standing in for CuPy) the CUDA types are the backend's own,
    # whatever the switch says
    monkeypatch.setenv("LUABRIDGE_CUDA_ON_CPU", "1")
    cuda.use_array_module(np)
    try:
        out = _in_fresh_runtime("require 'cunn'; local m = nn.Linear(2, 3):cuda(); "
                                "return torch.type(m.weight) .. ' ' .. tostring(cutorch.onCPU)")
    finally:
        cuda.use_array_module(None)
    assert out == "torch.CudaTensor false"
