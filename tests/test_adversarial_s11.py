"""Adversarial inputs for session 11's FFI paths (oneDNN eltwise/softmax/binary passes, blocked
elementwise evaluation, Dropout's masks, conv-net plans, threaded fused groups).

Each case runs as a whole program in its own process (`luabridge th`, or python -c), so a
segfault fails the test (a negative exit status) rather than killing pytest. Each asserts a
clear error naming the module or op and the sizes, or the right values.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers import run_script
from processes import AWAIT_CHILD


def th(tmp_path: Path, source: str) -> str:
    """Runs source as `luabridge th`; fails on a crash or a non-zero exit; its stdout."""
    r = run_script(tmp_path, source, timeout=300)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
    return r.stdout


def py(source: str, timeout: float = 300) -> str:
    r = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
    return r.stdout


# Prints "<label>\t<error or ok>" for each call: the tests assert on these lines.
PRELUDE = r"""
require 'nn'
require('torch.backend.cpu.dnnl_eltwise').forceThreads = 2
function try(label, f)
  local ok, e = pcall(f)
  print(label .. '\t' .. (ok and 'ok' or (tostring(e):gsub('\n', ' '))))
end
"""


def lines(out: str) -> dict[str, str]:
    return dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)


def test_activation_backward_after_input_resized(tmp_path: Path) -> None:
    """A backward reading the last forward's output (Tanh, Sigmoid, ELU, Sqrt, Exp) with an input
    resized since: the loop read past the output's memory (a segfault); now a clear error, and
    gradInput is left as it was. ReLU (reads the input) still runs."""
    out = lines(th(tmp_path, PRELUDE + r"""
for _, name in ipairs{'Tanh', 'Sigmoid', 'ELU', 'Sqrt', 'Exp'} do
  local m = nn[name]():float()
  m:forward(torch.rand(2):float())
  local before = m.gradInput:nElement()
  try(name, function() m:backward(torch.rand(1000000):float(), torch.ones(1000000):float()) end)
  print(name .. ' gradInput\t' .. m.gradInput:nElement() .. ' ' .. before)
end
local m = nn.ReLU():float()
m:forward(torch.rand(2):float())
try('ReLU', function() assert(m:backward(torch.rand(1000):float(), torch.ones(1000):float()):sum() == 1000) end)
"""))
    for name in ("Tanh", "Sigmoid", "ELU", "Sqrt", "Exp"):
        assert f"nn.{name}: the output of the last forward (2) does not match input size 1000000" in out[name]
        assert out[f"{name} gradInput"] == "0 0"
    assert out["ReLU"] == "ok"


def test_softmax_backward_after_input_resized(tmp_path: Path) -> None:
    """LogSoftMax's row loop read gradOutput for the stale output's rows (past its memory); all
    the softmax modules now name the stale output's size."""
    out = lines(th(tmp_path, PRELUDE + r"""
for _, name in ipairs{'LogSoftMax', 'SoftMax', 'SoftMin', 'SpatialSoftMax', 'SpatialLogSoftMax'} do
  local m = nn[name]():float()
  local big = name:find('Spatial') and {200, 10, 10, 10} or {20000, 10}
  m:forward(torch.rand(torch.LongStorage(big)):float())
  big[1] = 1
  local s = torch.LongStorage(big)
  try(name, function() m:backward(torch.rand(s):float(), torch.ones(s):float()) end)
end
"""))
    for name in ("LogSoftMax", "SoftMax", "SoftMin"):
        assert f"nn.{name}: the output of the last forward (20000x10) does not match input size 1x10" in out[name]
    for name in ("SpatialSoftMax", "SpatialLogSoftMax"):
        assert f"nn.{name}: the output of the last forward (200x10x10x10) does not match input size 1x10x10x10" in out[name]


def test_elementwise_names_must_be_identifiers(tmp_path: Path) -> None:
    """Names travel to Python comma-separated, their sorted order placing the addresses: a name
    with a comma made one tensor two names there, so a scalar went where an address goes (a
    segfault); an empty name shifted every address by one (a program wrote the wrong tensor)."""
    out = lines(th(tmp_path, PRELUDE + r"""
local N = 1000000
local x, y = torch.FloatTensor(N):fill(1), torch.FloatTensor(N):fill(2)
try('comma', function() return torch.elementwise('a = c', {['a,b'] = x, c = y}, {s = 5}) end)
try('empty', function() return torch.elementwise('x = y', {x = x, [''] = y, y = y}) end)
try('space', function() return torch.elementwise('x = y', {x = x, ['y z'] = y}) end)
try('scalar', function() return torch.elementwise('x = y', {x = x, y = y}, {['k,j'] = 1}) end)
print('untouched\t' .. x:sum() .. ' ' .. y:sum())
try('still runs', function() assert(torch.elementwise('x = y + k', {x = x, y = y}, {k = 1})); assert(x:sum() == 3 * N) end)
"""))
    assert 'torch.elementwise: name "a,b" is not an identifier' in out["comma"]
    assert 'torch.elementwise: name "" is not an identifier' in out["empty"]
    assert 'torch.elementwise: name "y z" is not an identifier' in out["space"]
    assert 'torch.elementwise: name "k,j" is not an identifier' in out["scalar"]
    assert out["untouched"] == "1000000 2000000"
    assert out["still runs"] == "ok"


def test_blocked_provider_checks_names_and_argument_count() -> None:
    """The provider's own checks (a caller other than pointwise.lua)."""
    from luabridge.providers.torch_cpu import blocked
    calls = blocked.callbacks(None)
    with pytest.raises(blocked.ProgramError, match="'a b' is not an identifier"):
        calls["blocked_compile"]("x = x", "a b,x", "")
    pid = calls["blocked_compile"]("x = y * k", "x,y", "k")
    with pytest.raises(blocked.ProgramError, match="2 arguments for 2 tensors and 1 scalars"):
        calls["blocked_run"](pid, "Float", 10, 1, 0.0, 0.0)


def test_elementwise_interrupted_on_two_threads_then_runs_again() -> None:
    """Ctrl-C during threaded blocked runs: KeyboardInterrupt, the workers are waited for, and the
    runtime's next programs run and give the right values; four runtimes in four Python threads
    run programs and Dropout's threaded masks at once."""
    out = py(r"""
import signal, threading, time
import luabridge
signal.signal(signal.SIGINT, signal.default_int_handler)
run = luabridge.eval('''(function()
  require 'torch'
  require('torch.backend.cpu.blas').watchLoad = false
  torch.setnumthreads(2)
  local x, y = torch.FloatTensor(2000000):fill(1), torch.FloatTensor(2000000):fill(2)
  return function(rounds)
    local pw = require('torch.backend.cpu.pointwise').blocked
    local r0 = pw.runs
    for i = 1, rounds do torch.elementwise('x = x*0 + y + k; y = y*1', {x = x, y = y}, {k = i}) end
    return pw.runs - r0, x[1], x[2000000], y:sum()
  end
end)()''')
def send():
    time.sleep(0.5)
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
for _ in range(2):
    t = threading.Thread(target=send); t.start()
    try:
        run(10 ** 6)
        print('not interrupted')
    except KeyboardInterrupt:
        print('interrupted')
    t.join()
    print('after', run(3))
SRC = '''(function()
  require 'nn'
  require('torch.backend.cpu.blas').watchLoad = false
  torch.setnumthreads(2)
  local x, y = torch.FloatTensor(1000000):fill(1), torch.FloatTensor(1000000):fill(2)
  for i = 1, 20 do torch.elementwise('x = x*0 + y + k', {x = x, y = y}, {k = i}) end
  local m = nn.Dropout(0.5):float()
  m:forward(torch.FloatTensor(1000000):fill(1))
  local kept = m.output:ne(0):sum()
  return x[1], x[1000000], m.output:sum() / kept, kept > 400000 and kept < 600000
end)()'''
res = {}
def worker(i):
    try:
        res[i] = tuple(luabridge.eval(SRC))
    except BaseException as e:
        res[i] = repr(e)
ts = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
print('threads', sorted(res.values()) == [(22, 22, 2, True)] * 4, res)
""")
    assert out.count("interrupted\n") == 2 and "not interrupted" not in out, out
    assert out.count("after (3, 5, 5, 4000000)") == 2, out
    assert "threads True" in out, out


def test_dropout_backward_with_another_size_names_the_module(tmp_path: Path) -> None:
    """A gradOutput whose size is not the last forward's mask: Dropout names itself and both
    sizes (it was cmul's error, after gradInput had been resized); p = 1 and p = 0 by setp give
    torch7's values (NaN for v2's 0/0, zeros for v1; the identity), without numpy's warnings."""
    r = run_script(tmp_path, PRELUDE + r"""
require('torch.backend.cpu.blas').watchLoad = false
torch.setnumthreads(2)
local N = 600000
for _, ip in ipairs{false, true} do for _, v1 in ipairs{false, true} do
  local tag = (ip and 'ip' or '') .. (v1 and 'v1' or 'v2')
  local m = nn.Dropout(0.5, v1, ip):float()
  m:forward(torch.FloatTensor(N):fill(1))
  local gi = m.gradInput:nElement()
  try(tag, function() m:backward(torch.FloatTensor(2 * N):fill(1), torch.FloatTensor(2 * N):fill(1)) end)
  print(tag .. ' gradInput\t' .. m.gradInput:nElement() - gi)
  m:setp(1)
  local y = m:forward(torch.FloatTensor(N):fill(1))
  print(tag .. ' p=1\t' .. (v1 and tostring(y:sum()) or tostring(y:ne(y):sum())))
  m:setp(0)
  print(tag .. ' p=0\t' .. m:forward(torch.FloatTensor(N):fill(1)):sum())
end end
""")
    assert r.returncode == 0, r.stderr
    assert "Warning" not in r.stderr, r.stderr
    out = lines(r.stdout)
    for tag in ("v2", "v1", "ipv2", "ipv1"):
        assert (f"nn.Dropout: gradOutput size {2 * 600000} does not match the noise of the last forward "
                f"({600000})") in out[tag]
        assert out[f"{tag} gradInput"] == "0"
        assert out[f"{tag} p=1"] == ("0" if "v1" in tag else "600000")
        assert out[f"{tag} p=0"] == "600000"


PLAN_MODEL = r"""
local planConv = require 'nn.util.plan_conv'
""" + r"""local function block(c)
  local body = nn.Sequential():add(nn.SpatialConvolution(c, c, 3, 3, 1, 1, 1, 1)):add(nn.SpatialBatchNormalization(c)):add(nn.ReLU(true))
    :add(nn.SpatialConvolution(c, c, 3, 3, 1, 1, 1, 1)):add(nn.SpatialBatchNormalization(c))
  return nn.Sequential():add(nn.ConcatTable():add(body):add(nn.Identity())):add(nn.CAddTable(true)):add(nn.ReLU(true))
end
function build()
  torch.manualSeed(1)
  local m = nn.Sequential():add(nn.SpatialConvolution(3, 8, 3, 3, 1, 1, 1, 1)):add(nn.SpatialBatchNormalization(8)):add(nn.ReLU(true))
    :add(block(8)):add(nn.SpatialMaxPooling(2, 2, 2, 2)):add(block(8)):add(nn.View(-1):setNumInputDims(3)):add(nn.Linear(128, 5))
  m:float(); m:evaluate()
  for _, b in ipairs(m:findModules('nn.SpatialBatchNormalization')) do b.running_mean:uniform(-0.1, 0.1); b.running_var:uniform(0.5, 1.5) end
  return m
end
x = torch.FloatTensor(2, 3, 8, 8):uniform(-1, 1)
function ref(m, input)
  nn.plans.enabled = false
  local r = m:clone():forward(input):clone()
  nn.plans.enabled = true
  return r
end
"""


def test_plan_forward_from_inside_a_module_and_error_mid_forward(tmp_path: Path) -> None:
    """A planned model whose module calls the model's forward (re-entrancy): the nested run left
    the modules lazy and the outer one made their stand-in their saved class, so reading a lazy
    output looped to a stack overflow; now planned and layer-by-layer runs agree, outputs too.
    A module between segments failing mid-forward left the segments' inner modules with an
    earlier forward's outputs; now they hold this forward's (up to the failing module)."""
    out = lines(th(tmp_path, PRELUDE + PLAN_MODEL + r"""
local Re = torch.class('nn.ReentrantTest', 'nn.Identity')
local function run(enabled)
  nn.plans.enabled = enabled
  local m2 = build(); local depth = 0
  local inner = nn.ReentrantTest():float()
  function inner:updateOutput(input)
    depth = depth + 1
    if depth == 3 then m2:forward(x:clone():mul(3)) end
    self.output = input; return input
  end
  m2:insert(inner, 5)
  m2:forward(x); m2:forward(x); local o = m2:forward(x):clone()
  local conv = m2.modules[4].modules[1].modules[1].modules[1]
  local c1 = conv.output:clone()
  local o2 = m2:forward(x):clone()
  return { o, c1, o2, conv.output:clone() }, planConv.planned(m2)
end
local a, planned = run(true)
local b = run(false)
nn.plans.enabled = true
local worst = 0
for i = 1, 4 do worst = math.max(worst, (a[i] - b[i]):abs():max()) end
print('reentrant\t' .. tostring(worst < 1e-5) .. ' ' .. tostring(planned))

local m = build(); m:forward(x); m:forward(x)
local x2 = x:clone():mul(2)
m.modules[8].weight = torch.FloatTensor(5, 7)
try('failing', function() return m:forward(x2) end)
local conv1 = m.modules[1].output
local inner = m.modules[4].modules[1].modules[1].modules[1].output
nn.plans.enabled = false
local want1 = m.modules[1]:clone():forward(x2)
nn.plans.enabled = true
print('after error\t' .. tostring((conv1 - want1):abs():max() < 1e-5) .. ' ' .. inner:size(2))
"""))
    assert out["reentrant"] == "true true"
    assert "nn.Linear" in out["failing"]
    assert out["after error"] == "true 8"


def test_fused_group_workers_end_with_their_runtime() -> None:
    """Each runtime's team of fused-group workers (fusion_threads.lua) waited for jobs for the
    rest of the process once its runtime was gone: a program running large groups from threads
    that come and go piled up a worker thread (and its Lua runtime) per thread. Now a closed
    runtime stops its workers; the values stay right."""
    out = py(r"""
import gc, threading, time
import numpy as np
import luabridge.tinyflow as tf
from luabridge.graph import Session
from luabridge.core.runtime import bridge
SET = "local torch = require 'torch'; require('torch.backend.cpu.blas').watchLoad = false; torch.setnumthreads(2)"
def work(i, out):
    b = bridge(); b.call(b.load(SET, "=s"))
    x = tf.placeholder(tf.float32, name="x")
    z = tf.exp(tf.tanh(x * 0.5) + 1.0) * x
    xv = np.random.default_rng(i).random(400003).astype(np.float32)
    r = Session("cpu fusion").run(z, {x: xv})
    out[i] = bool(np.allclose(r, np.exp(np.tanh(xv * 0.5) + 1) * xv, rtol=1e-5))
before = threading.active_count()
out = {}
for rnd in range(2):
    ts = [threading.Thread(target=work, args=(rnd * 4 + i, out)) for i in range(4)]
    [t.start() for t in ts]; [t.join() for t in ts]
print('values', sorted(out.values()) == [True] * 8)
deadline = time.monotonic() + 60
while threading.active_count() > before and time.monotonic() < deadline:
    gc.collect(); time.sleep(0.2)
print('left', threading.active_count() - before, [t.name for t in threading.enumerate()])
""")
    assert "values True" in out, out
    assert "left 0 " in out, out


def test_nan_activation_parameters_run_the_modules_own_pass(tmp_path: Path) -> None:
    """A NaN parameter (nn.ELU(0/0), nn.LeakyReLU(0/0)) keyed oneDNN's plan table: 'table index
    is NaN' from dnnl_eltwise.lua; now oneDNN declines and the module's loop gives its NaNs, as
    with oneDNN off."""
    out = lines(th(tmp_path, PRELUDE + r"""
local x = torch.randn(100000):float()
for _, name in ipairs{'ELU', 'LeakyReLU'} do
  local m = nn[name](0/0):float()
  try(name, function()
    local y, g = m:forward(x):clone(), m:backward(x, x):clone()
    require('torch.backend.cpu.dnnl_eltwise').enabled = false
    local y2, g2 = m:forward(x):clone(), m:backward(x, x):clone()
    require('torch.backend.cpu.dnnl_eltwise').enabled = true
    local function same(a, b) return a:ne(a):eq(b:ne(b)):all() and a:eq(a):cmul(a:ne(b)):sum() == 0 end
    assert(same(y, y2) and same(g, g2), 'values differ')
  end)
end
"""))
    assert out == {"ELU": "ok", "LeakyReLU": "ok"}


def test_log_softmax_row_loops_decline_operands_of_other_sizes(tmp_path: Path) -> None:
    """The op table's LogSoftMax row loops read every operand for the output's rows: they now
    decline (false) where an operand has another element count, whoever calls them."""
    out = lines(th(tmp_path, PRELUDE + r"""
local ops = require('torch.backend').of(torch.FloatTensor())
local out, buf = torch.FloatTensor(20000, 10):uniform(), torch.FloatTensor(20000, 10)
local gi, go = torch.FloatTensor(20000, 10), torch.FloatTensor(1, 10):fill(1)
try('backward', function() assert(ops.log_softmax_rows_backward(gi, go, out, buf) == false) end)
try('forward', function() assert(ops.log_softmax_rows_forward(torch.FloatTensor(20000, 10), go, buf) == false) end)
try('same sizes', function() assert(ops.log_softmax_rows_backward(gi, gi:clone(), out, buf) == true) end)
"""))
    assert out == {"backward": "ok", "forward": "ok", "same sizes": "ok"}


def test_onednn_in_a_child_forked_after_its_threads_started() -> None:
    """GNU OpenMP is not fork-safe: a child forked after oneDNN ran a pass on 2 threads waited
    for ever in its next pass (an activation, a convolution). The child now runs oneDNN on one
    thread, with the parent's values; a plan made for 2 threads raises a clear error there."""
    out = py(AWAIT_CHILD + r"""
import os
import luabridge
f = luabridge.eval('''(function()
  require 'nn'
  require('torch.backend.cpu.blas').watchLoad = false
  torch.setnumthreads(2)
  local e = require('torch.backend.cpu.dnnl_eltwise')
  torch.manualSeed(3)
  local x = torch.FloatTensor(1000000):uniform(-1, 1)
  local conv = nn.SpatialConvolution(16, 16, 3, 3):float()
  local xc = torch.FloatTensor(8, 16, 32, 32):uniform()
  return function(force)
    e.forceThreads = force
    local ok, y = pcall(function() return nn.ELU():float():forward(x):sum() end)
    e.forceThreads = nil
    if not ok then return tostring(y) end
    return y, conv:forward(xc):sum()
  end
end)()''')
parent = f(None)
f(2)
pid = os.fork()
if pid == 0:
    child = f(None)
    forced = f(2)
    os._exit(0 if child == parent and 'not fork-safe' in str(forced) else 3)
await_child(pid, 120)
""")
    assert "child exit 0" in out, out
