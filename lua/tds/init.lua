-- tds: torch7's data structures (torch/tds) -- tds.Hash, tds.Vec and tds.AtomicCounter, saved
-- and loaded by torch.save / torch.load in torch7's layout. In torch7 they live in C memory;
-- here they are userdata over Lua tables, with the same operators and methods.
local tds = {}
package.loaded.tds = tds

require 'tds.pairs'
tds.Hash = require 'tds.Hash'
tds.Vec = require 'tds.Vec'
tds.AtomicCounter = require 'tds.AtomicCounter'
tds.hash, tds.vec, tds.atomic_counter = tds.Hash, tds.Vec, tds.AtomicCounter

return tds
