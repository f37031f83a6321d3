-- CPU buffers: allocated by Python as numpy arrays, seen here through FFI pointers.
-- A storage keeps a handle; when the handle is collected its id is queued and released on the
-- Python side at the next allocation (never from inside the collector).
local ffi = require 'ffi'

ffi.cdef [[ typedef struct { int64_t id; } luabridge_buffer_handle; ]]

local py = rawget(_G, '__luabridge_py')
local memory = {}
local pending = {}
-- The collector cannot see numpy-owned bytes, so it is run after every COLLECT_BYTES of new
-- buffers: otherwise dead tensors would keep their buffers long after they are unreachable.
-- A dead tensor frees its buffer after three cycles: LuaJIT's weak-keyed tables (object.lua)
-- keep a dead key's value alive for one more cycle, and the chain is tensor, storage, handle.
local COLLECT_BYTES = 64 * 1024 * 1024
local allocatedSinceCollect = 0
-- torch.setheaptracking(false) turns that off (torch7's name for telling the collector about
-- tensor memory); it is on by default
memory.tracking = true

-- ctypes made once: allocation runs in the interpreter (its Python call ends any trace), where
-- ffi.new / ffi.cast with a type string would parse the string on every call.
local handleType = ffi.typeof('luabridge_buffer_handle')
local uint64, voidp = ffi.typeof('uint64_t'), ffi.typeof('void *')

local function on_collect(h)
  pending[#pending + 1] = tonumber(h.id)
end

-- Addresses come as two 32-bit halves so that no bit is lost in a double; as type ct (void *).
local function address(hi, lo, ct)
  return ffi.cast(ct or voidp, ffi.cast(uint64, hi) * 4294967296ULL + lo)
end
memory.address = address

-- Reuse without Python (memory.reuse(maxBytes), which pool workers turn on: a loader allocates
-- the same sizes sample after sample, and each Python call holds the GIL the other workers
-- wait for). A released buffer that Python finds referenced by nothing else (no numpy view, no
-- other runtime: BufferRegistry.release's keep) stays registered there and waits here, by type
-- and size, for the next allocation of its size, up to maxBytes in all.
local reuseMax, reuseBytes = 0, 0
local sized = {}      -- id -> { address, type name, elements, bytes } of each buffer allocated here
local reusable = {}   -- type name -> elements -> stack of ids
local dropped = {}    -- ids kept by Python that did not fit here: released at the end of the flush

local function take(kept, n)
  local keep = {}
  for id in kept:gmatch('%d+') do keep[tonumber(id)] = true end
  local drops = #dropped
  for i = 1, n do
    local id = pending[i]
    local info = sized[id]
    if keep[id] and info and reuseBytes + info[4] <= reuseMax then
      local byType = reusable[info[2]]
      if not byType then byType = {}; reusable[info[2]] = byType end
      local stack = byType[info[3]]
      if not stack then stack = {}; byType[info[3]] = stack end
      stack[#stack + 1] = id
      reuseBytes = reuseBytes + info[4]
    else
      if keep[id] then   -- kept, but no room (or unknown here): release it for good
        drops = drops + 1
        dropped[drops] = id
      end
      sized[id] = nil
    end
  end
end

-- The batch stays queued until Python has released it: Ctrl-C (a KeyboardInterrupt raised in
-- py.release) leaves it for the next flush to send again, which Python allows.
function memory.flush()
  local n = #pending
  if n > 0 then
    local kept = py.release(table.concat(pending, ',', 1, n), reuseMax > 0)
    if reuseMax > 0 then take(kept or '', n) end
    -- ids queued meanwhile (a collection inside concat) stay; nothing below allocates until
    -- pending is replaced, so no finalizer can queue into the table being dropped
    local rest, i = {}, n + 1
    while pending[i] do
      rest[i - n] = pending[i]
      i = i + 1
    end
    pending = rest
  end
  if #dropped > 0 then   -- kept by Python, with no room here (Ctrl-C: sent again next time)
    py.release(table.concat(dropped, ','))
    dropped = {}
  end
end

-- memory.reuse(maxBytes): keeps up to maxBytes of released buffers for reuse (0: off, the
-- default; turning it off releases the ones kept).
function memory.reuse(maxBytes)
  reuseMax = maxBytes
  if maxBytes > 0 then return end
  for _, byType in pairs(reusable) do
    for _, stack in pairs(byType) do
      for _, id in ipairs(stack) do
        dropped[#dropped + 1] = id
        sized[id] = nil
      end
    end
  end
  reusable, reuseBytes = {}, 0
  memory.flush()
end

function memory.handle(id)
  return ffi.gc(handleType(id), on_collect)
end

-- Counts bytes of new buffers toward the next collection, and releases the collected ones.
-- Storages over memory that Python lends (shared numpy arrays, luabridge.torch's inputs) count
-- too: nothing is allocated for them, but each keeps its lender's memory until it is collected.
function memory.account(bytes)
  allocatedSinceCollect = allocatedSinceCollect + bytes
  if allocatedSinceCollect > COLLECT_BYTES and memory.tracking then
    allocatedSinceCollect = 0
    for _ = 1, 3 do collectgarbage() end
  end
  memory.flush()
end

-- Buffers of up to memory.smallBytes (size vectors, tensors of a few elements) are carved in
-- Lua from a slab, one Python buffer of SLAB_BYTES: a Python allocation costs about 4 us with
-- its release, a carve a fraction of one. A carve's storage holds the slab's handle and id and
-- sits at an offset into it (_baseoff), so the slab lives while any of its storages, or any
-- numpy view of them, does. Carves are handed out once and never reused: a slab is zero when
-- made, and goes back to Python whole with its last holder (so one long-lived carve keeps
-- SLAB_BYTES). 0 turns carving off.
-- numpy's own words ("Unable to allocate 7.28 TiB ...") name neither the op nor the sizes
local function outOfMemory(n, dt)
  local check = require 'torch.core.check'
  check.error(('%s: not enough memory for %.0f %s elements (%.4g bytes)'):format(
    check.userOp() or 'alloc', n, dt.name, n * dt.size))
end

local SLAB_BYTES, ALIGN = 4096, 16
memory.smallBytes = 64
local slabPtr, slabHandle, slabId, slabUsed = nil, nil, nil, SLAB_BYTES
local bytePtr = ffi.typeof('uint8_t *')

local function carve(bytes, dt)
  local size = math.max(ALIGN, math.ceil(bytes / ALIGN) * ALIGN)
  if slabUsed + size > SLAB_BYTES then
    memory.account(SLAB_BYTES)
    local id, hi, lo = py.alloc(SLAB_BYTES, 'Byte', true)
    if not id then outOfMemory(bytes / dt.size, dt) end
    slabPtr, slabHandle, slabId, slabUsed = address(hi, lo, bytePtr), memory.handle(id), id, 0
  elseif #pending > 0 then
    memory.flush()
  end
  local at = slabUsed
  slabUsed = at + size
  return ffi.cast(dt.ptr, slabPtr + at), slabHandle, slabId, at / dt.size
end

-- A zeroed buffer of n elements of type dt: returns the typed pointer, the handle, its id and
-- the buffer's element offset in the handle's memory (0 unless carved). With overwritten true
-- the caller writes every element before anything reads them (a file read), so a reused
-- buffer is not zeroed first.
function memory.alloc(n, dt, overwritten)
  local bytes = n * dt.size
  if bytes <= memory.smallBytes then return carve(bytes, dt) end
  memory.account(bytes)
  if reuseMax > 0 then
    local stack = reusable[dt.name] and reusable[dt.name][n]
    local id = stack and stack[#stack]
    if id then
      stack[#stack] = nil
      reuseBytes = reuseBytes - bytes
      local ptr = sized[id][1]
      if not overwritten then ffi.fill(ptr, bytes) end
      return ffi.cast(dt.ptr, ptr), memory.handle(id), id, 0
    end
  end
  -- no pcall: an error raised in py.alloc (Ctrl-C's KeyboardInterrupt) passes through as itself
  local id, hi, lo = py.alloc(n, dt.name, not overwritten)
  if not id then outOfMemory(n, dt) end
  local ptr = address(hi, lo, dt.ptr)
  if reuseMax > 0 then sized[id] = { ptr, dt.name, n, bytes } end
  return ptr, memory.handle(id), id, 0
end

-- A buffer mapped from the file at path (luabridge.memory.BufferRegistry.map_file): returns the
-- typed pointer, the handle, the id and the element count.
function memory.map(op, path, dt, shared, n)
  memory.flush()
  local id, hi, lo, count = py.map_file(path, dt.name, shared, n)
  if not id then   -- hi: the Python exception's own line ("FileNotFoundError: [Errno 2] ...")
    require('torch.core.check').error(('%s: cannot map file <%s>%s: %s'):format(
      op, path, shared and ' (shared)' or '', hi))
  end
  return address(hi, lo, dt.ptr), memory.handle(id), id, count
end

memory.py = py
return memory
