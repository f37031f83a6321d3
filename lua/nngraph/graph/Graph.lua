-- graph.Graph: a list of nodes and a list of edges (each list also maps its elements to their
-- positions, and node.id is the node's position), with torch7's graph algorithms. The orders
-- (node ids, roots, topsort) are torch7's, so that scripts indexing gModule.forwardnodes[i]
-- reach the same node as in torch7.
local Graph = torch.class('graph.Graph')

function Graph:__init()
  self.nodes, self.edges = {}, {}
end

local function append(list, x)
  if not list[x] then
    list[#list + 1] = x
    list[x] = #list
  end
end

-- Adds an edge (or a list of edges): the edge once, then its nodes, `from` before `to`.
function Graph:add(edge)
  if type(edge) ~= 'table' then error('graph.Graph.add: a graph.Edge or a list of them expected', 2) end
  if not torch.typename(edge) then
    for _, e in ipairs(edge) do self:add(e) end
    return
  end
  append(self.edges, edge)
  append(self.nodes, edge.from)
  append(self.nodes, edge.to)
  edge.from:add(edge.to)
  edge.from.id, edge.to.id = self.nodes[edge.from], self.nodes[edge.to]
end

-- A graph with new nodes sharing the old nodes' data, made edge by edge in edge order:
-- addEdge(copy, edge, twin) adds the copy's edge, twin(node) giving (or making) a node's copy.
-- Also returns the map from the old nodes to their copies.
local function copyEdges(self, addEdge)
  local copy, twins = graph.Graph(), {}
  local function twin(node)
    twins[node] = twins[node] or node:_twin()
    return twins[node]
  end
  for _, e in ipairs(self.edges) do addEdge(copy, e, twin) end
  return copy, twins
end

function Graph:clone()
  return (copyEdges(self, function(copy, e, twin)
    local from, to = twin(e.from), twin(e.to)
    copy:add(graph.Edge(from, to, e.weight))
  end))
end

-- The graph with every edge turned around (new nodes sharing the data); also returns the map
-- from the old nodes to the new ones.
function Graph:reverse()
  return copyEdges(self, function(copy, e, twin)
    local from, to = twin(e.from), twin(e.to)
    copy:add(graph.Edge(to, from, e.weight))
  end)
end

-- Nodes of `ends` ('from' or 'to') of some edge that are never at the other end, in node order.
local function endpoints(self, keep, drop)
  local found = {}
  for _, e in ipairs(self.edges) do found[e[keep]] = true end
  for _, e in ipairs(self.edges) do found[e[drop]] = nil end
  local list = {}
  for node in pairs(found) do list[#list + 1] = node end
  table.sort(list, function(a, b) return self.nodes[a] < self.nodes[b] end)
  return list
end

-- Nodes without incoming edges / without outgoing edges.
function Graph:roots() return endpoints(self, 'from', 'to') end
function Graph:leaves() return endpoints(self, 'to', 'from') end

function Graph:hasCycle()
  local roots = self:roots()
  if #roots == 0 then return #self.edges > 0 end
  for _, root in ipairs(roots) do
    if root:hasCycle() then return true end
  end
  return false
end

-- Every node after the nodes it has edges from: the post-order of a depth-first walk of the
-- reversed graph from its roots. Also returns the reversed graph and its roots.
function Graph:topsort()
  local rg, twins = self:reverse()
  local original = {}
  for old, new in pairs(twins) do original[new] = old end
  local roots = rg:roots()
  if #roots == 0 then error('graph.topsort: the graph has cycles', 2) end
  local start = roots[1]
  if #roots > 1 then
    start = graph.Node('dummy_root')   -- not in `original`: left out of the order
    for _, root in ipairs(roots) do start:add(root) end
  end
  local order = {}
  start:dfs(function(node) order[#order + 1] = original[node] end)
  if #order ~= #self.nodes then error('graph.topsort: the graph has cycles', 2) end
  return order, rg, roots
end

-- The dot text of the graph: each node named (graphNodeName, or Node<id>) over its label(),
-- with its graphNodeAttributes when its class has them.
function Graph:todot(title)
  local nodes, edges = {}, {}
  for i, node in ipairs(self.nodes) do
    local name = node.graphNodeName and node:graphNodeName() or ('Node' .. node.id)
    nodes[i] = { id = node.id, label = name .. '\n' .. node:label(),
                 attributes = node.graphNodeAttributes and node:graphNodeAttributes() }
  end
  for i, e in ipairs(self.edges) do edges[i] = { e.from.id, e.to.id } end
  return graph._dotText(title, nodes, edges)
end
