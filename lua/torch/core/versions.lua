-- Write versions and escape marks of CPU buffers, so that a whole-model plan may keep what it
-- derived from a tensor's elements (a convolution's weights reordered into oneDNN's blocked
-- layout) for as long as nothing wrote them.
--
-- Each buffer's owner (the root storage: a storage viewing another has _base, the one owning the
-- buffer) holds
--   _ver: bumped by every write Lua can see: every op of the op table writing a tensor or
--         storage argument (backend/init.lua wraps each op; its `writes` table names the
--         arguments an op writes, every tensor and storage argument by default), and every write
--         of the torch surface that reaches the memory itself (Storage, Tensor's element
--         assignment, File reads, MemoryFile, the RNG state, ...);
--   _esc: true once the memory may be written where Lua cannot see it: a raw pointer handed to
--         user code (t:data(), storage:data(), torch.data, cdata, the op `ptr`), memory lent by
--         Python (luabridge.from_numpy, the torch bridge's shared parameters) or by another Lua
--         state (threads), a file mapping. Never cleared: a buffer stays escaped until it goes.
-- and each buffer id a numpy / DLPack view was made of on the Python side
-- (luabridge/core/memory.py's views, also what `threads` and the torch bridge share) is marked
-- viewed: escaped while any such view lives. The plan asks Python (buffer_viewed: does anything
-- but the registry hold the buffer's array?) and, once the views are gone, clears the mark and
-- bumps the version (they may have written it).
-- A plan caching from a buffer keeps (root, _ver, offset, sizes, strides) and never caches from
-- an escaped one. A bump where nothing was written costs at most a cache miss; a missed bump is
-- a stale cache, so every writer bumps.
local object = require 'torch.core.object'

local fields = object.fields
local versions = {}

-- Whether evaluation plans keep their blocked weights while the weights' buffers are unchanged
-- (LUABRIDGE_PLAN_WEIGHT_CACHE=0 turns it off; tests compare both).
versions.cacheWeights = os.getenv('LUABRIDGE_PLAN_WEIGHT_CACHE') ~= '0'
-- Counters for tests and profiles: weight reorders the evaluation plans ran and skipped.
versions.reorders, versions.hits = 0, 0

-- The fields table of the storage owning x's buffer (x a tensor or a storage), or nil (an empty
-- tensor, anything else). Loop-free: it runs on every op.
local function owner(x)
  local f = fields[x]
  if f == nil then return nil end
  local st = f._st
  if st == nil then
    if f._n == nil then return nil end       -- not a storage
  elseif st then
    f = fields[st]
  else
    return nil                               -- a tensor without a storage
  end
  local base = f._base
  if base then return fields[base] end
  return f
end

-- Versions move only once a plan has kept something derived from a buffer (versions.watch(),
-- called before a plan first records a version): until then no cache exists that a write could
-- leave stale, and a program without one (an LSTM's ~1500 small ops a step, each bump a few
-- lookups in the large weak-keyed field table) pays one test per bump.
local watching = false
function versions.watch() watching = true end

-- x (a tensor or storage; anything else is ignored) was, or is about to be, written.
local function bump(x)
  if not watching then return end
  local f = owner(x)
  if f then f._ver = (f._ver or 0) + 1 end
end
versions.bump = bump

local viewedIds = {}   -- buffer id -> true: a Python view of it was made
local py = require('torch.core.memory').py

-- s (a storage) is viewed from Python: its buffer escapes while the view lives.
function versions.viewed(s)
  local f = fields[s]
  if f and f._id then viewedIds[f._id] = true end
  bump(s)
end

-- Whether no Python view of buffer id lives (root: the storage owning it, bumped when the last
-- views went: they may have written it).
function versions.unviewed(id, root)
  if not viewedIds[id] then return true end
  if py.buffer_viewed(id) then return false end
  viewedIds[id] = nil
  bump(root)
  return true
end

-- Whether x's buffer escaped, or was viewed from Python (the views may be gone: unviewed asks).
function versions.marked(x)
  local f = owner(x)
  if not f then return false end
  if f._esc then return true end
  local st = fields[x]._st
  if st == nil then st = x end
  return viewedIds[fields[st]._id] == true
end

-- x's memory may now be written behind Lua's back.
function versions.escape(x)
  local f = owner(x)
  if f then f._esc = true end
  return x
end

-- The root storage of x's buffer (x a tensor or storage), or nil.
function versions.root(x)
  local f = fields[x]
  if f == nil then return nil end
  local st = f._st
  if st == nil then st = x elseif not st then return nil end
  return fields[st]._base or st
end

-- x's buffer: its version and whether it escaped.
function versions.state(x)
  local f = owner(x)
  if not f then return nil, nil end
  return f._ver or 0, f._esc == true
end

-- Every tensor and storage among the values of table t (one level), bumped: for ops handed a
-- module or a list of parameters whose tensors they write. Raw iteration (next, not pairs): a
-- module a plan left lazy answers `pairs` by rerunning the forward layer by layer (plan_conv.lua),
-- which a training plan's every backward would then pay (ResNet-18 at batch 8: ~300 ms a step);
-- the fields it lacks hold no tensor to bump.
function versions.bumpFields(t)
  if not watching then return end
  if type(t) ~= 'table' then return bump(t) end
  for _, v in next, t do bump(v) end
end

return versions
