"""Layout choices for the oneDNN convolutions LeNet runs on 2 threads (dnnl_nn.lua's
convdnnl.nhwc): gradInput of a convolution with 17 to 31 input channels runs on channels-last
kernels (LeNet's 20 -> 50), from 32 on blocked; forward and weight gradient channels-last for every
count past 16 that is not a multiple of 16. Both layouts (convdnnl.channelsLast on and off) give
PyTorch's float64 values at 1 and 2 threads."""
import numpy as np
import pytest

from helpers import N, lua_fn

torch = pytest.importorskip("torch")
F = torch.nn.functional

available = lua_fn("function() return require('torch.backend.cpu.dnnl').available end")
pytestmark = pytest.mark.skipif(not available(), reason="oneDNN is not installed (pip install 'luabridge[onednn]')")

nhwc = lua_fn("function(C, O, pass) return require('torch.backend.cpu.dnnl_nn').nhwc(C, O, pass) end")


@pytest.mark.parametrize("C, want", [(3, (False, False, False)), (16, (False, False, False)),
                                     (20, (True, True, True)), (24, (True, True, True)),
                                     (32, (False, False, False)), (40, (True, True, False)),
                                     (50, (True, True, False)), (64, (False, False, False))])
def test_channels_last_rule(C, want):
    got = tuple(bool(nhwc(C, 50, p)) for p in ("forward", "accGrad", "backward"))
    assert got == want


conv_run = lua_fn("""function(threads, channelsLast, nIn, nOut, k, s, p, x, w, b, go)
  require 'nn'
  local blas = require 'torch.backend.cpu.blas'
  local convdnnl = require 'torch.backend.cpu.dnnl_nn'
  -- the settings for this run, put back after it whatever happens
  local before = { watch = blas.watchLoad, threads = torch.getnumthreads(), layout = convdnnl.channelsLast }
  local function set(v) blas.watchLoad, convdnnl.channelsLast = v.watch, v.layout; torch.setnumthreads(v.threads) end
  set { watch = false, threads = threads, layout = channelsLast }
  local m = nn.SpatialConvolution(nIn, nOut, k, k, s, s, p, p):float()
  m.weight:copy(w); m.bias:copy(b)
  m:zeroGradParameters()
  local ok, out = pcall(m.forward, m, x)
  local okBack, gi = false, nil
  if ok then okBack, gi = pcall(m.backward, m, x, go) end
  set(before)
  if not ok then error(out, 0) end
  if not okBack then error(gi, 0) end
  return out:clone(), gi:clone(), m.gradWeight:clone(), m.gradBias:clone()
end""")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("channels_last", [True, False])
@pytest.mark.parametrize("case", [
    (20, 50, 5, 1, 0, (4, 20, 12, 12)),   # LeNet's second convolution
    (24, 40, 3, 2, 1, (3, 24, 11, 9)),    # 24 channels, stride and padding
    (40, 24, 3, 1, 1, (2, 40, 7, 8)),     # 40: gradInput blocked
])
def test_conv_layouts_against_pytorch(case, channels_last, threads):
    nIn, nOut, k, s, p, shape = case
    rng = np.random.default_rng(nIn * 100 + nOut)
    x = rng.standard_normal(shape).astype(np.float32)
    w = (rng.standard_normal((nOut, nIn, k, k)) / np.sqrt(nIn * k * k)).astype(np.float32)
    b = rng.standard_normal(nOut).astype(np.float32)
    t, tw, tb = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, w, b))
    out = F.conv2d(t, tw, tb, stride=s, padding=p)
    go = rng.standard_normal(out.shape).astype(np.float32)
    out.backward(torch.tensor(go, dtype=torch.float64))
    got = conv_run(threads, channels_last, nIn, nOut, k, s, p, x, w, b, go)
    for name, g, want in zip(("output", "gradInput", "gradWeight", "gradBias"), got,
                             (out.detach(), t.grad, tw.grad, tb.grad)):
        want = want.numpy()
        np.testing.assert_allclose(N(g), want, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(want).max()), err_msg=name)
