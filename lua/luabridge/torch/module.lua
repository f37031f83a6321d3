-- The Lua half of luabridge.torch.LuaModule (luabridge/torch/module.py): tensors over memory that
-- Python registered (PyTorch tensors), one call per forward and one per backward, and a record
-- of where the tensors that Python views lie, so that Python rebuilds its views only when they
-- moved (a module reuses its output and gradInput buffers from call to call).
require 'torch'
local memory = require 'torch.core.memory'
local M = {}

-- A tensor of type typeName ('Double') over buffer `id` (address halves hi, lo; n elements from
-- the tensor's first one), with dim sizes then dim strides. Python computed n from them, so the
-- view is valid by construction and skips the constructor's checks.
function M.tensor(typeName, id, hi, lo, n, dim, ...)
  local sizes, strides = {}, {}
  for d = 1, dim do
    sizes[d], strides[d] = (select(d, ...)), (select(dim + d, ...))
  end
  local mt = torch.getmetatable('torch.' .. typeName .. 'Tensor')
  memory.account(n * mt.__dtype.size)   -- the tensor holds its lender's memory until collected
  return torch._makeTensor(mt, torch._storageFromBuffer(typeName, id, hi, lo, n), 0, sizes, strides)
end

-- Records, at rec[i], where tensor t lies; true when that differs from what rec[i] held.
local function moved(rec, i, t)
  local r = rec[i]
  local dim = t:dim()
  if r and type(r) == 'table' and r.data == t:data() and r.type == torch.typename(t) and r.dim == dim then
    local same = true
    for d = 1, dim do
      if r[d] ~= t:size(d) or r[-d] ~= t:stride(d) then same = false; break end
    end
    if same then return false end
  end
  r = { data = t:data(), type = torch.typename(t), dim = dim }
  for d = 1, dim do r[d], r[-d] = t:size(d), t:stride(d) end
  rec[i] = r
  return true
end

-- Walks value (a tensor, a table of them, nested, or nil) in order, recording each tensor and
-- each table's length in rec from position i; returns the next position and whether anything moved.
local function walk(rec, i, value)
  if torch.isTensor(value) then return i + 1, moved(rec, i, value) end
  local n = type(value) == 'table' and #value or -1   -- -1: nil or a non-tensor value
  local changed = rec[i] ~= n
  rec[i] = n
  i = i + 1
  for k = 1, n do
    local c
    i, c = walk(rec, i, value[k])
    changed = changed or c
  end
  return i, changed
end

-- A record: whether value lies where it did when rec last saw it (its tensors and tables' shape).
function M.moved(rec, value)
  local last, changed = walk(rec, 1, value)
  if rec[last] ~= nil then   -- the previous value was longer
    for k = last, #rec do rec[k] = nil end
    changed = true
  end
  return changed
end

-- The state of one LuaModule: the module, the gradient tensors in the order of the Parameters,
-- and a record for each value Python views.
function M.state(module, grads)
  return { module = module, grads = grads, output = {}, gradInput = {}, gradRecord = {} }
end

-- A value Python passed: M.tensor's arguments (a type name first), or the value itself.
local function value(first, ...)
  if type(first) == 'string' then return M.tensor(first, ...) end
  return first
end

local function copyArray(a) local r = {} for i = 1, #a do r[i] = a[i] end return r end

-- Where tensor t lies (its storage and layout, read through its methods), copied before the
-- module may change t.
local function layout(t)
  local sz, str = {}, {}
  for d = 1, t:dim() do sz[d], str[d] = t:size(d), t:stride(d) end
  return { mt = getmetatable(t), st = t:storage(), off = t:storageOffset(), sz = sz, str = str }
end

-- Whether tensor t still lies as layout l says (modules seldom change their input's layout).
local function unchanged(t, l)
  if t:storage() ~= l.st or t:storageOffset() ~= l.off or getmetatable(t) ~= l.mt or t:dim() ~= #l.sz then
    return false
  end
  for d = 1, #l.sz do
    if t:size(d) ~= l.sz[d] or t:stride(d) ~= l.str[d] then return false end
  end
  return true
end

-- The input: M.tensor's arguments (the storage is kept, see luabridge/torch/crossing.py's Lent),
-- true for the kept storage's view (Python lends the same memory again), or a Lua value.
-- Returns the input (Python keeps it for the backward), the output, and whether it moved.
function M.forward(state, first, ...)
  local input
  if first == true then
    local l = state.lent
    input = l.view
    if not unchanged(input, l) then   -- the module resized or re-pointed it: a new view
      input = torch._makeTensor(l.mt, l.st, l.off - 1, copyArray(l.sz), copyArray(l.str))
      l.view = input
    end
  else
    input = value(first, ...)
    if type(first) == 'string' then
      state.lent = layout(input)
      state.lent.view = input
    end
  end
  local output = state.module:forward(input)
  return input, output, M.moved(state.output, output)
end

-- updateGradInput, and with params the parameters' gradients alone (zeroed first: PyTorch adds
-- them up itself). Returns the gradInput, whether it moved, and whether the gradients moved.
function M.backward(state, input, params, ...)
  local m, gradOutput = state.module, value(...)
  if not params then
    local gradInput = m:updateGradInput(input, gradOutput)
    return gradInput, M.moved(state.gradInput, gradInput), false
  end
  local grads = state.grads
  for i = 1, #grads do grads[i]:zero() end
  local gradInput = m:backward(input, gradOutput, 1)
  return gradInput, M.moved(state.gradInput, gradInput), M.moved(state.gradRecord, grads)
end

return M
