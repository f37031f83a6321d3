"""tds (lua/tds): tds.Hash and tds.Vec against Python dicts and lists under the same operations,
torch.save / torch.load round trips (binary and ascii, shared references), the Torch7-written
tds files of ../shared/fixtures/t7 (and the exact bytes torch7 writes for a tds.Vec),
luabridge.t7 reading what we write, printing, AtomicCounter, and errors. Each test runs in one
fresh runtime of its own thread: requiring tds changes what torch.load makes of tds classes."""
from __future__ import annotations

import json
import random

import pytest

import luabridge
from luabridge import t7
from helpers import T7_FIXTURES, needs_t7_fixtures
from lua_json import fresh_runner


@pytest.fixture(scope="module")
def run():
    yield from fresh_runner("local tds = require 'tds'")


def test_hash_follows_a_python_dict(run):
    rng = random.Random(5)
    ops = [(rng.choice("abcdefgh") if rng.random() < 0.5 else rng.randint(1, 6),
            None if rng.random() < 0.3 else rng.randint(0, 99)) for _ in range(200)]
    ref: dict = {}
    sizes = []
    for k, v in ops:
        if v is None:
            ref.pop(k, None)
        else:
            ref[k] = v
        sizes.append(len(ref))
    got = run("""
      local ops = cjson.decode(...)
      local h, sizes = tds.Hash(), {}
      for _, op in ipairs(ops) do
        h[op[1]] = op[2] ~= cjson.null and op[2] or nil
        sizes[#sizes + 1] = #h
      end
      local pairsOut = {}
      for k, v in pairs(h) do pairsOut[#pairsOut + 1] = {k, v} end
      return {sizes, pairsOut}""", json.dumps([[k, v] for k, v in ops]))
    assert got[0] == sizes
    assert {(k, v) for k, v in got[1]} == set(ref.items())


def test_vec_follows_a_python_list(run):
    got = run("""
      local v = tds.Vec(5, 3, 8)
      local trace = {}
      local function snap() local s = {} for i, x in ipairs(v) do s[i] = x end trace[#trace + 1] = s end
      v:insert(1, 7); snap()          -- [7, 5, 3, 8]
      v:insert(9); snap()             -- [7, 5, 3, 8, 9]
      v:insert(3, 4); snap()          -- [7, 5, 4, 3, 8, 9]
      v:remove(2); snap()             -- [7, 4, 3, 8, 9]
      v:remove(); snap()              -- [7, 4, 3, 8]
      v:sort(function(a, b) return a > b end); snap()
      v:sort(); snap()
      v:resize(2); snap()
      v[4] = 1
      return {trace, #v, v[3] == nil, v:concat(','), v:concat('-', 2, 4), v:concatstorage('+', 1, 2):string()}""")
    ref = [5, 3, 8]
    trace = []
    for step in (lambda: ref.insert(0, 7), lambda: ref.append(9), lambda: ref.insert(2, 4), lambda: ref.pop(1),
                 lambda: ref.pop(), lambda: ref.sort(reverse=True), lambda: ref.sort(), lambda: ref.__delitem__(slice(2, None))):
        step()
        trace.append(list(ref))
    assert got[0] == trace
    assert got[1:] == [4, True, "3,4,nil,1", "4-nil-1", "3+4"]


def test_tables_become_nested_tds_objects(run):
    got = run("""
      local h = tds.Hash({a = 1, list = {1, 2, 3}, sub = {x = 'y'}})
      local v = tds.Vec(4, 5, torch.ones(3), nil, 'hello')
      return {torch.type(h), #h, torch.type(h.list), #h.list, torch.type(h.sub), h.sub.x, #v,
              torch.type(v[3]), v[4] == nil, v[5], type(h)}""")
    assert got == ["tds.Hash", 3, "tds.Vec", 3, "tds.Hash", "y", 5, "torch.DoubleTensor", True, "hello", "userdata"]


@pytest.mark.parametrize("mode", ["binary", "ascii"])
def test_save_load_round_trip(run, mode, tmp_path):
    path = str(tmp_path / "d.t7")
    got = run(f"""
      local t = torch.range(1, 4)
      local shared = tds.Vec('s')
      local h = tds.Hash()
      h.name, h[3], h[true], h.t, h.a, h.b = 'x', 2.5, false, t, shared, shared
      h.vec = tds.Vec(1, nil, tds.Hash({{k = 'v'}}))
      torch.save(..., h, '{mode}')
      local r = torch.load(..., '{mode}')
      return {{torch.type(r), #r, r.name, r[3], r[true], r.t:totable(), r.a == r.b, r.a[1], #r.vec,
               r.vec[2] == nil, r.vec[3].k}}""", path)
    assert got == ["tds.Hash", 7, "x", 2.5, False, [1, 2, 3, 4], True, "s", 3, True, "v"]


def test_python_reader_reads_what_tds_writes(run, tmp_path):
    path = str(tmp_path / "d.t7")
    run("torch.save(..., tds.Hash({a = 1, v = {10, 20}, [5] = 'five'}))", path)
    assert t7.read(path) == {"a": 1, "v": [10, 20], 5: "five"}


@needs_t7_fixtures
def test_torch7_files_load_as_tds(run):
    got = run("""
      local hashFile, vecFile = ...
      local h, v = torch.load(hashFile), torch.load(vecFile)
      local keys = {}
      for k, x in pairs(h) do keys[#keys + 1] = {k, x} end
      table.sort(keys, function(a, b) return a[1] < b[1] end)
      return {torch.type(h), #h, keys, torch.type(v), #v, v[1], v[2]}""",
        str(T7_FIXTURES / "tds_hash.t7"), str(T7_FIXTURES / "tds_vec.t7"))
    assert got == ["tds.Hash", 3, [[1, 2], [2, 3], [10, 11]], "tds.Vec", 2, 123, 456]


@needs_t7_fixtures
def test_vec_saves_to_torch7s_bytes(run, tmp_path):
    path = tmp_path / "vec.t7"
    run("torch.save(..., tds.Vec(123, 456))", str(path))
    assert path.read_bytes() == (T7_FIXTURES / "tds_vec.t7").read_bytes()


def test_printing_as_torch7(run):
    got = run("return {tostring(tds.Vec('how', 'are', 'you')), tostring(tds.Hash({foo = 'bar', bazz = 1}))}")
    assert got[0] == "tds.Vec[3]{\n    1 : how\n    2 : are\n    3 : you\n}"
    assert got[1] == "tds.Hash[2]{\nbazz : 1\nfoo  : bar\n}"


def test_atomic_counter(run, tmp_path):
    got = run("""
      local a = tds.AtomicCounter()
      local r = {a:get(), a:inc(), a:inc(), a:get()}
      a:set(100)
      torch.save(..., a)
      local b = torch.load(...)
      r[#r + 1] = b:get(); r[#r + 1] = tostring(b)
      return r""", str(tmp_path / "a.t7"))
    assert got == [0, 0, 1, 2, 100, "tds.AtomicCounter=100"]


@pytest.mark.parametrize("code, message", [
    ("tds.Hash().x = {}", "tds.Hash: unsupported value type <table>"),
    ("tds.Hash()[0/0] = 1", "tds.Hash: key is NaN"),
    ("local h = tds.Hash(); return h[nil]", "tds.Hash: index is nil"),
    ("tds.Vec()[0] = 1", "tds.Vec: index must be a positive integer, got 0"),
    ("tds.Vec()[1.5] = 1", "tds.Vec: index must be a positive integer, got 1.5"),
    ("tds.Vec(1):remove(3)", "tds.Vec:remove: index 3 out of range (size 1)"),
    ("tds.Vec(1):resize(-1)", "tds.Vec:resize: size must be a non-negative integer, got -1"),
    ("return tds.Vec().nosuch", "tds.Vec: invalid key <nosuch>"),
    ("tds.Vec({a = 1})", "tds.Vec: a Lua table with number keys expected"),
    ("tds.Hash(1, 2)", "tds.Hash: a Lua table or nothing expected"),
])
def test_errors(run, code, message):
    with pytest.raises(luabridge.LuaError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        run(code)
