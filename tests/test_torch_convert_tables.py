"""luabridge.torch.convert on torch7's table layers: for every converter of convert_tables, the
converted module's outputs and its autograd gradients equal the Lua module's forward and
backward (float64, to 1e-10), on random inputs, batch and not."""
from __future__ import annotations

from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is missing (pip install torch): luabridge.torch needs it")

import numpy as np  # noqa: E402

import luabridge  # noqa: E402
from luabridge.torch import convert_tables  # noqa: E402,F401 - registers the converters
from luabridge.torch.convert import CONVERTERS, ConversionError, convert  # noqa: E402
from luabridge.torch.module import LuaModule  # noqa: E402

rng = np.random.default_rng(13)


def r(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape)


def away_from_zero(*shape: int) -> np.ndarray:
    x = r(*shape)
    return np.sign(x) * (0.5 + np.abs(x))


Inputs = Callable[[], Any]
CASES: dict[str, list[tuple[str, Inputs]]] = {
    "nn.ConcatTable": [
        ("nn.ConcatTable():add(nn.Linear(4, 3)):add(nn.Linear(4, 2))", lambda: r(5, 4)),
        ("nn.ConcatTable():add(nn.Linear(4, 3)):add(nn.ConcatTable():add(nn.Linear(4, 1)))", lambda: r(4)),
    ],
    "nn.ParallelTable": [
        ("nn.ParallelTable():add(nn.Linear(4, 3)):add(nn.Linear(2, 3))", lambda: [r(5, 4), r(5, 2)]),
        ("nn.ParallelTable():add(nn.Linear(4, 3)):add(nn.CAddTable())", lambda: [r(4), [r(3), r(3)]]),
    ],
    "nn.MapTable": [("nn.MapTable(nn.Linear(3, 2))", lambda: [r(4, 3), r(4, 3), r(4, 3)])],
    "nn.CAddTable": [
        ("nn.CAddTable()", lambda: [r(2, 3), r(2, 3), r(2, 3)]),
        ("nn.CAddTable()", lambda: [r(2, 3), r(6)]),   # equal element counts are enough
        ("nn.CAddTable(true)", lambda: [r(2, 3), r(2, 3)]),
    ],
    "nn.CSubTable": [("nn.CSubTable()", lambda: [r(2, 3), r(2, 3)]), ("nn.CSubTable()", lambda: [r(4), r(4)])],
    "nn.CMulTable": [("nn.CMulTable()", lambda: [r(2, 3), r(2, 3), r(2, 3)]), ("nn.CMulTable()", lambda: [r(5), r(5)])],
    "nn.CDivTable": [("nn.CDivTable()", lambda: [r(2, 3), away_from_zero(2, 3)])],
    "nn.CMaxTable": [("nn.CMaxTable()", lambda: [r(3, 4), r(3, 4), r(3, 4)])],
    "nn.CMinTable": [("nn.CMinTable()", lambda: [r(3, 4), r(3, 4)])],
    "nn.JoinTable": [
        ("nn.JoinTable(1)", lambda: [r(2, 3), r(4, 3)]),
        ("nn.JoinTable(2)", lambda: [r(2, 3), r(2, 5)]),
        ("nn.JoinTable(-1)", lambda: [r(2, 2, 3), r(2, 2, 1)]),
        ("nn.JoinTable(1, 1)", lambda: [r(3), r(4)]),
        ("nn.JoinTable(1, 1)", lambda: [r(2, 3), r(2, 4)]),   # a batch: joins dim 2
    ],
    "nn.SplitTable": [
        ("nn.SplitTable(1)", lambda: r(3, 4)),
        ("nn.SplitTable(-1)", lambda: r(3, 4, 2)),
        ("nn.SplitTable(1, 2)", lambda: r(3, 4)),
        ("nn.SplitTable(1, 1)", lambda: r(2, 3)),              # a batch: splits dim 2
        ("nn.SplitTable(2, 2)", lambda: r(2, 3, 4)),
    ],
    "nn.SelectTable": [
        ("nn.SelectTable(2)", lambda: [r(2), r(3), r(4)]),
        ("nn.SelectTable(-1)", lambda: [r(2), r(3), r(4)]),
        ("nn.SelectTable(2)", lambda: [r(2), [r(3), [r(4), r(1)]]]),   # a nested entry
    ],
    "nn.NarrowTable": [
        ("nn.NarrowTable(2, 2)", lambda: [r(2), r(3), [r(4), r(2)], r(1)]),
        ("nn.NarrowTable(3)", lambda: [r(2), r(3), r(4)]),
    ],
    "nn.FlattenTable": [("nn.FlattenTable()", lambda: [r(2), [r(3), [r(4), r(2, 2)]], r(1)])],
    "nn.MM": [
        ("nn.MM()", lambda: [r(3, 4), r(4, 2)]),
        ("nn.MM(true)", lambda: [r(4, 3), r(4, 2)]),
        ("nn.MM(false, true)", lambda: [r(5, 3, 4), r(5, 2, 4)]),
        ("nn.MM(true, true)", lambda: [r(5, 4, 3), r(5, 2, 4)]),
    ],
    "nn.MV": [
        ("nn.MV()", lambda: [r(3, 4), r(4)]),
        ("nn.MV(true)", lambda: [r(4, 3), r(4)]),
        ("nn.MV()", lambda: [r(5, 3, 4), r(5, 4)]),
        ("nn.MV(true)", lambda: [r(5, 4, 3), r(5, 4)]),
    ],
    "nn.DotProduct": [("nn.DotProduct()", lambda: [r(4), r(4)]), ("nn.DotProduct()", lambda: [r(5, 3), r(5, 3)])],
    "nn.CosineDistance": [
        ("nn.CosineDistance()", lambda: [r(4), r(4)]),
        ("nn.CosineDistance()", lambda: [r(5, 3), r(5, 3)]),
    ],
    "nn.PairwiseDistance": [
        ("nn.PairwiseDistance(2)", lambda: [r(4), r(4)]),
        ("nn.PairwiseDistance(2)", lambda: [r(5, 3), r(5, 3)]),
        ("nn.PairwiseDistance(1)", lambda: [r(5, 3), r(5, 3)]),
        ("nn.PairwiseDistance(3)", lambda: [r(5, 3), r(5, 3)]),
        ("nn.PairwiseDistance(1.5)", lambda: [r(4), r(4)]),
    ],
    "nn.MixtureTable": [
        ("nn.MixtureTable()", lambda: [r(3), [r(5), r(5), r(5)]]),
        ("nn.MixtureTable()", lambda: [r(4, 3), [r(4, 5), r(4, 5), r(4, 5)]]),
        ("nn.MixtureTable()", lambda: [r(3), r(3, 5)]),
        ("nn.MixtureTable()", lambda: [r(4, 3), r(4, 3, 5)]),
        ("nn.MixtureTable(3)", lambda: [r(4, 3), r(4, 5, 3)]),
    ],
    "nn.Bottle": [
        ("nn.Bottle(nn.Linear(3, 2))", lambda: r(4, 5, 3)),
        ("nn.Bottle(nn.Linear(3, 2))", lambda: r(5, 3)),
        ("nn.Bottle(nn.Linear(3, 2), 2, 2)", lambda: r(2, 4, 5, 3)),
    ],
    "nn.Index": [
        ("nn.Index(1)", lambda: [r(4, 3), np.array([1, 3, 3, 2], dtype=np.int64)]),
        ("nn.Index(2)", lambda: [r(4, 3), np.array([3, 1], dtype=np.int64)]),
    ],
    "nn.MaskedSelect": [("nn.MaskedSelect()", lambda: [r(4, 3), (rng.random((4, 3)) < 0.5).astype(np.uint8)])],
    "nn.ZipTable": [("nn.ZipTable()", lambda: [[r(2), r(3)], [r(4), r(1)]])],
    "nn.ZipTableOneToMany": [("nn.ZipTableOneToMany()", lambda: [r(3), [r(2), r(4), r(1)]])],
    "nn.CAddTensorTable": [("nn.CAddTensorTable()", lambda: [r(3), [r(3), r(3)]])],
}


def nested(fn: Callable[[Any], Any], x: Any) -> Any:
    return [nested(fn, e) for e in x] if isinstance(x, (list, tuple)) else fn(x)


def leaves(x: Any) -> list[Any]:
    return [v for e in x for v in leaves(e)] if isinstance(x, (list, tuple)) else [x]


def lua_pass(m: Any, x: Any) -> tuple[Any, Any, Any]:
    """The Lua module's output, a random gradOutput shaped like it, and its gradInput (copies).
    Lua gets copies of x: an inplace module writes into its input."""
    x = nested(np.copy, x)
    out = nested(lambda t: np.array(t), m.forward(x))
    grad_out = nested(lambda t: rng.standard_normal(t.shape), out)
    grad_in = nested(lambda t: np.array(t), m.backward(x, grad_out))
    return out, grad_out, grad_in


def torch_pass(model: torch.nn.Module, x: Any, grad_out: Any) -> tuple[Any, list[Any]]:
    """The converted module's output, and the gradients of its float inputs by autograd."""
    tx = nested(lambda a: torch.tensor(a, requires_grad=a.dtype == np.float64), x)
    out = model(tx)
    wrt = [t for t in leaves(tx) if t.requires_grad]
    grads = torch.autograd.grad(leaves(out), wrt, [torch.from_numpy(g) for g in leaves(grad_out)], allow_unused=True)
    return nested(lambda t: t.detach().numpy(), out), [torch.zeros_like(t) if g is None else g for t, g in zip(wrt, grads)]


def close(a: Any, b: Any, what: str) -> None:
    la, lb = leaves(a), leaves(b)
    assert len(la) == len(lb), f"{what}: {len(la)} tensors against {len(lb)}"
    for i, (x, y) in enumerate(zip(la, lb)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=0, atol=1e-10, err_msg=f"{what} {i}")


CASE_LIST = [(name, ctor, inputs) for name, cases in CASES.items() for ctor, inputs in cases]


@pytest.mark.parametrize("name,ctor,inputs", CASE_LIST, ids=[f"{c}" for _, c, _ in CASE_LIST])
def test_converted_matches_lua_forward_and_backward(name: str, ctor: str, inputs: Inputs) -> None:
    luabridge.require("nn")
    lua = luabridge.wrap(luabridge.eval(ctor))
    assert lua._typename() == name
    model = convert(lua)
    x = inputs()
    out, grad_out, grad_in = lua_pass(lua, x)
    tout, tgrads = torch_pass(model, x, grad_out)
    close(tout, out, "output")
    float_grads = [g for g, a in zip(leaves(grad_in), leaves(x)) if a.dtype == np.float64]
    close([g.numpy() for g in tgrads], float_grads, "gradInput")


def test_every_table_converter_has_a_case() -> None:
    mine = {name for name, fn in CONVERTERS.items() if fn.__module__ == convert_tables.__name__}
    assert mine - set(CASES) == set(), "converters without a test case"


def test_parameters_are_copies_of_the_lua_weights_named_as_luamodule_names_them() -> None:
    nn = luabridge.nn
    lua = nn.ConcatTable().add(nn.Linear(4, 3)).add(nn.Bottle(nn.Linear(4, 2)))
    model = convert(lua)
    names = [name for name, _ in model.named_parameters()]
    assert names == ["1.weight", "1.bias", "2.1.weight", "2.1.bias"]
    assert names == [name for name, _ in LuaModule(lua).named_parameters()]
    weight = model.get_parameter("1.weight")
    np.testing.assert_array_equal(weight.detach().numpy(), np.asarray(lua.modules[0].weight))
    with torch.no_grad():
        weight.add_(1)
    assert not np.array_equal(weight.detach().numpy(), np.asarray(lua.modules[0].weight))


def test_unconvertible_settings_and_children_name_their_path() -> None:
    luabridge.require("nn")
    luabridge.execute("if not nn.C2Unknown then torch.class('nn.C2Unknown', 'nn.Module') end")
    with pytest.raises(ConversionError, match=r"nn.C2Unknown at 2\.1 has no PyTorch counterpart"):
        convert("nn.ConcatTable():add(nn.Linear(2, 2)):add(nn.ParallelTable():add(nn.C2Unknown()))")
    with pytest.raises(ConversionError, match=r"nn.MapTable at <root> has unshared clones"):
        convert("nn.MapTable(nn.Linear(2, 2), false)")
    with pytest.raises(ConversionError, match=r"nn.SelectTable at 1 selects key 'x'"):
        convert("nn.ConcatTable():add(nn.SelectTable('x'))")


def test_bad_inputs_name_the_module() -> None:
    x = [torch.zeros(2), torch.zeros(3)]
    with pytest.raises(IndexError, match="SelectTable: index 3 does not exist in an input list of 2 entries"):
        convert("nn.SelectTable(3)")(x)
    with pytest.raises(IndexError, match="NarrowTable: entries 2 to 3 out of range of an input list of 2 entries"):
        convert("nn.NarrowTable(2, 2)")(x)
    with pytest.raises(IndexError, match="JoinTable: dimension 3 out of range for a 1D input"):
        convert("nn.JoinTable(3)")(x)
    # the layers that take one torch7 dim read it alike (negative from the end, range checked)
    for ctor in ("nn.Sum(3)", "nn.Max(-3)", "nn.Narrow(3, 1, 1)", "nn.Select(3, 1)"):
        with pytest.raises(IndexError, match=r"(Reduce|Narrow|Select): dimension -?3 out of range for a 2D input"):
            convert(ctor)(torch.zeros(2, 2))
