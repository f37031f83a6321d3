-- Closure factories of luabridge's graph executor: the run loop, entry views of planned
-- buffers, and the forward/backward closures of nn modules (one module shared by both).
require 'torch'
local M = {}

-- "[10,20]" / "(10, 20)" / "7" -> {10, 20} / {7}; nil -> default. Multi-digit numbers stay whole.
function M.tuple(s, default)
  if s == nil then return default end
  local t = {}
  for k in tostring(s):gmatch('%-?%d+') do t[#t + 1] = tonumber(k) end
  return t
end

-- A tensor of the given sizes over a flat buffer tensor, from element `offset` (0-based).
function M.entry(flat, sizes, offset)
  local t = flat.new()
  if #sizes == 0 then return t end
  return t:set(flat:storage(), flat:storageOffset() + (offset or 0), torch.LongStorage(sizes))
end

-- The run loop: calls every step; `where()` tells the step that last started (0 when done).
function M.runner(steps)
  local n, cur = #steps, 0
  local function run()
    for i = 1, n do
      cur = i
      steps[i]()
    end
    cur = 0
  end
  return run, function() return cur end
end

-- Compiles a factory source once per source text.
local factories = setmetatable({}, { __mode = 'v' })
function M.factory(source)
  local f = factories[source]
  if not f then
    local chunk, err = loadstring('return ' .. source, '=(graph op)')
    if not chunk then error('graph op source: ' .. err, 0) end
    f = chunk()
    factories[source] = f
  end
  return f
end

-- Fills every tensor of a list with NaN (test mode: a freed buffer must never be read).
function M.poisoner(list)
  return function()
    for i = 1, #list do list[i]:fill(0 / 0) end
  end
end

-- nn modules ------------------------------------------------------------------------------------

-- A factory giving each executor its own clone of the module `factory` makes (a compiled
-- graph's closures must not share a module's state between two forward calls).
function M.cloning(factory)
  return function(ishape, kwarg) return factory(ishape, kwarg):clone() end
end

local function isCriterion(m) return torch.isTypeOf(m, 'nn.Criterion') end

-- The module converted to the graph's tensor type, with its parameter and gradient tensors
-- (their storage released: the closures re-point them at the graph's buffers on every call).
function M.prepare(m, typename)
  m = m:type(typename)
  if isCriterion(m) then return m, {}, {} end
  local W, gW = m:parameters()
  W, gW = W or {}, gW or {}
  for _, t in ipairs(W) do t:set() end
  for _, t in ipairs(gW) do t:set() end
  return m, W, gW
end

-- A private tensor viewing `target`, installed as m[field] before each call (never a
-- graph tensor, which the module could re-point); after the call, target gets the module's
-- result copied in when the module replaced or reallocated it (unless readOnly).
local function binder(m, field, target, readOnly)
  local holder = target.new():set(target)
  return function()
    holder:set(target)
    m[field] = holder
  end, function()
    local r = m[field]
    if not readOnly and not (torch.isTensor(r) and r:isSetTo(target)) then target:copy(r) end
    m[field] = holder
  end
end

local function bindAll(W, from, first)
  for i = 1, #W do W[i]:set(from[first + i - 1]) end
end

-- spec: { criterion = bool, states = {module fields bound to the last inputs} }
-- x: the node's inputs ({data, [target], params..., states...}), y: {output}.
function M.nnForward(m, W, spec, x, y)
  local input, out = x[1], y[1]
  if spec.criterion then
    local target = x[2]
    return function()
      out:fill(m:updateOutput(input, target))
    end
  end
  local first, states, nW = 2, spec.states or {}, #W
  local before, after = binder(m, 'output', out)
  return function()
    bindAll(W, x, first)
    for i = 1, #states do m[states[i]]:set(x[first + nW + i - 1]) end
    before()
    m:updateOutput(input)
    after()
  end
end

-- x: {gradOutput, [forward inputs...], [forward output]} as spec says; y: one gradient per
-- forward input (those of the target and states are left alone).
function M.nnBackward(m, W, gW, spec, x, y)
  local empty = y[1].new()
  local gradOutput = x[1]
  local needIn, n = spec.needInputs, spec.forwardInputs
  local input = needIn and x[2] or empty
  local output = spec.needOutputs and x[needIn and n + 2 or 2] or empty
  if spec.criterion then
    local target = needIn and x[3] or empty
    local before, after = binder(m, 'gradInput', y[1])
    return function()
      before()
      m:updateGradInput(input, target)
      after()
      local scale = gradOutput[1]  -- the criterion's loss gradient (1 when it is the objective)
      if scale ~= 1 then y[1]:mul(scale) end
    end
  end
  if #W > 0 and not needIn then
    error('nnBackward: a module with parameters needs its forward inputs', 0)
  end
  local first, states, nW = 2, spec.states or {}, #W
  local gradW = {}
  for i = 1, nW do gradW[i] = y[first + i - 1] end
  local outBefore, outAfter = binder(m, 'output', output, true)
  local before, after = binder(m, 'gradInput', y[1])
  return function()
    if needIn then
      bindAll(W, x, 3)
      for i = 1, #states do m[states[i]]:set(x[2 + nW + i]) end
    end
    bindAll(gW, gradW, 1)
    outBefore()
    before()
    -- backward, not updateGradInput then accGradParameters: a container then makes one sweep
    -- over its layers instead of two
    for i = 1, nW do gW[i]:zero() end
    m:backward(input, gradOutput, 1)
    after()
    outAfter()
    for i = 1, nW do
      if not gW[i]:isSetTo(gradW[i]) then gradW[i]:copy(gW[i]); gW[i]:set(gradW[i]) end
    end
  end
end

return M
