"""rnn (lua/rnn): LSTM, FastLSTM, GRU, Recurrent, SeqLSTM, SeqLSTMP and SeqGRU outputs against
numpy float64 implementations of their equations (parameters read from the modules); BPTT
gradients (inputs and parameters, through Sequencer and the Seq* layers) against finite
differences; remember/forget carrying the hidden state; MaskZero, SeqReverseSequence and the
criterions by hand; a small Sequencer(FastLSTM) language model whose loss falls while it trains."""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np
import pytest
from luabridge.core.runtime import luajit21   # the module luabridge runs on (its own build or lupa's)

import luabridge
from helpers import lua_arg, lua_fn, numeric_grad

# rnn redefines nn.Dropout (argument 4 means lazy), as in torch7; these tests load it in a runtime
# of their own, on one worker thread, so that the other test files keep nn's Dropout.
_WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rnn-tests")


def _python(value: Any) -> Any:
    """Tensors as numpy copies, tables as lists, functions as Python callables (run on the worker)."""
    kind = luajit21.lua_type(value)
    if kind == "function":
        return lambda *args: _WORKER.submit(lambda: _python(value(*map(lua_arg, args)))).result()
    if kind in ("table", "userdata"):
        if luabridge.eval("torch.isTensor")(value):
            return luabridge.to_numpy(value).copy()
        return [_python(value[i]) for i in range(1, len(value) + 1)]
    if isinstance(value, tuple):
        return tuple(_python(v) for v in value)
    return value


def sigmoid(a: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-a))


def lua(code: str) -> Callable[..., Any]:
    """A Lua function (rnn loaded) run on the worker; numpy arguments go in as tensors viewing
    their memory, results come back as numpy arrays, lists and callables."""
    fn = lua_fn(f"function(...) require 'rnn'; return ({code})(...) end")
    return lambda *args: _WORKER.submit(lambda: _python(fn(*args))).result()


# ---- numpy references --------------------------------------------------------------------------

def lstm_peephole_ref(xs, p):
    """nn.LSTM: peephole gates; the output gate sees the new cell."""
    h = np.zeros((xs.shape[1], p["Wxi"].shape[0]))
    c = np.zeros_like(h)
    out = []
    for x in xs:
        i = sigmoid(x @ p["Wxi"].T + p["bi"] + h @ p["Whi"].T + c * p["ci"])
        f = sigmoid(x @ p["Wxf"].T + p["bf"] + h @ p["Whf"].T + c * p["cf"])
        z = np.tanh(x @ p["Wxz"].T + p["bz"] + h @ p["Whz"].T)
        c = f * c + i * z
        o = sigmoid(x @ p["Wxo"].T + p["bo"] + h @ p["Who"].T + c * p["co"])
        h = o * np.tanh(c)
        out.append(h)
    return np.stack(out)


def lstm_ref(xs, Wx, b, Wh, order="izfo"):
    """An LSTM without peepholes whose gate pre-activations are x Wx^T + b + h Wh^T, blocks of
    size H in `order` (i input, z candidate, f forget, o output)."""
    H = Wh.shape[1]
    h = np.zeros((xs.shape[1], H))
    c = np.zeros_like(h)
    out = []
    for x in xs:
        a = x @ Wx.T + b + h @ Wh.T
        g = {k: a[:, n * H:(n + 1) * H] for n, k in enumerate(order)}
        c = sigmoid(g["f"]) * c + sigmoid(g["i"]) * np.tanh(g["z"])
        h = sigmoid(g["o"]) * np.tanh(c)
        out.append(h)
    return np.stack(out)


def gru_ref(xs, Wx_ru, b_ru, Wh_ru, Wx_n, b_n, Wh_n, h0=None):
    H = Wh_n.shape[0]
    h = np.zeros((xs.shape[1], H)) if h0 is None else h0
    out = []
    for x in xs:
        ru = sigmoid(x @ Wx_ru.T + b_ru + h @ Wh_ru.T)
        r, u = ru[:, :H], ru[:, H:]
        n = np.tanh(x @ Wx_n.T + b_n + (r * h) @ Wh_n.T)
        h = (1 - u) * n + u * h
        out.append(h)
    return np.stack(out)


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(7)


# ---- forward against the equations ------------------------------------------------------------

def test_lstm_matches_peephole_equations(rng):
    xs = rng.standard_normal((5, 3, 4))
    out, names, values = lua("""function(x)
      torch.manualSeed(1)
      local lstm = nn.LSTM(4, 6)
      for _, p in ipairs(lstm:parameters()) do p:uniform(-0.5, 0.5) end
      -- gate = Sequential(ParallelTable(Seq(Dropout, Linear), Seq(Dropout, LinearNoBias), CMul), ...)
      local function gate(g)
        local par = g.modules[1]
        return par.modules[1].modules[2].weight, par.modules[1].modules[2].bias,
          par.modules[2].modules[2].weight, par.modules[3].weight
      end
      local hid = lstm.hiddenLayer.modules[2]
      local t = {}
      t.Wxi, t.bi, t.Whi, t.ci = gate(lstm.inputGate)
      t.Wxf, t.bf, t.Whf, t.cf = gate(lstm.forgetGate)
      t.Wxo, t.bo, t.Who, t.co = gate(lstm.outputGate)
      t.Wxz, t.bz, t.Whz = hid.modules[1].modules[2].weight, hid.modules[1].modules[2].bias,
        hid.modules[2].modules[2].weight
      local names, values = {}, {}
      for k, v in pairs(t) do table.insert(names, k); table.insert(values, v) end
      return nn.Sequencer(lstm):forward(x), names, values
    end""")(xs)
    p = dict(zip(names, values))
    np.testing.assert_allclose(out, lstm_peephole_ref(xs, p), rtol=1e-10, atol=1e-12)


def test_fastlstm_and_seqlstm_match_equations(rng):
    xs = rng.standard_normal((6, 2, 3))
    run = lua("""function(x)
      torch.manualSeed(2)
      local fast = nn.FastLSTM(3, 5)
      local seq = nn.SeqLSTM(3, 5)
      return nn.Sequencer(fast):forward(x), fast.i2g.weight, fast.i2g.bias, fast.o2g.weight,
        seq:forward(x), seq.weight, seq.bias, seq:toFastLSTM():forward(x[1])
    end""")
    fast_out, Wx, b, Wh, seq_out, weight, bias, converted = run(xs)
    np.testing.assert_allclose(fast_out, lstm_ref(xs, Wx, b, Wh, "izfo"), rtol=1e-10, atol=1e-12)
    # SeqLSTM: weight is (D+H) x 4H with gate blocks i f o g
    W = weight
    want = lstm_ref(xs, W[:3].T, bias, W[3:].T, "ifoz")
    np.testing.assert_allclose(seq_out, want, rtol=1e-10, atol=1e-12)
    # the forget gate's bias starts at 1, the others at 0
    np.testing.assert_array_equal(bias, np.r_[np.zeros(5), np.ones(5), np.zeros(10)])
    # toFastLSTM gives the same first step
    np.testing.assert_allclose(converted, want[0], rtol=1e-10, atol=1e-12)


def test_seqlstmp_projects_the_hidden_state(rng):
    xs = rng.standard_normal((4, 2, 3))
    out, weight, bias, weightO = lua("""function(x)
      local m = nn.SeqLSTMP(3, 6, 2)
      return m:forward(x), m.weight, m.bias, m.weightO
    end""")(xs)
    W, b, Wo = weight, bias, weightO
    H = 6
    h = np.zeros((2, 2))
    c = np.zeros((2, H))
    want = []
    for x in xs:
        a = x @ W[:3] + h @ W[3:] + b
        i, f, o, g = sigmoid(a[:, :H]), sigmoid(a[:, H:2 * H]), sigmoid(a[:, 2 * H:3 * H]), np.tanh(a[:, 3 * H:])
        c = f * c + i * g
        h = (o * np.tanh(c)) @ Wo
        want.append(h)
    np.testing.assert_allclose(out, np.stack(want), rtol=1e-10, atol=1e-12)


def test_gru_and_seqgru_match_equations(rng):
    xs = rng.standard_normal((5, 3, 4))
    h0 = rng.standard_normal((3, 2))
    run = lua("""function(x, h0)
      torch.manualSeed(3)
      local gru = nn.GRU(4, 2)
      local seq = nn.SeqGRU(4, 2)
      return nn.Sequencer(gru):forward(x), gru:parameters(), seq:forward({h0, x}), seq.weight, seq.bias,
        nn.Sequencer(seq:toGRU()):forward(x)
    end""")
    gru_out, params, seq_out, weight, bias, converted = run(xs, h0)
    p = params
    np.testing.assert_allclose(gru_out, gru_ref(xs, *p), rtol=1e-10, atol=1e-12)
    W, b = weight, bias
    args = (W[:4, :4].T, b[:4], W[4:, :4].T, W[:4, 4:].T, b[4:], W[4:, 4:].T)
    np.testing.assert_allclose(seq_out, gru_ref(xs, *args, h0=h0), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(converted, gru_ref(xs, *args), rtol=1e-10, atol=1e-12)


def simple_rnn_ref(xs, Wi, bi, Wf, bf, start):
    """nn.Recurrent with Tanh: h1 = tanh(Wi x1 + bi + start), then h = tanh(Wi x + bi + Wf h + bf)."""
    h = np.tanh(xs[0] @ Wi.T + bi + start)
    out = [h]
    for x in xs[1:]:
        h = np.tanh(x @ Wi.T + bi + h @ Wf.T + bf)
        out.append(h)
    return np.stack(out)


RECURRENT = """local function recurrent() return nn.Recurrent(5, nn.Linear(3, 5), nn.Linear(5, 5), nn.Tanh(), 99) end
      local function weights(r)
        return {r.inputModule.weight, r.inputModule.bias, r.feedbackModule.weight, r.feedbackModule.bias,
                r.startModule.bias}
      end"""


def test_recurrent_simple_rnn(rng):
    xs = rng.standard_normal((4, 2, 3))
    out, p = lua(f"""function(x)
      {RECURRENT}
      local r = recurrent()
      return nn.Sequencer(r):forward(x), weights(r)
    end""")(xs)
    np.testing.assert_allclose(out, simple_rnn_ref(xs, *p), rtol=1e-10, atol=1e-12)


def test_bidirectional_sequencers_and_repeater(rng):
    xs = rng.standard_normal((4, 2, 3))
    bi, pf, pb, brnn, fw, fb, bw, bb, rep, pr = lua(f"""function(x)
      {RECURRENT}
      torch.manualSeed(4)
      local fwd, bwd, again = recurrent(), recurrent(), recurrent()
      local steps = {{}}
      for t = 1, x:size(1) do steps[t] = x[t] end
      local bi = nn.BiSequencer(fwd, bwd):forward(steps)
      local brnn = nn.SeqBRNN(3, 4)
      local f, b = brnn.forwardModule, brnn.backwardModule
      return bi, weights(fwd), weights(bwd), brnn:forward(x), f.weight, f.bias, b.weight, b.bias,
        nn.Repeater(again, 3):forward(x[1]), weights(again)
    end""")(xs)
    # BiSequencer: the forward RNN, and the backward one over the reversed steps, joined per step
    want = np.concatenate([simple_rnn_ref(xs, *pf), simple_rnn_ref(xs[::-1], *pb)[::-1]], axis=2)
    np.testing.assert_allclose(np.stack(bi), want, rtol=1e-10, atol=1e-12)
    # SeqBRNN: two SeqLSTMs (gate blocks i f o g), the backward one reversed, added
    want = (lstm_ref(xs, fw[:3].T, fb, fw[3:].T, "ifoz")
            + lstm_ref(xs[::-1], bw[:3].T, bb, bw[3:].T, "ifoz")[::-1])
    np.testing.assert_allclose(brnn, want, rtol=1e-10, atol=1e-12)
    # Repeater: the same input at each of its 3 steps
    np.testing.assert_allclose(np.stack(rep), simple_rnn_ref(np.stack([xs[0]] * 3), *pr), rtol=1e-10, atol=1e-12)


def test_recursor_bptt_linear_no_bias_zero_grad_and_rho(rng):
    xs, gos = rng.standard_normal((3, 2, 4)), rng.standard_normal((3, 2, 3))
    outs, gins, W, b, gW, nobias, hasBias, nbW, zout, zgrad, kept, rhos, message = lua("""function(x, go)
      local rec = nn.Recursor(nn.Linear(4, 3))
      local outs, gins = {}, {}
      for t = 1, 3 do outs[t] = rec:forward(x[t]):clone() end
      rec:zeroGradParameters()
      for t = 3, 1, -1 do gins[t] = rec:backward(x[t], go[t]):clone() end   -- last step first
      local lin = rec:getStepModule(1)
      local nb = nn.LinearNoBias(4, 3)
      local z = nn.ZeroGrad()
      local zout, zgrad = z:forward(x[1]), z:backward(x[1], torch.ones(2, 4))
      local r = nn.Recurrent(5, nn.Linear(4, 5), nn.Linear(5, 5), nn.Tanh(), 99)
      local net = nn.Sequential():add(r)
      net:maxBPTTstep(2)                      -- keeps rho + 1 step clones, recycling the oldest
      for t = 1, 8 do net:forward(x[1]) end
      local ok, err = pcall(function() r:backwardThroughTime() end)
      return outs, gins, lin.weight, lin.bias, lin.gradWeight, nb:forward(x[1]), nb.bias ~= nil, nb.weight, zout, zgrad,
        require('moses').size(r.sharedClones), {r.rho}, tostring(err)
    end""")(xs, gos)
    np.testing.assert_allclose(np.stack(outs), xs @ W.T + b, rtol=1e-12)
    np.testing.assert_allclose(np.stack(gins), gos @ W, rtol=1e-12)
    np.testing.assert_allclose(gW, sum(g.T @ x for g, x in zip(gos, xs)), rtol=1e-12)
    assert not hasBias
    np.testing.assert_allclose(nobias, xs[0] @ nbW.T, rtol=1e-12)
    np.testing.assert_array_equal(zout, xs[0])
    np.testing.assert_array_equal(zgrad, np.zeros((2, 4)))
    assert kept == 3 and rhos == [2]
    assert "nn.Recurrent:backwardThroughTime: DEPRECATED Jan 8, 2016" in message


# ---- gradients by finite differences -----------------------------------------------------------

GRAD_CASES = {
    "LSTM": "nn.Sequencer(nn.LSTM(3, 4))",
    "FastLSTM": "nn.Sequencer(nn.FastLSTM(3, 4))",
    "GRU": "nn.Sequencer(nn.GRU(3, 4))",
    "Recurrent": "nn.Sequencer(nn.Recurrent(4, nn.Linear(3, 4), nn.Linear(4, 4), nn.Sigmoid(), 99))",
    "Recurrence": "nn.Sequencer(nn.Recurrence(nn.Sequential():add(nn.JoinTable(1, 1)):add(nn.Linear(7, 4)):add(nn.Tanh()), 4, 1))",
    "SeqLSTM": "nn.SeqLSTM(3, 4)",
    "SeqLSTMP": "nn.SeqLSTMP(3, 5, 4)",
    "SeqGRU": "nn.SeqGRU(3, 4)",
    "MuFuRu": "nn.Sequencer(nn.MuFuRu(3, 4))",
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_bptt_gradients_by_finite_differences(name, rng):
    xs = rng.standard_normal((4, 2, 3))
    weights = rng.standard_normal((4, 2, 4))
    setup = lua(f"""function(x, w)
      torch.manualSeed(5)
      local m = {GRAD_CASES[name]}
      local params, gradParams = m:getParameters()
      local flat
      local function bind(values) flat = values; flat:copy(params) end
      local function loss()
        params:copy(flat)
        return torch.cmul(m:forward(x), w):sum()
      end
      local function grads()
        params:copy(flat)
        m:zeroGradParameters()
        m:forward(x)
        return m:backward(x, w), gradParams
      end
      return params:nElement(), bind, loss, grads
    end""")
    count, bind, loss, grads = setup(xs, weights)   # x views xs: the loss sees its perturbations
    flat = np.empty(count)
    bind(flat)                                      # the parameters, as a tensor viewing flat
    gx, gp = grads()
    np.testing.assert_allclose(gx, numeric_grad(loss, xs), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(gp, numeric_grad(loss, flat), rtol=1e-5, atol=1e-7)


# ---- memory, masking, criterions ---------------------------------------------------------------

def test_remember_continues_the_sequence_and_forget_restarts(rng):
    xs = rng.standard_normal((6, 2, 3))
    whole, halves, fresh = lua("""function(x)
      local seq = nn.Sequencer(nn.FastLSTM(3, 4))
      local whole = seq:forward(x):clone()
      seq:remember('both')
      seq:forget()
      local a = seq:forward(x:narrow(1, 1, 3)):clone()
      local b = seq:forward(x:narrow(1, 4, 3)):clone()
      seq:forget()
      local fresh = seq:forward(x:narrow(1, 4, 3)):clone()
      return whole, torch.cat(a, b, 1), fresh
    end""")(xs)
    np.testing.assert_allclose(halves, whole, rtol=1e-12, atol=1e-14)
    # after forget, the second half starts again from a zero state: it differs from the continuation
    assert np.abs(fresh - whole[3:]).max() > 1e-3


def test_seqlstm_remember_modes(rng):
    xs = rng.standard_normal((4, 1, 2))
    kept, reset, first = lua("""function(x)
      local m = nn.SeqLSTM(2, 3)
      local first = m:forward(x):clone()
      m:remember('eval')                       -- training: each forward starts from zeros
      local reset = m:forward(x):clone()
      m:evaluate()
      m:forward(x)
      local kept = m:forward(x):clone()        -- evaluation: carries on from the last step
      return kept, reset, first
    end""")(xs)
    np.testing.assert_allclose(reset, first, rtol=0, atol=0)
    assert np.abs(kept - first).max() > 1e-4


def test_maskzero_zeroes_padded_steps_and_trimzero_agrees(rng):
    xs = rng.standard_normal((3, 4, 2))
    xs[0, 1] = 0.0   # sample 2 is padding at step 1
    xs[1, 3] = 0.0
    masked, trimmed, gmask, gtrim = lua("""function(x)
      torch.manualSeed(9)
      local lstm = nn.FastLSTM(2, 3)
      local a = nn.Sequencer(lstm:clone():maskZero(1))
      local b = nn.Sequencer(lstm:clone():trimZero(1))
      local g = torch.ones(3, 4, 3)
      local oa, ob = a:forward(x):clone(), b:forward(x):clone()
      return oa, ob, a:backward(x, g):clone(), b:backward(x, g):clone()
    end""")(xs)
    out = masked
    np.testing.assert_array_equal(out[0, 1], 0.0)
    np.testing.assert_array_equal(out[1, 3], 0.0)
    assert np.all(out[0, 0] != 0.0)
    np.testing.assert_allclose(trimmed, out, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(gmask[0, 1], 0.0)
    np.testing.assert_allclose(gtrim, gmask, rtol=1e-12, atol=1e-14)


def test_lookuptablemaskzero_and_maskzerocriterion():
    out, weight, loss, grad = lua("""function()
      local lt = nn.LookupTableMaskZero(5, 2)
      local out = lt:forward(torch.LongTensor({0, 3, 0, 5}))
      local crit = nn.MaskZeroCriterion(nn.MSECriterion(), 1)
      local input = torch.Tensor({{0, 0}, {1, 2}, {3, 5}})
      local target = torch.Tensor({{7, 7}, {0, 0}, {1, 1}})
      local loss = crit:forward(input, target)
      return out, lt.weight, loss, crit:backward(input, target)
    end""")()
    W = weight
    # index i uses row i + 1; row 1 is the zero row of index 0
    np.testing.assert_array_equal(out, np.stack([np.zeros(2), W[3], np.zeros(2), W[5]]))
    # the all-zero first sample is left out: MSE over the other two samples (4 elements)
    kept = np.array([[1, 2], [3, 5]]) - np.array([[0, 0], [1, 1]])
    assert loss == pytest.approx((kept ** 2).mean())
    np.testing.assert_allclose(grad, np.vstack([np.zeros(2), 2 * kept / 4]))


def test_seqreversesequence_and_sequencercriterion(rng):
    xs = rng.standard_normal((3, 2, 4))
    rev, grad, loss, closs, cgrad = lua("""function(x)
      local r = nn.SeqReverseSequence(1)
      local rev = r:forward(x):clone()
      local grad = r:backward(x, torch.range(1, 24):view(3, 2, 4)):clone()
      local crit = nn.SequencerCriterion(nn.MSECriterion(), true)
      local loss = crit:forward(x, torch.zeros(3, 2, 4))
      local rc = nn.RepeaterCriterion(nn.MSECriterion())
      local closs = rc:forward({x[1], x[2]}, x[3])
      return rev, grad, loss, closs, crit:backward(x, torch.zeros(3, 2, 4))
    end""")(xs)
    np.testing.assert_array_equal(rev, xs[::-1])
    np.testing.assert_array_equal(grad, np.arange(1, 25, dtype=float).reshape(3, 2, 4)[::-1])
    # sizeAverage: the mean over steps of each step's MSE
    assert loss == pytest.approx(np.mean([(x ** 2).mean() for x in xs]))
    assert closs == pytest.approx(((xs[0] - xs[2]) ** 2).mean() + ((xs[1] - xs[2]) ** 2).mean())
    np.testing.assert_allclose(cgrad, 2 * xs / 8 / 3)


def test_language_model_loss_decreases():
    losses = lua("""function()
      torch.manualSeed(11)
      local vocab, hidden, seqlen, batch = 8, 16, 5, 4
      local lm = nn.Sequential()
        :add(nn.LookupTable(vocab, hidden))
        :add(nn.SplitTable(1))
        :add(nn.Sequencer(nn.Sequential():add(nn.FastLSTM(hidden, hidden)):add(nn.Linear(hidden, vocab)):add(nn.LogSoftMax())))
      local crit = nn.SequencerCriterion(nn.ClassNLLCriterion())
      -- a fixed sequence: each word predicts the next (i -> i+1 mod vocab)
      local input = torch.LongTensor(seqlen, batch)
      for t = 1, seqlen do for b = 1, batch do input[t][b] = (t + b) % vocab + 1 end end
      local target = {}
      for t = 1, seqlen do target[t] = input[t] % vocab + 1 end
      local losses = {}
      for i = 1, 25 do
        local out = lm:forward(input)
        losses[i] = crit:forward(out, target)
        lm:zeroGradParameters()
        lm:backward(input, crit:backward(out, target))
        lm:updateParameters(0.5)
      end
      return torch.Tensor(losses)
    end""")()
    losses = losses
    assert losses[0] == pytest.approx(5 * np.log(8), rel=0.1)   # about uniform at the start
    assert losses[-1] < 0.5 * losses[0]
    assert np.all(np.diff(losses[:5]) < 0)


@pytest.mark.parametrize("code, message", [
    ("nn.Sequencer(3)", "Sequencer: expecting nn.Module instance at arg 1, got number"),
    ("nn.SeqLSTM(3, 4):forward(torch.randn(2, 3))", "nn.SeqLSTM: only supports batch mode (a 3D input), got 2D"),
    ("nn.SeqLSTM(3, 4):forward(torch.randn(2, 5, 2))", "nn.SeqLSTM: input x should be 2x5x3, got 2x5x2"),
    ("nn.Sequencer(nn.Linear(2, 2)):backward(torch.randn(3, 2), torch.randn(2, 2))",
     "Sequencer: gradOutput should have as many elements as input (3 steps, got 2)"),
    ("nn.MaskZero(nn.Linear(2, 2), 1):forward(torch.randn(2, 2, 2))",
     "nn.MaskZero: input has 3 dimensions, expecting nInputDim (1) or nInputDim+1 (batch)"),
    ("nn.SequencerCriterion(nn.MSECriterion()):forward({torch.randn(2)}, {})",
     "SequencerCriterion: target should have as many elements as input (1 steps, got 0)"),
])
def test_bad_input_errors(code, message):
    with pytest.raises(luabridge.LuaError, match=re.escape(message)):
        lua(f"function() return {code} end")()


def test_scripts_may_reuse_the_global_rnn_name(rng):
    # rnn's examples write `rnn = nn.Sequential()...`: the classes reach their helpers through nn.rnn
    xs = rng.standard_normal((3, 2, 2))
    ok, message = lua("""function(x)
      local saved = rnn
      rnn = nn.Sequential():add(nn.Sequencer(nn.Recurrent(3, nn.Linear(2, 3), nn.Linear(3, 3))))
      local ok, err = pcall(function()
        local out = rnn:forward(x)
        rnn:backward(x, out:clone():fill(1))
      end)
      rnn = saved
      return ok, tostring(err)
    end""")(xs)
    assert ok, message
