-- require 'graph': torch7's graph package, which lives with nngraph (lua/nngraph/graph/).
return require 'nngraph.graph'
