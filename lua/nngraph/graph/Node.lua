-- graph.Node: a data table and an ordered list of children (the list also maps each child to
-- its position). The fields (data, id, children, visited, marked) are torch7's, so that graphs
-- inside torch7's .t7 files work unchanged.
local Node = torch.class('graph.Node')

function Node:__init(data)
  self.data = data
  self.id = 0
  self.children = {}
  self.visited, self.marked = false, false
end

-- Adds a child once (a second add of the same node is ignored); a plain list adds each node.
function Node:add(child)
  if type(child) == 'table' and not torch.typename(child) then
    for _, c in ipairs(child) do self:add(c) end
  elseif not self.children[child] then
    self.children[#self.children + 1] = child
    self.children[child] = #self.children
  end
end

-- A node of the same class over the same data, without edges (for clones and reversed graphs).
function Node:_twin()
  local twin = setmetatable({}, getmetatable(self))
  twin:__init(self.data)
  return twin
end

function Node:label() return tostring(self.data) end

-- Walks the nodes reachable from self not yet `visited`: pre(node) before its children,
-- post(node) after them. The callbacks set the flags (as torch7's graph does).
function Node:visit(pre, post)
  if self.visited then return end
  if pre then pre(self) end
  for _, child in ipairs(self.children) do child:visit(pre, post) end
  if post then post(self) end
end

-- Depth first: fn on every reachable node, children before parents; returns the nodes in that
-- order with their `visited` flags left set.
function Node:dfs_dirty(fn)
  local order = {}
  self:visit(function(node) node.visited = true end,
             function(node) fn(node); order[#order + 1] = node end)
  return order
end

function Node:dfs(fn)
  for _, node in ipairs(self:dfs_dirty(fn)) do node.visited = false end
end

-- Breadth first from self: fn on every reachable node, level by level, children in order;
-- returns the nodes with their `marked` flags left set.
function Node:bfs_dirty(fn)
  local queue, head = { self }, 1
  self.marked = true
  while queue[head] do
    local node = queue[head]
    head = head + 1
    fn(node)
    for _, child in ipairs(node.children) do
      if not child.marked then
        child.marked = true
        queue[#queue + 1] = child
      end
    end
  end
  return queue
end

function Node:bfs(fn)
  for _, node in ipairs(self:bfs_dirty(fn)) do node.marked = false end
end

-- The graph of every edge reachable from self (nodes numbered in breadth-first order).
function Node:graph()
  local g = graph.Graph()
  self:bfs(function(node)
    for _, child in ipairs(node.children) do g:add(graph.Edge(node, child)) end
  end)
  return g
end

-- Whether a path from self comes back to a node still open on the path.
function Node:hasCycle()
  local open, done, found = {}, {}, false
  local function walk(node)
    if found or done[node] then return end
    if open[node] then found = true return end
    open[node] = true
    for _, child in ipairs(node.children) do walk(child) end
    open[node], done[node] = nil, true
  end
  walk(self)
  return found
end
