-- nngraph.Node: a graph node whose data holds a module (or a split/select marker), the nodes it
-- takes its inputs from (children, in order: data.mapindex maps an input's data to its position)
-- and annotations (name, description, the source line that made it).
local utils = require 'nngraph.utils'

local Node, parent = torch.class('nngraph.Node', 'graph.Node')

function Node:__init(data)
  parent.__init(self, data)
  data.annotations = data.annotations or {}
  data.mapindex = data.mapindex or {}
  data.reverseMap = data.reverseMap or {}
  if not data.annotations._debugLabel then
    local info = utils.callerInfo()
    if info then
      data.annotations._debugLabel = ('[%s]:%d_%s'):format(info.short_src, info.currentline, info.name or '')
    end
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

-- n nodes selecting the elements 1..n of the table this node outputs.
function Node:split(noutput)
  if noutput == 1 then return nngraph.JustElement()(self) end
  local label = self.data.annotations._debugLabel or ''
  local splitter = nngraph.Node({ nSplitOutputs = noutput, annotations = { _debugLabel = label .. ' split' } })
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

-- A description: the annotated description, the module and the sizes of the last input seen.
function Node:label()
  local function describe(x)
    if torch.isTensor(x) then return torch.typename(x) .. '[' .. table.concat(x:size():totable(), 'x') .. ']' end
    if utils.istable(x) then
      local parts = {}
      for i, v in ipairs(x) do parts[i] = describe(v) end
      return '{' .. table.concat(parts, ',') .. '}'
    end
    return tostring(x)
  end
  local parts = {}
  local desc = self.data.annotations.description
  if desc then parts[#parts + 1] = 'desc = ' .. desc end
  if self.data.module then parts[#parts + 1] = 'module = ' .. tostring(self.data.module) end
  if self.data.input then parts[#parts + 1] = 'input = ' .. describe(self.data.input) end
  if self.data.selectindex then parts[#parts + 1] = 'selectindex = ' .. self.data.selectindex end
  return table.concat(parts, '; ')
end

-- prev - module: module(prev)
function Node.__sub__(prev, nxt) return nxt(prev) end
