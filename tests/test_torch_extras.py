"""The parts of torch7's `torch` package around tensors: torch.CmdLine (help, parse, errors,
string, log), torch.include / packageLuaPath / include, `paths` as a global, LongStorage keys
and tensor values in indexing, cdata(), storages mapped from files and shared memory, and what
real programs relied on (tools/real_programs.py): classes in the Lua registry, the static
`Storage.elementSize()`, `deserializeFromStorage` of a CharTensor, `torch.totable` and a type
name as the constructors' last argument.

Expected values come from torch7's rules (CmdLine.lua, Tensor.c, THAllocator.c) worked out by
hand, and from numpy reading the mapped files itself."""
from __future__ import annotations

import datetime
import gc
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import luabridge
from luabridge.core.runtime import runtime
from helpers import lua_fn


def th(script: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "luabridge", "th", str(script), *args],
                          capture_output=True, text=True, timeout=60, cwd=cwd)


TRAIN = """
local cmd = torch.CmdLine()
cmd:text()
cmd:text('Training')
cmd:option('-seed', 123, 'initial random seed')
cmd:option('-lr', 0.1, 'rate')
cmd:option('-cuda', false, 'use gpu')
cmd:argument('-data', 'data dir')
cmd:text()
"""

# torch7's help: names padded to the longest (an option's own length, an argument's plus the
# two brackets: here <data> is 6), then the help text, then an option's default in brackets
HELP_BODY = ("\n"
             "Training\n"
             "  -seed  initial random seed [123]\n"
             "  -lr    rate [0.1]\n"
             "  -cuda  use gpu [false]\n"
             "  <data> data dir\n"
             "\n")


def parse(lua, args: list[str]) -> dict:
    fn = lua_fn("function(words) " + TRAIN + " return cmd:parse(words) end")
    result = fn(lua_fn("function(...) return {...} end")(*args))
    return dict(result.items())


def test_cmdline_parse_defaults_options_flags_and_arguments(lua):
    assert parse(lua, ["mnist"]) == {"seed": 123, "lr": 0.1, "cuda": False, "data": "mnist"}
    # numbers are converted, a boolean option is a flag that flips its default
    got = parse(lua, ["-lr", "0.5", "cifar", "-cuda", "-seed", "7"])
    assert got == {"seed": 7, "lr": 0.5, "cuda": True, "data": "cifar"}


def test_cmdline_flag_with_true_default_turns_off(lua):
    fn = lua_fn("""function(...)
      local cmd = torch.CmdLine()
      cmd:option('-shuffle', true, 'shuffle the data')
      cmd:option('--name', 'run', 'a name')
      return cmd:parse({...})
    end""")
    assert dict(fn().items()) == {"shuffle": True, "name": "run"}
    assert dict(fn("-shuffle", "--name", "x").items()) == {"shuffle": False, "name": "x"}


@pytest.mark.parametrize("code, message", [
    ("cmd:option('-n')", "option -n has no default value"),
    ("cmd:option('-n', 1, 'count', 'string')", "option -n has wrong default type value"),
    ("cmd:addTime('x', 3)", "Argument has to be string"),
])
def test_cmdline_declaration_errors(lua, code, message):
    fn = lua_fn(f"function() local cmd = torch.CmdLine(); {code} end")
    with pytest.raises(luabridge.LuaError, match=message):
        fn()


def test_cmdline_help_flag_prints_usage_and_exits_0(tmp_path):
    script = tmp_path / "train.lua"
    script.write_text(TRAIN + "cmd:parse(arg)\nprint('not reached')\n")
    for flag in ("-h", "--help", "-help"):
        r = th(script, flag)
        assert r.returncode == 0
        assert r.stdout == f"Usage: {script} [options] <data>\n" + HELP_BODY


@pytest.mark.parametrize("args, message", [
    (["-seed"], "missing argument for option -seed"),
    (["-seed", "abc", "d"], "invalid type for option -seed (should be number)"),
    ([], "not enough arguments"),
    (["a", "b"], "invalid argument: b"),
    # an undeclared option is a positional word, as in torch7
    (["d", "-foo"], "invalid argument: -foo"),
])
def test_cmdline_bad_command_line_prints_error_and_help_and_exits_1(tmp_path, args, message):
    script = tmp_path / "train.lua"
    script.write_text(TRAIN + "cmd:parse(arg)\n")
    r = th(script, *args)
    assert r.returncode == 1
    assert r.stderr == message
    # a blank line before and after the message, then the help (without the script name)
    assert r.stdout == "\n\nUsage: [options] <data>\n" + HELP_BODY


def test_cmdline_string_names_the_run(lua):
    fn = lua_fn("function(params, ignore) " + TRAIN
                  + " return cmd:string('exp', params, ignore) end")

    def name(params: dict, ignore: dict) -> str:
        return fn(runtime().table_from(params), runtime().table_from(ignore))

    params = {"seed": 123, "lr": 0.5, "cuda": True, "data": "x"}
    # arguments first, then the sorted options that differ from their defaults
    assert name(params, {}) == "exp,data=x,cuda=t,lr=0.5"
    assert name(params, {"lr": True}) == "exp,data=x,cuda=t"
    assert name(params, {"seed": False}) == "exp,data=x,cuda=t,lr=0.5,seed=123"
    assert name({"seed": 123}, {}) == "exp"


def test_cmdline_log_tees_print_with_time_prefix(tmp_path):
    log = tmp_path / "run.log"
    script = tmp_path / "log.lua"
    script.write_text(f"""
local cmd = torch.CmdLine()
cmd:option('-lr', 0.1, 'rate')
cmd:addTime('proj', '%Y')
local params = cmd:parse(arg)
cmd:log('{log}', params)
print('hello', 3)
cmd:silent()
print('quiet')
""")
    r = th(script, "-lr", "2")
    assert r.returncode == 0, r.stderr
    year = datetime.datetime.now().strftime("%Y")
    screen = r.stdout.splitlines()
    assert screen[0].startswith("[program started on ")
    assert screen[1:] == ["[command line arguments]", "lr\t2", "[----------------------]", "hello\t3"]
    lines = log.read_text().split("\n")
    # each file line: the os.date prefix, then the values, joined by spaces (and one before \n)
    prefix = f"{year}[proj]:  "
    assert lines[0].startswith(prefix + "[program started on ") and lines[0].endswith("] ")
    assert lines[1:] == [prefix + "[command line arguments] ", prefix + "lr 2 ",
                         prefix + "[----------------------] ", prefix + "hello 3 ",
                         prefix + "quiet ", ""]


def test_paths_is_global_and_include_forms(tmp_path, lua):
    assert lua.eval("paths == require('paths') and type(paths.concat) == 'function'")
    root = Path(lua.eval("torch.packageLuaPath('torch')"))
    assert (root / "init.lua").exists() and root.name == "torch"
    assert lua.eval("torch.packageLuaPath()") == str(root.parent)
    assert lua.eval("torch.packageLuaPath('no_such_package_here')") is None
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "init.lua").write_text("include('Part.lua')\nreturn {}\n")
    (pkg / "Part.lua").write_text("INCLUDED_PART = (INCLUDED_PART or 0) + 1\n")
    (pkg / "extra.lua").write_text("INCLUDED_EXTRA = 42\n")
    luabridge.add_lua_path(tmp_path)
    assert lua.eval("torch.packageLuaPath('mypkg')") == str(pkg)
    lua.execute("require 'mypkg'")          # include() resolves beside the including file
    assert lua.eval("INCLUDED_PART") == 1
    lua.execute("torch.include('mypkg', 'extra.lua')")
    assert lua.eval("INCLUDED_EXTRA") == 42


def test_longstorage_key_reads_and_writes_one_element(lua):
    a = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    t = luabridge.from_numpy(a)
    f = lua_fn("""function(t)
      local last = t[#t]
      local mid = t[torch.LongStorage{2, 1, 3}]
      t[torch.LongStorage{1, 2, 4}] = -5
      t[torch.LongStorage{-1, -1, -1}] = torch.FloatTensor{7}
      return last, mid
    end""")
    last, mid = f(t)
    assert (last, mid) == (23.0, 14.0)   # a[1, 2, 3] and a[1, 0, 2] before the writes
    assert a[0, 1, 3] == -5 and a[1, 2, 3] == 7
    for bad in ("{1, 2}", "{1, 2, 3, 4}"):
        with pytest.raises(luabridge.LuaError, match=r"LongStorage key of \d coordinates for a 3D tensor"):
            lua_fn(f"function(t) return t[torch.LongStorage{bad}] end")(t)
    with pytest.raises(luabridge.LuaError, match="index 3 out of range for dimension 1 of size 2"):
        lua_fn("function(t) t[torch.LongStorage{3, 1, 1}] = 0 end")(t)
    with pytest.raises(luabridge.LuaError, match="index: cannot index an empty tensor"):
        lua_fn("function() local e = torch.Tensor(); return e[#e] end")()


def test_tensor_value_assigned_at_a_number_index(lua):
    v = np.zeros(4)
    m = np.zeros((3, 2))
    lua_fn("""function(v, m)
      v[2] = torch.Tensor{3}
      v[-1] = torch.IntTensor{9}      -- converted, as torch7's copy
      m[2] = torch.Tensor{5, 6}       -- N-D: copied into the row
      m[{3, 1}] = torch.Tensor{8}
    end""")(luabridge.from_numpy(v), luabridge.from_numpy(m))
    np.testing.assert_array_equal(v, [0, 3, 0, 9])
    np.testing.assert_array_equal(m, [[0, 0], [5, 6], [8, 0]])
    with pytest.raises(luabridge.LuaError, match="inconsistent tensor size"):
        lua_fn("function(v) v[1] = torch.Tensor{1, 2} end")(luabridge.from_numpy(v))


def test_constructor_tables_take_numeric_strings(lua):
    """torch7 read table elements with lua_tonumber, so strings such as CSV fields convert."""
    t, s, nested = lua.execute("""return torch.Tensor({'1', ' 2.5', 3, '0x10', '1e2'}),
        torch.LongStorage({'4', 5}), torch.FloatTensor({{'1', 2}, {3, '-4'}})""")
    np.testing.assert_array_equal(luabridge.to_numpy(t), [1, 2.5, 3, 16, 100])
    assert (s[1], s[2], s.size(s)) == (4, 5, 2)
    np.testing.assert_array_equal(luabridge.to_numpy(nested), [[1, 2], [3, -4]])
    with pytest.raises(luabridge.LuaError, match="torch.DoubleTensor: table element must be a number, got 'x'"):
        lua.execute("torch.Tensor({1, 'x'})")
    with pytest.raises(luabridge.LuaError, match="torch.IntStorage: table entry 2 must be a number, got table"):
        lua.execute("torch.IntStorage({1, {}})")


def test_assigned_elements_take_numeric_strings(lua):
    """torch7's __newindex read a value with lua_isnumber / luaL_checknumber: '7' is 7."""
    v = np.zeros(3)
    m = np.zeros((2, 2), dtype=np.float32)
    s, second = lua_fn("""function(v, m)
      v[1] = '7'
      v[{3}] = '-0.5'
      m[{2, 1}] = '1e3'
      m[torch.LongStorage{1, 2}] = '0x10'
      local s = torch.IntStorage(3)
      s[2] = ' 42 '
      local second = s[2]
      s:copy({'1', 2, '3'})
      return s, second
    end""")(luabridge.from_numpy(v), luabridge.from_numpy(m))
    np.testing.assert_array_equal(v, [7, 0, -0.5])
    np.testing.assert_array_equal(m, [[0, 16], [1000, 0]])
    assert second == 42 and [s[i] for i in (1, 2, 3)] == [1, 2, 3]
    with pytest.raises(luabridge.LuaError, match="element assignment: value must be a number, got 'x'"):
        lua.execute("torch.Tensor(2)[1] = 'x'")
    with pytest.raises(luabridge.LuaError, match="torch.ByteStorage: value must be a number, got 'y'"):
        lua.execute("torch.ByteStorage(2)[1] = 'y'")
    with pytest.raises(luabridge.LuaError, match="copy: table entry 2 must be a number, got 'z'"):
        lua.execute("torch.FloatStorage(2):copy({1, 'z'})")


def test_torch_data_points_at_the_first_element(lua):
    """torch.data(x[, asnumber]), as torch7's: the pointer of a tensor (at its offset) or storage."""
    text, same, offset_bytes = lua.execute("""local ffi = require 'ffi'
      local t = torch.ByteTensor({104, 105, 0, 33})
      local v = t:narrow(1, 2, 3)
      return ffi.string(torch.data(t)), torch.data(t, true) == torch.data(t:storage(), true),
             torch.data(v, true) - torch.data(t, true)""")
    assert (text, same, offset_bytes) == ("hi", True, 1)
    d = np.arange(5.0)
    address = lua.eval("function(t) return torch.data(t, true) end")(luabridge.from_numpy(d))
    assert address == d.__array_interface__["data"][0]
    with pytest.raises(luabridge.LuaError, match="torch.data: expected a tensor or a storage, got number"):
        lua.execute("torch.data(3)")


def test_cdata_describes_tensor_and_storage_as_torch7_structs(lua):
    got = lua_fn("""function()
      local t = torch.FloatTensor(4, 6):zero()
      local c = t:cdata()
      local n = t:narrow(2, 3, 2)
      local cn = n:cdata()
      n:fill(1)
      local sum = 0
      for i = 0, tonumber(c.storage.size) - 1 do sum = sum + c.storage.data[i] end
      t:resize(2, 3, 4)
      local c2 = t:cdata()
      return c == c2, c2.nDimension, tonumber(c2.size[2]), tonumber(c2.stride[0]),
             tonumber(cn.storageOffset), tonumber(cn.size[1]), tonumber(cn.stride[0]), sum,
             t:storage():cdata() == c2.storage, tonumber(c2.storage.size)
    end""")()
    # the same struct, refreshed; the narrow starts at element 2 with rows of stride 6
    assert tuple(got) == (True, 3, 4, 12, 2, 2, 6, 8.0, True, 24)


# numpy dtypes of torch7's storage types
STORAGE_DTYPES = {"Byte": np.uint8, "Char": np.int8, "Short": np.int16, "Int": np.int32,
                  "Long": np.int64, "Float": np.float32, "Double": np.float64}


@pytest.mark.parametrize("name", list(STORAGE_DTYPES))
def test_mapped_storage_reads_whole_file_and_shared_writes_reach_it(tmp_path, lua, name):
    dt = STORAGE_DTYPES[name]
    path = tmp_path / "data.bin"
    values = (np.arange(10) * 3 % 17).astype(dt)
    values.tofile(path)
    read = lua_fn(f"""function(path)
      local s = torch.{name}Storage(path, true)
      s[1] = 5
      s[10] = s[10] + 1
      return s:size(), s[4]
    end""")
    size, fourth = read(str(path))
    assert (size, fourth) == (10, values[3])
    expected = values.copy()
    expected[0], expected[9] = 5, values[9] + 1
    gc.collect()
    np.testing.assert_array_equal(np.fromfile(path, dtype=dt), expected)


def test_private_mapping_keeps_writes_out_of_the_file(tmp_path, lua):
    path = tmp_path / "data.bin"
    np.arange(6, dtype=np.float32).tofile(path)
    got = lua_fn("""function(path)
      local s = torch.FloatStorage(path, false, 4)   -- a prefix of the file
      local t = torch.FloatTensor(s)
      t:mul(10)
      return s:size(), t:sum()
    end""")(str(path))
    assert tuple(got) == (4, 60.0)
    np.testing.assert_array_equal(np.fromfile(path, dtype=np.float32), np.arange(6))


def test_shared_mapping_creates_and_grows_the_file(tmp_path, lua):
    path = tmp_path / "new.bin"
    lua_fn("""function(path)
      local s = torch.DoubleStorage(path, true, 5)
      torch.DoubleTensor(s):copy(torch.range(1, 5))
    end""")(str(path))
    np.testing.assert_array_equal(np.fromfile(path, dtype=np.float64), [1, 2, 3, 4, 5])
    lua_fn("function(path) torch.DoubleStorage(path, true, 8)[8] = 9 end")(str(path))
    np.testing.assert_array_equal(np.fromfile(path, dtype=np.float64), [1, 2, 3, 4, 5, 0, 0, 9])


def test_mapped_storage_errors(tmp_path, lua):
    path = tmp_path / "small.bin"
    np.zeros(2, dtype=np.float32).tofile(path)
    with pytest.raises(luabridge.LuaError, match=r"torch.FloatStorage: cannot map file <.*small.bin>: "
                                                 r"file <.*> size is smaller than the required mapping size <12>"):
        lua_fn("function(p) return torch.FloatStorage(p, false, 3) end")(str(path))
    with pytest.raises(luabridge.LuaError, match=r"torch.IntStorage: cannot map file <.*missing.bin>: .*No such file"):
        lua_fn("function(p) return torch.IntStorage(p) end")(str(tmp_path / "missing.bin"))
    with pytest.raises(luabridge.LuaError, match=r"resize: cannot resize a storage mapped from the file"):
        lua_fn("function(p) torch.FloatStorage(p):resize(5) end")(str(path))
    with pytest.raises(luabridge.LuaError, match="shared must be a boolean, got string"):
        lua_fn("function(p) return torch.FloatStorage(p, 'yes') end")(str(path))


def test_mapped_storage_numpy_view_outlives_the_lua_storage(tmp_path, lua):
    path = tmp_path / "data.bin"
    np.arange(8, dtype=np.float64).tofile(path)
    t = lua_fn("function(p) return torch.DoubleTensor(torch.DoubleStorage(p, true)) end")(str(path))
    view = luabridge.to_numpy(t)
    del t
    lua.execute("for _ = 1, 4 do collectgarbage() end; torch.DoubleStorage(1)")  # release queued ids
    view[3] = 30.0
    assert np.fromfile(path, dtype=np.float64)[3] == 30.0


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm on this system")
def test_shared_memory_storage_lives_in_dev_shm_until_collected(lua):
    name = f"luabridge_test_{os.getpid()}"
    shm = Path("/dev/shm") / name
    lua_fn(f"""function()
      SHM_TEST = torch.FloatStorage('{name}', true, 6, true)
      torch.FloatTensor(SHM_TEST):copy(torch.range(1, 6))
    end""")()
    np.testing.assert_array_equal(np.fromfile(shm, dtype=np.float32), np.arange(1, 7))
    # a second mapping of the same object sees the first one's writes
    assert lua.eval(f"torch.FloatStorage('/dev/shm/{name}', true)[6]") == 6
    lua.execute("SHM_TEST = nil; for _ = 1, 4 do collectgarbage() end")
    assert not shm.exists()


# torch7 behaviours that real programs (torchnet, OpenFace) relied on

def test_storage_element_size_on_the_class_and_on_instances(lua):
    sizes = lua_fn("""function()
      return {torch.LongStorage.elementSize(), torch.FloatStorage.elementSize(),
              torch.ByteStorage.elementSize(), torch.DoubleStorage(3):elementSize()}
    end""")()
    assert list(sizes.values()) == [8, 4, 1, 8]


def test_deserialize_from_a_char_tensor_contiguous_or_strided(lua):
    got = lua_fn("""function()
      local obj = {x = torch.range(1, 4), name = 'abc'}
      local bytes = torch.serializeToStorage(obj)
      local flat = torch.deserializeFromStorage(torch.CharTensor(bytes))
      -- the same bytes in every other element of a larger tensor: a strided view
      local wide = torch.CharTensor(bytes:size(), 2):zero()
      wide:select(2, 1):copy(torch.CharTensor(bytes))
      local strided = torch.deserializeFromStorage(wide:select(2, 1))
      return {flat.x:sum(), flat.name, strided.x:sum(), strided.name}
    end""")()
    assert list(got.values()) == [10.0, "abc", 10.0, "abc"]
    with pytest.raises(luabridge.LuaError, match="CharStorage expected, got torch.ByteTensor"):
        lua_fn("function() return torch.deserializeFromStorage(torch.ByteTensor(3)) end")()


def test_classes_are_in_the_lua_registry_as_luaT_keeps_them(lua):
    # torchnet's torch.isclass: debug.getregistry()[obj] is set for class metatables only
    got = lua_fn("""function()
      require 'nn'
      local reg = debug.getregistry()
      torch.class('gapsTest.Thing')
      return {reg[getmetatable(nn.Linear)], reg[torch.getmetatable('nn.Linear')],
              reg[getmetatable(gapsTest.Thing)], reg[getmetatable(gapsTest.Thing())], reg[{}] == nil,
              reg[getmetatable(setmetatable({}, {}))] == nil}
    end""")()
    assert list(got.values()) == ["nn.Linear", "nn.Linear", "gapsTest.Thing", "gapsTest.Thing", True, True]


def test_totable_of_tensors_and_storages(lua):
    got = lua_fn("""function()
      return {torch.totable(torch.LongStorage{3, 96, 96}), torch.totable(torch.Tensor{{1, 2}, {3, 4}})}
    end""")()
    assert [list(got[1].values()), [list(r.values()) for r in got[2].values()]] == [[3, 96, 96], [[1, 2], [3, 4]]]
    with pytest.raises(luabridge.LuaError, match="torch.totable: expected a tensor or a storage, got table"):
        lua_fn("function() return torch.totable({1}) end")()


@pytest.mark.parametrize("call, kind, values", [
    ("torch.range(1, 4, 'torch.FloatTensor')", "torch.FloatTensor", [1, 2, 3, 4]),
    ("torch.range(2, 8, 3, 'torch.IntTensor')", "torch.IntTensor", [2, 5, 8]),
    ("torch.zeros(3, 'torch.LongTensor')", "torch.LongTensor", [0, 0, 0]),
    ("torch.ones(2, 'torch.ByteTensor')", "torch.ByteTensor", [1, 1]),
    ("torch.linspace(0, 1, 5, 'torch.FloatTensor')", "torch.FloatTensor", [0, 0.25, 0.5, 0.75, 1]),
    ("torch.logspace(0, 2, 3, 'torch.FloatTensor')", "torch.FloatTensor", [1, 10, 100]),
    ("torch.eye(2, 'torch.LongTensor')", "torch.LongTensor", [[1, 0], [0, 1]]),
    ("torch.range(1, 2)", "torch.DoubleTensor", [1, 2]),
])
def test_a_last_type_name_argument_gives_the_result_type(lua, call, kind, values):
    t, name = lua_fn(f"function() local t = {call}; return t, torch.type(t) end")()
    assert name == kind
    np.testing.assert_array_equal(luabridge.to_numpy(t), np.array(values))


def test_a_string_that_is_no_tensor_type_is_still_an_error(lua):
    with pytest.raises(luabridge.LuaError, match="zeros"):
        lua_fn("function() return torch.zeros(2, 'torch.NoSuchTensor') end")()
