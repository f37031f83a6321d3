-- threads.Condition([id]): a condition variable. With every job on one thread nothing could
-- signal a waiter, so wait() is an error; signal() and broadcast() do nothing.
local Condition = {}
Condition.__index = Condition

local byId, lastId = {}, 0

function Condition:wait(mutex)
  error(('threads.Condition %d: wait would never return (jobs run on one thread here)'):format(self.cid), 2)
end

function Condition:signal() end
function Condition:broadcast() end
function Condition:id() return self.cid end
function Condition:free() byId[self.cid] = nil end

return function(id)
  if id ~= nil then
    local c = byId[id]
    if not c then error(('threads.Condition: no condition with id %s'):format(tostring(id)), 2) end
    return c
  end
  lastId = lastId + 1
  local c = setmetatable({ cid = lastId }, Condition)
  byId[lastId] = c
  return c
end
