-- Helpers for tests/test_plans_nngraph.py: char-rnn's step models (LSTM, GRU, RNN, after
-- karpathy/char-rnn's model/*.lua), a runner of clones through time (clone_many_times' sharing)
-- with nn.plans.enabled on or off, and the comparison of everything a program can read.
require 'nn'
require 'nngraph'
local plans = require 'nn.util.plans'
local plan = require 'nngraph.plan'

local H = {}

-- One time step: inputs {x, state...}, outputs {state..., log-probabilities}. x: characters'
-- indices (OneHot) when onehot, else a batch x vocab tensor.
local function input(vocab, onehot, x)
  if onehot then return nn.OneHot(vocab)(x) end
  return x
end

function H.lstm(vocab, hidden, layers, dropout, onehot)
  local inputs = { nn.Identity()() }
  for _ = 1, layers do
    inputs[#inputs + 1] = nn.Identity()()
    inputs[#inputs + 1] = nn.Identity()()
  end
  local outputs = {}
  local x, width = input(vocab, onehot, inputs[1]), vocab
  for L = 1, layers do
    local prevC, prevH = inputs[2 * L], inputs[2 * L + 1]
    if L > 1 and dropout > 0 then x = nn.Dropout(dropout)(x) end
    local sums = nn.CAddTable()({ nn.Linear(width, 4 * hidden)(x), nn.Linear(hidden, 4 * hidden)(prevH) })
    local inGate, forget, outGate, write = nn.SplitTable(2)(nn.Reshape(4, hidden)(sums)):split(4)
    inGate, forget, outGate, write = nn.Sigmoid()(inGate), nn.Sigmoid()(forget), nn.Sigmoid()(outGate), nn.Tanh()(write)
    local c = nn.CAddTable()({ nn.CMulTable()({ forget, prevC }), nn.CMulTable()({ inGate, write }) })
    local h = nn.CMulTable()({ outGate, nn.Tanh()(c) })
    outputs[2 * L - 1], outputs[2 * L] = c, h
    x, width = h, hidden
  end
  if dropout > 0 then x = nn.Dropout(dropout)(x) end
  outputs[#outputs + 1] = nn.LogSoftMax()(nn.Linear(hidden, vocab)(x))
  return nn.gModule(inputs, outputs)
end

function H.gru(vocab, hidden, layers, dropout, onehot)
  local inputs = { nn.Identity()() }
  for _ = 1, layers do inputs[#inputs + 1] = nn.Identity()() end
  local function inputSum(width, xv, hv)
    return nn.CAddTable()({ nn.Linear(width, hidden)(xv), nn.Linear(hidden, hidden)(hv) })
  end
  local outputs = {}
  local x, width = input(vocab, onehot, inputs[1]), vocab
  for L = 1, layers do
    local prevH = inputs[L + 1]
    if L > 1 then
      x, width = outputs[L - 1], hidden
      if dropout > 0 then x = nn.Dropout(dropout)(x) end
    end
    local update = nn.Sigmoid()(inputSum(width, x, prevH))
    local reset = nn.Sigmoid()(inputSum(width, x, prevH))
    local gated = nn.CMulTable()({ reset, prevH })
    local candidate = nn.Tanh()(nn.CAddTable()({ nn.Linear(width, hidden)(x), nn.Linear(hidden, hidden)(gated) }))
    local zh = nn.CMulTable()({ update, candidate })
    local zhm1 = nn.CMulTable()({ nn.AddConstant(1, false)(nn.MulConstant(-1, false)(update)), prevH })
    outputs[#outputs + 1] = nn.CAddTable()({ zh, zhm1 })
  end
  local top = outputs[#outputs]
  if dropout > 0 then top = nn.Dropout(dropout)(top) end
  outputs[#outputs + 1] = nn.LogSoftMax()(nn.Linear(hidden, vocab)(top))
  return nn.gModule(inputs, outputs)
end

function H.rnn(vocab, hidden, layers, dropout, onehot)
  local inputs = { nn.Identity()() }
  for _ = 1, layers do inputs[#inputs + 1] = nn.Identity()() end
  local outputs = {}
  local x, width = input(vocab, onehot, inputs[1]), vocab
  for L = 1, layers do
    if L > 1 then
      x, width = outputs[L - 1], hidden
      if dropout > 0 then x = nn.Dropout(dropout)(x) end
    end
    outputs[#outputs + 1] = nn.Tanh()(nn.CAddTable()({ nn.Linear(width, hidden)(x), nn.Linear(hidden, hidden)(inputs[L + 1]) }))
  end
  outputs[#outputs + 1] = nn.LogSoftMax()(nn.Linear(hidden, vocab)(outputs[#outputs]))
  return nn.gModule(inputs, outputs)
end

-- Every tensor a program can read after a run: the output and gradInput of each model and of
-- every module inside it (tables flattened), the flat parameters and their gradients.
local function collect(list, x)
  if torch.isTensor(x) then
    list[#list + 1] = x:clone()
  elseif type(x) == 'table' then
    for _, v in ipairs(x) do collect(list, v) end
  end
  return list
end

local function readable(models, params, grads)
  local list = {}
  for _, m in ipairs(models) do
    for _, mod in ipairs(m:listModules()) do   -- m itself, then the modules inside, nested ones too
      collect(list, mod.output)
      collect(list, mod.gradInput)
    end
  end
  collect(list, params)
  collect(list, grads)
  return list
end

-- Runs rep(r) for r = 1, reps with nn.plans.enabled = enabled (put back afterwards, after an
-- error too); returns how many of the last rep's gModule forwards and backwards ran a plan.
function H.counted(enabled, reps, rep)
  local was = plans.enabled
  plans.enabled = enabled
  local counts = { forward = 0, backward = 0 }
  local of, ob = plan.forward, plan.backward
  local ok, err = xpcall(function()
    for r = 1, reps do
      if r == reps then
        plan.forward = function(...) counts.forward = counts.forward + 1; return of(...) end
        plan.backward = function(...) counts.backward = counts.backward + 1; return ob(...) end
      end
      rep(r)
    end
  end, debug.traceback)
  plan.forward, plan.backward = of, ob
  plans.enabled = was
  if not ok then error(err, 0) end
  return counts.forward, counts.backward
end

-- Runs a char-rnn step model `proto` through time on clones sharing its parameters (as
-- char-rnn's clone_many_times), `reps` times: each rep zeroes the gradients, runs forward
-- through time from state0 and (when train) backward through time with gradients gy[t] on the
-- log-probabilities; xs[t]: the inputs' first entry at step t. Returns the readable tensors,
-- and how many of the clones' last forward and backward ran a plan with chains.
-- n clones of step model p sharing its parameters, in training or evaluation mode; then p's
-- flattened parameters and gradients.
function H.clones(p, n, train)
  local params, grads = p:getParameters()
  local clones = {}
  for t = 1, n do
    clones[t] = p:clone('weight', 'bias', 'gradWeight', 'gradBias')
    if train then clones[t]:training() else clones[t]:evaluate() end
  end
  return clones, params, grads
end

function H.throughTime(proto, enabled, xs, state0, gy, train, reps, seed)
  local clones, params, grads = H.clones(proto:clone(), #xs, train)
  local nState = #state0
  local nf, nb = H.counted(enabled, reps, function()
    torch.manualSeed(seed or 7)
    grads:zero()
    local state, inputs = state0, {}
    for t = 1, #xs do
      inputs[t] = { xs[t], unpack(state) }
      local out = clones[t]:forward(inputs[t])
      state = { unpack(out, 1, nState) }
    end
    if train then
      local gradState = {}
      for i = 1, nState do gradState[i] = state0[i]:clone():zero() end
      for t = #xs, 1, -1 do
        local gout = { unpack(gradState) }
        gout[nState + 1] = gy[t]
        local gin = clones[t]:backward(inputs[t], gout)
        gradState = { unpack(gin, 2, nState + 1) }
      end
    end
  end)
  return readable(clones, params, grads), nf, nb
end

-- The largest difference between two lists of tensors, relative to the largest magnitude
-- (at least 1), and whether the lists hold the same sizes.
function H.difference(a, b)
  if #a ~= #b then return math.huge, false end
  local worst = 0
  for i = 1, #a do
    if not a[i]:isSameSizeAs(b[i]) then return math.huge, false end
    if a[i]:nElement() > 0 then
      local scale = math.max(1, a[i]:clone():abs():max())
      worst = math.max(worst, (a[i]:double() - b[i]:double()):abs():max() / scale)
    end
  end
  return worst, true
end

-- Runs a gModule `reps` times on fixed inputs and gradients (forward, backward when train),
-- with plans on or off; returns the readable tensors and the number of planned calls in the
-- last rep.
function H.fixed(proto, enabled, input, gradOutput, train, reps)
  local m = proto:clone()
  local params, grads = m:getParameters()
  if train then m:training() else m:evaluate() end
  local nf, nb = H.counted(enabled, reps, function()
    grads:zero()
    m:forward(input)
    if train then m:backward(input, gradOutput, 0.5) end
  end)
  return readable({ m }, params, grads), nf, nb
end

-- char-rnn's model `kind` in element type typ ('float', 'double') through `steps` steps on
-- random data (seed 3), with plans off and on (H.throughTime, 3 reps): returns both lists of
-- readable tensors and the planned forward and backward calls of the last rep, then the inputs
-- of the first step.
function H.throughTimeCase(kind, typ, vocab, hidden, layers, dropout, steps, batch, train, onehot)
  torch.manualSeed(3)
  local proto = H[kind](vocab, hidden, layers, dropout, onehot)
  proto = proto[typ](proto)
  local T = typ == 'double' and torch.DoubleTensor or torch.FloatTensor
  local xs, gy, state0 = {}, {}, {}
  local nState = kind == 'lstm' and 2 * layers or layers
  for t = 1, steps do
    xs[t] = onehot and torch.LongTensor(batch):random(1, vocab) or T(batch, vocab):normal()
    gy[t] = T(batch, vocab):normal()
  end
  for i = 1, nState do state0[i] = T(batch, hidden):normal(0, 0.5) end
  local off = H.throughTime(proto, false, xs, state0, gy, train, 3)
  local on, nf, nb = H.throughTime(proto, true, xs, state0, gy, train, 3)
  return off, on, nf, nb, proto, { xs[1], unpack(state0) }
end

H.plan = plan
H.plans = plans
H.readable = readable
return H
