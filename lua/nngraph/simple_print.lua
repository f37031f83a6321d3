-- nngraph.simple_print: a gModule's graph as Graphviz text with only its real layers: nodes
-- without a module and nn.Identity nodes are left out, their inputs joined to their users.
local simple_print = {}

local function kept(node)
  return node.data.module ~= nil and torch.typename(node.data.module) ~= 'nn.Identity'
end

-- The kept nodes (with their ids in the graph) and the edges between them, through the nodes
-- left out.
local function simplify(g)
  local nodes = {}
  for _, node in ipairs(g.nodes) do
    if kept(node) then nodes[#nodes + 1] = { id = node.id, label = 'Node' .. node.id .. '\n' .. node:label() } end
  end
  local edges = {}
  for _, node in ipairs(g.nodes) do
    if kept(node) then
      local seen = {}
      local function reach(from)   -- the kept nodes reached from `from` through left-out ones
        for _, child in ipairs(from.children) do
          if not seen[child] then
            seen[child] = true
            if kept(child) then edges[#edges + 1] = { node.id, child.id } else reach(child) end
          end
        end
      end
      reach(node)
    end
  end
  return nodes, edges
end

function simple_print.todot(g, title)
  return graph._dotText(title, simplify(g))
end

-- Writes fname.dot and renders fname.svg (Graphviz needed for the svg).
function simple_print.dot(g, title, fname)
  if type(fname) ~= 'string' then
    error('nngraph.simple_print.dot(g, title, fname): fname (a path without extension) is needed', 2)
  end
  graph._writeDotAndSvg(simple_print.todot(g, title), fname)
end

return simple_print
