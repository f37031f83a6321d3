-- The Lua half of luabridge.graph.lua_module (luabridge/graph/api.py): a module from its
-- constructor string, its parameters with their field names, and its output size for an input.
require 'nn'
local M = {}
function M.build(spec)
  local f, err = loadstring('return ' .. spec, '=(lua_module)')
  if not f then error('lua_module: ' .. err, 0) end
  return f()
end
function M.describe(m, typename)
  if not (torch.isTypeOf(m, 'nn.Module') or torch.isTypeOf(m, 'nn.Criterion')) then
    error('lua_module: expected an nn module or criterion, got ' .. torch.type(m), 0)
  end
  m = m:type(typename)
  local W = torch.isTypeOf(m, 'nn.Module') and m:parameters() or {}
  local names = {}
  for i, w in ipairs(W) do
    names[i] = 'param' .. i
    for k, v in pairs(m) do
      if v == w and type(k) == 'string' then names[i] = k end
    end
  end
  return m, torch.isTypeOf(m, 'nn.Criterion'), W, names, m:clone()
end
function M.probe(m, sizes, typename)
  local x = torch.Tensor():type(typename):resize(torch.LongStorage(sizes)):zero()
  return m:forward(x):size():totable()
end
return M
