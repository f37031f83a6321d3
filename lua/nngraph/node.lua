-- nngraph.Node: a graph node whose data holds a module (or a split/select marker), the nodes it
-- takes its inputs from (children, in order: data.mapindex maps an input's data to its position)
-- and annotations (name, description, graphAttributes, the source line that declared it).
local utils = require 'nngraph.utils'

local Node, parent = torch.class('nngraph.Node', 'graph.Node')

-- The stack level, seen from __init, of the line that declared a node made by module(inputs):
-- 1 __init, 2 the class system's pcall, 3 its constructor, 4 nngraph's makeNode, 5 the caller
-- (module(...) reaches makeNode through tail calls only, which leave no frame).
local DECLARATION_LEVEL = 5

function Node:__init(data)
  parent.__init(self, data)
  data.annotations = data.annotations or {}
  data.mapindex = data.mapindex or {}
  data.reverseMap = data.reverseMap or {}
  if not data.annotations._debugLabel then
    local info = debug.getinfo(DECLARATION_LEVEL, 'Sl')
    if info then data.annotations._debugLabel = ('[%s]:%d_'):format(info.short_src, info.currentline) end
  end
end

-- Makes child an input of self; with domap it takes the next input position.
function Node:add(child, domap)
  parent.add(self, child)
  if domap then
    local mapindex = self.data.mapindex
    if mapindex[child.data] then error("nngraph: don't pass the same input twice", 3) end
    local reverseMap = child.data.reverseMap or {}   -- nodes in torch7's older files lack it
    if reverseMap[self] then error('nngraph: this connection has already been made', 3) end
    mapindex[#mapindex + 1] = child.data
    mapindex[child.data] = #mapindex
    reverseMap[self] = true
    child.data.reverseMap = reverseMap
  end
end

-- n nodes selecting the elements 1..n of the table this node outputs. Their labels extend
-- this node's: "<label> split at [file]:line-mnode" for the splitting node, "<label>-i".
function Node:split(noutput)
  if noutput == 1 then return nngraph.JustElement()(self) end
  local label = self.data.annotations._debugLabel or ''
  local caller = debug.getinfo(2, 'Sl')
  local splitter = nngraph.Node({ nSplitOutputs = noutput, annotations = {
    _debugLabel = ('%s split at [%s]:%d-mnode'):format(label, caller.short_src, caller.currentline) } })
  splitter:add(self, true)
  local selects = {}
  for i = 1, noutput do
    selects[i] = nngraph.Node({ selectindex = i, input = {}, annotations = { _debugLabel = label .. '-' .. i } })
    selects[i]:add(splitter, true)
  end
  return unpack(selects)
end

function Node:annotate(annotations)
  for k, v in pairs(annotations) do self.data.annotations[k] = v end
  return self
end

function Node:graphNodeName()
  local name = self.data.annotations.name
  return name and (name .. ' (' .. self.id .. ')') or ('Node' .. self.id)
end

-- The Graphviz attributes of the node: annotations.graphAttributes, the tooltip defaulting
-- to the declaration line.
function Node:graphNodeAttributes()
  local annotations = self.data.annotations
  annotations.graphAttributes = annotations.graphAttributes or {}
  annotations.graphAttributes.tooltip = annotations.graphAttributes.tooltip or annotations._debugLabel
  return annotations.graphAttributes
end

-- "Tensor[2x3]" (the type named unless it is the default one), flagged NaN, inf or -inf.
local function describeTensor(t)
  local name = t:type() == torch.Tensor():type() and 'Tensor' or t:type()
  local flag = ''
  if t:nElement() > 0 then
    if t:ne(t):sum() > 0 then flag = 'NaN'
    elseif t:max() == math.huge then flag = 'inf'
    elseif t:min() == -math.huge then flag = '-inf' end
  end
  return name .. '[' .. table.concat(t:size():totable(), 'x') .. ']' .. flag
end

local function describe(x)
  if torch.isTensor(x) then return describeTensor(x) end
  if utils.istable(x) then
    local parts = {}
    for i, v in ipairs(x) do parts[i] = describe(v) end
    return '{' .. table.concat(parts, ',') .. '}'
  end
  return (tostring(x):gsub('\n', '\\l'))
end

-- What the node holds, one "key = value" per line (dot's left-aligned \l): the module, the
-- inputs and gradients of the last run, the input nodes when there are several; the
-- description first.
function Node:label()
  local keys = {}
  for k in pairs(self.data) do
    if k ~= 'annotations' and k ~= 'forwardNodeId' and k ~= 'reverseMap' then keys[#keys + 1] = k end
  end
  table.sort(keys)
  local lines = {}
  for _, k in ipairs(keys) do
    local v = self.data[k]
    if k ~= 'mapindex' then
      lines[#lines + 1] = k .. ' = ' .. describe(v)
    elseif #v > 1 then
      local ids = {}
      for i, d in ipairs(v) do ids[i] = 'Node' .. (d.forwardNodeId or '') end
      lines[#lines + 1] = 'mapindex = {' .. table.concat(ids, ',') .. '}'
    end
  end
  local desc = self.data.annotations.description
  return (desc and ('desc = ' .. desc .. '\\n') or '') .. table.concat(lines, '\\l')
end

-- prev - module: module(prev)
function Node.__sub__(prev, nxt) return nxt(prev) end
