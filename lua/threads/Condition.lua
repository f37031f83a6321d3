-- threads.Condition([id]): a condition variable. With every job on one thread nothing could
-- signal a waiter, so wait() is an error; signal() and broadcast() do nothing.
local Condition = {}
Condition.__index = Condition

function Condition:wait()
  error(('threads.Condition %d: wait would never return (jobs run on one thread here)'):format(self._id), 2)
end

function Condition:signal() end
function Condition:broadcast() end

return require('threads.handles')('Condition', Condition)
