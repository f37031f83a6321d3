-- threads.Mutex([id]): a mutex; Mutex(m:id()) is the same mutex. Jobs run on one thread here,
-- so locking a locked mutex is an error (torch7 would wait for a release that never comes).
local Mutex = {}
Mutex.__index = Mutex

local byId, lastId = {}, 0

function Mutex:lock()
  if self.locked then error(('threads.Mutex %d: already locked (jobs run on one thread: it would never be unlocked)'):format(self.mid), 2) end
  self.locked = true
end

function Mutex:unlock()
  if not self.locked then error(('threads.Mutex %d: unlock of an unlocked mutex'):format(self.mid), 2) end
  self.locked = false
end

function Mutex:id() return self.mid end

function Mutex:free() byId[self.mid] = nil end

function Mutex.__tostring(self) return ('threads.Mutex(%d)'):format(self.mid) end

return function(id)
  if id ~= nil then
    local m = byId[id]
    if not m then error(('threads.Mutex: no mutex with id %s'):format(tostring(id)), 2) end
    return m
  end
  lastId = lastId + 1
  local m = setmetatable({ mid = lastId, locked = false }, Mutex)
  byId[lastId] = m
  return m
end
