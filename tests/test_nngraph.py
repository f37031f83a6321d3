"""nngraph (lua/nngraph/): node-call syntax, gModule forward against numpy, gradients (inputs and
parameters) against finite differences, multiple/nested inputs and outputs, split, fan-out sums,
gModules inside containers, type conversion and the error cases; node orders as torch7's (hand
derived, and against a torch7 file), forwardnodes reaching the modules that run, declaration
labels, .dot files (and svg when Graphviz is installed), simple_print, setDebug, annotateNodes,
node labels and nngraph.nesting."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import luabridge
from helpers import N, T, T7_FIXTURES, lua_fn, needs_t7_fixtures, numeric_grad

# Small modules for the tests (defined once per runtime):
#   Add2: {a, b} -> a + b;  Scale23: x -> {2x, 3x};  Nest: x -> {x, {-x, x^2}};
#   Flatten3: {a, {b, c}} -> a + 2b + 3c (elementwise).
_SETUP = lua_fn("""function()
  require 'nngraph'
  if torch.getmetatable('nngraphtest.Add2') then return end
  local Add2 = torch.class('nngraphtest.Add2', 'nn.Module')
  function Add2:updateOutput(input) self.output = input[1] + input[2]; return self.output end
  function Add2:updateGradInput(input, g) self.gradInput = { g:clone(), g:clone() }; return self.gradInput end
  local Scale23 = torch.class('nngraphtest.Scale23', 'nn.Module')
  function Scale23:updateOutput(x) self.output = { x * 2, x * 3 }; return self.output end
  function Scale23:updateGradInput(x, g) self.gradInput = g[1] * 2 + g[2] * 3; return self.gradInput end
  local Nest = torch.class('nngraphtest.Nest', 'nn.Module')
  function Nest:updateOutput(x) self.output = { x:clone(), { -x, torch.cmul(x, x) } }; return self.output end
  function Nest:updateGradInput(x, g)
    self.gradInput = g[1] - g[2][1] + torch.cmul(g[2][2], x) * 2
    return self.gradInput
  end
  local Flatten3 = torch.class('nngraphtest.Flatten3', 'nn.Module')
  function Flatten3:updateOutput(t) self.output = t[1] + t[2][1] * 2 + t[2][2] * 3; return self.output end
  function Flatten3:updateGradInput(t, g) self.gradInput = { g:clone(), { g * 2, g * 3 } }; return self.gradInput end
end""")


@pytest.fixture(scope="module")
def ng(lua):
    _SETUP()
    return lua


_IS_TENSOR = lua_fn("function(x) return torch.isTensor(x) end")
_TYPE = lua_fn("function(x) return torch.type(x) end")


def _flat(x: Any) -> list[np.ndarray]:
    """The tensors of a (nested) Lua table or a tensor, depth first, as numpy copies."""
    if _IS_TENSOR(x):
        return [N(x)]
    out = []
    for i in range(1, len(x) + 1):
        out += _flat(x[i])
    return out


# Builds a net from Lua source (`return gModule`), and returns functions over numpy arrays.
_BUILD = lua_fn("""function(src)
  torch.manualSeed(7)
  local net = loadstring(src)()
  local params, grads = net:getParameters()
  return net, params, grads
end""")

_FORWARD = lua_fn("function(net, input) return net:forward(input) end")
_BACKWARD = lua_fn("""function(net, input, gradOutput)
  net:zeroGradParameters()
  net:forward(input)
  return net:backward(input, gradOutput)
end""")


def _objective_weights(rng: np.random.Generator, outputs: list[np.ndarray]) -> list[np.ndarray]:
    return [rng.standard_normal(o.shape) for o in outputs]


def _as_lua(arrays: list[np.ndarray], shape: Any) -> Any:
    """Tensors viewing the arrays, arranged as the nested Lua structure `shape` (ints = positions)."""
    if isinstance(shape, int):
        return T(arrays[shape])
    return luabridge.eval("function(...) return {...} end")(*[_as_lua(arrays, s) for s in shape])


def check_gradients(net: Any, params: Any, grads: Any, inputs: list[np.ndarray], shape: Any,
                    rng: np.random.Generator, eps: float = 1e-6) -> None:
    """Backward of L = sum_k <w_k, output_k> matches central differences of L, for every input
    element and every parameter."""
    lua_in = _as_lua(inputs, shape)
    out = _FORWARD(net, lua_in)
    ws = _objective_weights(rng, _flat(out))
    go = _like(out, iter(ws))             # gradOutput with the output's structure
    grad_in = _flat(_BACKWARD(net, lua_in, go))
    grad_p = N(grads)

    def loss() -> float:
        return sum(float((w * o).sum()) for w, o in zip(ws, _flat(_FORWARD(net, lua_in))))

    # gradInput follows the input structure (same depth-first order)
    assert len(grad_in) == len(inputs)
    for arr, gi in zip(inputs, grad_in):
        np.testing.assert_allclose(gi, numeric_grad(loss, arr, eps), rtol=1e-5, atol=1e-7)
    if grad_p.size:
        np.testing.assert_allclose(grad_p, numeric_grad(loss, luabridge.to_numpy(params), eps), rtol=1e-5, atol=1e-7)


def _like(struct: Any, ws: Any) -> Any:
    """A Lua value with struct's nesting holding the next arrays of ws as tensors."""
    if _IS_TENSOR(struct):
        return T(next(ws))
    items = [_like(struct[i], ws) for i in range(1, len(struct) + 1)]
    return luabridge.eval("function(...) return {...} end")(*items)


MLP = """
local x = nn.Identity()()
local h = nn.Tanh()(nn.Linear(3, 4)(x))
local y = nn.Linear(4, 2)(h)
return nn.gModule({x}, {y})
"""


def test_mlp_forward_matches_numpy(ng, rng):
    net, _, _ = _BUILD(MLP)
    x = rng.standard_normal((5, 3))
    lin = lua_fn("function(net) local m = net:findModules('nn.Linear') return m[1].weight, m[1].bias, m[2].weight, m[2].bias end")
    w1, b1, w2, b2 = (N(t) for t in lin(net))
    ref = np.tanh(x @ w1.T + b1) @ w2.T + b2
    np.testing.assert_allclose(N(_FORWARD(net, T(x))), ref, rtol=1e-12)
    np.testing.assert_allclose(N(_FORWARD(net, T(x[1]))), ref[1], rtol=1e-12)   # single sample


@pytest.mark.parametrize("batch", [None, 3])
def test_mlp_gradients(ng, rng, batch):
    net, params, grads = _BUILD(MLP)
    x = rng.standard_normal((3,) if batch is None else (batch, 3))
    check_gradients(net, params, grads, [x], 0, rng)


MULTI = """
local a, b = nn.Identity()(), nn.Identity()()
local la = nn.Linear(3, 2)(a)
local s = nngraphtest.Add2()({la, nn.Linear(4, 2)(b)})
local t = nn.Tanh()(la)                        -- la feeds two nodes: its gradients add up
return nn.gModule({a, b}, {s, t, nn.Linear(2, 3)(s)})
"""


def test_multiple_inputs_and_outputs(ng, rng):
    net, params, grads = _BUILD(MULTI)
    a, b = rng.standard_normal(3), rng.standard_normal(4)
    out = _FORWARD(net, _as_lua([a, b], [0, 1]))
    assert len(out) == 3
    check_gradients(net, params, grads, [a, b], [0, 1], rng)


SPLIT = """
local x = nn.Identity()()
local p, q = nngraphtest.Scale23()(nn.Linear(2, 3)(x)):split(2)
local r = nngraphtest.Add2()({nn.Tanh()(p), q})
return nn.gModule({x}, {r, p})
"""


def test_split(ng, rng):
    net, params, grads = _BUILD(SPLIT)
    x = rng.standard_normal(2)
    r, p = _FORWARD(net, T(x))[1], _FORWARD(net, T(x))[2]
    np.testing.assert_allclose(N(r), np.tanh(N(p)) + N(p) * 1.5, rtol=1e-12)
    check_gradients(net, params, grads, [x], 0, rng)


NESTED = """
local x = nn.Identity()()                     -- receives {a, {b, c}}
local n = nngraphtest.Nest()(nn.Linear(2, 2)(nngraphtest.Flatten3()(x)))
local f1 = nngraphtest.Flatten3()(n)            -- n's nested output feeds two nodes:
local f2 = nngraphtest.Flatten3()(n)            -- nested gradients are summed
return nn.gModule({x}, {f1, nn.Tanh()(f2)})
"""


def test_nested_tables(ng, rng):
    net, params, grads = _BUILD(NESTED)
    arrays = [rng.standard_normal(2) for _ in range(3)]
    check_gradients(net, params, grads, arrays, [0, [1, 2]], rng)


STATE = """
local x, state = nn.Identity()(), nn.Identity()()   -- inputs x and state = {h, c}
local h, c = state:split(2)
local h2 = nn.Tanh()(nngraphtest.Add2()({nn.Linear(3, 3)(x), h}))
return nn.gModule({x, state}, {h2, nngraphtest.Add2()({h2, c})})
"""


def test_nested_input_split(ng, rng):
    net, params, grads = _BUILD(STATE)
    arrays = [rng.standard_normal(3) for _ in range(3)]
    gi = _BACKWARD(net, _as_lua(arrays, [0, [1, 2]]), _as_lua([np.ones(3), np.ones(3)], [0, 1]))
    assert _IS_TENSOR(gi[1]) and len(gi[2]) == 2      # gradInput mirrors {x, {h, c}}
    check_gradients(net, params, grads, arrays, [0, [1, 2]], rng)


def test_nest(ng, rng):
    # nngraph.nest builds a node whose output nests like the given (nested) list of nodes
    vals = [rng.standard_normal(n) for n in (4, 2, 3)]
    out = lua_fn("""function(v1, v2, v3)
      local a, b, c = nn.Identity()(), nn.Identity()(), nn.Identity()()
      local net = nn.gModule({a, b, c}, {nngraph.nest({a, {b}, c}), nngraph.nest({c}), nngraph.nest(a)})
      local o = net:forward({v1, v2, v3})
      local gi = net:backward({v1, v2, v3}, {{v1, {v2}, v3}, {v3}, v1})
      return #o[1], #o[1][2], o[1][2][1], #o[2], o[2][1], o[3], gi[1], gi[2], gi[3]
    end""")(*vals)
    assert out[0] == 3 and out[1] == 1 and out[3] == 1
    np.testing.assert_array_equal(N(out[2]), vals[1])
    np.testing.assert_array_equal(N(out[4]), vals[2])
    np.testing.assert_array_equal(N(out[5]), vals[0])
    for g, expected in zip(out[6:], (2 * vals[0], vals[1], 2 * vals[2])):   # a and c are used twice
        np.testing.assert_allclose(N(g), expected, rtol=1e-12)
    with pytest.raises(luabridge.LuaError, match="nngraph.nest: expecting a node or a non-empty list of nodes, got number"):
        lua_fn("function() return nngraph.nest({nn.Identity()(), 3}) end")()


def test_forwardnodes_and_backwardnodes(ng):
    order = lua_fn("""function(src)
      local net = loadstring(src)()
      local function names(nodes)
        local r = {}
        for i, n in ipairs(nodes) do r[i] = n.data.module and torch.typename(n.data.module) or '-' end
        return table.concat(r, ' ')
      end
      return names(net.forwardnodes), names(net.backwardnodes), #net.modules, net.forwardnodes[1].data == net.innode.data
    end""")
    fwd, bwd, nmod, first = order(MLP)
    assert fwd == "- nn.Identity nn.Linear nn.Tanh nn.Linear -"
    assert bwd == "- nn.Linear nn.Tanh nn.Linear nn.Identity -"
    assert nmod == 4 and first


CONTAINED = """
local x = nn.Identity()()
local inner = nn.gModule({x}, {nn.Tanh()(nn.Linear(3, 3)(x))})
return nn.Sequential():add(nn.Linear(2, 3)):add(inner):add(nn.Linear(3, 2))
"""


def test_gmodule_inside_containers(ng, rng):
    net, params, grads = _BUILD(CONTAINED)
    assert N(params).size == 2 * 3 + 3 + 9 + 3 + 3 * 2 + 2
    check_gradients(net, params, grads, [rng.standard_normal((4, 2))], 0, rng)


def test_gmodule_of_gmodules(ng, rng):
    src = """
    local function block(n) local x = nn.Identity()(); return nn.gModule({x}, {nn.Tanh()(nn.Linear(n, n)(x))}) end
    local x = nn.Identity()()
    local b1 = block(3)(x)
    local b2 = block(3)(b1)
    return nn.gModule({x}, {nngraphtest.Add2()({b1, b2})})
    """
    net, params, grads = _BUILD(src)
    check_gradients(net, params, grads, [rng.standard_normal(3)], 0, rng)


def test_module_call_on_tensors_still_runs_forward(ng, rng):
    x, go = rng.standard_normal((2, 3)), rng.standard_normal((2, 4))
    out, gi, ref_out, ref_gi = lua_fn("""function(x, go)
      torch.manualSeed(1)
      local m = nn.Linear(3, 4)
      local y = m(x):clone()
      local y2, gi = m(x, go)
      return y, gi:clone(), m:forward(x):clone(), m:backward(x, go):clone()
    end""")(x, go)
    np.testing.assert_array_equal(N(out), N(ref_out))
    np.testing.assert_array_equal(N(gi), N(ref_gi))
    # a table of tensors (no node in it) is a forward call too
    tab = lua_fn("function(a, b) return nngraphtest.Add2()({a, b}) end")(rng.standard_normal(2), np.ones(2))
    assert _TYPE(tab) == "torch.DoubleTensor"


def test_node_kinds_and_operators(ng, rng):
    kinds = lua_fn("""function()
      local x = -nn.Identity()                            -- -module: module()
      local y = x - nn.Linear(2, 2) - nn.Tanh()             -- node - module: module(node)
      local c = nn.MSECriterion()({y, nn.Identity()()})   -- a criterion on nodes
      local named = nn.Tanh()(y):annotate{name = 'act'}
      return torch.type(x), torch.type(y), torch.typename(c.data.module), named.data.annotations.name,
             #y.children, y.data.module ~= nil
    end""")()
    assert kinds == ("nngraph.Node", "nngraph.Node", "nn.ModuleFromCriterion", "act", 1, True)


def test_criterion_node_gradients(ng, rng):
    src = """
    local x, t = nn.Identity()(), nn.Identity()()
    local loss = nn.MSECriterion()({nn.Linear(3, 2)(x), t})
    return nn.gModule({x, t}, {loss})
    """
    net, params, grads = _BUILD(src)
    x, t = rng.standard_normal(3), rng.standard_normal(2)
    lin = lua_fn("function(net) local m = net:findModules('nn.Linear')[1] return m.weight, m.bias end")
    w, b = (N(v) for v in lin(net))
    out = N(_FORWARD(net, _as_lua([x, t], [0, 1])))
    np.testing.assert_allclose(out, [np.mean((w @ x + b - t) ** 2)], rtol=1e-12)
    gi = _BACKWARD(net, _as_lua([x, t], [0, 1]), T(np.array([2.0])))
    np.testing.assert_allclose(N(gi[1]), 2 * w.T @ (2 * (w @ x + b - t) / 2), rtol=1e-10)
    np.testing.assert_array_equal(N(gi[2]), np.zeros(2))


def test_type_conversion(ng, rng):
    out = lua_fn("""function(src, x)
      torch.manualSeed(3)
      local net = loadstring(src)()
      local ref = net:forward(x):clone()
      net:float()
      local y = net:forward(x:float())
      local gi = net:backward(x:float(), y:clone():fill(1))
      local kept, weight = torch.type(net.innode.data.input[1]), torch.type(net.modules[2].weight)
      net:double()    -- the inputs and gradients held in the nodes are converted too
      return torch.type(y), torch.type(gi), weight, (y:double() - ref):abs():max(), kept, torch.type(net.innode.data.input[1]), torch.type(net.backwardnodes[2].data.gradOutput[1]),
             net.output == net.outnode.data.input[1]
    end""")(MLP, rng.standard_normal((2, 3)))
    assert out[:3] == ("torch.FloatTensor", "torch.FloatTensor", "torch.FloatTensor") and out[3] < 1e-5
    assert out[4:] == ("torch.FloatTensor", "torch.DoubleTensor", "torch.DoubleTensor", True)


def test_nested_input_changing_size(ng):
    # the summed-gradient buffer of a fanned-out node follows the nesting of each new input
    sizes = lua_fn("""function()
      local x = nn.Identity()()
      local net = nn.gModule({x}, {nn.Identity()(x), nn.Identity()(x)})
      local out = {}
      for _, n in ipairs {3, 2} do
        local inner = {}
        for i = 1, n do inner[i] = torch.Tensor(i):fill(i) end
        local input = {torch.ones(4), inner}
        net:forward(input)
        local gi = net:backward(input, {{torch.ones(4), inner}, {torch.ones(4), inner}})
        out[#out + 1] = #gi[2]
        out[#out + 1] = gi[2][n][1]
      end
      return unpack(out)
    end""")()
    assert sizes == (3, 6, 2, 4)


def test_replace(ng, rng):
    size = lua_fn("""function()
      local i = nn.Identity()()
      local model = nn.gModule({i}, {nn.Linear(2, 5)(nn.Sigmoid()(nn.Linear(5, 2)(i)))})
      model:replace(function(m)
        if torch.type(m) == 'nn.Linear' then return m.weight:size(1) == 5 and nn.Linear(2, 10) or nn.Linear(10, 2) end
        if torch.type(m) == 'nn.Sigmoid' then return nn.Tanh() end
        return m
      end)
      local types = {}
      for _, m in ipairs(model.modules) do types[#types + 1] = torch.type(m) end
      return model:forward(torch.randn(4, 10)):size(2), table.concat(types, ' ')
    end""")()
    assert size == (10, "nn.Identity nn.Linear nn.Tanh nn.Linear")


def test_training_with_optim(ng, rng):
    # a gModule trained by optim.sgd on a linear regression reaches the least-squares fit
    x = rng.standard_normal((32, 3))
    y = x @ np.array([[1.0], [-2.0], [0.5]]) + 0.3
    loss = lua_fn("""function(x, y)
      require 'optim'
      torch.manualSeed(5)
      local i = nn.Identity()()
      local net = nn.gModule({i}, {nn.Linear(3, 1)(i)})
      local crit = nn.MSECriterion()
      local params, grads = net:getParameters()
      local config = {learningRate = 0.1, momentum = 0.5}
      local function feval()
        grads:zero()
        local f = crit:forward(net:forward(x), y)
        net:backward(x, crit:backward(net.output, y))
        return f, grads
      end
      local f
      for k = 1, 300 do f = optim.sgd(feval, params, config)[1] end
      return crit:forward(net:forward(x), y)
    end""")(x, y)
    assert loss < 1e-10


@pytest.mark.parametrize("src, message", [
    ("local x = nn.Identity()(); return nn.gModule({x}, {nn.Linear(2, 2)})", "outputs[1] is an nn.Module"),
    ("local x = nn.Identity()(); return nn.gModule({x}, {x, 3})", "outputs[2] should be an nngraph.Node but is of type number"),
    ("local x = nn.Identity()(); return nn.gModule({}, {x})", "a graph without inputs"),
    ("local x = nn.Identity()(); local a, b = nngraphtest.Scale23()(x):split(2); return nn.gModule({x}, {a})",
     "1 of split(2) outputs from the node declared at"),
    ("local x = nn.Identity()(); local h = nn.Tanh()(x); local dead = nn.Tanh()(h); return nn.gModule({x}, {h})",
     "does not connect to gmodule output"),
    ("local x = nn.Identity()(); local z = nn.Identity()(); return nn.gModule({x}, {nngraphtest.Add2()({x, z})})",
     "some nodes do not depend on the inputs"),
    ("local x = nn.Identity()(); return nn.Tanh()({x, nn.Linear(2, 2)})", "inputs[2] is an nn.Module"),
    ("return nn.Tanh()(nil)", "inputs[1] is nil"),
    ("return nn.Tanh()({})", "cannot pass an empty table of inputs"),
    ("local x = nn.Identity()(); return nn.Tanh()({x, x})", "don't pass the same input twice"),
])
def test_construction_errors(ng, src, message):
    with pytest.raises(luabridge.LuaError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(").replace(")", r"\)")):
        _BUILD(src)


def test_runtime_errors(ng, rng):
    net, _, _ = _BUILD(MULTI)
    with pytest.raises(luabridge.LuaError, match="expecting a table of 2 inputs, got torch.DoubleTensor"):
        _FORWARD(net, T(rng.standard_normal(3)))
    with pytest.raises(luabridge.LuaError, match="got 1 inputs instead of 2"):
        _FORWARD(net, _as_lua([rng.standard_normal(3)], [0]))
    a, b = rng.standard_normal(3), rng.standard_normal(4)
    with pytest.raises(luabridge.LuaError, match="got 2 gradOutputs instead of 3"):
        _BACKWARD(net, _as_lua([a, b], [0, 1]), _as_lua([np.ones(2), np.ones(2)], [0, 1]))
    split_net, _, _ = _BUILD("local x = nn.Identity()(); local a, b = x:split(2); "
                             "return nn.gModule({x}, {nngraphtest.Add2()({a, b})})")
    with pytest.raises(luabridge.LuaError, match="split\\(2\\) at .* cannot split 3 outputs"):
        _FORWARD(split_net, _as_lua([np.ones(2)] * 3, [0, 1, 2]))


# ---- graph orders, labels, Graphviz output, debugging helpers --------------------------------

_ORDER = lua_fn("""function(net)
  local function show(nodes)
    local r = {}
    for i, n in ipairs(nodes) do
      local d = n.data
      r[i] = n.id .. ':' .. (d.module and torch.typename(d.module) or d.selectindex and ('select' .. d.selectindex)
                             or d.nSplitOutputs and 'split' or '-')
    end
    return table.concat(r, ' ')
  end
  return show(net.forwardnodes), show(net.backwardnodes)
end""")


def test_node_orders_as_torch7(ng):
    # Derived by hand with torch7's graph algorithms: the backward graph is numbered breadth
    # first from the output node; the forward graph by reversing the edges in edge order;
    # topsort is the post-order of a depth-first walk of the reversed graph.
    net = lua_fn("""function()
      local x1, x2 = nn.Identity()(), nn.Identity()()
      local m = nn.CMulTable()({nn.Linear(3, 3)(x1), x2})
      return nn.gModule({x1, x2}, {m, nn.Tanh()(x2)})
    end""")()
    fwd, bwd = _ORDER(net)
    assert fwd == ("10:- 9:split 8:select1 6:nn.Identity 4:nn.Linear 7:select2 5:nn.Identity "
                   "1:nn.CMulTable 3:nn.Tanh 2:-")
    assert bwd == ("1:- 2:nn.CMulTable 3:nn.Tanh 5:nn.Identity 7:select2 4:nn.Linear 6:nn.Identity "
                   "8:select1 9:split 10:-")


@needs_t7_fixtures
def test_node_orders_match_a_torch7_file(ng):
    saved = lua_fn("function(path) return torch.load(path) end")(str(T7_FIXTURES / "gmodule_with_linear_identity.t7"))
    ours = lua_fn("""function()
      local a, b = nn.Identity()(), nn.Identity()()
      return nn.gModule({a, b}, {nn.CAddTable()({b, nn.Linear(1, 2)(a)})})
    end""")()
    assert _ORDER(ours) == _ORDER(saved)


def test_forwardnodes_reach_the_running_modules(ng, rng, tmp_path):
    # the colorization scripts set forwardnodes[i].data.module.modules[k].nfeatures after loading
    path = str(tmp_path / "net.t7")
    lua_fn("""function(path)
      local x = nn.Identity()()
      local features = nn.Sequential():add(nn.Linear(3, 2)):add(nn.Tanh()):add(nn.Replicate(2))
      torch.save(path, nn.gModule({x}, {nn.Identity()(features(x))}))
    end""")(path)
    x = rng.standard_normal(3)
    run = lua_fn("""function(path, x)
      local net = torch.load(path)
      local before = net:forward(x):clone()
      net.forwardnodes[3].data.module.modules[3].nfeatures = 4
      local linear = net.modules[2].modules[1]
      return before, net:forward(x):clone(), linear.weight, linear.bias,
             net.forwardnodes[3].data.module == net.modules[2]
    end""")
    before, after, w, b, same = run(path, x)
    row = np.tanh(N(w) @ x + N(b))
    np.testing.assert_allclose(N(before), np.tile(row, (2, 1)), rtol=1e-12)
    np.testing.assert_allclose(N(after), np.tile(row, (4, 1)), rtol=1e-12)
    assert same


def test_declaration_labels(ng):
    # each node names the line that declared it; split nodes extend their input's label
    labels = lua_fn("""function()
      local build = loadstring([[
        local x = nn.Identity()()
        local h = x - nn.Linear(3, 4)
        local t = -nn.Tanh()
        local c = nn.MSECriterion()({h, x})
        local s = nn.SplitTable(1)(h)
        local p, q = s:split(2)
        return x, h, t, c, s, p, q
      ]], '@model.lua')
      local r = {}
      for i, node in ipairs({build()}) do r[i] = node.data.annotations._debugLabel end
      local p = select(6, build())
      r[#r + 1] = p.children[1].data.annotations._debugLabel
      return unpack(r)
    end""")()
    assert labels == ("[model.lua]:1_", "[model.lua]:2_", "[model.lua]:3_", "[model.lua]:4_", "[model.lua]:5_",
                      "[model.lua]:5_-1", "[model.lua]:5_-2", "[model.lua]:5_ split at [model.lua]:6-mnode")


_CHAIN = lua_fn("""function()
  local x = nn.Identity()()
  local h = nn.Linear(3, 4)(x):annotate{name = 'hidden', description = 'the layer',
                                         graphAttributes = {color = 'blue'}}
  return nn.gModule({x}, {nn.Tanh()(h)})
end""")


def _dot_nodes_and_edges(text: str) -> tuple[dict[int, str], set[tuple[int, int]]]:
    nodes = {int(i): attrs for i, attrs in re.findall(r"^n(\d+)\[(.*)\];$", text, re.M)}
    edges = {(int(a), int(b)) for a, b in re.findall(r"^n(\d+) -> n(\d+);$", text, re.M)}
    return nodes, edges


def test_graph_dot_file(ng, tmp_path):
    # forward graph of x -> Linear -> Tanh, numbered as torch7: Tanh 1, output 2, Linear 3,
    # Identity 4, input 5; edges from each input to its user
    net = _CHAIN()
    prefix = str(tmp_path / "net")
    dot = lua_fn("function(net, title, prefix) local ok, err = pcall(graph.dot, net.fg, title, prefix) return ok, tostring(err) end")
    ok, err = dot(net, "My net", prefix)
    text = (tmp_path / "net.dot").read_text()
    nodes, edges = _dot_nodes_and_edges(text)
    assert 'label="My net"' in text
    assert edges == {(3, 1), (1, 2), (4, 3), (5, 4)}
    assert sorted(nodes) == [1, 2, 3, 4, 5]
    assert nodes[3].startswith('color=blue label="hidden (3)\\ndesc = the layer\\n')
    assert "module = nn.Linear(3 -> 4)" in nodes[3] and 'tooltip="[(eval)]:3_"' in nodes[3]
    assert "Node1\\nmodule = nn.Tanh" in nodes[1]
    if shutil.which("dot"):
        assert ok, err
        svg = (tmp_path / "net.svg").read_text()
        assert "<svg" in svg and "hidden (3)" in svg
    else:
        assert not ok and "needs Graphviz" in err


def test_graph_dot_without_graphviz(ng, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))   # no `dot` program reachable
    net = _CHAIN()
    with pytest.raises(luabridge.LuaError, match=r"net\.svg needs Graphviz: its `dot` program is not on PATH"):
        lua_fn("function(net, prefix) graph.dot(net.fg, 'x', prefix) end")(net, str(tmp_path / "net"))
    assert (tmp_path / "net.dot").exists()
    with pytest.raises(luabridge.LuaError, match="fname .* is needed"):
        lua_fn("function(net) graph.dot(net.fg, 'x') end")(net)


def test_simple_print_keeps_the_layers(ng):
    text = lua_fn("""function()
      local x = nn.Identity()()
      local i = nn.Identity()(nn.Linear(3, 3)(x))
      local net = nn.gModule({x}, {nn.CAddTable()({nn.Tanh()(i), nn.Sigmoid()(i)})})
      return nngraph.simple_print.todot(net.fg, 'layers')
    end""")()
    nodes, edges = _dot_nodes_and_edges(text)
    name = {i: re.search(r"module = nn\.(\w+)", attrs).group(1) for i, attrs in nodes.items()}
    assert sorted(name.values()) == ["CAddTable", "Linear", "Sigmoid", "Tanh"]
    assert {(name[a], name[b]) for a, b in edges} == {
        ("Linear", "Tanh"), ("Linear", "Sigmoid"), ("Tanh", "CAddTable"), ("Sigmoid", "CAddTable")}


def test_set_debug_draws_the_failing_node(ng, tmp_path, rng):
    prefix = str(tmp_path / "failing")
    ok, err = lua_fn("""function(prefix, x)
      nngraph.setDebug(true)
      local input = nn.Identity()()
      local net = nn.gModule({input}, {nn.Tanh()(nn.Linear(3, 2)(input))})
      net.name = prefix
      local ok, err = pcall(net.forward, net, x)
      nngraph.setDebug(false)
      return ok, err
    end""")(prefix, rng.standard_normal(5))
    assert not ok and "nn.Linear" in err and "stack traceback" in err
    text = (tmp_path / "failing.dot").read_text()
    # forward graph numbered as torch7: Tanh 1, output 2, Linear 3
    assert text.rstrip().endswith("n3[style=filled, fillcolor=red];\n}")
    assert re.search(r"^n3\[label=.*module = nn\.Linear\(3 -> 2\)", text, re.M)
    # off again: errors pass through without files
    lua_fn("""function(x)
      local input = nn.Identity()()
      local net = nn.gModule({input}, {nn.Linear(3, 2)(input)})
      net.name = 'never_written'
      return pcall(net.forward, net, x)
    end""")(rng.standard_normal(5))
    assert not os.path.exists("never_written.dot")


def test_annotate_nodes(ng):
    names = lua_fn("""function()
      local input = nn.Identity()()
      local hidden = nn.Linear(3, 3)(input)
      local out = nn.Tanh()(hidden):annotate{name = 'kept'}
      nngraph.annotateNodes()
      local net = nn.gModule({input}, {out})
      return input.data.annotations.name, hidden.data.annotations.name, out.data.annotations.name,
             hidden:graphNodeName()
    end""")()
    assert names == ("input", "hidden", "kept", "hidden (3)")


def test_node_label(ng):
    label = lua_fn("""function(x)
      local input = nn.Identity()()
      local h = nn.Linear(3, 2)(input):annotate{description = 'first'}
      local net = nn.gModule({input}, {nn.CAddTable()({h, nn.Linear(3, 2)(input)})})
      net:forward(x)
      local sum = net.forwardnodes[#net.forwardnodes - 1]
      h.data.input[1] = torch.FloatTensor(2, 3):fill(0/0)
      return h:label(), sum:label()
    end""")
    first, sum_ = label(np.ones((4, 3)))
    assert first == "desc = first\\ninput = {torch.FloatTensor[2x3]NaN}\\lmodule = nn.Linear(3 -> 2)"
    assert re.fullmatch(r"input = \{Tensor\[4x2\],Tensor\[4x2\]\}\\lmapindex = \{Node\d+,Node\d+\}\\l"
                        r"module = nn\.CAddTable", sum_)


def test_nesting(ng):
    out = lua_fn("""function()
      local a = {torch.Tensor{1, 2}, {torch.Tensor{3}}}
      local copy = nngraph.nesting.cloneNested(a)
      copy[1][1] = 10
      local target = {torch.Tensor(5), {torch.Tensor(1), torch.Tensor(2)}, torch.Tensor(1)}
      local kept = target[2]
      nngraph.nesting.resizeNestedAs(target, a)
      nngraph.nesting.fillNested(target, 1)
      nngraph.nesting.addNestedTo(target, a)
      local copied = {torch.Tensor(2), {torch.Tensor(1)}}
      nngraph.nesting.copyNested(copied, a)
      return a[1][1], copy[1][1], target[1], target[2][1], #target[2], target[3] == nil, target[2] == kept,
             copied[2][1][1]
    end""")()
    assert out[:2] == (1, 10)
    np.testing.assert_array_equal(N(out[2]), [2, 3])
    np.testing.assert_array_equal(N(out[3]), [4])
    assert out[4:] == (1, True, True, 3)


@pytest.mark.skipif(shutil.which("dot") is None, reason="needs Graphviz's dot program")
def test_graphviz_layout_and_files(ng, tmp_path):
    # a chain root -> a -> b laid out top-down: one column, y falling from root to b
    positions, magic = lua_fn("""function(png)
      local g = graph.Graph()
      local root, a, b = graph.Node('root'), graph.Node('a'), graph.Node('b')
      g:add(graph.Edge(root, a))
      g:add(graph.Edge(a, b))
      graph.graphvizFile(g, 'dot', png)
      return graph.graphvizLayout(g), io.open(png, 'rb'):read(4):sub(2)
    end""")(str(tmp_path / "g.png"))
    xy = N(positions)
    assert xy.shape == (3, 2) and ((0 <= xy) & (xy <= 1)).all()
    np.testing.assert_allclose(xy[:, 0], xy[0, 0])
    assert xy[0, 1] > xy[1, 1] > xy[2, 1]
    assert magic == "PNG"


def test_require_graph_alone():
    # torch7's graph package loads by itself, without nn
    run = subprocess.run([sys.executable, "-c", "import luabridge; luabridge.require('graph'); "
                          "print(luabridge.eval('torch.typename(graph.Graph()), package.loaded.nn == nil'))"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "('graph.Graph', True)"


# ---- nngraph's own test folder, run unmodified ------------------------------------------------
# github.com/torch/nngraph's test/ run with deepmind's torch-totem and Penlight (pure Lua) on
# LUA_PATH. None of them is part of the project: LUABRIDGE_NNGRAPH_TESTS names the test/ folder,
# LUABRIDGE_TOTEM and LUABRIDGE_PENLIGHT the two checkouts; without them these cases skip.
# The counts are the tests each upstream file defines.
UPSTREAM_TESTS = {"test_nngraph": 28, "test_JustElement": 3, "test_JustTable": 2, "test_ModuleFromCriterion": 4,
                  "test_connectivity": 1, "test_debug": 2, "test_nest": 1, "test_old": None, "speed": None}


def _upstream_env() -> dict[str, str]:
    folders = {k: os.environ.get(k, "") for k in ("LUABRIDGE_NNGRAPH_TESTS", "LUABRIDGE_TOTEM", "LUABRIDGE_PENLIGHT")}
    missing = [k for k, v in folders.items() if not v or not os.path.isdir(v)]
    if missing:
        pytest.skip(f"nngraph's test folder needs {', '.join(missing)} (checkouts of torch/nngraph's test/, "
                    "deepmind/torch-totem and lunarmodules/Penlight)")
    totem, penlight = folders["LUABRIDGE_TOTEM"], os.path.join(folders["LUABRIDGE_PENLIGHT"], "lua")
    lua_path = f"{totem}/?.lua;{totem}/?/init.lua;{penlight}/?.lua;{penlight}/?/init.lua;;"
    return {**os.environ, "LUA_PATH": lua_path, "NNGRAPH_TESTS": folders["LUABRIDGE_NNGRAPH_TESTS"]}


@pytest.mark.parametrize("name", list(UPSTREAM_TESTS))
def test_upstream_test_folder(tmp_path, name):
    env = _upstream_env()
    if name == "test_old" and shutil.which("dot") is None:
        pytest.skip("test_old renders svg files with Graphviz's dot program")
    work = tmp_path / "test"
    shutil.copytree(env.pop("NNGRAPH_TESTS"), work, ignore=shutil.ignore_patterns("*.dot", "*.svg"))
    done = subprocess.run([sys.executable, "-m", "luabridge", "th", f"{name}.lua"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    tests = UPSTREAM_TESTS[name]
    if tests is not None:   # totem's summary line
        assert re.search(rf"in {tests} tests? with 0 failures and 0 errors", done.stdout), done.stdout[-2000:]
    if name == "test_old":
        assert (work / "old.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
        assert "module = nn.CAddTable" in (work / "new.dot").read_text()
    if name == "speed":
        assert re.search(r"Backward Time = [\d.]+ %", done.stdout), done.stdout[-2000:]
