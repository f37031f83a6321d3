"""nn layers on CUDA tensors (module:cuda()), with numpy standing in for CuPy so that it runs on any
machine: the results must match the same module on CPU tensors (compared in float64 against the
float32 device run)."""
from __future__ import annotations

import numpy as np
import pytest

import luabridge
from nn_layers_check import call, forward, lua_tensor, module


_RUN = """function(m, x, g, onDevice)
  if onDevice then m = m:clone():cuda(); x = x:cuda(); g = g:cuda() end
  local y = m:forward(x):double()
  local gi = m:backward(x, g):double()
  return y, gi, torch.type(m.output)
end"""

DEVICE_MODULES = ["nn.Linear(4, 3)", "nn.ReLU()", "nn.ReLU(true)", "nn.Threshold(0.2, -1)", "nn.Threshold(0.2, 0.2)",
                  "nn.Threshold(0.5, -1, true)", "nn.HardTanh()",
                  "nn.ReLU6()", "nn.Tanh()", "nn.Sigmoid()", "nn.SoftMax()", "nn.LogSoftMax()", "nn.SoftMin()",
                  "nn.Max(2)", "nn.Min(1)", "nn.Sum(2)", "nn.Normalize(2)", "nn.Normalize(math.huge)",
                  "nn.CMul(4)", "nn.CAdd(4)", "nn.Add(4)", "nn.Mul()", "nn.Euclidean(4, 2)", "nn.Cosine(4, 2)",
                  "nn.View(-1)", "nn.Reshape(2, 6)", "nn.Narrow(2, 2, 2)", "nn.Padding(2, -1)",
                  "nn.BatchNormalization(4)", "nn.MulConstant(3)"]


@pytest.mark.parametrize("ctor", DEVICE_MODULES)
def test_device_matches_cpu(ctor, numpy_device, rng):
    m = module(ctor)
    x = rng.standard_normal((3, 4))
    g = rng.standard_normal(forward(m, x.copy()).shape)
    y, gi, _ = call(_RUN, m, lua_tensor(x.copy()), lua_tensor(g), False)
    yd, gid, kind = call(_RUN, m, lua_tensor(x.copy()), lua_tensor(g), True)
    assert kind == "torch.CudaTensor"
    np.testing.assert_allclose(luabridge.to_numpy(yd), luabridge.to_numpy(y), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(luabridge.to_numpy(gid), luabridge.to_numpy(gi), rtol=1e-5, atol=1e-5)


def test_cpu_only_modules_say_so(numpy_device):
    with pytest.raises(luabridge.LuaError, match=r"nn.RReLU: torch.CudaTensor is not supported \(CPU kernel\)"):
        call("function() return nn.RReLU():cuda():forward(torch.randn(3):cuda()) end")


# ---- modules whose CPU passes are LuaJIT loops: their device passes are luabridge/backend/cuda_nn.py's

# One pass on CPU float32 and on the device (a clone): outputs, gradInput, the parameter
# gradients (accGradParameters with a scale) and max pooling's indices, as float64 CPU tensors.
_SPATIAL_RUN = """function(m, x, g, onDevice)
  m = m:clone():float()
  x, g = x:float(), g:float()
  if onDevice then m = m:cuda(); x = x:cuda(); g = g:cuda() end
  m:zeroGradParameters()
  local y = m:forward(x):double()
  local gi = m:updateGradInput(x, g):double()
  m:accGradParameters(x, g, 0.5)
  local function host(t) return t and t:double() or torch.DoubleTensor() end
  return y, gi, host(m.gradWeight), host(m.gradBias), host(m.indices), torch.type(m.output)
end"""

SPATIAL_MODULES = [
    ("nn.SpatialConvolution(3, 4, 3, 3)", (2, 3, 7, 6)),
    ("nn.SpatialConvolution(3, 4, 3, 2, 2, 1, 1, 2)", (2, 3, 7, 6)),
    ("nn.SpatialConvolution(3, 4, 2, 3, 1, 2, 1, 0)", (3, 6, 5)),
    ("nn.SpatialConvolution(3, 2, 3, 3, 1, 1, 1, 1):noBias()", (2, 3, 5, 5)),
    ("nn.SpatialConvolutionMM(3, 4, 3, 3, 2, 2, 1, 1)", (2, 3, 7, 7)),
    ("nn.SpatialConvolutionMM(3, 4, 1, 1)", (3, 4, 5)),
    ("nn.SpatialMaxPooling(2, 2)", (2, 3, 8, 6)),
    ("nn.SpatialMaxPooling(3, 3, 2, 2, 1, 1)", (2, 3, 7, 6)),
    ("nn.SpatialMaxPooling(3, 3, 2, 2, 1, 1):ceil()", (3, 8, 7)),
    ("nn.SpatialMaxPooling(3, 2, 1, 2):ceil()", (2, 2, 7, 6)),
    ("nn.SpatialAveragePooling(2, 2, 2, 2)", (2, 3, 8, 6)),
    ("nn.SpatialAveragePooling(3, 3, 2, 2, 1, 1)", (2, 3, 7, 6)),
    ("nn.SpatialAveragePooling(3, 3, 2, 2, 1, 1):ceil()", (3, 8, 7)),
    ("nn.SpatialAveragePooling(3, 3, 2, 2, 1, 1):setCountExcludePad()", (2, 3, 7, 6)),
    ("nn.SpatialAveragePooling(3, 2, 2, 1, 1, 1):ceil():setCountExcludePad()", (2, 8, 7)),
    ("nn.SpatialBatchNormalization(3)", (4, 3, 5, 4)),
]


@pytest.mark.parametrize("ctor,shape", SPATIAL_MODULES)
def test_spatial_device_matches_cpu(ctor, shape, numpy_device, rng):
    m = module(ctor)
    x = rng.standard_normal(shape)
    x[..., 0, :2] = 5.0   # a tie for each plane's first window maximum: the first one wins
    g = rng.standard_normal(forward(module(ctor), x.copy()).shape)
    cpu = call(_SPATIAL_RUN, m, lua_tensor(x.copy()), lua_tensor(g), False)
    dev = call(_SPATIAL_RUN, m, lua_tensor(x.copy()), lua_tensor(g), True)
    assert dev[-1] == "torch.CudaTensor"
    for c, d in zip(cpu[:-1], dev[:-1]):
        np.testing.assert_allclose(luabridge.to_numpy(d), luabridge.to_numpy(c), rtol=1e-5, atol=1e-5)


_DEVICE_RUN = """function(m, x, g)
  m = m:cuda()
  m:zeroGradParameters()
  local y = m:forward(x:cuda()):double()
  local gi = m:updateGradInput(x:cuda(), g:cuda()):double()
  m:accGradParameters(x:cuda(), g:cuda(), 0.5)
  local function host(t) return t and t:double() or torch.DoubleTensor() end
  return y, gi, host(m.gradWeight), host(m.gradBias), host(m.weight), host(m.bias)
end"""


@pytest.mark.parametrize("stride,pad", [((1, 1), (0, 0)), ((2, 1), (1, 2))])
def test_conv_device_against_numpy(stride, pad, numpy_device, rng):
    """The device convolution's output and gradients against float64 numpy references."""
    from test_nn_speed_paths import conv_grads_ref, conv_ref
    (dH, dW), (pH, pW) = stride, pad
    m = module(f"nn.SpatialConvolution(3, 4, 3, 2, {dW}, {dH}, {pW}, {pH})")
    x = rng.standard_normal((2, 3, 7, 6))
    gshape = conv_ref(x, np.zeros((4, 3, 2, 3)), None, stride, pad).shape
    g = rng.standard_normal(gshape)
    y, gi, gw, gb, w, b = (luabridge.to_numpy(t) for t in call(_DEVICE_RUN, m, lua_tensor(x), lua_tensor(g)))
    w32, b32 = w.astype(np.float32).astype(np.float64), b.astype(np.float32).astype(np.float64)
    x32, g32 = x.astype(np.float32).astype(np.float64), g.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(y, conv_ref(x32, w32, b32, stride, pad), rtol=1e-4, atol=1e-4)
    ref_gi, ref_gw, ref_gb = conv_grads_ref(x32, w32, g32, stride, pad)
    np.testing.assert_allclose(gi, ref_gi, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gw, 0.5 * ref_gw, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gb, 0.5 * ref_gb, rtol=1e-4, atol=1e-4)


def test_pooling_device_against_numpy(numpy_device, rng):
    """Device max and average pooling (padding counted, as count_include_pad) against numpy."""
    from test_nn_speed_paths import max_pool_ref
    x = rng.standard_normal((2, 3, 8, 6)).astype(np.float32).astype(np.float64)
    g = rng.standard_normal((2, 3, 4, 3))
    y, gi = (luabridge.to_numpy(t) for t in call(_DEVICE_RUN, module("nn.SpatialMaxPooling(2, 2, 2, 2)"),
                                                 lua_tensor(x), lua_tensor(g))[:2])
    np.testing.assert_allclose(y, max_pool_ref(x, (2, 2), (2, 2)), rtol=1e-6)
    winner = x == np.repeat(np.repeat(max_pool_ref(x, (2, 2), (2, 2)), 2, -2), 2, -1)
    np.testing.assert_allclose(gi, winner * np.repeat(np.repeat(g, 2, -2), 2, -1), rtol=1e-6, atol=1e-7)
    # 3x3 windows of stride 2 over the plane padded by 1: sums of the zero-padded windows / 9
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((2, 3, 4, 3))
    for i in range(3):
        for j in range(3):
            ref += padded[..., i:i + 7:2, j:j + 5:2]
    g = rng.standard_normal(ref.shape)
    y = luabridge.to_numpy(call(_DEVICE_RUN, module("nn.SpatialAveragePooling(3, 3, 2, 2, 1, 1)"),
                                lua_tensor(x), lua_tensor(g))[0])
    np.testing.assert_allclose(y, ref / 9, rtol=1e-5, atol=1e-6)


def test_conv_device_reads_strided_input(numpy_device, rng):
    """A transposed (non-contiguous) device input gives the CPU result of its contiguous copy."""
    x = rng.standard_normal((2, 3, 6, 7))
    w = rng.standard_normal((4, 3, 3, 3))
    run = """function(x, w)
      local m = nn.SpatialConvolution(3, 4, 3, 3, 1, 1, 1, 1):float()
      m.weight:copy(w); m.bias:zero()
      local ref = m:forward(x:float():transpose(3, 4):contiguous()):double()
      local d = m:cuda():forward(x:float():cuda():transpose(3, 4)):double()
      return ref, d
    end"""
    ref, d = call(run, lua_tensor(x), lua_tensor(w))
    # independent reference: direct float64 cross-correlation of the transposed images
    xt = np.pad(x.transpose(0, 1, 3, 2), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((2, 4, 7, 6))
    for i in range(3):
        for j in range(3):
            want += np.einsum("oc,bchw->bohw", w[:, :, i, j], xt[:, :, i:i + 7, j:j + 6])
    np.testing.assert_allclose(luabridge.to_numpy(d), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(luabridge.to_numpy(d), luabridge.to_numpy(ref), rtol=1e-5, atol=1e-5)


def test_max_pooling_device_indices_are_torch7s(numpy_device):
    """1-based offsets of each maximum inside its plane, in a CudaLongTensor."""
    x = np.arange(16.0).reshape(1, 4, 4)[:, ::-1].copy()
    r = call("""function(x)
      local m = nn.SpatialMaxPooling(2, 2, 2, 2):cuda()
      local y = m:forward(x:cuda())
      return y:double(), m.indices:long(), torch.type(m.indices)
    end""", lua_tensor(x))
    np.testing.assert_array_equal(luabridge.to_numpy(r[0]), [[[13, 15], [5, 7]]])
    np.testing.assert_array_equal(luabridge.to_numpy(r[1]), [[[2, 4], [10, 12]]])
    assert r[2] == "torch.CudaLongTensor"


_CRITERION_RUN = """function(c, x, t, onDevice, deviceTarget)
  c = c:clone():float()
  x = x:float()
  if onDevice then c = c:cuda(); x = x:cuda() end
  if deviceTarget then t = t:cuda() end
  local l = c:forward(x, t)
  local gi = c:backward(x, t)
  return l, gi:double(), torch.type(gi)
end"""

CRITERIA = ["nn.ClassNLLCriterion()", "nn.ClassNLLCriterion(torch.Tensor{1, 2, 0.5, 3})",
            "nn.ClassNLLCriterion(torch.Tensor{1, 2, 0.5, 3}, false)", "nn.ClassNLLCriterion(nil, true, 3)",
            "nn.ClassNLLCriterion(nil, false, 2)", "nn.CrossEntropyCriterion()",
            "nn.CrossEntropyCriterion(torch.Tensor{2, 1, 1, 0.5})", "nn.MSECriterion()", "nn.MSECriterion(false)"]


@pytest.mark.parametrize("ctor", CRITERIA)
@pytest.mark.parametrize("rows", [5, 0])   # 0: one 1-D sample
@pytest.mark.parametrize("device_target", [False, True])
def test_criterion_device_matches_cpu(ctor, rows, device_target, numpy_device, rng):
    c = module(ctor)
    shape = (rows, 4) if rows else (4,)
    x = rng.standard_normal(shape)
    if "MSE" in ctor:
        t = rng.standard_normal(shape)
    else:
        t = np.array([1.0, 3, 4, 2, 3][:rows or 1])
    loss, gi, _ = call(_CRITERION_RUN, c, lua_tensor(x.copy()), lua_tensor(t), False, False)
    dloss, dgi, kind = call(_CRITERION_RUN, c, lua_tensor(x.copy()), lua_tensor(t), True, device_target)
    assert kind == "torch.CudaTensor"
    assert dloss == pytest.approx(loss, rel=1e-5, abs=1e-6)
    np.testing.assert_allclose(luabridge.to_numpy(dgi), luabridge.to_numpy(gi), rtol=1e-5, atol=1e-6)


def test_class_nll_device_values(numpy_device):
    """Against a float64 reference: weighted mean of -x[i, t_i], ignored samples skipped."""
    x = np.log(np.array([[0.2, 0.5, 0.3], [0.1, 0.1, 0.8], [0.6, 0.3, 0.1]]))
    loss, gi, _ = call(_CRITERION_RUN, module("nn.ClassNLLCriterion(torch.Tensor{1, 2, 4}, true, 1)"),
                       lua_tensor(x), lua_tensor(np.array([2.0, 3, 1])), True, True)
    assert loss == pytest.approx(-(2 * x[0, 1] + 4 * x[1, 2]) / 6, rel=1e-6)
    want = np.zeros((3, 3))
    want[0, 1], want[1, 2] = -2 / 6, -4 / 6
    np.testing.assert_allclose(luabridge.to_numpy(gi), want, rtol=1e-6)


@pytest.mark.parametrize("code,message", [
    ("M(nn.SpatialConvolution(2, 3, 3, 3)):forward(X(3, 5, 5))",
     r"nn.SpatialConvolution: expected input with 2 planes in dimension 1, got 3 \(input size 3x5x5\)"),
    ("M(nn.SpatialConvolution(2, 3, 3, 3)):forward(X(2, 2, 2))",
     r"nn.SpatialConvolution: input of size 2x2x2 is too small for kernel 3x3"),
    ("M(nn.SpatialConvolution(2, 3, 3, 3)):forward(X(2, 2, 2)[1]:double())",
     r"nn.SpatialConvolution: expected 3D \(planes x H x W\) or 4D"),
    ("M(nn.SpatialMaxPooling(2, 2)):forward(X(4, 4))",
     r"nn.SpatialMaxPooling: expected 3D \(planes x H x W\) or 4D"),
    ("local m = M(nn.SpatialMaxPooling(2, 2)); m:updateGradInput(X(1, 4, 4), X(1, 2, 2))",
     r"nn.SpatialMaxPooling: call updateOutput with this input before updateGradInput"),
    ("M(nn.SpatialAveragePooling(3, 3, 1, 1, 2, 2)):forward(X(1, 5, 5))",
     r"nn.SpatialAveragePooling: padding must be at most half the kernel size"),
    ("M(nn.ClassNLLCriterion()):forward(X(2, 3), torch.Tensor{1, 4})",
     r"nn.ClassNLLCriterion: target 4 out of range, expected a class index in \[1, 3\]"),
    ("M(nn.ClassNLLCriterion()):forward(X(2, 3), torch.Tensor{1, 2, 3})",
     r"nn.ClassNLLCriterion: target size 3 does not match input size 2x3 \(2 samples\)"),
    ("M(nn.MSECriterion()):forward(X(2, 3), torch.Tensor(5))",
     r"nn.MSECriterion: input and target size mismatch, 2x3 \(6 elements\) and 5 \(5 elements\)"),
])
@pytest.mark.parametrize("on_device", [False, True])
def test_device_errors_are_the_cpu_ones(code, message, on_device, numpy_device):
    """The same checks run before either path: the same message on CPU and device tensors."""
    to = ":cuda()" if on_device else ""
    run = call(f"""function()
      local function X(...) return torch.FloatTensor(...):zero(){to} end
      local function M(m) return m:float(){to} end
      return function() {code} end
    end""")
    with pytest.raises(luabridge.LuaError, match=message):
        call("function(f) return f() end", run)


def test_subclasses_with_their_own_loops_still_refuse_device_tensors(numpy_device):
    with pytest.raises(luabridge.LuaError, match="nn.LoopingConvolution: CUDA tensors are not supported"):
        call("""function()   -- a subclass that has not opted in (its class sets no _deviceKernel)
          if not nn.LoopingConvolution then torch.class('nn.LoopingConvolution', 'nn.SpatialConvolution') end
          return nn.LoopingConvolution(1, 1, 3, 3):cuda():forward(torch.randn(1, 5, 5):cuda()) end""")
    with pytest.raises(luabridge.LuaError, match="nn.SpatialAutoCropMSECriterion: torch.CudaTensor is not supported"):
        call("""function() return nn.SpatialAutoCropMSECriterion():cuda()
          :forward(torch.randn(1, 3, 3):cuda(), torch.randn(1, 3, 3):cuda()) end""")


def test_tinyflow_lenet_runs_on_the_gpu_session(numpy_device, rng):
    """conv2d, max_pool, avg_pool, linear and the cross-entropy criterion under Session("gpu"):
    the loss and gradients of Session("cpu")."""
    import luabridge.tinyflow as tf

    x, label = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    c1 = tf.nn.conv2d(x, num_filter=4, ksize=[1, 3, 3, 1], padding='SAME', name="dev_c1")
    p1 = tf.nn.max_pool(tf.tanh(c1), ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding='VALID',
                        data_format='NCHW')
    c2 = tf.nn.conv2d(p1, num_filter=6, ksize=[1, 3, 3, 1], padding='VALID', name="dev_c2")
    p2 = tf.nn.avg_pool(tf.nn.relu(c2), ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding='SAME',
                        data_format='NCHW')
    fc = tf.nn.linear(tf.nn.flatten_layer(p2), num_hidden=3, name="dev_fc")
    loss = tf.nn.mean_sparse_softmax_cross_entropy_with_logits(fc, label)
    images = rng.standard_normal((5, 2, 10, 10)).astype(np.float32)
    labels = rng.integers(0, 3, 5).astype(np.float32)
    shapes = list(tf.infer_variable_shapes(loss, feed_dict={x: [5, 2, 10, 10], label: [5]}))
    init = {n: (0.3 * rng.standard_normal(s)).astype(np.float32) for _, n, s in shapes}
    holders = {n: tf.placeholder(tf.float32) for n in init}
    fetch = [loss] + tf.gradients(loss, [v for v, _, _ in shapes])
    results = {}
    for config in ("cpu", "gpu"):
        sess = tf.Session(config)
        sess.run([tf.assign(v, holders[n]) for v, n, _ in shapes], feed_dict={holders[n]: init[n] for n in init})
        results[config] = sess.run(fetch, feed_dict={x: images, label: labels})
        assert sess.device.name == ("cuda" if config == "gpu" else "cpu")
    assert np.isfinite(results["cpu"][0]).all()
    for c, g in zip(results["cpu"], results["gpu"]):
        np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-5)
