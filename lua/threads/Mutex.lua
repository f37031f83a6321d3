-- threads.Mutex([id]): a mutex shared by every thread (a pthread mutex, threads/handles.lua);
-- Mutex(m:id()) in any runtime is the same mutex.
local handles = require 'threads.handles'
local C = handles.C

local Mutex = {}

function Mutex:lock() C.luabridge_mutex_lock(self._h.ptr) end
function Mutex:unlock() C.luabridge_mutex_unlock(self._h.ptr) end

return handles.class('threads.Mutex', Mutex, function(ptr) C.luabridge_mutex_init(ptr, nil) end)
