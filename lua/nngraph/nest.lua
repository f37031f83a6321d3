-- nngraph.nest(x): a node whose output has the nesting of x, a node or a (nested) list of nodes:
--   nngraph.nest({a, {b}, c}) outputs {a's output, {b's output}, c's output}.
local utils = require 'nngraph.utils'

local function nest(x)
  if utils.isNode(x) then return x end
  if type(x) ~= 'table' or #x == 0 then
    error('nngraph.nest: expecting a node or a non-empty list of nodes, got ' .. torch.type(x), 3)
  end
  if #x == 1 then return nngraph.JustTable()(nest(x[1])) end
  local children = {}
  for i, child in ipairs(x) do children[i] = nest(child) end
  return nn.Identity()(children)
end

function nngraph.nest(...)
  if select('#', ...) ~= 1 or ... == nil then error('nngraph.nest: pass one node or one list of nodes', 2) end
  return nest(...)
end
