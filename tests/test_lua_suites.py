"""Runs the Lua test files tests/lua/test_*.lua under pytest, one case per Lua test function.

A Lua test file builds a torch.Tester and either calls its run() or returns it. While a file is
collected, torch.Tester._collector makes run() hand the tester over instead of running it; each
test is then run on its own (tester:run with the exact name) and a failed assertion or a Lua
error fails its pytest case with the Tester's report.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import luabridge
from luabridge.core.runtime import bridge

LUA_TESTS = Path(__file__).parent / "lua"

_COLLECT = r"""
local path = ...
local testers = {}
local function keep(t)
  for _, x in ipairs(testers) do if x == t then return end end
  testers[#testers + 1] = t
end
torch.Tester._collector = function(tester) keep(tester); return 0 end
local ok, result = pcall(dofile, path)
torch.Tester._collector = nil
if not ok then error(result, 0) end
if torch.typename(result) == 'torch.Tester' then keep(result) end
local cases = {}
for i, tester in ipairs(testers) do
  for _, name in ipairs(tester._order) do cases[#cases + 1] = { i, name, tester } end
end
return cases
"""

_RUN_ONE = r"""
local tester, name = ...
local pattern = '^' .. name:gsub('%W', '%%%0') .. '$'
local ok, err = pcall(tester.run, tester, pattern)
if ok then return true end
local report = table.concat(tester.errors, '\n')
return false, report ~= '' and report or tostring(err)
"""


def _lua_function(body: str) -> Any:
    """A Lua function whose errors come back as luabridge.LuaError."""
    fn = luabridge.eval(f"function(...) {body} end")
    return lambda *args: bridge().call(fn, *args)


def collect(path: Path) -> list[tuple[str, Any]]:
    """(case id, (tester, name)) for each test of a Lua test file."""
    luabridge.require("torch")
    cases = _lua_function(_COLLECT)(str(path))
    found = [cases[i] for i in range(1, len(cases) + 1)]
    several = len({c[1] for c in found}) > 1
    return [(f"{c[2]}[{c[1]}]" if several else c[2], (c[3], c[2])) for c in found]


def run_lua_test(tester: Any, name: str) -> None:
    """Runs one test of a tester; a failure or error fails the calling pytest case."""
    result = _lua_function(_RUN_ONE)(tester, name)
    ok, report = (result, "") if not isinstance(result, tuple) else result
    if not ok:
        pytest.fail(f"Lua test {name} failed:\n{report}", pytrace=False)


def _all_cases() -> list[Any]:
    params = []
    for path in sorted(LUA_TESTS.glob("test_*.lua")):
        try:
            cases = collect(path)
        except luabridge.LuaError as e:
            params.append(pytest.param(None, str(e), id=f"{path.stem}::<load>"))
            continue
        params += [pytest.param(case, None, id=f"{path.stem}::{cid}") for cid, case in cases]
    return params


@pytest.mark.parametrize("case, load_error", _all_cases())
def test_lua(case: Any, load_error: str | None) -> None:
    if load_error is not None:
        pytest.fail(f"the Lua test file does not load:\n{load_error}", pytrace=False)
    run_lua_test(*case)


# The runner itself: a deliberately failing suite must fail its case, and only that one.
_SUITE = """
local tests = torch.TestSuite()
local tester = torch.Tester()
function tests.passes() tester:eq(torch.Tensor{1, 2}, torch.Tensor{1, 2}) end
function tests.fails() tester:eq(torch.Tensor{1, 2}, torch.Tensor{1, 3}, 'the second element differs') end
function tests.raises() local t = torch.Tensor(3); return t:narrow(1, 2, 5) end
function tests.passes_too() tester:assertlt(1, 2) end
tester:add(tests):run()
"""


def test_runner_reports_failures(tmp_path: Path) -> None:
    path = tmp_path / "test_failing.lua"
    path.write_text(_SUITE)
    cases = dict(collect(path))
    assert list(cases) == ["passes", "fails", "raises", "passes_too"]
    run_lua_test(*cases["passes"])
    run_lua_test(*cases["passes_too"])
    with pytest.raises(pytest.fail.Exception, match="the second element differs") as info:
        run_lua_test(*cases["fails"])
    assert "max diff=1" in str(info.value) and "test_failing.lua:5" in str(info.value)
    with pytest.raises(pytest.fail.Exception, match="narrow"):
        run_lua_test(*cases["raises"])


def test_runner_accepts_a_returned_tester(tmp_path: Path) -> None:
    path = tmp_path / "test_returned.lua"
    path.write_text("local t = torch.Tester()\n"
                    "t:add(function() t:asserteq(2 + 2, 5) end, 'arith')\n"
                    "return t\n")
    (cid, case), = collect(path)
    assert cid == "arith"
    with pytest.raises(pytest.fail.Exception, match="EQ failed: 4 ~= 5"):
        run_lua_test(*case)


def test_runner_load_error(tmp_path: Path) -> None:
    path = tmp_path / "test_broken.lua"
    path.write_text("local x = \n")
    with pytest.raises(luabridge.LuaError, match="test_broken.lua"):
        collect(path)
