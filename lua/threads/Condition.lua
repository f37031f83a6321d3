-- threads.Condition([id]): a condition variable shared by every thread (a pthread condition,
-- threads/handles.lua): wait(mutex) releases the locked mutex until a signal, then retakes it.
local handles = require 'threads.handles'
local C = handles.C

local Condition = {}

function Condition:wait(mutex)
  if torch.typename(mutex) ~= 'threads.Mutex' then
    error('threads.Condition:wait: a threads.Mutex (locked by this thread) expected', 2)
  end
  C.luabridge_cond_wait(self._h.ptr, mutex._h.ptr)
end

function Condition:signal() C.luabridge_cond_signal(self._h.ptr) end
function Condition:broadcast() C.luabridge_cond_broadcast(self._h.ptr) end

return handles.class('threads.Condition', Condition, function(ptr) C.luabridge_cond_init(ptr, nil) end)
