"""Famous models end to end (issue 11, part 4): the two that need no checkout, and the tool that
checks the others from their repositories (tools/famous_models.py) on a tiny fake repository.

- an rnn language model (LookupTable, Sequencer(FastLSTM), SequencerCriterion) trains a few
  steps, is saved with torch.save and loaded with torch.load (same log-probabilities) and with
  luabridge.t7.read, whose weights drive a numpy float64 forward that must give Lua's output;
- a colorization-style two-input gModule (luminance image + global feature vector) saved in a
  {model = ...} table, loaded, and edited through forwardnodes[i].data.module the way
  colorization scripts fit the net to another image size; outputs against numpy from the weights
  luabridge.t7.read finds in the file.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from helpers import N, lua_fn
from luabridge import t7
from test_rnn import lstm_ref
from test_rnn import lua as rnn_lua  # rnn in a runtime of its own (it redefines nn.Dropout)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import famous_models as fm  # noqa: E402


def objects(value: Any, typename: str, seen: set[int] | None = None) -> Iterator[t7.TorchObject]:
    """Every object of class `typename` reachable in what t7.read returned, first found first."""
    seen = set() if seen is None else seen
    if id(value) in seen or not isinstance(value, (t7.TorchObject, dict, list)):
        return
    seen.add(id(value))
    if isinstance(value, t7.TorchObject) and value.typename == typename:
        yield value
    children = value.fields.values() if isinstance(value, t7.TorchObject) else (
        value.values() if isinstance(value, dict) else value)
    for child in children:
        yield from objects(child, typename, seen)


def log_softmax(a: np.ndarray) -> np.ndarray:
    shifted = a - a.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


# ---- the rnn language model -------------------------------------------------------------------

TEXT = "the cat sat on the mat and the rat sat on the cat "


def test_rnn_language_model_trains_saves_and_reads_back(tmp_path):
    vocab = sorted(set(TEXT))
    ids = np.array([vocab.index(ch) + 1 for ch in TEXT], dtype=np.float64)
    seqlen, batch = 8, 3
    starts = [0, 17, 34]    # three sequences of 8 characters; each predicts the next character
    tokens = np.stack([ids[s:s + seqlen] for s in starts], axis=1)
    nexts = np.stack([ids[s + 1:s + seqlen + 1] for s in starts], axis=1)
    path = str(tmp_path / "lm.t7")
    losses, logprobs, reloaded = rnn_lua("""function(tokens, nexts, vocab, path)
      require 'optim'
      torch.manualSeed(5)
      local hidden = 12
      local lm = nn.Sequential()
        :add(nn.LookupTable(vocab, hidden))
        :add(nn.SplitTable(1))
        :add(nn.Sequencer(nn.Sequential()
          :add(nn.FastLSTM(hidden, hidden)):add(nn.Linear(hidden, vocab)):add(nn.LogSoftMax())))
      local crit = nn.SequencerCriterion(nn.ClassNLLCriterion())
      local input, target = tokens:long(), nn.SplitTable(1):forward(nexts)
      local params, grads = lm:getParameters()
      local function loss_and_gradient()
        grads:zero()
        local out = lm:forward(input)
        local loss = crit:forward(out, target)
        lm:backward(input, crit:backward(out, target))
        return loss, grads
      end
      local losses = {}
      for step = 1, 6 do losses[step] = select(2, optim.sgd(loss_and_gradient, params, {learningRate = 0.5}))[1] end
      local logprobs = nn.JoinTable(1):forward(lm:forward(input)):clone()
      torch.save(path, lm)
      local reloaded = nn.JoinTable(1):forward(torch.load(path):forward(input)):clone()
      return torch.Tensor(losses), logprobs, reloaded
    end""")(tokens, nexts, len(vocab), path)

    assert losses[0] == pytest.approx(seqlen * np.log(len(vocab)), rel=0.1)   # about uniform at first
    assert np.all(np.diff(losses) < 0), losses
    np.testing.assert_array_equal(reloaded, logprobs)

    # the pure-Python reader's weights reproduce the trained model's output in float64
    saved = t7.read(path)
    lookup = next(objects(saved, "nn.LookupTable")).weight
    lstm = next(objects(saved, "nn.FastLSTM"))
    out_layer = next(o for o in objects(saved, "nn.Linear") if o.weight.shape == (len(vocab), 12))
    xs = lookup[tokens.astype(int) - 1]                                    # seqlen x batch x hidden
    hs = lstm_ref(xs, lstm.i2g.weight, lstm.i2g.bias, lstm.o2g.weight, order="izfo")
    expected = log_softmax(hs @ out_layer.weight.T + out_layer.bias).reshape(seqlen * batch, len(vocab))
    np.testing.assert_allclose(logprobs, expected, rtol=1e-10, atol=1e-12)


# ---- the colorization-style gModule -----------------------------------------------------------

# luminance (1 x H x W) -> local features; global vector (3) -> Linear, replicated over H x W;
# fused by a 1x1 convolution into two chrominance planes
BUILD_AND_SAVE = """function(path, H, W)
  require 'nngraph'
  torch.manualSeed(2)
  local lum, glob = nn.Identity()(), nn.Identity()()
  local local_features = nn.ReLU()(nn.SpatialConvolution(1, 4, 3, 3, 1, 1, 1, 1)(lum))
  local spread = nn.Replicate(W, 3)(nn.Replicate(H, 2)(nn.Linear(3, 4)(glob)))
  local fused = nn.JoinTable(1)({local_features, spread})
  local ab = nn.Tanh()(nn.SpatialConvolution(8, 2, 1, 1)(fused))
  torch.save(path, {model = nn.gModule({lum, glob}, {ab})})
end"""

# what a colorization script does after torch.load: fit the replication to the image's size,
# and here also swap the output nonlinearity, by editing the nodes' modules
LOAD_EDIT_RUN = """function(path, lum, glob)
  require 'nngraph'
  local model = torch.load(path).model
  local fits, before = pcall(model.forward, model, {lum, glob})
  before = fits and before:clone() or tostring(before)
  local H, W = lum:size(2), lum:size(3)
  for i = 1, #model.forwardnodes do
    local m = model.forwardnodes[i].data.module
    if torch.type(m) == 'nn.Replicate' then
      m.nfeatures = m.dim == 2 and H or W
    elseif torch.type(m) == 'nn.Tanh' then
      model.forwardnodes[i].data.module = nn.Sigmoid()
    end
  end
  return fits, before, model:forward({lum, glob}):clone()
end"""


def conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray, pad: int) -> np.ndarray:
    """Cross-correlation as nn.SpatialConvolution: x C x H x W, w O x C x k x k, stride 1."""
    k = w.shape[-1]
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    H, W = xp.shape[1] - k + 1, xp.shape[2] - k + 1
    out = np.zeros((w.shape[0], H, W)) + b[:, None, None]
    for dy in range(k):
        for dx in range(k):
            out += np.einsum("oc,chw->ohw", w[:, :, dy, dx], xp[:, dy:dy + H, dx:dx + W])
    return out


def colorize_ref(saved: Any, lum: np.ndarray, glob: np.ndarray, squash) -> np.ndarray:
    convs = sorted(objects(saved, "nn.SpatialConvolution"), key=lambda c: c.nInputPlane)
    linear = next(objects(saved, "nn.Linear"))
    local_features = np.maximum(conv2d(lum, convs[0].weight, convs[0].bias, 1), 0)
    spread = np.broadcast_to((linear.weight @ glob + linear.bias)[:, None, None], (4, *lum.shape[1:]))
    fused = np.concatenate([local_features, spread])
    return squash(conv2d(fused, convs[1].weight, convs[1].bias, 0))


def test_colorization_gmodule_loads_and_its_nodes_are_edited(tmp_path):
    rng = np.random.default_rng(4)
    path = str(tmp_path / "colornet.t7")
    lua_fn(BUILD_AND_SAVE)(path, 4, 4)
    saved = t7.read(path)
    assert saved["model"].typename == "nn.gModule" and len(saved["model"].forwardnodes) >= 9

    # the saved size runs as saved; a 6 x 5 image needs the edit, which also swaps Tanh for Sigmoid
    lum44, lum65, glob = rng.random((1, 4, 4)), rng.random((1, 6, 5)), rng.standard_normal(3)
    fits, before, _ = lua_fn(LOAD_EDIT_RUN)(path, lum44, glob)
    assert fits
    np.testing.assert_allclose(N(before), colorize_ref(saved, lum44, glob, np.tanh), rtol=1e-12, atol=1e-12)
    fits, message, edited = lua_fn(LOAD_EDIT_RUN)(path, lum65, glob)
    assert not fits and "JoinTable" in message   # unedited, the 4 x 4 replication does not fit
    sigmoid = lambda a: 1 / (1 + np.exp(-a))  # noqa: E731
    np.testing.assert_allclose(N(edited), colorize_ref(saved, lum65, glob, sigmoid), rtol=1e-12, atol=1e-12)

# ---- tools/famous_models.py on a fake repository ----------------------------------------------

TINY_DEF = """imgDim = 8
function createModel()
  local net = nn.Sequential()
  net:add(nn.SpatialConvolutionMM(3, 2, 3, 3))            -- 2 x 6 x 6
  net:add(nn.View(72))
  net:add(nn.Linear(72, opt.embSize))
  {normalize}
  return net
end
"""


def fake_openface(tmp_path: Path, normalize: bool) -> Path:
    repos = tmp_path / "repos"
    folder = repos / "cmusatyalab+openface" / "models" / "openface"
    folder.mkdir(parents=True)
    line = "net:add(nn.Normalize(2))" if normalize else ""
    (folder / "nn4.small2.def.lua").write_text(TINY_DEF.replace("{normalize}", line))
    return repos


def test_tool_checks_a_fake_openface(tmp_path, capsys):
    repos = fake_openface(tmp_path, normalize=True)
    openface = next(m for m in fm.MODELS if m.name == "openface")
    row = fm.check_model(openface, repos)
    assert row.ok, row.detail
    assert row.fields["input"] == "2x3x8x8" and row.fields["output"] == "2x128"
    assert int(row.fields["params"]) == 3 * 2 * 9 + 2 + 72 * 128 + 128
    if importlib.util.find_spec("torch"):
        assert float(row.fields["reference"]) < 1e-6   # PyTorch's forward of what t7.read found
    assert not (repos / "cmusatyalab+openface" / "model.t7").exists()   # ran in a scratch copy

    assert fm.main([str(repos), "--only", "openface"]) == 0
    printed = capsys.readouterr().out
    assert "| openface | 2x3x8x8 | 2x128 | 9,400 |" in printed and printed.rstrip().endswith("| pass |")


def test_tool_fails_a_model_whose_check_fails_or_whose_repository_is_missing(tmp_path):
    openface = next(m for m in fm.MODELS if m.name == "openface")
    row = fm.check_model(openface, fake_openface(tmp_path, normalize=False))
    assert not row.ok and "output check failed: max |norm-1|" in row.detail
    missing = fm.check_model(openface, tmp_path / "nothing")
    assert not missing.ok and "not found" in missing.detail


def test_tool_builds_the_colorization_net_without_a_repository(tmp_path):
    colorization = next(m for m in fm.MODELS if m.name == "colorization")
    row = fm.check_model(colorization, tmp_path / "no-checkouts")
    assert row.ok, row.detail
    assert row.fields["input"] == "1x64x64+128" and row.fields["output"] == "2x64x64"
    # convolutions 1->32 (3x3), 32->64 (3x3), 128->64 (1x1), 64->2 (3x3); Linear 128->64, 64->64
    assert row.fields["reference"] == "in tests"   # a gModule: checked against numpy above
    assert int(row.fields["params"]) == (32 * 9 + 32) + (64 * 32 * 9 + 64) + (64 * 128 + 64) + (2 * 64 * 9 + 2) \
        + (64 * 128 + 64) + (64 * 64 + 64)


def test_tool_trains_the_rnn_language_model_without_a_repository(tmp_path):
    rnn_lm = next(m for m in fm.MODELS if m.name == "rnn-lm")
    row = fm.check_model(rnn_lm, tmp_path / "no-checkouts")
    assert row.ok, row.detail   # the driver's check: the loss fell at each of its SGD steps
    assert row.fields["input"] == "50x16" and row.fields["output"] == "50x16x65"
    # LookupTable 65x128; FastLSTM's input Linear 128->4*128 (with bias) and output one (without); Linear 128->65
    assert int(row.fields["params"]) == 65 * 128 + (128 * 512 + 512) + 128 * 512 + (128 * 65 + 65)


def test_reference_forward_of_t7_read_models_matches_lua(tmp_path):
    """tools/t7_reference.py on the layer kinds of OpenFace (DepthConcat centring, LP pooling,
    cross-map LRN, batch norm, ceil-mode pooling, Normalize) and of fast-neural-style's residual
    blocks and upsampling (reflection padding, ConcatTable + CAddTable, full convolution)."""
    pytest.importorskip("torch", reason="the reference forward runs on PyTorch")
    import t7_reference

    out = lua_fn("""function(path, x)
      require 'nn'
      torch.manualSeed(7)
      local inception = nn.DepthConcat(2)
        :add(nn.SpatialConvolution(3, 4, 3, 3, 2, 2))                                -- 4 x 3 x 3
        :add(nn.Sequential():add(nn.SpatialLPPooling(3, 2, 3, 3, 2, 2)))             -- 3 x 3 x 3
        :add(nn.SpatialMaxPooling(3, 3, 3, 3):ceil())                                -- 3 x 3 x 3
        :add(nn.SpatialConvolutionMM(3, 2, 1, 1, 3, 3))                              -- 2 x 3 x 3
        :add(nn.SpatialAveragePooling(2, 2, 4, 4))                                   -- 3 x 2 x 2, centred
      local bn = nn.SpatialBatchNormalization(15)
      bn.running_mean:uniform(-1, 1); bn.running_var:uniform(0.5, 2); bn.weight:uniform(); bn.bias:uniform()
      local residual = nn.Sequential():add(nn.ConcatTable()
          :add(nn.Sequential():add(nn.SpatialReflectionPadding(1, 1, 1, 1)):add(nn.SpatialConvolution(15, 15, 3, 3)))
          :add(nn.Identity()))
        :add(nn.CAddTable())
      local net = nn.Sequential():add(inception):add(bn):add(nn.SpatialCrossMapLRN(5, 0.001, 0.75, 2))
        :add(residual):add(nn.ReLU()):add(nn.SpatialFullConvolution(15, 4, 3, 3, 2, 2, 1, 1, 1, 1)):add(nn.Tanh())
        :add(nn.MulConstant(3)):add(nn.View(4 * 6 * 6)):add(nn.Linear(144, 8)):add(nn.Normalize(2))
      net:evaluate()
      local y = net:forward(x)
      torch.save(path, net)
      return y
    end""")(str(tmp_path / "net.t7"), np.random.default_rng(3).random((2, 3, 8, 8)))
    ref = t7_reference.forward(t7.read(tmp_path / "net.t7"), np.random.default_rng(3).random((2, 3, 8, 8)))
    np.testing.assert_allclose(ref, N(out), rtol=1e-10, atol=1e-12)
    with pytest.raises(t7_reference.Unsupported, match="nn.SoftPlus"):
        t7_reference.forward(t7.TorchObject("nn.SoftPlus", 0, {}), np.zeros(2))


def test_parameters_follow_nns_order():
    leaf = lambda *ws: t7.TorchObject("nn.Linear", 0, {"weight": ws[0], "bias": ws[1]})  # noqa: E731
    a, b, c, d = (np.full(2, v, np.float32) for v in range(4))
    tree = t7.TorchObject("nn.Sequential", 0, {"modules": [leaf(a, b), t7.TorchObject(
        "nn.Sequential", 0, {"modules": [t7.TorchObject("nn.ReLU"), leaf(c, d)]})]})
    assert [w[0] for w in fm.parameters(tree)] == [0, 1, 2, 3]


def test_weight_check_finds_a_changed_or_missing_parameter(tmp_path):
    lua_fn("""function(dir)
      require 'nn'
      local net = nn.Sequential():add(nn.Linear(3, 2)):add(nn.Tanh()):add(nn.Linear(2, 2)):float()
      local params = net:getParameters()
      torch.save(dir .. '/model.t7', {model = net})
      local f = torch.DiskFile(dir .. '/params.f32', 'w'):binary()
      f:writeFloat(params:storage())
      f:close()
    end""")(str(tmp_path))
    assert fm.weight_problems(tmp_path, "model") == []
    raw = np.fromfile(tmp_path / "params.f32", dtype="<f4")
    assert raw.size == 3 * 2 + 2 + 2 * 2 + 2
    changed = raw.copy()
    changed[7] += 1    # the first Linear's second bias
    changed.tofile(tmp_path / "params.f32")
    assert fm.weight_problems(tmp_path, "model") == ["t7.read's weights differ from Lua's at 7"]
    raw[:-1].tofile(tmp_path / "params.f32")
    assert fm.weight_problems(tmp_path, "model") == ["t7.read found 14 parameters, Lua has 13"]
