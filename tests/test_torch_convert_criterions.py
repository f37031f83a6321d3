"""luabridge.torch.convert on torch7's criterions: for every converter of convert_criterions, the
converted loss module, fed the very input and target tensors of the Lua criterion (1-based
class targets included), gives its loss, and autograd gives its backward (float64, to 1e-10)."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable
from unittest import mock

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is missing (pip install torch): luabridge.torch needs it")

import numpy as np  # noqa: E402
from test_torch_convert_tables import close, leaves, nested  # noqa: E402

import luabridge  # noqa: E402
from luabridge.torch import convert_criterions  # noqa: E402,F401 - registers the converters
from luabridge.torch.convert import CONVERTERS, convert  # noqa: E402

rng = np.random.default_rng(7)


def r(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape)


def log_probs(*shape: int, dim: int = -1) -> np.ndarray:
    x = r(*shape)
    return x - np.log(np.exp(x).sum(dim, keepdims=True))


def classes(n: int, *shape: int, dtype: type = np.float64) -> np.ndarray:
    """1-based class indices, as torch7 takes them (a DoubleTensor by default)."""
    return rng.integers(1, n + 1, shape).astype(dtype)


def signs(*shape: int) -> np.ndarray:
    return np.where(rng.random(shape) < 0.5, -1.0, 1.0)


def probabilities(*shape: int) -> np.ndarray:
    return rng.uniform(0.05, 0.95, shape)


def multilabel_targets(rows: int, n: int) -> np.ndarray:
    """Each row: a few distinct 1-based classes, then zeros (torch7's end marker)."""
    t = np.zeros((rows, n))
    for row in t:
        k = rng.integers(1, n)
        row[:k] = rng.permutation(n)[:k] + 1
    return t


Pair = Callable[[], tuple[Any, Any]]   # -> (input, target)
CASES: dict[str, list[tuple[str, Pair]]] = {
    "nn.MSECriterion": [
        ("nn.MSECriterion()", lambda: (r(5, 4), r(5, 4))),
        ("nn.MSECriterion(false)", lambda: (r(5, 4), r(20))),   # equal element counts are enough
        ("nn.MSECriterion()", lambda: (r(6), r(6))),
    ],
    "nn.AbsCriterion": [("nn.AbsCriterion()", lambda: (r(5, 4), r(5, 4))), ("nn.AbsCriterion(false)", lambda: (r(7), r(7)))],
    "nn.SmoothL1Criterion": [
        ("nn.SmoothL1Criterion()", lambda: (2 * r(5, 4), r(5, 4))),
        ("nn.SmoothL1Criterion(false)", lambda: (2 * r(7), r(7))),
    ],
    "nn.SoftMarginCriterion": [("nn.SoftMarginCriterion()", lambda: (r(5, 4), signs(5, 4)))],
    "nn.DistKLDivCriterion": [
        ("nn.DistKLDivCriterion()", lambda: (log_probs(4, 5), np.exp(log_probs(4, 5)) * (rng.random((4, 5)) < 0.7))),
    ],
    "nn.BCECriterion": [
        ("nn.BCECriterion()", lambda: (probabilities(5, 4), (rng.random((5, 4)) < 0.5).astype(float))),
        ("nn.BCECriterion(torch.rand(4))", lambda: (probabilities(5, 4), probabilities(5, 4))),
        ("nn.BCECriterion(torch.rand(6), false)", lambda: (probabilities(6), probabilities(6))),
    ],
    "nn.MultiLabelSoftMarginCriterion": [
        ("nn.MultiLabelSoftMarginCriterion()", lambda: (r(5, 4), (rng.random((5, 4)) < 0.5).astype(float))),
        ("nn.MultiLabelSoftMarginCriterion(torch.rand(4), false)", lambda: (3 * r(5, 4), probabilities(5, 4))),
    ],
    "nn.MarginCriterion": [
        ("nn.MarginCriterion()", lambda: (r(5, 4), signs(5, 4))),
        ("nn.MarginCriterion(0.5)", lambda: (r(8), signs(8))),
    ],
    "nn.HingeEmbeddingCriterion": [
        ("nn.HingeEmbeddingCriterion()", lambda: (np.abs(r(5, 4)), signs(5, 4))),
        ("nn.HingeEmbeddingCriterion(2)", lambda: (np.abs(r(6)), -1)),   # one label for all
    ],
    "nn.WeightedMSECriterion": [
        ("nn.WeightedMSECriterion(torch.rand(3, 4))", lambda: (r(3, 4), r(3, 4))),
        ("nn.WeightedMSECriterion(torch.rand(3, 4))", lambda: (r(5, 3, 4), r(5, 3, 4))),   # per sample
    ],
    "nn.SpatialAutoCropMSECriterion": [
        ("nn.SpatialAutoCropMSECriterion()", lambda: (r(2, 3, 4, 5), r(2, 3, 7, 8))),
        ("nn.SpatialAutoCropMSECriterion(false)", lambda: (r(3, 4, 4), r(3, 5, 6))),
    ],
    "nn.ClassSimplexCriterion": [
        ("nn.ClassSimplexCriterion(5)", lambda: (r(4, 5), classes(5, 4))),
        ("nn.ClassSimplexCriterion(5)", lambda: (r(5), 3)),
    ],
    "nn.ClassNLLCriterion": [
        ("nn.ClassNLLCriterion()", lambda: (log_probs(6, 4), classes(4, 6))),
        ("nn.ClassNLLCriterion()", lambda: (log_probs(6, 4), classes(4, 6, dtype=np.int64))),
        ("nn.ClassNLLCriterion(torch.rand(4))", lambda: (log_probs(6, 4), classes(4, 6))),
        ("nn.ClassNLLCriterion(torch.rand(4), false)", lambda: (log_probs(6, 4), classes(4, 6))),
        ("nn.ClassNLLCriterion(nil, true, 2)", lambda: (log_probs(8, 3), np.array([1., 2, 3, 2, 1, 3, 3, 2]))),
        ("nn.ClassNLLCriterion()", lambda: (log_probs(5), 4)),
        ("nn.ClassNLLCriterion()", lambda: (log_probs(5), np.array([2.0]))),
    ],
    "nn.CrossEntropyCriterion": [
        ("nn.CrossEntropyCriterion()", lambda: (r(6, 4), classes(4, 6))),
        ("nn.CrossEntropyCriterion(torch.rand(4), false)", lambda: (r(6, 4), classes(4, 6))),
        ("nn.CrossEntropyCriterion()", lambda: (r(1, 5), classes(5, 1))),
        ("nn.CrossEntropyCriterion()", lambda: (r(5), 2)),
    ],
    "nn.SpatialClassNLLCriterion": [
        ("nn.SpatialClassNLLCriterion()", lambda: (log_probs(2, 3, 4, 5, dim=1), classes(3, 2, 4, 5))),
        ("nn.SpatialClassNLLCriterion(torch.rand(3), false)", lambda: (log_probs(2, 3, 4, 5, dim=1), classes(3, 2, 4, 5))),
    ],
    "nn.MultiMarginCriterion": [
        ("nn.MultiMarginCriterion()", lambda: (r(6, 4), classes(4, 6))),
        ("nn.MultiMarginCriterion(2)", lambda: (r(6, 4), classes(4, 6))),
        ("nn.MultiMarginCriterion(1, torch.rand(4), 0.5)", lambda: (r(6, 4), classes(4, 6))),
        ("nn.MultiMarginCriterion(2)", lambda: (r(5), 3)),
    ],
    "nn.MultiLabelMarginCriterion": [
        ("nn.MultiLabelMarginCriterion()", lambda: (r(5, 6), multilabel_targets(5, 6))),
        ("nn.MultiLabelMarginCriterion()", lambda: (r(6), multilabel_targets(1, 6)[0])),
    ],
    "nn.CosineEmbeddingCriterion": [
        ("nn.CosineEmbeddingCriterion()", lambda: ([r(6, 3), r(6, 3)], signs(6))),
        ("nn.CosineEmbeddingCriterion(-0.2)", lambda: ([r(6, 3), r(6, 3)], signs(6))),
        ("nn.CosineEmbeddingCriterion()", lambda: ([r(4), r(4)], 1)),
    ],
    "nn.MarginRankingCriterion": [
        ("nn.MarginRankingCriterion()", lambda: ([r(7), r(7)], signs(7))),
        ("nn.MarginRankingCriterion(0.5)", lambda: ([r(1), r(1)], -1)),
    ],
    "nn.L1HingeEmbeddingCriterion": [
        ("nn.L1HingeEmbeddingCriterion()", lambda: ([r(5), r(5)], 1)),
        ("nn.L1HingeEmbeddingCriterion(20)", lambda: ([r(5), r(5)], -1)),
        ("nn.L1HingeEmbeddingCriterion(0.1)", lambda: ([r(5), r(5)], -1)),   # beyond the margin: zero
    ],
    "nn.DistanceRatioCriterion": [
        ("nn.DistanceRatioCriterion()", lambda: ([np.abs(r(6)), np.abs(r(6))], None)),
        ("nn.DistanceRatioCriterion(false)", lambda: ([np.abs(r(4, 2)), np.abs(r(4, 2))], None)),
    ],
    "nn.ParallelCriterion": [
        ("nn.ParallelCriterion():add(nn.MSECriterion(), 0.5):add(nn.ClassNLLCriterion())",
         lambda: ([r(3, 2), log_probs(4, 3)], [r(3, 2), classes(3, 4)])),
        ("nn.ParallelCriterion(true):add(nn.MSECriterion()):add(nn.AbsCriterion(), 2)",
         lambda: ([r(3, 2), r(3, 2)], r(3, 2))),
    ],
    "nn.MultiCriterion": [("nn.MultiCriterion():add(nn.MSECriterion(), 0.3):add(nn.AbsCriterion())", lambda: (r(4, 3), r(4, 3)))],
    "nn.ModuleCriterion": [
        ("nn.ModuleCriterion(nn.MSECriterion(), nn.CAddTable(), nn.Linear(4, 3))", lambda: ([r(5, 3), r(5, 3)], r(5, 4))),
        ("nn.ModuleCriterion(nn.AbsCriterion(), nil, nn.Linear(4, 3))", lambda: (r(5, 3), r(5, 4))),
    ],
    # a module: input {input, target}, no target; its gradient is the input's only
    "nn.CriterionTable": [("nn.CriterionTable(nn.ClassNLLCriterion())", lambda: ([log_probs(5, 3), classes(3, 5, dtype=np.int64)], None))],
}


def lua_pass(m: Any, x: Any, t: Any) -> tuple[float, Any]:
    """The Lua loss and gradInput (copied), on copies of x and t."""
    x, t = nested(np.copy, x), nested(np.copy, t) if isinstance(t, (np.ndarray, list)) else t
    loss = m.forward(x, t)
    grad = m.backward(x, t)
    return (loss[0] if isinstance(loss, tuple) else loss), nested(np.array, grad)


def torch_pass(model: torch.nn.Module, x: Any, t: Any) -> tuple[float, list[Any]]:
    tx = nested(lambda a: torch.tensor(a, requires_grad=a.dtype == np.float64), x)
    loss = model(tx) if t is None else model(tx, nested(torch.tensor, t) if isinstance(t, (np.ndarray, list)) else t)
    wrt = [v for v in leaves(tx) if v.requires_grad]
    return loss.item(), [g.numpy() for g in torch.autograd.grad(loss, wrt)]


# cudnn's criterions, run without a GPU (LUABRIDGE_CUDA_ON_CPU=1) in a runtime of their own
CUDNN_CASES: dict[str, list[tuple[str, Pair]]] = {
    "cudnn.SpatialCrossEntropyCriterion": [
        ("cudnn.SpatialCrossEntropyCriterion()", lambda: (r(2, 3, 4, 5), classes(3, 2, 4, 5))),
        ("cudnn.SpatialCrossEntropyCriterion(torch.rand(3))", lambda: (r(1, 3, 4, 5), classes(3, 1, 4, 5))),
    ],
    "cudnn.VolumetricCrossEntropyCriterion": [
        ("cudnn.VolumetricCrossEntropyCriterion(torch.rand(3))", lambda: (r(2, 3, 2, 4, 5), classes(3, 2, 2, 4, 5))),
    ],
}

CASE_LIST = [(name, ctor, make) for name, cases in CASES.items() for ctor, make in cases]
CUDNN_CASE_LIST = [(name, ctor, make) for name, cases in CUDNN_CASES.items() for ctor, make in cases]


@pytest.mark.parametrize("name,ctor,make", CASE_LIST, ids=[ctor for _, ctor, _ in CASE_LIST])
def test_converted_loss_matches_lua_forward_and_backward(name: str, ctor: str, make: Pair) -> None:
    check_case(name, ctor, make)


@pytest.fixture(scope="module")
def cudnn_thread() -> Any:
    """A thread whose runtime has cudnn loaded without a GPU (the other tests' runtime stays without)."""
    pool = ThreadPoolExecutor(max_workers=1)
    with mock.patch.dict(os.environ, {"LUABRIDGE_CUDA_ON_CPU": "1"}):
        pool.submit(luabridge.require, "cudnn").result()
    yield pool
    pool.shutdown()


@pytest.mark.parametrize("name,ctor,make", CUDNN_CASE_LIST, ids=[ctor for _, ctor, _ in CUDNN_CASE_LIST])
def test_converted_cudnn_loss_matches_lua(cudnn_thread: ThreadPoolExecutor, name: str, ctor: str, make: Pair) -> None:
    cudnn_thread.submit(check_case, name, ctor, make).result()


def check_case(name: str, ctor: str, make: Pair) -> None:
    """Converts ctor's criterion and compares loss and gradient with the Lua criterion's."""
    luabridge.require("nn")
    lua = luabridge.wrap(luabridge.eval(ctor))
    assert lua._typename() == name
    model = convert(lua)
    x, t = make()
    loss, grad = lua_pass(lua, x, t)
    tloss, tgrads = torch_pass(model, x, t)
    assert abs(tloss - loss) <= 1e-10, (tloss, loss)
    float_grads = [g for g, a in zip(leaves(grad), leaves(x)) if a.dtype == np.float64]
    close(tgrads, float_grads, "gradInput")


def test_every_criterion_converter_has_a_case() -> None:
    mine = {name for name, fn in CONVERTERS.items() if fn.__module__ == convert_criterions.__name__}
    assert mine - set(CASES) - set(CUDNN_CASES) == set(), "converters without a test case"


def test_size_average_set_after_construction_is_read() -> None:
    """sizeAverage is a public field: the converter reads it, not the constructor's argument."""
    lua = luabridge.nn.CrossEntropyCriterion()
    lua.sizeAverage = False
    x, t = r(6, 4), classes(4, 6)
    summed = convert(lua)(torch.tensor(x), torch.tensor(t)).item()
    assert abs(summed - lua.forward(x, t)) <= 1e-10
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    assert abs(summed + logp[np.arange(6), t.astype(int) - 1].sum()) <= 1e-10   # 1-based targets


@pytest.mark.parametrize("ctor,target", [
    ("nn.ClassNLLCriterion()", [1.0, 0.0]),           # 0 is no class in torch7
    ("nn.CrossEntropyCriterion()", [1.0, 4.0]),
    ("nn.MultiMarginCriterion()", [1.5, 2.0]),
])
def test_class_targets_out_of_range_name_the_one_based_range(ctor: str, target: list[float]) -> None:
    model = convert(ctor)
    with pytest.raises(IndexError, match=r"target .* out of range, expected a class index in \[1, 3\]"):
        model(torch.zeros(2, 3, dtype=torch.float64), torch.tensor(target))
