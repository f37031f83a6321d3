-- threads.safe(func[, mutex]): func wrapped in mutex:lock() / mutex:unlock() (a new mutex by
-- default); the mutex is unlocked when func raises too.
return function(func, mutex)
  if type(func) ~= 'function' then error('threads.safe: function, [mutex] expected', 2) end
  mutex = mutex or require('threads.Mutex')()
  return function(...)
    mutex:lock()
    local results = { n = 0 }
    local args = { n = select('#', ...), ... }
    local ok, err = pcall(function()
      local function keep(...) results.n = select('#', ...); for i = 1, results.n do results[i] = select(i, ...) end end
      keep(func(unpack(args, 1, args.n)))
    end)
    mutex:unlock()
    if not ok then error(err, 0) end
    return unpack(results, 1, results.n)
  end
end
