"""A custom torch7 layer written in Lua (examples/custom_layer.lua, nn.MyLayer) used from Python:
checked against numpy, then trained inside an nn.Sequential with optim.adam.

    python examples/custom_layer.py
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

import luabridge
from luabridge import nn, optim

luabridge.dofile(Path(__file__).resolve().parent / "custom_layer.lua")  # defines nn.MyLayer


def numpy_swish(x: np.ndarray, w: float) -> np.ndarray:
    return x / (1 + np.exp(-w * x))


def check_layer(rng: np.random.Generator) -> float:
    """Largest gap between the layer (forward, input and slope gradients) and numpy."""
    layer = nn.MyLayer(0.7)
    x, g = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    out = np.array(layer.forward(x))  # a copy: layer.output is reused by the next call
    grad_in = np.array(layer.backward(x, g))
    eps = 1e-6
    want_in = (numpy_swish(x + eps, 0.7) - numpy_swish(x - eps, 0.7)) / (2 * eps) * g
    want_w = ((numpy_swish(x, 0.7 + eps) - numpy_swish(x, 0.7 - eps)) / (2 * eps) * g).sum()
    return max(np.abs(out - numpy_swish(x, 0.7)).max(), np.abs(grad_in - want_in).max(),
               abs(float(layer.gradWeight[0]) - want_w))


def fit(rng: np.random.Generator, steps: int = 300) -> tuple[float, float]:
    """Regresses sin(3x) with Linear -> MyLayer -> Linear; the MSE before and after."""
    luabridge.require("torch").manualSeed(1)
    model = nn.Sequential().add(nn.Linear(1, 32)).add(nn.MyLayer()).add(nn.Linear(32, 1))
    criterion = nn.MSECriterion()
    x = rng.uniform(-1, 1, (256, 1))
    y = np.sin(3 * x)
    params, grads = model.getParameters()

    def feval(_params: luabridge.Tensor) -> tuple[float, luabridge.Tensor]:
        grads.zero()
        loss = criterion.forward(model.forward(x), y)
        model.backward(x, criterion.backward(model.output, y))
        return loss, grads

    config: dict = {"learningRate": 0.02}
    first = feval(params)[0]
    for _ in range(steps):
        optim.adam(feval, params, config)
    print(model)
    return first, feval(params)[0]


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"nn.MyLayer against numpy: largest difference {check_layer(rng):.2e}")
    before, after = fit(rng)
    print(f"sin(3x) regression MSE: {before:.4f} before, {after:.4f} after training")


if __name__ == "__main__":
    main()
