"""ccn2 (soumith/cuda-convnet2.torch's layers) without a GPU, LUABRIDGE_CUDA_ON_CPU=1: tensors laid
out planes x height x width x batch, checked against float64 numpy written from cuda-convnet2's
definitions (convFilterActs' rounded-up output rows and groups, its weight layout, convLocalMaxPool,
convResponseNormCrossMap with addScale / size); the convolution's gradients through its adjoint
identities, the normalization's through finite differences of the numpy forward."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from luabridge import t7

LUABRIDGE = [str(Path(sys.executable).with_name("luabridge"))]

SCRIPT = r"""
require 'ccn2'
local d = torch.load(arg[1])
local out = {}
local conv = ccn2.SpatialConvolution(d.nIn, d.nOut, d.k, d.stride, d.pad, d.groups):cuda()
conv.weight:copy(d.weight); conv.bias:copy(d.bias)
out.conv = conv:forward(d.x):clone()
out.convGradInput = conv:updateGradInput(d.x, d.g):clone()
conv:zeroGradParameters(); conv:accGradParameters(d.x, d.g, 1)
out.convGradWeight, out.convGradBias = conv.gradWeight:clone(), conv.gradBias:clone()
out.weightSize = torch.Tensor(conv.weight:size():totable())
local pool = ccn2.SpatialMaxPooling(d.poolK, d.poolD):cuda()
out.pool = pool:forward(d.x):clone()
out.poolGradInput = pool:backward(d.x, d.poolG):clone()
local crn = ccn2.SpatialCrossResponseNormalization(d.size, d.addScale, d.powScale, d.minDiv):cuda()
out.crn = crn:forward(d.x):clone()
out.crnGradInput = crn:backward(d.x, d.crnG):clone()
local ok, err = pcall(function() conv:forward(d.x:narrow(4, 1, 16)) end)
out.batchError = tostring(err)
torch.save(arg[2], out)
"""


def conv_ref(x, w, b, k, stride, pad, groups):
    """cuda-convnet2's convFilterActs: x planes x h x w x batch, w (nIn/groups * k * k) x nOut."""
    C, H, _, B = x.shape
    F = w.shape[1]
    oH = int(np.ceil((2 * pad + H - k) / stride)) + 1
    extra = (oH - 1) * stride + k - (H + 2 * pad)
    xp = np.zeros((C, H + 2 * pad + extra, H + 2 * pad + extra, B))
    xp[:, pad:pad + H, pad:pad + H, :] = x
    inG, outG = C // groups, F // groups
    filt = w.reshape(inG, k, k, F)
    y = np.zeros((F, oH, oH, B))
    for f in range(F):
        g = f // outG
        for i in range(oH):
            for j in range(oH):
                patch = xp[g * inG:(g + 1) * inG, i * stride:i * stride + k, j * stride:j * stride + k, :]
                y[f, i, j] = np.einsum("cyxb,cyx->b", patch, filt[:, :, :, f]) + b[f]
    return y


def pool_ref(x, k, d):
    C, H, _, B = x.shape
    o = (H - k) // d + 1
    y = np.zeros((C, o, o, B))
    arg = {}
    for i in range(o):
        for j in range(o):
            win = x[:, i * d:i * d + k, j * d:j * d + k, :]
            y[:, i, j, :] = win.max(axis=(1, 2))
    return y


def crn_ref(x, size, addScale, powScale, minDiv):
    C = x.shape[0]
    s = addScale / size
    y = np.empty_like(x)
    for f in range(C):
        lo, hi = max(0, f - size // 2), min(C, f - size // 2 + size)
        d = minDiv + s * (x[lo:hi] ** 2).sum(axis=0)
        y[f] = x[f] * d ** -powScale
    return y


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ccn2")
    rng = np.random.default_rng(3)
    C, H, B, F, k, stride, pad, groups = 8, 9, 32, 32, 3, 2, 1, 2
    x = rng.standard_normal((C, H, H, B)).astype(np.float32)
    data = {
        "x": x, "nIn": C, "nOut": F, "k": k, "stride": stride, "pad": pad, "groups": groups,
        "weight": (rng.standard_normal((C // groups * k * k, F)) * 0.2).astype(np.float32),
        "bias": rng.standard_normal(F).astype(np.float32),
        "g": rng.standard_normal((F, 5, 5, B)).astype(np.float32),   # ceil((2 + 9 - 3) / 2) + 1 = 5 rows
        "poolK": 3, "poolD": 2, "poolG": rng.standard_normal((C, 4, 4, B)).astype(np.float32),
        "size": 5, "addScale": 0.5, "powScale": 0.75, "minDiv": 2.0,
        "crnG": rng.standard_normal((C, H, H, B)).astype(np.float32),
    }
    t7.write(tmp / "in.t7", data)
    (tmp / "run.lua").write_text(SCRIPT)
    env = {**os.environ, "LUABRIDGE_CUDA_ON_CPU": "1"}
    proc = subprocess.run([*LUABRIDGE, "th", str(tmp / "run.lua"), str(tmp / "in.t7"), str(tmp / "out.t7")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = t7.read(tmp / "out.t7")
    return {k: (v.astype(np.float64) if isinstance(v, np.ndarray) else v) for k, v in data.items()}, out


def test_convolution_forward_groups_and_rounded_up_rows(run):
    d, out = run
    want = conv_ref(d["x"], d["weight"], d["bias"], d["k"], d["stride"], d["pad"], d["groups"])
    assert want.shape == (32, 5, 5, 32)
    assert list(out["weightSize"]) == [4 * 3 * 3, 32]   # (nIn/groups * k * k) x nOut
    np.testing.assert_allclose(out["conv"], want, rtol=1e-4, atol=1e-4)


def test_convolution_gradients_are_the_adjoints(run):
    d, out = run
    rng = np.random.default_rng(5)
    k, s, p, G = d["k"], d["stride"], d["pad"], d["groups"]
    zero = np.zeros_like(d["bias"])
    g = d["g"]
    # <gradInput, v> = <g, conv(v)> for any v (the convolution without bias is linear in its input)
    v = rng.standard_normal(d["x"].shape)
    lhs = (out["convGradInput"] * v).sum()
    rhs = (g * conv_ref(v, d["weight"], zero, k, s, p, G)).sum()
    assert abs(lhs - rhs) <= 1e-3 * abs(rhs) + 1e-2
    # <gradWeight, u> = <g, conv_u(x)>, gradBias = g summed over rows, columns and batch
    u = rng.standard_normal(d["weight"].shape)
    lhs = (out["convGradWeight"] * u).sum()
    rhs = (g * conv_ref(d["x"], u, zero, k, s, p, G)).sum()
    assert abs(lhs - rhs) <= 1e-3 * abs(rhs) + 1e-2
    np.testing.assert_allclose(out["convGradBias"], g.sum(axis=(1, 2, 3)), rtol=1e-4, atol=1e-3)


def test_max_pooling(run):
    d, out = run
    np.testing.assert_allclose(out["pool"], pool_ref(d["x"], 3, 2), rtol=1e-6)
    # each window's gradient lands on its maximum (no ties among normal samples)
    x, g = d["x"], d["poolG"]
    want = np.zeros_like(x)
    for i in range(4):
        for j in range(4):
            win = x[:, 2 * i:2 * i + 3, 2 * j:2 * j + 3, :]
            flat = win.reshape(x.shape[0], 9, x.shape[3])
            idx = flat.argmax(axis=1)
            for c in range(x.shape[0]):
                for b in range(x.shape[3]):
                    yy, xx = divmod(idx[c, b], 3)
                    want[c, 2 * i + yy, 2 * j + xx, b] += g[c, i, j, b]
    np.testing.assert_allclose(out["poolGradInput"], want, rtol=1e-5, atol=1e-6)


def test_cross_map_response_normalization(run):
    d, out = run
    args = (d["size"], d["addScale"], d["powScale"], d["minDiv"])
    np.testing.assert_allclose(out["crn"], crn_ref(d["x"], *args), rtol=1e-5, atol=1e-6)
    # gradInput against central differences of the float64 forward, one sample of the batch
    x, g = d["x"][..., :1].copy(), d["crnG"][..., :1]
    num = np.zeros_like(x)
    eps = 1e-6
    for idx in np.ndindex(x.shape):
        x[idx] += eps
        up = (g * crn_ref(x, *args)).sum()
        x[idx] -= 2 * eps
        down = (g * crn_ref(x, *args)).sum()
        x[idx] += eps
        num[idx] = (up - down) / (2 * eps)
    np.testing.assert_allclose(out["crnGradInput"][..., :1], num, rtol=1e-3, atol=1e-4)


def test_batch_must_be_a_multiple_of_32(run):
    _, out = run
    assert "multiple of 32" in out["batchError"]


def test_without_a_device_or_the_switch():
    env = {k: v for k, v in os.environ.items() if k not in ("LUABRIDGE_CUDA_ON_CPU", "LUABRIDGE_CUDA_ARRAY_MODULE")}
    code = ("local ok1, e1 = pcall(require, 'ccn2'); local ok2, e2 = pcall(require, 'ccn2'); "
            "print(tostring(ok1) .. '|' .. tostring(ok2) .. '|' .. tostring(e1) .. '|' .. tostring(e2))")
    proc = subprocess.run([*LUABRIDGE, "th", "-e", code], env=env, capture_output=True, text=True, timeout=120)
    ok1, ok2, e1, e2 = proc.stdout.strip().splitlines()[-1].split("|", 3)
    if ok1 == "true":
        pytest.skip("a CUDA device is present: ccn2 runs on it")
    # as cutorch's: the switch is named, and a second require fails the same way (no sentinel left)
    assert ok2 == "false" and "LUABRIDGE_CUDA_ON_CPU=1" in e1 and e1 == e2
