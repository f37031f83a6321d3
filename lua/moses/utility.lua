-- moses's utility functions: functions that make functions.
return function(M)
  function M.noop() end

  function M.identity(value) return value end

  function M.constant(value) return function() return value end end

  -- Results cached by hash(first argument) (the argument itself by default).
  function M.memoize(f, hash)
    local cache = setmetatable({}, { __mode = 'kv' })
    hash = hash or M.identity
    return function(...)
      local key = hash(...)
      local hit = cache[key]
      if hit == nil then hit = f(...); cache[key] = hit end
      return hit
    end
  end

  -- f runs on the first `count` calls; later calls return what the count-th call returned.
  function M.before(f, count)
    local calls, last = 0, nil
    return function(...)
      calls = calls + 1
      if calls <= count then last = f(...) end
      return last
    end
  end

  function M.once(f) return M.before(f, 1) end

  -- f runs from the count-th call on.
  function M.after(f, count)
    local calls = 0
    return function(...)
      calls = calls + 1
      if calls >= count then return f(...) end
    end
  end

  -- compose(f, g, h)(...) is f(g(h(...))).
  function M.compose(...)
    local fs = { ... }
    return function(...)
      local results = { ... }
      for i = #fs, 1, -1 do results = { fs[i](unpack(results)) } end
      return unpack(results)
    end
  end

  function M.pipe(value, ...)
    return M.compose(...)(value)
  end

  function M.complement(f)
    return function(...) return not f(...) end
  end

  function M.juxtapose(value, ...)
    local results = {}
    for i = 1, select('#', ...) do results[i] = (select(i, ...))(value) end
    return unpack(results)
  end

  function M.wrap(f, wrapper)
    return function(...) return wrapper(f, ...) end
  end

  function M.times(n, iter, ...)
    local results = {}
    for i = 1, n do results[i] = iter(i, ...) end
    return results
  end

  function M.bind(f, v)
    return function(...) return f(v, ...) end
  end

  function M.bind2(f, v)
    return function(a, ...) return f(a, v, ...) end
  end

  function M.bindn(f, ...)
    local bound = { n = select('#', ...), ... }
    return function(...)
      local args = { unpack(bound, 1, bound.n) }
      for i = 1, select('#', ...) do args[bound.n + i] = select(i, ...) end
      return f(unpack(args, 1, bound.n + select('#', ...)))
    end
  end

  function M.bindAll(obj, ...)
    for i = 1, select('#', ...) do
      local name = select(i, ...)
      local method = obj[name]
      if method then obj[name] = M.bind(method, obj) end
    end
    return obj
  end

  -- A new integer id each call; template formats it (a format string, or a function).
  local lastId = 0
  function M.uniqueId(template, ...)
    lastId = lastId + 1
    if type(template) == 'string' then return template:format(lastId) end
    if type(template) == 'function' then return template(lastId, ...) end
    return lastId
  end

  -- Yields f(x), f(f(x)), ... (x itself is not yielded).
  function M.iterator(f, x)
    return function()
      x = f(x)
      return x
    end
  end

  -- The values of a generic for iterator, in an array.
  function M.array(...)
    local values = {}
    for v in ... do values[#values + 1] = v end
    return values
  end

  function M.flip(f)
    return function(...) return f(unpack(M.reverse({ ... }))) end
  end

  function M.over(...)
    local fs = { ... }
    return function(...)
      local results = {}
      for i, f in ipairs(fs) do results[i] = f(...) end
      return results
    end
  end

  -- A function true when every predicate (every) or some predicate (not every) passes.
  local function overTest(every, ...)
    local fs = { ... }
    return function(...)
      for _, f in ipairs(fs) do
        if (not f(...)) == every then return not every end
      end
      return every
    end
  end

  function M.overEvery(...) return overTest(true, ...) end

  function M.overSome(...) return overTest(false, ...) end

  -- f with its i-th argument passed through the i-th transform (the rest unchanged).
  function M.overArgs(f, ...)
    local transforms = { ... }
    return function(...)
      local args = { n = select('#', ...), ... }
      for i, tr in ipairs(transforms) do
        if i <= args.n then args[i] = tr(args[i]) end
      end
      return f(unpack(args, 1, args.n))
    end
  end

  -- Arguments given now, with '_' marking those left to the call; call arguments fill the
  -- placeholders in order, then go after (partial) or before (partialRight) the given ones.
  local function fillPlaceholders(given, call)
    local args, used = {}, 0
    for i = 1, given.n do
      if given[i] == '_' then used = used + 1; args[i] = call[used] else args[i] = given[i] end
    end
    return args, used
  end

  function M.partial(f, ...)
    local given = { n = select('#', ...), ... }
    return function(...)
      local call = { n = select('#', ...), ... }
      local args, used = fillPlaceholders(given, call)
      local n = given.n
      for i = used + 1, call.n do n = n + 1; args[n] = call[i] end
      return f(unpack(args, 1, n))
    end
  end

  function M.partialRight(f, ...)
    local given = { n = select('#', ...), ... }
    return function(...)
      local call = { n = select('#', ...), ... }
      local filled, used = fillPlaceholders(given, call)
      local args = {}
      for i = used + 1, call.n do args[#args + 1] = call[i] end
      local n = #args
      for i = 1, given.n do args[n + i] = filled[i] end
      return f(unpack(args, 1, n + given.n))
    end
  end

  function M.curry(f, nArgs)
    nArgs = nArgs or 2
    local function collect(args)
      return function(v)
        local more = { unpack(args, 1, #args) }
        more[#more + 1] = v
        if #more >= nArgs then return f(unpack(more, 1, nArgs)) end
        return collect(more)
      end
    end
    return collect({})
  end

  -- The seconds f(...) took (os.clock), then its results.
  function M.time(f, ...)
    local start = os.clock()
    local results = { f(...) }
    return os.clock() - start, unpack(results)
  end
end
