"""Write versions and escape marks of buffers (lua/torch/core/versions.lua), and the evaluation
plans that keep their convolutions' blocked weights while the weights' buffer is unchanged
(lua/torch/backend/cpu/nn_plan.lua). For every way a weight can be written (the op table's
ops, the Storage / Tensor / File surface, raw pointers, numpy and DLPack views, memory lent by
Python, the torch bridge), a planned ResNet-like conv net in evaluation runs, its third
convolution's weights are written that way, and the next planned forward must equal the same
model run layer by layer (plans off: every convolution reads its weights itself); the counters
of reorders show the cache hitting where nothing was written, and never for an escaped buffer.
Each case runs with the cache on and off."""
from pathlib import Path

import numpy as np
import pytest

import luabridge
from helpers import lua_fn

available = lua_fn("""function()
  require 'nn'
  return require('torch.backend').cpu.plan_conv_supported(torch.FloatTensor(1))
end""")
pytestmark = pytest.mark.skipif(not available(), reason="oneDNN is not installed (pip install 'luabridge[onednn]')")

TESTS = Path(__file__).resolve().parent
TOL = 2e-5
CONVS = 10   # the convolutions of plan_models.lua's resnet: every one has blocked weights here

HARNESS = lua_fn(r"""function(models, compare)
  require 'nn'
  require 'optim'
  local P = dofile(models)
  local maxDiff = dofile(compare)
  local V = require 'torch.core.versions'
  local H = { V = V }

  -- a planned model warmed up (its blocked weights cached where the cache is on): setup(H, model,
  -- conv) runs first (a pointer taken, getParameters)
  function H.prepare(cache, setup)
    torch.manualSeed(1)
    local model, sizes = P.resnet()
    model = P.randomStats(model:float())
    model:evaluate()
    local x = torch.FloatTensor(2, unpack(sizes)):normal()
    local conv = model:findModules('nn.SpatialConvolution')[3]
    H.model, H.x, H.conv = model, x, conv
    if setup then setup(H, model, conv) end
    V.cacheWeights = cache
    nn.plans.enabled = true
    model:forward(x)
    H.before = model:forward(x):clone()
    return H
  end

  -- after a write: the planned forward against the layer-by-layer one, how far the write moved
  -- the output, and the weight reorders of the planned forward
  function H.finish()
    local model, x = H.model, H.x
    local r0 = V.reorders
    local planned = model:forward(x):clone()
    local reorders = V.reorders - r0
    nn.plans.enabled = false
    local ref = model:forward(x):clone()
    nn.plans.enabled = true
    V.cacheWeights = true
    return maxDiff(planned, ref), maxDiff(H.before, ref), reorders
  end

  -- reorders and hits of n more planned forwards (each must equal the first)
  function H.forwards(n)
    local r0, h0 = V.reorders, V.hits
    local first = H.model:forward(H.x):clone()
    for _ = 2, n do assert(maxDiff(H.model:forward(H.x), first) == 0) end
    return V.reorders - r0, V.hits - h0
  end

  function H.escaped(t) return V.marked(t) end
  return H
end""")

_H = {}


def H():  # noqa: N802 - the Lua harness table
    if "h" not in _H:
        _H["h"] = HARNESS(str(TESTS / "plan_models.lua"), str(TESTS / "plans_compare.lua"))
    return _H["h"]


def lua(code: str):
    return lua_fn(code)


# Lua write paths: (setup or None, write), each a function(H, model, conv)
WRITES = {
    "Tensor:copy": (None, "function(H, m, c) c.weight:copy(c.weight:clone():mul(-1.5)) end"),
    "Tensor:mul in place": (None, "function(H, m, c) c.weight:mul(2) end"),
    "Tensor:uniform": (None, "function(H, m, c) c.weight:uniform(-1, 1) end"),
    "Tensor:fill": (None, "function(H, m, c) c.weight:fill(0.05) end"),
    "Tensor:zero of a narrow": (None, "function(H, m, c) c.weight:narrow(1, 2, 3):zero() end"),
    "element assignment": (None, "function(H, m, c) c.weight[{1, 1, 1, 1}] = 50; c.weight[{5, 3, 2, 2}] = 50 end"),
    "sub-tensor assignment": (None, "function(H, m, c) c.weight[2] = 3 end"),
    "indexed copy": (None, "function(H, m, c) c.weight:indexCopy(1, torch.LongTensor{1, 4}, "
                           "c.weight:index(1, torch.LongTensor{2, 3}):mul(-3)) end"),
    "torch.add into": (None, "function(H, m, c) torch.add(c.weight, c.weight, 0.3) end"),
    "torch.randn into": (None, "function(H, m, c) torch.randn(c.weight, c.weight:size()) end"),
    "optim.sgd on getParameters":
        ("function(H, m, c) H.flat, H.grad = m:getParameters() end",
         "function(H, m, c) H.grad:normal(); "
         "optim.sgd(function() return 0, H.grad end, H.flat, { learningRate = 0.5 }) end"),
    "updateParameters": ("function(H, m, c) m:zeroGradParameters(); m:training(); "
                         "m:backward(H.x, m:forward(H.x):clone():normal()); m:evaluate() end",
                         "function(H, m, c) m:updateParameters(0.5) end"),
    "Storage element": (None, "function(H, m, c) local s, o = c.weight:storage(), c.weight:storageOffset(); "
                         "s[o + 3] = 40; s[o + 100] = 40; s[o + 200] = -40 end"),
    "Storage:fill": (None, "function(H, m, c) c.weight:storage():fill(0.01) end"),
    "Storage:copy": (None, "function(H, m, c) local s = c.weight:storage(); "
                           "s:copy(torch.FloatStorage(s:size()):fill(0.02)) end"),
    "Storage:copy from a table": (None, "function(H, m, c) local s = c.weight:storage(); local t = {}; "
                                        "for i = 1, s:size() do t[i] = (i % 7) * 0.01 end; s:copy(t) end"),
    "a view storage's write": (None, "function(H, m, c) local s = c.weight:storage(); "
                                     "torch.FloatStorage(s, 5, 20):fill(2) end"),
    "Storage:resize swapping buffers": (None, "function(H, m, c) local s = c.weight:storage(); "
                                              "local n = s:size(); s:resize(0); s:resize(n) end"),
    "Tensor:set to other memory": (None, "function(H, m, c) "
                                         "c.weight:set(c.weight:clone():mul(-2)) end"),
    "Tensor:set to a view storage": ("function(H, m, c) local s = c.weight:storage(); "
                                     "H.s = torch.FloatStorage(s:size() + 8); torch.FloatTensor(H.s, 1, s:size()):copy(torch.FloatTensor(s)) end",
                                     "function(H, m, c) c.weight:set(H.s, 9, c.weight:size()) end"),
    "MemoryFile read into the storage": (None, "function(H, m, c) local s = c.weight:storage(); "
                                              "local f = torch.MemoryFile(); "
                                              "f:writeFloat(torch.FloatStorage(s:size()):fill(-0.05)); f:seek(1); "
                                              "f:readFloat(s) end"),
    "DiskFile read into the storage": (None, "function(H, m, c) local s = c.weight:storage(); "
                                            "local path = os.tmpname(); local f = torch.DiskFile(path, 'w'):binary(); "
                                            "f:writeFloat(torch.FloatStorage(s:size()):fill(0.07)); f:close(); "
                                            "f = torch.DiskFile(path, 'r'):binary(); f:readFloat(s); f:close(); "
                                            "os.remove(path) end"),
    "torch.load then set": (None, "function(H, m, c) local f = torch.MemoryFile():binary(); "
                                  "f:writeObject(c.weight:clone():mul(3)); f:seek(1); "
                                  "c.weight:set(f:readObject()) end"),
    "deserialize then copy": (None, "function(H, m, c) "
                                    "c.weight:copy(torch.deserialize(torch.serialize(c.weight:clone():add(1)))) end"),
    # raw pointers: taken before the plan ran (the buffer escaped then), written after
    "Tensor:data pointer": ("function(H, m, c) H.p = c.weight:data() end",
                            "function(H, m, c) for i = 0, 500, 50 do H.p[i] = 30 end end"),
    "Storage:data pointer": ("function(H, m, c) H.p = c.weight:storage():data() end",
                             "function(H, m, c) for i = 0, 500, 50 do H.p[c.weight:storageOffset() + i] = 30 end end"),
    "torch.data": ("function(H, m, c) H.p = torch.data(c.weight) end",
                   "function(H, m, c) for i = 3, 500, 50 do H.p[i] = 25 end end"),
    "Tensor:cdata": ("function(H, m, c) H.c = c.weight:cdata() end",
                     "function(H, m, c) for i = 2, 500, 50 do H.c.storage.data[H.c.storageOffset + i] = 33 end end"),
    "Storage:cdata": ("function(H, m, c) H.c = c.weight:storage():cdata() end",
                      "function(H, m, c) for i = 1, 500, 50 do H.c.data[c.weight:storageOffset() + i] = 33 end end"),
    "the op table's ptr": ("function(H, m, c) H.p = require('torch.backend').of(c.weight).ptr(c.weight) end",
                           "function(H, m, c) for i = 0, 500, 50 do H.p[i] = 44 end end"),
}


@pytest.mark.parametrize("cache", [True, False], ids=["cache", "nocache"])
@pytest.mark.parametrize("path", sorted(WRITES))
def test_lua_write_paths(path: str, cache: bool) -> None:
    setup, write = WRITES[path]
    h = H().prepare(cache, lua(setup) if setup else None)
    lua(write)(h, h.model, h.conv)
    worst, moved, reorders = h.finish()
    assert moved > 1e-3, f"{path}: the write did not change the output ({moved})"
    assert worst < TOL, f"{path} (cache {cache}): planned and layer-by-layer differ by {worst}"
    assert reorders >= 1


def test_numpy_view_written() -> None:
    """A numpy view (luabridge.to_numpy) made after the plan cached the weights, written."""
    h = H().prepare(True, None)
    view = luabridge.to_numpy(h.conv.weight)
    assert H().escaped(h.conv.weight)
    view[1:3] *= -2
    worst, moved, reorders = h.finish()
    assert moved > 1e-3 and worst < TOL and reorders == 1


def test_numpy_view_gone_caches_again() -> None:
    """While a numpy view lives the weights reorder at every run; once it is gone (a copy of the
    values taken, as a benchmark copying our weights into PyTorch does) they are kept again."""
    h = H().prepare(True, None)
    copy = np.array(luabridge.to_numpy(h.conv.weight))
    view = luabridge.to_numpy(h.conv.weight)
    assert H().escaped(h.conv.weight)
    reorders, _ = h.forwards(2)
    assert reorders == 2
    view *= 0.5
    del view
    reorders, hits = h.forwards(3)
    assert reorders == 1 and hits == 3 * CONVS - 1
    worst, moved, _ = h.finish()
    assert moved > 1e-3 and worst < TOL
    assert copy.shape == (8, 8, 3, 3)


def test_dlpack_view_written() -> None:
    """A DLPack consumer (numpy.from_dlpack of the tensor's proxy) writing in place."""
    h = H().prepare(True, None)
    arr = np.from_dlpack(luabridge.wrap(h.conv.weight))
    assert H().escaped(h.conv.weight)
    reorders, _ = h.forwards(2)
    assert reorders == 2
    arr[0] += 1.0
    worst, moved, reorders = h.finish()
    assert moved > 1e-3 and worst < TOL and reorders == 1


def test_weight_lent_by_numpy() -> None:
    """A weight over numpy's memory (luabridge.from_numpy): escaped from the start."""
    h = H().prepare(True, None)
    arr = luabridge.to_numpy(h.conv.weight).copy()
    t = luabridge.from_numpy(arr)
    lua("function(H, t) H.conv.weight:set(t) end")(h, luabridge.unwrap(t))
    assert H().escaped(h.conv.weight)
    h.forwards(2)
    arr *= -1
    worst, moved, reorders = h.finish()
    assert moved > 1e-3 and worst < TOL and reorders == 1


def test_torch_bridge_optimizer_step() -> None:
    """torch.optim stepping a LuaModule's parameters (PyTorch's memory shared with the Lua
    weights) between planned forwards."""
    torch = pytest.importorskip("torch")
    from luabridge.torch import LuaModule

    h = H().prepare(True, None)
    net = LuaModule(luabridge.wrap(h.model))
    net.eval()
    x = torch.from_numpy(luabridge.to_numpy(h.x).copy())
    with torch.no_grad():
        net(x)
        before = net(x).clone()
    opt = torch.optim.SGD(net.parameters(), lr=0.5)
    for p in net.parameters():
        p.grad = torch.randn_like(p)
    opt.step()
    with torch.no_grad():
        planned = net(x).clone()
    ref = lua("""function(m, x)
      nn.plans.enabled = false
      local r = m:forward(x):clone()
      nn.plans.enabled = true
      return r
    end""")(h.model, h.x)
    ref = torch.from_numpy(luabridge.to_numpy(ref).copy())
    scale = max(1.0, float(ref.abs().max()))
    assert float((before - ref).abs().max()) / scale > 1e-3
    assert float((planned - ref).abs().max()) / scale < TOL


def test_cache_hits_when_nothing_is_written() -> None:
    h = H().prepare(True, None)
    reorders, hits = h.forwards(4)
    assert reorders == 0 and hits == 4 * CONVS
    # one weight written: that convolution alone reorders, once
    lua("function(H) H.conv.weight:mul(0.5) end")(h)
    reorders, hits = h.forwards(3)
    assert reorders == 1 and hits == 3 * CONVS - 1


def test_reads_do_not_bump() -> None:
    """What only reads the weights (eager ops, clones, copies out, norms, serialization, the
    layer-by-layer run) keeps the cache."""
    h = H().prepare(True, None)
    lua("""function(H)
      local w = H.conv.weight
      local x = w:clone(); x:copy(w); x:add(w); torch.cmul(x, w, w)
      local _ = w:sum() + w:norm() + w:max() + w:dot(w)
      local s = torch.serialize(H.model)
      local i = w:index(1, torch.LongTensor{1, 2})
      local p = H.model:parameters()
      local f = torch.FloatTensor(w:nElement()):copy(w)
      nn.plans.enabled = false
      H.model:forward(H.x)
      nn.plans.enabled = true
    end""")(h)
    reorders, hits = h.forwards(2)
    assert reorders == 0 and hits == 2 * CONVS


def test_escaped_buffer_never_cached() -> None:
    h = H().prepare(True, lua("function(H, m, c) H.p = c.weight:data() end"))
    assert H().escaped(h.conv.weight)
    reorders, hits = h.forwards(3)
    assert reorders == 3 and hits == 3 * (CONVS - 1)


def test_switch_off_reorders_every_run() -> None:
    h = H().prepare(False, None)
    reorders, hits = h.forwards(3)
    assert reorders == 3 * CONVS and hits == 0


def test_the_copy_bump_is_what_keeps_it_right() -> None:
    """With the copy op's bump taken away, the copy path above leaves the plan on its stale
    weights: the check that catches a missing bump works."""
    h = H().prepare(True, None)
    stale = lua("""function(H)
      local be = require('torch.backend')
      local wrapped = be.cpu.copy
      rawset(be.cpu, 'copy', be.unwrapped(wrapped))
      local ok, err = pcall(function() H.conv.weight:copy(H.conv.weight:clone():mul(-1.5)) end)
      rawset(be.cpu, 'copy', wrapped)
      assert(ok, err)
    end""")
    stale(h)
    worst, moved, reorders = h.finish()
    assert reorders == 0 and worst > 1e-3, "without copy's bump the plan should have kept stale weights"


def test_failed_write_and_bad_input_keep_the_plan_right() -> None:
    h = H().prepare(True, None)
    err = lua("""function(H)
      local ok1, e1 = pcall(function() H.conv.weight:copy(torch.FloatTensor(3)) end)
      local ok2, e2 = pcall(function() H.model:forward(torch.FloatTensor(2, 5, 20, 20)) end)
      return tostring(e1) .. '\\n' .. tostring(e2)
    end""")(h)
    assert "copy" in err or "size" in err or "elements" in err
    assert "SpatialConvolution" in err or "input" in err
    worst, moved, reorders = h.finish()
    assert worst < TOL


def test_bump_and_escape_follow_views() -> None:
    """A storage viewing another bumps and escapes the buffer's owner."""
    r = lua("""function()
      local V = require 'torch.core.versions'
      V.watch()   -- versions move once a plan keeps something (as after any cached forward)
      local root = torch.FloatStorage(10)
      local view = torch.FloatStorage(root, 3, 4)
      local t = torch.FloatTensor(view, 1, torch.LongStorage{2, 2})
      local v0 = V.state(root)
      t:fill(1)
      local v1 = V.state(root)
      view[1] = 2
      local v2, esc0 = V.state(root)
      local _ = t:data()
      local _, esc1 = V.state(root)
      return v1 > v0, v2 > v1, esc0, esc1, V.root(t) == root
    end""")()
    assert r == (True, True, False, True, True)


def test_weight_written_by_another_lua_state() -> None:
    """A weight shared with a `threads` worker (threads.sharedserialize: the worker's runtime
    gets a storage over the same memory) and written there."""
    h = H().prepare(True, None)
    lua("""function(H)
      local threads = require 'threads'
      threads.serialization('threads.sharedserialize')
      local pool = threads.Threads(1, function() require 'torch' end)
      pool:addjob(function(w) w:mul(-2); w:narrow(1, 1, 2):add(0.5) end, function() end, H.conv.weight)
      pool:synchronize()
      pool:terminate()
    end""")(h)
    assert H().escaped(h.conv.weight)
    worst, moved, reorders = h.finish()
    assert moved > 1e-3 and worst < TOL and reorders == 1


def test_every_declared_op_exists() -> None:
    """backend.writes names ops of the tables (a misspelt name would leave its op bumping
    everything, or a new op's writes undeclared where a table argument holds them)."""
    missing = lua("""function()
      local b = require 'torch.backend'
      local out = {}
      for name in pairs(b.writes) do
        if rawget(b.cpu, name) == nil and rawget(b.cuda, name) == nil then out[#out + 1] = name end
      end
      table.sort(out)
      return table.concat(out, ' ')
    end""")()
    assert missing == ""


def test_op_results_bump_and_reads_do_not() -> None:
    """The op table's wrappers: a result is bumped, an operand only read is not."""
    r = lua("""function()
      local V = require 'torch.core.versions'
      V.watch()
      local a, b, r = torch.FloatTensor(5):fill(1), torch.FloatTensor(5):fill(2), torch.FloatTensor(5)
      local va, vb, vr = V.state(a), V.state(b), V.state(r)
      r:add(a, b); torch.cmul(r, a, b); r:copy(a); local _ = a:sum() + b:dot(a)
      local va2, vb2, vr2 = V.state(a), V.state(b), V.state(r)
      torch.sort(r, torch.LongTensor(), b)
      return va2 == va, vb2 == vb, vr2 > vr, V.state(b) == vb, V.state(r) > vr2
    end""")()
    assert r == (True, True, True, True, True)
