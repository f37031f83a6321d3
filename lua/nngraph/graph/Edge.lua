-- graph.Edge: a directed edge from one node to another (with an optional weight).
local Edge = torch.class('graph.Edge')

function Edge:__init(from, to, weight)
  self.from, self.to, self.weight = from, to, weight
end
