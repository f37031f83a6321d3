-- threads.Mutex([id]): a mutex; Mutex(m:id()) is the same mutex. Jobs run on one thread here,
-- so locking a locked mutex is an error (torch7 would wait for a release that never comes).
local Mutex = {}
Mutex.__index = Mutex

function Mutex:lock()
  if self.locked then
    error(('threads.Mutex %d: already locked (jobs run on one thread: it would never be unlocked)'):format(self._id), 2)
  end
  self.locked = true
end

function Mutex:unlock()
  if not self.locked then error(('threads.Mutex %d: unlock of an unlocked mutex'):format(self._id), 2) end
  self.locked = false
end

function Mutex.__tostring(self) return ('threads.Mutex(%d)'):format(self._id) end

return require('threads.handles')('Mutex', Mutex)
