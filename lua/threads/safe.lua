-- threads.safe(func[, mutex]): func wrapped in mutex:lock() / mutex:unlock() (a new mutex by
-- default). The wrapper may be sent to workers: it holds the mutex, which travels as its id.
-- The mutex is unlocked when func raises too.
return function(func, mutex)
  local Mutex = require 'threads.Mutex'
  if type(func) ~= 'function' or (mutex ~= nil and torch.typename(mutex) ~= 'threads.Mutex') then
    error('threads.safe: function, [mutex] expected', 2)
  end
  mutex = mutex or Mutex()
  return function(...)
    mutex:lock()
    local results = { pcall(func, ...) }
    mutex:unlock()
    if not results[1] then error(results[2], 0) end
    return unpack(results, 2, table.maxn(results))
  end
end
