-- The part of torch7's `graph` package that nngraph uses (and that its .t7 files hold): nodes,
-- edges, graphs with torch7's orders, and Graphviz output.
require 'torch'
graph = rawget(_G, 'graph') or {}
require 'nngraph.graph.Node'
require 'nngraph.graph.Edge'
require 'nngraph.graph.Graph'
require 'nngraph.graph.graphviz'
return graph
