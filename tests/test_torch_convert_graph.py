"""luabridge.torch.convert on nngraph gModules: the torch.fx.GraphModule runs the Lua graph's
forward (residual block, an LSTM cell as char-rnn writes it, several inputs and outputs, a split
table input, a module shared by two nodes, a real Torch7 file), checked against the Lua gModule
in float64 to 1e-10, and its autograd gradients against the Lua backward (inputs and weights)."""
from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is missing (pip install torch): luabridge.torch needs it")

import numpy as np  # noqa: E402

import luabridge  # noqa: E402
from helpers import T7_FIXTURES, needs_t7_fixtures  # noqa: E402
from luabridge.torch.convert import ConversionError, convert  # noqa: E402
from luabridge.torch.module import LuaModule  # noqa: E402

ATOL = 1e-10


def graph(code: str) -> Any:
    """The gModule the Lua function body `code` returns (nngraph loaded)."""
    luabridge.require("nngraph")
    return luabridge.wrap(luabridge.eval(f"(function() {code} end)()"))


def to_lua(x: Any) -> Any:
    """Nested lists of arrays as Lua tables of tensors over copies (Lua may keep them)."""
    if isinstance(x, list):
        return [to_lua(v) for v in x]
    return luabridge.from_numpy(np.array(x, dtype=np.float64))


def from_lua(x: Any) -> Any:
    """A Lua tensor or (nested) table of them as numpy copies."""
    if isinstance(x, list):
        return [from_lua(v) for v in x]
    return np.array(luabridge.to_numpy(x))


def to_torch(x: Any) -> Any:
    if isinstance(x, list):
        return [to_torch(v) for v in x]
    return torch.tensor(x, dtype=torch.float64, requires_grad=True)


def flat(x: Any) -> list:
    return [y for v in x for y in flat(v)] if isinstance(x, list) else [x]


def check(g: Any, inputs: Any, rng: np.random.Generator) -> torch.fx.GraphModule:
    """Converts g and checks forward, the input gradients and the weight gradients of every
    submodule named by its index in g.modules against the Lua module."""
    gm = convert(g)
    assert isinstance(gm, torch.fx.GraphModule)
    want = from_lua(g.forward(to_lua(inputs)))
    xs = to_torch(inputs)
    got = gm(xs)
    assert len(flat(got)) == len(flat(want))
    for a, b in zip(flat(got), flat(want)):
        np.testing.assert_allclose(a.detach().numpy(), b, rtol=0, atol=ATOL)

    grads = [rng.standard_normal(np.shape(y)) for y in flat(want)]
    shaped = _like(want, iter(grads))
    g.zeroGradParameters()
    want_grad = from_lua(g.backward(to_lua(inputs), to_lua(shaped)))
    torch.autograd.backward(flat(got), [torch.from_numpy(d) for d in grads])
    for x, w in zip(flat(xs), flat(want_grad)):   # no gradient in torch: zeros in Lua
        np.testing.assert_allclose(np.zeros_like(w) if x.grad is None else x.grad.numpy(), w, rtol=0, atol=ATOL)
    lua_modules = g.modules
    for name, sub in gm.named_children():
        if name.isdigit() and isinstance(sub, torch.nn.Linear):
            lua = lua_modules[int(name) - 1]
            np.testing.assert_allclose(sub.weight.grad.numpy(), from_lua(lua.gradWeight), rtol=0, atol=ATOL)
            np.testing.assert_allclose(sub.bias.grad.numpy(), from_lua(lua.gradBias), rtol=0, atol=ATOL)
    return gm


def _like(structure: Any, values: Any) -> Any:
    if isinstance(structure, list):
        return [_like(v, values) for v in structure]
    return next(values)


def test_residual_block(rng):
    g = graph("""
      local x = nn.Identity()()
      local branch = nn.Linear(4, 4)(nn.Tanh()(nn.Linear(4, 4)(x)))
      return nn.gModule({x}, {nn.Tanh()(nn.CAddTable()({branch, x}))})""")
    gm = check(g, rng.standard_normal((3, 4)), rng)
    assert list(gm.graph.nodes)[0].name == "x"


LSTM = """
  local x, prev_c, prev_h = nn.Identity()(), nn.Identity()(), nn.Identity()()
  local i2h = nn.Linear(3, 4 * 5)(x):annotate{name = 'i2h'}
  local h2h = nn.Linear(5, 4 * 5)(prev_h)
  local gates = nn.Reshape(4, 5)(nn.CAddTable()({i2h, h2h}))
  local n1, n2, n3, n4 = nn.SplitTable(2)(gates):split(4)
  local in_gate, forget_gate = nn.Sigmoid()(n1), nn.Sigmoid()(n2)
  local out_gate, in_transform = nn.Sigmoid()(n3), nn.Tanh()(n4)
  local next_c = nn.CAddTable()({nn.CMulTable()({forget_gate, prev_c}),
                                 nn.CMulTable()({in_gate, in_transform})})
  local next_h = nn.CMulTable()({out_gate, nn.Tanh()(next_c)})
  return nn.gModule({x, prev_c, prev_h}, {next_c, next_h})"""


def test_lstm_cell_as_char_rnn_writes_it(rng):
    """Inputs {x, prev_c, prev_h} as one list; outputs [next_c, next_h]; the gates come from
    a split of SplitTable's table. The weights are checked against a hand-written LSTM step."""
    g = graph(LSTM)
    x, c, h = rng.standard_normal((2, 3)), rng.standard_normal((2, 5)), rng.standard_normal((2, 5))
    gm = check(g, [x, c, h], rng)
    assert [n.name for n in gm.graph.nodes if n.op == "placeholder"] == ["inputs"]
    lua_i2h = next(m for m in g.modules if m._typename() == "nn.Linear" and m.weight.shape == (20, 3))
    np.testing.assert_array_equal(gm.i2h.weight.detach().numpy(), from_lua(lua_i2h.weight))   # annotated name

    i2h, h2h = (next(m for n, m in gm.named_children() if isinstance(m, torch.nn.Linear) and (n == "i2h") == named)
                for named in (True, False))
    w = {n: p.detach().numpy() for n, p in (*i2h.named_parameters("i2h"), *h2h.named_parameters("h2h"))}
    gates = (x @ w["i2h.weight"].T + w["i2h.bias"] + h @ w["h2h.weight"].T + w["h2h.bias"]).reshape(2, 4, 5)
    sig = 1 / (1 + np.exp(-gates[:, :3]))
    next_c = sig[:, 1] * c + sig[:, 0] * np.tanh(gates[:, 3])
    next_h = sig[:, 2] * np.tanh(next_c)
    got_c, got_h = gm([torch.from_numpy(x), torch.from_numpy(c), torch.from_numpy(h)])
    np.testing.assert_allclose(got_c.detach().numpy(), next_c, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got_h.detach().numpy(), next_h, rtol=0, atol=1e-12)


def test_several_inputs_and_outputs(rng):
    g = graph("""
      local a, b = nn.Identity()(), nn.Identity()()
      local lb = nn.Linear(2, 3)(b)
      return nn.gModule({a, b}, {nn.CAddTable()({a, lb}), nn.JoinTable(2)({a, b, lb}), nn.Tanh()(a)})""")
    out = check(g, [rng.standard_normal((4, 3)), rng.standard_normal((4, 2))], rng)
    assert isinstance(out([torch.zeros(4, 3, dtype=torch.float64), torch.zeros(4, 2, dtype=torch.float64)]), list)


def test_table_input_split_and_identity_nodes(rng):
    """One input node fed a table {x, y}, split in two; a split(1) (nngraph.JustElement) of
    NarrowTable's one-element table."""
    g = graph("""
      local inp = nn.Identity()()
      local x, y = inp:split(2)
      local prod = nn.CMulTable()({nn.Identity()(x), y})
      local joined = nn.Linear(3, 2)(nn.NarrowTable(2, 1)(inp):split(1))
      return nn.gModule({inp}, {prod, joined})""")
    check(g, [rng.standard_normal((2, 3)), rng.standard_normal((2, 3))], rng)


def test_criterion_node(rng):
    """A criterion called on nodes (nn.ModuleFromCriterion): the loss as a one-element tensor,
    the gradient reaching the prediction only."""
    g = graph("""
      local x, target = nn.Identity()(), nn.Identity()()
      local loss = nn.MSECriterion()({nn.Tanh()(nn.Linear(3, 2)(x)), target})
      return nn.gModule({x, target}, {loss})""")
    gm = check(g, [rng.standard_normal((4, 3)), rng.standard_normal((4, 2))], rng)
    assert gm([torch.zeros(4, 3, dtype=torch.float64), torch.zeros(4, 2, dtype=torch.float64)]).shape == (1,)


def test_names_python_cannot_take_fall_back_to_the_index(rng):
    g = graph("""
      local x = nn.Identity()()
      local a = nn.Linear(3, 3)(x):annotate{name = 'class'}
      local b = nn.Tanh()(a):annotate{name = 'graph'}
      local c = nn.Linear(3, 2)(b):annotate{name = 'two words'}
      return nn.gModule({x}, {nn.Sigmoid()(c):annotate{name = 'gate'}})""")
    gm = check(g, rng.standard_normal((2, 3)), rng)
    assert [name for name, _ in gm.named_children()] == ["1", "2", "3", "4", "gate"]


def test_module_shared_by_two_nodes_is_one_submodule(rng):
    g = graph("""
      local x = nn.Identity()()
      local lin = nn.Linear(3, 3)
      return nn.gModule({x}, {lin(nn.Tanh()(lin(x)))})""")
    gm = check(g, rng.standard_normal((2, 3)), rng)
    linears = [m for m in gm.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 1
    lua = g.modules[1]
    np.testing.assert_allclose(linears[0].weight.grad.numpy(), from_lua(lua.gradWeight), rtol=0, atol=ATOL)


def test_gmodule_inside_a_container_and_pickled(rng, tmp_path):
    seq = graph("""
      local x = nn.Identity()()
      local inner = nn.gModule({x}, {nn.Tanh()(nn.Linear(3, 2)(x))})
      return nn.Sequential():add(nn.Linear(4, 3)):add(inner):add(nn.Sigmoid())""")
    x = rng.standard_normal((5, 4))
    converted = convert(seq)
    want = from_lua(seq.forward(to_lua(x)))
    np.testing.assert_allclose(converted(torch.from_numpy(x)).detach().numpy(), want, rtol=0, atol=ATOL)
    torch.save(converted, tmp_path / "m.pt")
    again = torch.load(tmp_path / "m.pt", weights_only=False)
    np.testing.assert_allclose(again(torch.from_numpy(x)).detach().numpy(), want, rtol=0, atol=ATOL)


UNCONVERTIBLE = """
  local x = nn.Identity()()
  local pooled = nn.SpatialFractionalMaxPooling(2, 2, 0.5, 0.5)(x)%s
  return nn.Sequential():add(nn.Identity()):add(nn.gModule({x}, {nn.Tanh()(pooled)}))"""
NAMED = ":annotate{name = 'frac'}"


@pytest.mark.parametrize("annotation, path", [(NAMED, "2.frac"), ("", "2.2")])
def test_strict_error_names_the_class_and_the_node(annotation, path):
    """The path goes through the gModule's index in the Sequential, then the node's name or
    its module's index in the gModule's modules."""
    with pytest.raises(ConversionError, match=rf"nn.SpatialFractionalMaxPooling at {path} has no PyTorch"):
        convert(graph(UNCONVERTIBLE % annotation))


def test_not_strict_keeps_the_lua_module(rng):
    seq = graph(UNCONVERTIBLE % NAMED)
    converted = convert(seq, strict=False)
    inner = converted.get_submodule("2")   # 1-based, as torch7 and LuaModule name children
    assert isinstance(inner, torch.fx.GraphModule)
    assert isinstance(inner.frac, LuaModule)
    x = rng.standard_normal((1, 2, 6, 6))
    want = from_lua(seq.forward(to_lua(x)))   # the pooling draws its regions again each forward:
    np.testing.assert_allclose(converted(torch.from_numpy(x)).detach().numpy().shape, want.shape)


@needs_t7_fixtures
def test_real_torch7_gmodule(rng):
    """nngraph's own file: two nn.Identity inputs, nn.Linear(1 -> 2) on one, CAddTable."""
    g = luabridge.load(T7_FIXTURES / "gmodule_with_linear_identity.t7")
    gm = check(g, [rng.standard_normal((3, 1)), rng.standard_normal((3, 2))], rng)
    assert sorted(type(m).__name__ for m in gm.children()) == ["CAddTable", "Identity", "Identity", "Linear"]
