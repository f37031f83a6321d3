-- The part of torch7's `graph` package that nngraph uses: nodes holding a data table and a list
-- of children, graphs of edges between them, reversal, roots and topological order. The fields
-- are torch7's, so that graphs in torch7's .t7 files work: node.children and graph.nodes /
-- graph.edges are lists that also map each of their elements to its position.
local Node = torch.class('graph.Node')

function Node:__init(data)
  self.data = data
  self.id = 0
  self.children = {}
  self.visited, self.marked = false, false
end

-- Adds child once (a second add of the same node is ignored).
function Node:add(child)
  if not self.children[child] then
    self.children[#self.children + 1] = child
    self.children[child] = #self.children
  end
end

-- A node of the same class over the same data, with no edges (for reversed graphs).
function Node:_twin()
  local twin = setmetatable({}, getmetatable(self))
  graph.Node.__init(twin, self.data)
  return twin
end

-- Calls fn on every node reachable from self, children before parents (post-order).
function Node:dfs(fn, seen)
  seen = seen or {}
  seen[self] = true
  for _, child in ipairs(self.children) do
    if not seen[child] then child:dfs(fn, seen) end
  end
  fn(self)
end

-- The graph of every node and edge reachable from self.
function Node:graph()
  local g = graph.Graph()
  g:addNode(self)
  self:dfs(function(node)
    for _, child in ipairs(node.children) do g:add(graph.Edge(node, child)) end
  end)
  return g
end

local Edge = torch.class('graph.Edge')
function Edge:__init(from, to) self.from, self.to = from, to end

local Graph = torch.class('graph.Graph')

function Graph:__init()
  self.nodes, self.edges = {}, {}
end

-- Nodes are numbered (node.id) in the order they join the graph.
function Graph:addNode(node)
  if not self.nodes[node] then
    self.nodes[#self.nodes + 1] = node
    self.nodes[node] = #self.nodes
    node.id = #self.nodes
  end
end

function Graph:add(edge)
  if self.edges[edge] then return end
  self.edges[#self.edges + 1] = edge
  self.edges[edge] = #self.edges
  self:addNode(edge.from)
  self:addNode(edge.to)
  edge.from:add(edge.to)
end

-- The graph with every edge turned around, over new nodes sharing the old nodes' data;
-- also returns the map from old to new nodes.
function Graph:reverse()
  local rg, twins = graph.Graph(), {}
  for _, node in ipairs(self.nodes) do
    twins[node] = node:_twin()
    rg:addNode(twins[node])
  end
  for _, e in ipairs(self.edges) do rg:add(graph.Edge(twins[e.to], twins[e.from])) end
  return rg, twins
end

-- Nodes without incoming edges, in node order.
function Graph:roots()
  local hasParent = {}
  for _, e in ipairs(self.edges) do hasParent[e.to] = true end
  local roots = {}
  for _, node in ipairs(self.nodes) do
    if not hasParent[node] then roots[#roots + 1] = node end
  end
  return roots
end

-- Nodes without outgoing edges.
function Graph:leaves()
  local leaves = {}
  for _, node in ipairs(self.nodes) do
    if #node.children == 0 then leaves[#leaves + 1] = node end
  end
  return leaves
end

-- Every node after all its parents; an error when the graph has a cycle.
function Graph:topsort()
  local order, state = {}, {}
  local function visit(node)
    if state[node] == 'done' then return end
    if state[node] == 'open' then error('graph.topsort: the graph has a cycle', 0) end
    state[node] = 'open'
    for _, child in ipairs(node.children) do visit(child) end
    state[node] = 'done'
    table.insert(order, 1, node)
  end
  local roots = self:roots()
  if #roots == 0 and #self.nodes > 0 then error('graph.topsort: the graph has a cycle', 2) end
  for i = #roots, 1, -1 do visit(roots[i]) end
  if #order ~= #self.nodes then error('graph.topsort: the graph has a cycle', 2) end
  return order
end

return graph
