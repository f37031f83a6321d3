-- torch7's nngraph: modules wired as a graph. Calling a module on nodes makes a node:
--   local x = nn.Identity()()              -- a node with no input yet (a graph input)
--   local h = nn.Tanh()(nn.Linear(3, 4)(x)) -- module(node) / module({node1, node2})
--   local g = nn.gModule({x}, {h})
-- Called on tensors (or with a gradOutput), a module still runs forward (and backward) as in nn.
require 'nn'
nngraph = rawget(_G, 'nngraph') or {}
require 'nngraph.graph'
package.loaded.graph = graph
local utils = require 'nngraph.utils'

require 'nngraph.node'
require 'nngraph.gmodule'
require 'nngraph.graphinspecting'
require 'nngraph.JustElement'
require 'nngraph.JustTable'
require 'nngraph.nest'
require 'nngraph.ModuleFromCriterion'
nngraph.nesting = require 'nngraph.nesting'
nngraph.simple_print = require 'nngraph.simple_print'

-- The nodes a call module(...) connects to, or nil when the call is nn's forward call:
-- no argument, a node, or a table holding nodes make a node.
local function nodeArgs(...)
  local n = select('#', ...)
  if n == 0 then return {} end
  local x = ...
  if n > 1 then return nil end
  if x == nil then error(utils.expectingNode(nil, 'inputs', 1), 4) end
  if utils.isNode(x) then return { x } end
  if utils.istable(x) then
    if next(x) == nil then
      error('cannot pass an empty table of inputs. To indicate no incoming connections, ' ..
            'leave the second set of parens blank.', 4)
    end
    for _, v in pairs(x) do if utils.isNode(v) then return x end end
  end
  return nil
end

-- The node of module(inputs). Called by tail calls only: the node takes its declaration line
-- from a fixed stack depth (node.lua).
local function makeNode(module, inputs)
  local node = nngraph.Node({ module = module })
  for i = 1, utils.tableMaxN(inputs) do
    if not utils.isNode(inputs[i]) then error(utils.expectingNode(inputs[i], 'inputs', i), 4) end
    node:add(inputs[i], true)
  end
  return node
end

local Module = torch.getmetatable('nn.Module')
local moduleCall = Module.__call__
function Module:__call__(...)
  local inputs = nodeArgs(...)
  if inputs then return makeNode(self, inputs) end
  return moduleCall(self, ...)
end

local Criterion = torch.getmetatable('nn.Criterion')
local criterionCall = Criterion.__call__
function Criterion:__call__(...)
  local inputs = nodeArgs(...)
  if inputs then return makeNode(nn.ModuleFromCriterion(self), inputs) end
  return criterionCall(self, ...)
end

-- -module: module(); prev - module: module(prev)
function Module.__unm__(m) return m() end
function Module.__sub__(prev, nxt) return nxt(prev) end

return nngraph
