"""torch.Tester, torch.TestSuite (assertions, reports, run options) and torch.Timer / tic / toc."""
from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

import luabridge
from luabridge import LuaError
from luabridge.core.runtime import bridge
from helpers import assert_lua_error, lua_fn


def check(expr: str) -> Any:
    """Evaluates expr with a fresh tester `t` (assertions outside run() just return true/false)."""
    return bridge().call(bridge().load(f"local t = torch.Tester()\nlocal r = {expr}\nreturn r", "=check"))


def run_suite(capfd: Any, body: str, setup: str = "") -> tuple[str | None, str]:
    """Runs a suite defined by body (functions on `tests`, assertions on `t`): (error, report)."""
    code = (f"local tests = torch.TestSuite()\nlocal t = torch.Tester()\n{body}\n"
            f"t:add(tests)\n{setup}\nreturn t:run()")
    try:
        luabridge.execute(code)
        err = None
    except LuaError as e:
        err = e.message
    return err, capfd.readouterr().out


# ---------------------------------------------------------------------------------------------
# assertions


@pytest.mark.parametrize("expr, expected", [
    ("t:assert(true)", True), ("t:assert(false)", False),
    ("t:assertlt(1, 2)", True), ("t:assertlt(2, 2)", False),
    ("t:assertle(2, 2)", True), ("t:assertle(3, 2)", False),
    ("t:assertgt(3, 2)", True), ("t:assertgt(2, 2)", False),
    ("t:assertge(2, 2)", True), ("t:assertge(1, 2)", False),
    ("t:asserteq('a', 'a')", True), ("t:asserteq(1, 2)", False),
    ("t:assertne(1, 2)", True), ("t:assertne(1, 1)", False),
    ("t:assertalmosteq(1, 1 + 1e-9, 1e-8)", True), ("t:assertalmosteq(1, 1.1, 0.01)", False),
    ("t:assertalmosteq(1, 1 + 1e-9)", False),              # default tolerance 1e-16
    ("t:eq(1, 1.05, 0.1)", True), ("t:eq(1, 1.05)", False),
    ("t:eq(math.huge, math.huge)", True), ("t:eq(0/0, 0/0)", False),
    ("t:eq('x', 'x')", True), ("t:eq(1, '1')", False), ("t:ne(1, '1')", True),
    ("t:eq({1, {2, 'a'}, k = true}, {1, {2, 'a'}, k = true})", True),
    ("t:eq({1, {2, 3}}, {1, {2, 4}})", False), ("t:eq({1, {2, 3}}, {1, {2, 3.01}}, 0.1)", True),
    ("t:eq({1, 2}, {1, 2, 3})", False), ("t:eq({a = 1}, {b = 1})", False),
    ("t:ne({1, 2}, {1, 3})", True), ("t:assertTableEq({x = {1}}, {x = {1}})", True),
    ("t:assertTableNe({x = {1}}, {x = {1}})", False),
])
def test_assertions_return_their_outcome(lua, expr, expected):
    assert check(expr) is expected


@pytest.mark.parametrize("expr, expected", [
    ("t:eq(torch.Tensor{1, 2, 3}, torch.Tensor{1, 2, 3})", True),
    ("t:eq(torch.Tensor{1, 2, 3}, torch.Tensor{1, 2, 3.5})", False),
    ("t:eq(torch.Tensor{1, 2, 3}, torch.Tensor{1, 2, 3.5}, 0.5)", True),
    ("t:eq(torch.Tensor{1, 2}, torch.FloatTensor{1, 2})", False),            # types differ
    ("t:eq(torch.Tensor{{1, 2}}, torch.Tensor{1, 2})", False),                # dims differ
    ("t:assertTensorEq(torch.Tensor{{1, 2}}, torch.Tensor{1, 2})", True),     # torch7: contents only
    ("t:assertTensorEq(torch.Tensor(2, 3):fill(1), torch.Tensor(3, 2):fill(1):t())", True),
    ("t:assertTensorEq(torch.Tensor{1, 2}, torch.Tensor{1, 2, 3})", False),
    ("t:assertTensorNe(torch.Tensor{1, 2}, torch.Tensor{1, 2, 3})", True),
    ("t:assertTensorNe(torch.Tensor{1, 2}, torch.Tensor{1, 2.5}, 0.1)", True),
    ("t:assertTensorNe(torch.Tensor{1, 2}, torch.Tensor{1, 2})", False),
    ("t:eq(torch.ByteTensor{1, 200}, torch.ByteTensor{1, 200})", True),
    ("t:eq(torch.ByteTensor{1, 200}, torch.ByteTensor{1, 199})", False),
    ("t:eq(torch.LongTensor{2^40, 1}, torch.LongTensor{2^40, 1})", True),
    ("t:eq(torch.HalfTensor{1, 2}, torch.HalfTensor{1, 2})", True),
    ("t:eq(torch.HalfTensor{1, 2}, torch.HalfTensor{1, 3})", False),
    ("t:eq(torch.Tensor{math.huge, 1}, torch.Tensor{math.huge, 1})", True),
    ("t:eq(torch.Tensor{0/0}, torch.Tensor{0/0})", False),
    ("t:eq(torch.Tensor(), torch.Tensor())", True),
    ("t:eq(torch.Tensor(0), torch.Tensor(0))", True),
    ("t:eq({torch.Tensor{1}, {n = torch.Tensor{2}}}, {torch.Tensor{1}, {n = torch.Tensor{2}}})", True),
    ("t:eq({torch.Tensor{1}}, {torch.Tensor{1.5}})", False),
    ("t:eq(torch.DoubleStorage{1, 2}, torch.DoubleStorage{1, 2})", True),
    ("t:eq(torch.DoubleStorage{1, 2}, torch.DoubleStorage{1, 3})", False),
    ("t:eq(torch.DoubleStorage{1, 2}, torch.FloatStorage{1, 2})", False),
    ("t:eq(torch.Tensor{1}, torch.DoubleStorage{1})", False),
    ("t:eq(torch.Tensor{1}, {1})", False),
])
def test_tensor_and_storage_equality(lua, expr, expected):
    assert check(expr) is expected


def test_strided_tensors_compare_elementwise(lua, rng):
    a = rng.standard_normal((4, 6))
    b = a.copy()
    b[2, 5] += 0.25
    ta = luabridge.from_numpy(a[:, ::2])                 # strided views of different layouts
    tb = luabridge.from_numpy(np.asfortranarray(b)[:, ::2])
    eq = lua_fn("function(a, b, tol) return torch.Tester():eq(a, b, tol) end")
    assert eq(ta, tb, 0) is True                          # column 5 is not in the view
    tb2 = luabridge.from_numpy(np.asfortranarray(b)[:, 1::2])
    ta2 = luabridge.from_numpy(a[:, 1::2])
    assert eq(ta2, tb2, 0.2) is False and eq(ta2, tb2, 0.25) is True


@pytest.mark.parametrize("expr, expected", [
    ("t:assertError(function() error('x') end)", True),
    ("t:assertError(function() end)", False),
    ("t:assertNoError(function() end)", True),
    ("t:assertNoError(function() error('boom') end)", False),
    ("t:assertErrorMsg(function() error('exact', 0) end, 'exact')", True),
    ("t:assertErrorMsg(function() error('exact') end, 'exact')", False),      # has a position prefix
    ("t:assertErrorPattern(function() torch.Tensor(2):narrow(1, 2, 2) end, 'narrow')", True),
    ("t:assertErrorPattern(function() error('abc') end, '^xyz')", False),
    ("t:assertErrorObj(function() error({code = 7}) end, function(e) return e.code == 7 end)", True),
    ("t:assertErrorObj(function() error({code = 7}) end, function(e) return e.code == 8 end)", False),
])
def test_error_assertions(lua, expr, expected):
    assert check(expr) is expected


@pytest.mark.parametrize("expr, message", [
    ("t:eq(1, 1, 'm', 'n')", "Unexpected string argument; already have a message"),
    ("t:eq(1, 1, 0.1, 0.2)", "already have a tolerance"),
    ("t:eq(1, 1, -1)", "tolerance cannot be negative"),
    ("t:eq(1, 1, {})", "Unrecognized argument"),
    ("t:asserteq(1, 1, 5)", "message must be a string"),
    ("t:assertTensorEq({}, torch.Tensor())", "First argument should be a Tensor"),
    ("t:assertTableEq({}, 1)", "Second argument should be a Table"),
])
def test_misused_assertions_raise_at_the_callers_line(lua, expr, message):
    with pytest.raises(LuaError, match=message) as info:
        check(expr)
    assert info.value.message.startswith("check:2:")


# ---------------------------------------------------------------------------------------------
# running and reporting

SUITE = """
function tests.good() t:eq(torch.Tensor{1, 2}, torch.Tensor{1, 2}); t:assert(true) end
function tests.bad()
  t:eq(torch.Tensor{1, 2, 3}, torch.Tensor{1, 2, 4}, 'a and b should be equal')
end
function tests.broken() local x = nil; return x.field end
"""


def test_report_and_failure(lua, capfd):
    err, out = run_suite(capfd, SUITE)
    assert err is not None and "An error was found while running tests!" in err
    lines = out.splitlines()
    assert lines[0] == "Running 3 tests"
    assert lines[1].startswith("1/3 good ....") and lines[1].endswith(" [PASS]") and len(lines[1]) == 80
    assert lines[2].startswith("2/3 bad ....") and lines[2].endswith(" [FAIL]")
    assert lines[3].startswith("3/3 broken ....") and lines[3].endswith(" [ERROR]")
    assert lines[4] == "Completed 3 asserts in 3 tests with 1 failure and 1 error"
    assert "a and b should be equal\nTensorEQ(==) violation: max diff=1, tolerance=0\nstack traceback:" in out
    assert "(execute):6: in function" in out               # the failing assertion's line
    assert "broken\n Function call failed" in out and "attempt to index local 'x'" in out
    assert lines[5] == "-" * 80


def test_all_passing_returns_zero(lua, capfd):
    err, out = run_suite(capfd, "function tests.a() t:asserteq(1, 1) end\nfunction tests.b() end")
    assert err is None
    assert "Completed 1 assert in 2 tests with 0 failures and 0 errors" in out
    assert luabridge.execute("local t = torch.Tester(); t:add(function() end, 'x'); return t:run()") == 0


def test_run_selected_names_in_definition_order(lua, capfd):
    body = "\n".join(f"function tests.{n}() end" for n in ["zeta", "alpha", "alps", "beta"])
    err, out = run_suite(capfd, body, "t:run({'^al', 'zeta'})")
    assert err is None
    ran = [line.split()[1] for line in out.splitlines() if line.endswith("[PASS]")]
    assert ran[:3] == ["zeta", "alpha", "alps"]                # the selected run, then the full one
    assert out.count("Running 3 tests") == 1 and out.count("Running 4 tests") == 1
    err, _ = run_suite(capfd, body, "t:run('nothing')")
    assert err is not None and "Couldn't find test 'nothing'" in err


def test_early_abort_summary_only_and_disable(lua, capfd):
    err, out = run_suite(capfd, SUITE, "t:setEarlyAbort(true)")
    assert "Aborting on first error, not all tests have been executed" in out
    assert "broken" not in out.split("Aborting")[0].splitlines()[-1]
    assert "Completed 3 asserts in 3 tests with 1 failure and 0 errors" in out
    err, out = run_suite(capfd, SUITE, "t:setSummaryOnly(true)")
    assert err is not None and "violation" not in out and "-" * 80 not in out
    err, out = run_suite(capfd, SUITE, "t:disable({'bad', 'broken'})")
    assert err is None and "[SKIP]" in out and "and 2 disabled" in out


def test_rethrow_errors(lua, capfd):
    err, _ = run_suite(capfd, SUITE, "t:setRethrowErrors(true)")
    assert err is not None and "TensorEQ(==) violation" in err and "(execute):" in err


def test_setup_teardown_and_warnings(lua, capfd):
    body = """
    local log = {}
    _G.__tester_log = log
    t:add(function(name) log[#log + 1] = 'up ' .. name end, '_setUp')
    t:add(function(name) log[#log + 1] = 'down ' .. name end, '_tearDown')
    function tests.a() t:assert(1) end
    function tests.b() t:assertTensorEq(torch.Tensor{{1}}, torch.Tensor{1}) end
    """
    err, out = run_suite(capfd, body)
    assert err is None
    assert list(luabridge.eval("__tester_log").values()) == ["up a", "down a", "up b", "down b"]
    assert "should only be used for boolean conditions" in out
    assert "same content but different dimensions" in out
    assert "[+warning]" in out and "and 2 warnings" in out


def test_add_forms_and_errors(lua):
    assert luabridge.execute("""
      local t = torch.Tester()
      t:add({ b = function() end, a = function() end })      -- plain table: by name, with a warning
      t:add(function() end)
      return table.concat(t._order, ',')""") == "a,b,unknown"
    assert_lua_error("local t = torch.Tester(); t:add(function() end, 'x'); t:add(function() end, 'x')", "already exists")
    assert_lua_error("torch.Tester():add({ a = { function() end } })", "Nested sets of tests")
    assert_lua_error("torch.Tester():add(3)", "only functions")
    assert_lua_error("torch.Tester():disable('nope')", "unrecognized test 'nope'")


def test_test_suite(lua):
    assert_lua_error("local s = torch.TestSuite(); function s.f() end; function s.f() end", "Test f is already defined")
    assert_lua_error("local s = torch.TestSuite(); s.x = 1", "Only functions are supported")
    assert_lua_error("local s = torch.TestSuite(); s.x = {}", "Nested tables of tests")
    got = luabridge.execute("""
      local s = torch.TestSuite()
      function s.c() end; function s.a() end; function s.b() end
      return s.a ~= nil, s.zz == nil, table.concat(torch.Tester():add(s)._order, ',')""")
    assert got == (True, True, "c,a,b")


# ---------------------------------------------------------------------------------------------
# Timer, tic, toc


def test_timer_measures_real_and_cpu_time(lua):
    # The timer's readings lie within Python's own clocks read around it (process CPU time: the
    # timer counts every thread of the process, as getrusage does), whatever the machine's load.
    read = lua_fn("function(t) return t:time() end")
    busy = luabridge.eval("function(s) local t = os.clock(); while os.clock() - t < s do end end")
    wall0, cpu0 = time.perf_counter(), time.process_time()
    timer = luabridge.eval("torch.Timer()")
    time.sleep(0.05)
    busy(0.05)
    r = read(timer)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    assert 0.1 - 0.005 <= r["real"] <= wall
    assert 0.05 - 0.005 <= r["user"] + r["sys"] <= cpu + 0.01
    assert r["sys"] >= 0


def test_timer_stop_resume_reset(lua):
    start = time.perf_counter()
    out = luabridge.execute("""
      local t = torch.Timer()
      -- spin on wall time (os.clock counts every thread of the process, so it can run ahead of it)
      local function spin(s) local w = torch.Timer(); while w:time().real < s do end end
      spin(0.02)
      t:stop()
      local stopped = t:time()
      spin(0.03)
      local still = t:time()
      local s1 = tostring(t)
      t:resume()
      spin(0.02)
      local resumed = t:time().real
      t:reset()
      local after = t:time().real
      t:stop(); t:reset()
      return stopped.real, still.real, still.user == stopped.user, resumed, after, t:time().real, s1, tostring(t)""")
    wall = time.perf_counter() - start
    stopped, still, same_user, resumed, after, reset_stopped, s1, s2 = out
    assert stopped >= 0.02 and still == stopped and same_user
    assert resumed >= stopped + 0.02          # (fixed upper bounds on wall time fail on a loaded machine)
    assert 0 <= after <= wall - 0.07 and reset_stopped == 0   # the 0.07 s of spins came before the reset
    assert s1 == "torch.Timer [status: stopped]" and s2 == "torch.Timer [status: stopped]"
    assert luabridge.eval("tostring(torch.Timer())") == "torch.Timer [status: running]"


def test_tic_toc(lua):
    toc = lua_fn("function(m) return torch.toc(m), torch.toc() end")
    start = time.perf_counter()
    mark = luabridge.eval("torch.tic()")
    time.sleep(0.02)
    since = toc(mark)
    wall = time.perf_counter() - start                 # what Python saw around it, whatever the load
    assert 0.02 <= since[0] <= wall and 0.02 <= since[1] <= wall
    with pytest.raises(LuaError, match="toc: expected a mark"):
        luabridge.eval("torch.toc('x')")
