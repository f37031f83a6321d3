"""The conv-net passes that run on oneDNN (backend/cpu/dnnl_nn.lua) against the kernels that run
without it (dnnl.enabled false) and PyTorch's functional ops: max pooling (output, torch7's
indices, and a backward that follows the indices, changed or not),
average pooling (count_include_pad, ceil_mode), convolutions of few channels, whose path the
thread count picks (nn_conv.lua's rule), on oneDNN's blocked and channels-last kernels, and the
depth-wise convolution (a grouped one on oneDNN); at 1 and 2 threads, odd sizes, padding, stride,
dilation, batch 1, non-contiguous input; and finite differences on a small case."""
import numpy as np
import pytest

from helpers import N, lua_fn

torch = pytest.importorskip("torch")
F = torch.nn.functional

available = lua_fn("function() return require('torch.backend.cpu.dnnl').available end")
PATHS = ["loops", pytest.param("onednn", marks=pytest.mark.skipif(
    not available(), reason="oneDNN is not installed (pip install 'luabridge[onednn]')"))]


def on_path(params, body):
    """A Lua function (path, threads, <params>, ...) running `body` (which returns a table: the
    function returns its values) with oneDNN on (path 'onednn') or off, on `threads` threads
    (blas.watchLoad off: whatever else runs), all put back after; `args` holds the extra
    arguments."""
    return lua_fn(f"""function(path, threads, {params}, ...)
      require 'nn'
      local dnnl = require 'torch.backend.cpu.dnnl'
      local blas = require 'torch.backend.cpu.blas'
      local was, watch, before = dnnl.enabled, blas.watchLoad, torch.getnumthreads()
      dnnl.enabled, blas.watchLoad = path == 'onednn', false
      torch.setnumthreads(threads)
      local args = {{ ... }}
      local ok, r = pcall(function() {body} end)
      dnnl.enabled, blas.watchLoad = was, watch
      torch.setnumthreads(before)
      if not ok then error(r) end
      return unpack(r)
    end""")


# Runs module `make` (a Lua expression of nn) on x (transposed in dims 3, 4 first when `strided`:
# a non-contiguous input) with oneDNN on or off, on `threads` threads (watchLoad off), in
# training or evaluation: output, indices (or false), gradInput; and, when `touch`, the
# gradInput after the indices of the first window were moved to its second tap.
run = on_path("make, x, go, strided, train, touch", """
    local m = loadstring('return ' .. make)():float()
    if not train then m:evaluate() end
    local input = strided and x:transpose(3, 4) or x
    local out = m:forward(input):clone()
    local ix = m.indices and m.indices:clone() or false
    local gi = m:backward(input, go):clone()
    local moved = false
    if touch then
      m.indices:view(-1)[1] = m.indices:view(-1)[1] + 1
      moved = m:backward(input, go):clone()
    end
    return { out, ix, gi, moved }
""")

# (module, constructor, input shape, torch op and its arguments)
MAX_CASES = [
    ("nn.SpatialMaxPooling(3, 3, 2, 2, 1, 1)", (2, 5, 13, 11), dict(kernel_size=3, stride=2, padding=1)),
    ("nn.SpatialMaxPooling(2, 2, 2, 2)", (1, 3, 9, 9), dict(kernel_size=2, stride=2)),
    ("nn.SpatialMaxPooling(2, 2, 2, 2):ceil()", (2, 3, 7, 9), dict(kernel_size=2, stride=2, ceil_mode=True)),
    ("nn.SpatialMaxPooling(3, 2, 2, 1, 1, 0):ceil()", (3, 2, 8, 6),
     dict(kernel_size=(2, 3), stride=(1, 2), padding=(0, 1), ceil_mode=True)),
    ("nn.SpatialDilatedMaxPooling(3, 3, 1, 2, 1, 1, 2, 2)", (1, 2, 11, 9),
     dict(kernel_size=3, stride=(2, 1), padding=1, dilation=2)),
]


def torch_max(x, go, args):
    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    out, idx = F.max_pool2d(t, return_indices=True, **args)
    out.backward(torch.tensor(go, dtype=torch.float64))
    return out.detach().numpy(), idx.numpy() + 1, t.grad.numpy()


def draw(shape, seed, ties=False):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if ties:   # rounded values after a ReLU: ties inside windows
        x = np.maximum(np.round(x * 2), 0)
    return x.astype(np.float32)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("make, shape, args", MAX_CASES)
@pytest.mark.parametrize("strided", [False, True])
def test_max_pool_against_pytorch(make, shape, args, path, threads, strided):
    x = draw(shape, sum(shape))
    xs = x.transpose(0, 1, 3, 2) if strided else x   # what the module sees
    go = draw(F.max_pool2d(torch.tensor(xs), **args).shape, 7)
    want_out, want_idx, want_gi = torch_max(xs, go, args)
    out, idx, gi, _ = run(path, threads, make, np.ascontiguousarray(x), go, strided, True, False)
    np.testing.assert_array_equal(N(out), want_out)
    np.testing.assert_array_equal(N(idx), want_idx)
    np.testing.assert_allclose(N(gi), want_gi, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("train", [True, False])
def test_max_pool_backward_reads_the_indices(path, train):
    """With ties, in training and evaluation; then with an index moved by hand: the gradient
    follows the indices, as torch7's."""
    make, shape = "nn.SpatialMaxPooling(2, 2, 2, 2)", (2, 3, 8, 6)
    x = draw(shape, 3, ties=True)
    go = draw((2, 3, 4, 3), 4)
    out, idx, gi, moved = run(path, 2, make, x, go, False, train, True)
    ref = {}
    for name, ix in (("gi", N(idx)), ("moved", N(idx))):
        if name == "moved":
            ix.reshape(-1)[0] += 1
        g = np.zeros((2, 3, 48))
        for b in range(2):
            for c in range(3):
                np.add.at(g[b, c], ix[b, c].ravel() - 1, go[b, c].ravel())
        ref[name] = g.reshape(shape)
    np.testing.assert_allclose(N(gi), ref["gi"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(N(moved), ref["moved"], rtol=1e-6, atol=1e-6)


AVG_CASES = [
    ("nn.SpatialAveragePooling(3, 3, 2, 2, 1, 1)", (2, 4, 11, 9), dict(kernel_size=3, stride=2, padding=1)),
    ("nn.SpatialAveragePooling(7, 7, 1, 1)", (1, 6, 7, 7), dict(kernel_size=7, stride=1)),   # ResNet's
    ("nn.SpatialAveragePooling(3, 2, 2, 1, 1, 0):setCountExcludePad()", (2, 3, 7, 8),
     dict(kernel_size=(2, 3), stride=(1, 2), padding=(0, 1), count_include_pad=False)),
    ("nn.SpatialAveragePooling(3, 3, 2, 2, 1, 1):ceil()", (2, 3, 10, 8),
     dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ("nn.SpatialAveragePooling(3, 3, 2, 2, 1, 1):ceil():setCountExcludePad()", (1, 3, 10, 9),
     dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("make, shape, args", AVG_CASES)
@pytest.mark.parametrize("strided", [False, True])
def test_avg_pool_against_pytorch(make, shape, args, path, threads, strided):
    x = draw(shape, sum(shape) + 1)
    xs = x.transpose(0, 1, 3, 2) if strided else x
    t = torch.tensor(xs, dtype=torch.float64, requires_grad=True)
    out = F.avg_pool2d(t, **args)
    go = draw(out.shape, 9)
    out.backward(torch.tensor(go, dtype=torch.float64))
    got_out, _, got_gi, _ = run(path, threads, make, np.ascontiguousarray(x), go, strided, True, False)
    np.testing.assert_allclose(N(got_out), out.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(N(got_gi), t.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_pool_finite_differences():
    """oneDNN's average and max pooling gradients against central differences of sum(out * go)
    (float32 forward passes; max pooling on distinct values, away from ties)."""
    fwd = lua_fn("""function(make, x)
      require 'nn'
      return loadstring('return ' .. make)():float():forward(x):clone()
    end""")
    for make in ("nn.SpatialAveragePooling(3, 3, 2, 2, 1, 1)", "nn.SpatialMaxPooling(3, 3, 2, 2, 1, 1)"):
        x = (np.random.default_rng(5).permutation(2 * 2 * 5 * 5).reshape(2, 2, 5, 5) / 10).astype(np.float32)
        go = draw((2, 2, 3, 3), 6)
        _, _, gi, _ = run("onednn" if available() else "loops", 2, make, x, go, False, True, False)
        num = np.zeros(x.shape)
        eps = 1e-2
        for i in np.ndindex(x.shape):
            up, down = x.copy(), x.copy()
            up[i] += eps
            down[i] -= eps
            num[i] = ((N(fwd(make, up)) - N(fwd(make, down))) * go).sum() / (2 * eps)
        np.testing.assert_allclose(N(gi), num, rtol=1e-3, atol=1e-3, err_msg=make)


# Convolutions of few input channels: the path (im2col or oneDNN) depends on the channel counts
# and the thread count (nn_conv.lua's rule): every choice against PyTorch's conv2d.
conv_run = on_path("nIn, nOut, k, s, p, l, x, w, b, go", """
    local m = nn.SpatialDilatedConvolution(nIn, nOut, k, k, s, s, p, p, l, l):float()
    m.weight:copy(w); m.bias:copy(b); m.gradWeight:fill(0.25); m.gradBias:fill(0.25)   -- accumulated onto
    local out = m:forward(x):clone()
    local gi = m:backward(x, go):clone()
    return { out, gi, m.gradWeight, m.gradBias }
""")

CONV_CASES = [  # nIn, nOut, k, stride, pad, dilation, input shape
    (1, 20, 5, 1, 0, 1, (3, 1, 14, 13)),      # LeNet's first layer: im2col on 1 thread, gradInput on any
    (20, 50, 5, 1, 0, 1, (2, 20, 12, 11)),    # LeNet's second: im2col on 1 thread, oneDNN channels-last on 2
    (3, 64, 7, 2, 3, 1, (1, 3, 21, 19)),      # ResNet's first: oneDNN but for gradInput
    (16, 32, 3, 1, 1, 2, (2, 16, 9, 10)),     # dilated, 16 channels: oneDNN
    (40, 24, 3, 2, 1, 1, (2, 40, 9, 8)),      # forward and weight gradient channels-last, stride
    (40, 40, 3, 1, 1, 1, (1, 40, 7, 7)),      # the same, batch 1
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", CONV_CASES)
def test_few_channel_conv_against_pytorch(case, path, threads):
    nIn, nOut, k, s, p, dil, shape = case
    rng = np.random.default_rng(nIn + nOut)
    x = rng.standard_normal(shape).astype(np.float32)
    w = (rng.standard_normal((nOut, nIn, k, k)) / np.sqrt(nIn * k * k)).astype(np.float32)
    b = rng.standard_normal(nOut).astype(np.float32)
    t, tw, tb = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, w, b))
    out = F.conv2d(t, tw, tb, stride=s, padding=p, dilation=dil)
    go = rng.standard_normal(out.shape).astype(np.float32)
    out.backward(torch.tensor(go, dtype=torch.float64))
    got = conv_run(path, threads, nIn, nOut, k, s, p, dil, x, w, b, go)
    for name, g, want in zip(("output", "gradInput", "gradWeight", "gradBias"), got,
                             (out.detach(), t.grad, tw.grad + 0.25, tb.grad + 0.25)):
        want = want.numpy()
        np.testing.assert_allclose(N(g), want, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(want).max()), err_msg=name)


# nn.SpatialDepthWiseConvolution: a grouped convolution on oneDNN, its im2col + bmm passes without.
depthwise_run = on_path("n, mult, k, s, p, x, w, b, go, strided", """
    local m = nn.SpatialDepthWiseConvolution(n, mult, k, k, s, s, p, p):float()
    m.weight:copy(w); m.bias:copy(b)
    local input = strided and x:transpose(x:dim() - 1, x:dim()) or x
    local out = m:forward(input):clone()
    m.gradWeight:fill(0.25); m.gradBias:fill(0.25)
    local gi = m:backward(input, go, 0.5):clone()
    return { out, gi, m.gradWeight, m.gradBias }
""")

DEPTHWISE_CASES = [  # nInputPlane, multiplier, k, stride, pad, input shape
    (8, 1, 3, 1, 1, (2, 8, 11, 9)),     # MobileNet's
    (3, 4, 5, 2, 2, (1, 3, 13, 12)),    # a channel multiplier, stride, batch 1
    (5, 2, 3, 1, 0, (5, 9, 10)),        # one image (3D input)
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", DEPTHWISE_CASES)
@pytest.mark.parametrize("strided", [False, True])
def test_depthwise_conv_against_pytorch(case, path, threads, strided):
    n, mult, k, s, p, shape = case
    rng = np.random.default_rng(n * 10 + mult)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((mult, n * k * k)).astype(np.float32)
    b = rng.standard_normal((mult, n)).astype(np.float32)
    xs = np.swapaxes(x, -1, -2) if strided else x
    batch = xs if xs.ndim == 4 else xs[None]
    # output plane i * mult + j: input plane i, kernel w[j][i]
    tw = torch.tensor(w.reshape(mult, n, k, k).transpose(1, 0, 2, 3).reshape(n * mult, 1, k, k),
                      dtype=torch.float64, requires_grad=True)
    tb = torch.tensor(b.T.reshape(-1), dtype=torch.float64, requires_grad=True)
    t = torch.tensor(batch, dtype=torch.float64, requires_grad=True)
    out = F.conv2d(t, tw, tb, stride=s, padding=p, groups=n)
    go = rng.standard_normal(out.shape[1:] if xs.ndim == 3 else out.shape).astype(np.float32)
    out.backward(torch.tensor(go, dtype=torch.float64).reshape(out.shape))
    got = depthwise_run(path, threads, n, mult, k, s, p, x, w, b, go, strided)
    gw = tw.grad.numpy().reshape(n, mult, k * k).transpose(1, 0, 2).reshape(mult, n * k * k)
    gb = tb.grad.numpy().reshape(n, mult).T
    wants = (out.detach().numpy().reshape(go.shape), t.grad.numpy().reshape(xs.shape), 0.25 + 0.5 * gw, 0.25 + 0.5 * gb)
    for name, g, want in zip(("output", "gradInput", "gradWeight", "gradBias"), got, wants):
        np.testing.assert_allclose(N(g), want, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(want).max()), err_msg=name)


def test_depthwise_accgrad_needs_a_forward():
    """As torch7: accGradParameters before any updateOutput is an error naming the module."""
    err = lua_fn("""function()
      require 'nn'
      local m = nn.SpatialDepthWiseConvolution(2, 1, 3, 3):float()
      local ok, e = pcall(function() m:accGradParameters(torch.FloatTensor(1, 2, 5, 5), torch.FloatTensor(1, 2, 3, 3)) end)
      return tostring(e)
    end""")()
    assert "SpatialDepthWiseConvolution" in err and "updateOutput" in err


# nn.SpatialCrossMapLRN: oneDNN (odd sizes) or nn_lrn.lua's loops; torch7's scale field too.
lrn_run = on_path("size, alpha, beta, k, x, go, strided", """
    local m = nn.SpatialCrossMapLRN(size, alpha, beta, k):float()
    local input = strided and x:transpose(x:dim() - 1, x:dim()) or x
    local out = m:forward(input):clone()
    return { out, m.scale:clone(), m:backward(input, go):clone() }
""")


def lrn_ref(x, go, size, alpha, beta, k):
    """torch7's SpatialCrossMapLRN in float64 over dim -3: output, scale, and the input gradient
    of sum(out * go) by autograd (any size: torch7's window [c - pre, c + post])."""
    pre = (size - 1) // 2
    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    sq = t * t
    C = x.shape[-3]
    sums = torch.stack([sq.narrow(-3, max(0, c - pre), min(C, c + size - pre) - max(0, c - pre)).sum(-3)
                        for c in range(C)], -3)
    scale = k + alpha / size * sums
    out = t * scale ** -beta
    out.backward(torch.tensor(go, dtype=torch.float64))
    return out.detach().numpy(), scale.detach().numpy(), t.grad.numpy()


LRN_CASES = [  # size, alpha, beta, k, input shape
    (5, 1e-4, 0.75, 2.0, (2, 12, 7, 6)),     # AlexNet's
    (3, 0.5, 0.75, 1.0, (1, 5, 4, 9)),       # a large alpha: the scaling shows
    (5, 2.0, 0.5, 1.5, (7, 5, 5)),           # one image (3D), more window than channels at the ends
    (4, 1.0, 0.75, 1.0, (2, 6, 3, 5)),       # even: the loops (oneDNN's window is centred)
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", LRN_CASES)
@pytest.mark.parametrize("strided", [False, True])
def test_lrn_against_reference(case, path, threads, strided):
    size, alpha, beta, k, shape = case
    rng = np.random.default_rng(size * 7 + len(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    xs = np.swapaxes(x, -1, -2) if strided else x
    go = rng.standard_normal(xs.shape).astype(np.float32)
    out, scale, gi = lrn_ref(xs, go, size, alpha, beta, k)
    got = lrn_run(path, threads, size, alpha, beta, k, x, go, strided)
    for name, g, want in zip(("output", "scale", "gradInput"), got, (out, scale, gi)):
        np.testing.assert_allclose(N(g), want, rtol=1e-5, atol=1e-5, err_msg=name)
    if size % 2:   # PyTorch's window is torch7's for odd sizes
        t = torch.tensor(xs, dtype=torch.float64)
        want = F.local_response_norm(t if t.dim() == 4 else t[None], size, alpha, beta, k)
        np.testing.assert_allclose(N(got[0]), want.numpy().reshape(xs.shape), rtol=1e-5, atol=1e-5)


# Volumetric convolutions and their transposes: oneDNN's 3D passes, or the im2col ones.
volume_run = on_path("cls, x, w, b, go", """
    local m = nn[cls](unpack(args)):float()
    m.weight:copy(w); m.bias:copy(b); m.gradWeight:fill(0.25); m.gradBias:fill(0.25)
    local out = m:forward(x):clone()
    local gi = m:backward(x, go):clone()
    local out2 = m:forward(x:narrow(x:dim(), 1, x:size(x:dim()) - 1)):clone()   -- another width
    return { out, gi, m.gradWeight, m.gradBias, out2 }
""")

VOLUME_CASES = [  # class, (nIn, nOut, kT, kW, kH, dT, dW, dH, padT, padW, padH), input shape
    ("VolumetricConvolution", (3, 4, 3, 3, 2, 1, 2, 1, 1, 1, 0), (2, 3, 5, 7, 8)),
    ("VolumetricConvolution", (16, 8, 1, 3, 3, 2, 1, 1, 0, 1, 1), (1, 16, 4, 6, 5)),
    ("VolumetricFullConvolution", (4, 3, 2, 3, 3, 2, 2, 1, 0, 1, 0), (2, 4, 3, 4, 5)),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", VOLUME_CASES)
def test_volumetric_conv_against_pytorch(case, path, threads):
    cls, args, shape = case
    nIn, nOut, kT, kW, kH, dT, dW, dH, pT, pW, pH = args
    full = cls == "VolumetricFullConvolution"
    rng = np.random.default_rng(sum(args))
    x = rng.standard_normal(shape).astype(np.float32)
    w = (rng.standard_normal((nIn, nOut, kT, kH, kW) if full else (nOut, nIn, kT, kH, kW)) / 4).astype(np.float32)
    b = rng.standard_normal(nOut).astype(np.float32)
    op = F.conv_transpose3d if full else F.conv3d
    outs = []
    for xx in (x, x[..., :-1]):
        t, tw, tb = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (xx, w, b))
        outs.append((op(t, tw, tb, stride=(dT, dH, dW), padding=(pT, pH, pW)), t, tw, tb))
    out, t, tw, tb = outs[0]
    go = rng.standard_normal(out.shape).astype(np.float32)
    out.backward(torch.tensor(go, dtype=torch.float64))
    got = volume_run(path, threads, cls, x, w, b, go, *args)
    wants = (out.detach(), t.grad, tw.grad + 0.25, tb.grad + 0.25, outs[1][0].detach())
    for name, g, want in zip(("output", "gradInput", "gradWeight", "gradBias", "output of another width"), got, wants):
        want = want.numpy()
        np.testing.assert_allclose(N(g), want, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(want).max()), err_msg=name)
