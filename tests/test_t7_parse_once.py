"""One load of a .t7 is one parse: the Lua reader (File.lua) requires the package of ours that
defines a class (lua/torch/t7format.lua's classPackages / prefixPackages) when it meets the
class, never by reading the file again after an error. Each case runs in a fresh runtime (a new
thread's), where only torch is loaded, and counts the reader's entries: the files opened for
reading (torch.DiskFile, and torch.MemoryFile for bytes)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import luabridge
from helpers import T7_FIXTURES, in_fresh_thread, lua_fn, needs_t7_fixtures
from luabridge import LuaError, t7
from luabridge.t7 import format as t7format
from luabridge.t7.load import read_t7

LUA = Path(__file__).resolve().parents[1] / "lua"

# Counts the reads that open a file or bytes: returns the list the names are appended to.
_count_opens = lua_fn("""function()
  local opened = {}
  for _, name in ipairs { 'torch.DiskFile', 'torch.MemoryFile' } do
    local mt = torch.getmetatable(name)
    local init = rawget(mt, '__init')
    mt.__init = function(self, source, mode, ...)
      if mode == 'r' then opened[#opened + 1] = name end
      return init(self, source, mode, ...)
    end
  end
  return opened
end""")
_loaded = lua_fn("function(name) return package.loaded[name] ~= nil end")
_typename = lua_fn("function(x) return torch.typename(x) end")


def _fresh(read):
    """(the typename of what read() returns, or its LuaError; the readers opened; whether nn and
    nngraph are loaded after), in a runtime of its own."""
    def run():
        luabridge.require("torch")
        assert not _loaded("nn") and not _loaded("nngraph")
        opened = _count_opens()
        try:
            outcome = _typename(luabridge.unwrap(read()))
        except LuaError as e:
            outcome = e
        return outcome, list(opened.values()), {p: _loaded(p) for p in ("nn", "nngraph")}
    return in_fresh_thread(run)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """An nn model and a gModule, written by our Lua; a plain tensor by the Python writer."""
    d = tmp_path_factory.mktemp("parse_once")
    lua_fn("""function(d)
      require 'nngraph'
      torch.save(d .. '/seq.t7', nn.Sequential():add(nn.Linear(3, 2)):add(nn.Tanh()))
      local x = nn.Identity()()
      torch.save(d .. '/g.t7', nn.gModule({ x }, { nn.Linear(3, 2)(x) }))
    end""")(str(d))
    t7.write(d / "tensor.t7", np.arange(6.0).reshape(2, 3))
    return d


def test_a_file_of_nn_modules_is_read_once_requiring_nn(files):
    value, opened, loaded = _fresh(lambda: luabridge.load(files / "seq.t7"))
    assert value == "nn.Sequential"
    assert opened == ["torch.DiskFile"] and loaded == {"nn": True, "nngraph": False}


def test_a_gmodule_is_read_once_requiring_nngraph(files):
    # the first class met is nn.gModule, which nngraph defines (not nn): classPackages says so
    value, opened, loaded = _fresh(lambda: luabridge.load(files / "g.t7"))
    assert value == "nn.gModule"
    assert opened == ["torch.DiskFile"] and loaded == {"nn": True, "nngraph": True}


def test_a_plain_tensor_is_read_once_requiring_nothing(files):
    value, opened, loaded = _fresh(lambda: luabridge.load(files / "tensor.t7"))
    assert value == "torch.DoubleTensor"
    assert opened == ["torch.DiskFile"] and loaded == {"nn": False, "nngraph": False}


def test_bytes_are_read_once_too(files):
    data = (files / "g.t7").read_bytes()
    value, opened, loaded = _fresh(lambda: read_t7(data))
    assert value == "nn.gModule"
    assert opened == ["torch.MemoryFile"] and loaded["nngraph"]


@needs_t7_fixtures
def test_torch7_written_gmodule_and_node_are_read_once():
    value, opened, _ = _fresh(lambda: luabridge.load(T7_FIXTURES / "gmodule_with_linear_identity.t7"))
    assert value == "nn.gModule" and opened == ["torch.DiskFile"]
    value, opened, loaded = _fresh(lambda: luabridge.load(T7_FIXTURES / "nngraph_node.t7"))
    assert value == "nngraph.Node" and opened == ["torch.DiskFile"] and loaded["nngraph"]


@needs_t7_fixtures
def test_a_class_no_package_provides_is_unknown_after_one_read():
    error, opened, loaded = _fresh(lambda: luabridge.load(T7_FIXTURES / "custom_class.t7"))
    assert isinstance(error, LuaError) and "unknown Torch class <Blah>" in error.message
    assert opened == ["torch.DiskFile"] and loaded == {"nn": False, "nngraph": False}
    _, opened, _ = _fresh(lambda: luabridge.load(T7_FIXTURES / "custom_class.t7", unknownClasses="table"))
    assert opened == ["torch.DiskFile"]


def test_an_nn_name_nn_lacks_is_unknown_once_nn_is_loaded(tmp_path):
    t7.write(tmp_path / "x.t7", t7.TorchObject("nn.NoSuchModule", 1, {"w": 2.0}))
    error, opened, loaded = _fresh(lambda: luabridge.load(tmp_path / "x.t7"))
    assert isinstance(error, LuaError) and "unknown Torch class <nn.NoSuchModule>" in error.message
    assert "require" not in error.message   # (no hint to require nn: the reader did)
    assert opened == ["torch.DiskFile"] and loaded["nn"]


def test_cudnn_classes_are_read_as_nn_ones_requiring_nn(files, tmp_path):
    tanh = t7.read(files / "seq.t7").modules[1]   # nn.Tanh, renamed as cudnn saved it
    tanh.typename = "cudnn.Tanh"
    t7.write(tmp_path / "c.t7", tanh)
    value, opened, loaded = _fresh(lambda: luabridge.load(tmp_path / "c.t7"))
    assert value == "nn.Tanh" and opened == ["torch.DiskFile"] and loaded["nn"]


def test_functions_stay_refused_when_packages_load_on_demand(tmp_path):
    # the safety rules hold in the one read: a function in a file of nn modules is refused
    make = lua_fn("""function(path)
      require 'nn'
      local m = nn.Sequential():add(nn.Linear(2, 2))
      m.hook = function(x) return x end
      torch.save(path, m)
    end""")
    make(str(tmp_path / "f.t7"))
    error, opened, loaded = _fresh(lambda: luabridge.load(tmp_path / "f.t7"))
    assert isinstance(error, LuaError) and re.search(r"<\?>\.hook is a Lua function", error.message)
    assert opened == ["torch.DiskFile"] and loaded["nn"]


def test_class_packages_name_the_packages_that_define_the_classes():
    """The spec's tables against the source: every class named in classPackages is declared by
    torch.class in that package, nngraph's classes in nn's namespace are all listed, and the
    packages are ours and need no CUDA."""
    declared = re.compile(r"""torch\.class\(\s*['"]([\w.]+)['"]""")

    def classes_of(package: str) -> set[str]:
        return {m for p in (LUA / package).rglob("*.lua") for m in declared.findall(p.read_text())}

    for name, package in t7format.CLASS_PACKAGES.items():
        assert name in classes_of(package), (name, package)
    assert {n for n in classes_of("nngraph") if n.startswith("nn.")} <= set(t7format.CLASS_PACKAGES)
    for prefix, package in t7format.PREFIX_PACKAGES.items():
        assert (LUA / package / "init.lua").is_file(), package
        assert package not in ("cudnn", "cunn", "cutorch", "ccn2")
        assert prefix == package or prefix == "cudnn"


def test_a_models_custom_classes_come_from_its_source_in_the_one_read():
    # the source defines nn.TestOnce: the reader calls it (classLoader) at the class it lacks,
    # once, instead of reading the bytes again after an "unknown Torch class" error
    layer = ("local Once, parent = torch.class('nn.TestOnce', 'nn.Module')\n"
             "function Once:updateOutput(input) self.output = input * 3; return self.output end\n")
    made = luabridge.Model.from_lua("require 'TestOnce'\nreturn nn.Sequential():add(nn.TestOnce())",
                                    files={"TestOnce.lua": layer})
    with_source = luabridge.Model.from_module(made.module(), source="require 'TestOnce'",
                                              files={"TestOnce.lua": layer})

    def run():
        luabridge.require("torch")
        opened = _count_opens()
        y = with_source.predict(np.ones((1, 2)))
        return y, list(opened.values())
    y, opened = in_fresh_thread(run)
    np.testing.assert_array_equal(y, [[3.0, 3.0]])
    assert opened == ["torch.MemoryFile"]
