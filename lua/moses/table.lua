-- moses's table functions: they take any table (array and hash parts) and call iterators as
-- f(key, value, ...), as moses 1.x does (rnn, dpnn and nn's tests are written for 1.x).
return function(M)
  function M.clear(t)
    for k in pairs(t) do t[k] = nil end
    return t
  end

  function M.each(t, f, ...)
    for k, v in pairs(t) do f(k, v, ...) end
  end

  -- integer keys only, lowest to highest (the array may be sparse)
  function M.eachi(t, f, ...)
    local keys = {}
    for k in pairs(t) do
      if type(k) == 'number' and k % 1 == 0 then keys[#keys + 1] = k end
    end
    table.sort(keys)
    for _, k in ipairs(keys) do f(k, t[k], ...) end
  end

  function M.at(t, ...)
    local values = {}
    for i = 1, select('#', ...) do values[#values + 1] = t[(select(i, ...))] end
    return values
  end

  function M.count(t, value)
    if value == nil then return M.size(t) end
    local n = 0
    for _, v in pairs(t) do if M.isEqual(v, value) then n = n + 1 end end
    return n
  end

  function M.countf(t, f, ...)
    local n = 0
    for k, v in pairs(t) do if f(k, v, ...) then n = n + 1 end end
    return n
  end

  -- An iterator over t's pairs, n times over (n defaults to 1; n <= 0 yields nothing).
  function M.cycle(t, n)
    n = n or 1
    if n <= 0 or next(t) == nil then return function() end end
    local k, round = nil, 1
    return function()
      local v
      k, v = next(t, k)
      if k == nil then
        round = round + 1
        if round > n then return nil end
        k, v = next(t)
      end
      return k, v
    end
  end

  -- f(k, v, ...) returning one value maps v; returning two maps the pair to a new key and value.
  function M.map(t, f, ...)
    local mapped = {}
    for k, v in pairs(t) do
      local k2, v2 = f(k, v, ...)
      if v2 ~= nil then mapped[k2] = v2 else mapped[k] = k2 end
    end
    return mapped
  end

  -- The states of folding f over values[from..to] (by step) from state, or from the first
  -- value when state is nil (values in array order for arrays).
  local function foldStates(values, f, state, from, to, step)
    local states, i = {}, from
    if state == nil then state, i = values[from], from + step; states[1] = state end
    for j = i, to, step do
      state = f(state, values[j])
      states[#states + 1] = state
    end
    return states
  end

  local function fold(t, f, state, leftToRight)
    local values = M.values(t)
    local from, to = 1, #values
    if not leftToRight then from, to = to, from end
    local states = foldStates(values, f, state, from, to, leftToRight and 1 or -1)
    if #states == 0 then return state end
    return states[#states]
  end

  function M.reduce(t, f, state) return fold(t, f, state, true) end

  function M.reduceby(t, f, state, pred, ...)
    return M.reduce(M.select(t, pred, ...), f, state)
  end

  function M.reduceRight(t, f, state) return fold(t, f, state, false) end

  function M.mapReduce(t, f, state)
    local values = M.values(t)
    return foldStates(values, f, state, 1, #values, 1)
  end

  function M.mapReduceRight(t, f, state)
    local values = M.values(t)
    return foldStates(values, f, state, #values, 1, -1)
  end

  -- The key of the first value equal to value (by isEqual), or passing value(v) when a function.
  function M.detect(t, value)
    local test = type(value) == 'function' and value or M.isEqual
    for k, v in pairs(t) do if test(v, value) then return k end end
  end

  function M.include(t, value)
    return M.detect(t, value) ~= nil
  end

  local function hasProps(v, props)
    if type(v) ~= 'table' then return false end
    for k, p in pairs(props) do if v[k] ~= p then return false end end
    return true
  end

  function M.where(t, props)
    local found = {}
    for _, v in pairs(t) do if hasProps(v, props) then found[#found + 1] = v end end
    return #found > 0 and found or nil
  end

  function M.findWhere(t, props)
    for _, v in pairs(t) do if hasProps(v, props) then return v end end
  end

  function M.select(t, f, ...)
    local kept = {}
    for k, v in pairs(t) do if f(k, v, ...) then kept[#kept + 1] = v end end
    return kept
  end

  function M.reject(t, f, ...)
    local kept = {}
    for k, v in pairs(t) do if not f(k, v, ...) then kept[#kept + 1] = v end end
    return kept
  end

  function M.all(t, f, ...)
    for k, v in pairs(t) do if not f(k, v, ...) then return false end end
    return true
  end

  -- method(v, ...) for each value; a string names each value's own method.
  function M.invoke(t, method, ...)
    local results = {}
    for k, v in pairs(t) do
      if type(method) == 'function' then
        results[k] = method(v, ...)
      elseif type(v) == 'table' or type(v) == 'string' or type(v) == 'userdata' then
        local m = v[method]
        if m ~= nil then results[k] = m(v, ...) end
      end
    end
    return results
  end

  function M.pluck(t, key)
    local values = {}
    for _, v in pairs(t) do
      if v[key] ~= nil then values[#values + 1] = v[key] end
    end
    return values
  end

  local function extreme(t, better, transform, ...)
    transform = transform or M.identity
    local best
    for _, v in pairs(t) do
      local tv = transform(v, ...)
      if best == nil or better(tv, best) then best = tv end
    end
    return best
  end

  function M.max(t, transform, ...)
    return extreme(t, function(a, b) return a > b end, transform, ...)
  end

  function M.min(t, transform, ...)
    return extreme(t, function(a, b) return a < b end, transform, ...)
  end

  -- A shuffled copy (Fisher-Yates); seed, when given, seeds math.random first.
  function M.shuffle(t, seed)
    if seed then math.randomseed(seed) end
    local shuffled = {}
    for _, v in pairs(t) do
      local j = math.random(#shuffled + 1)
      shuffled[#shuffled + 1] = shuffled[j]
      shuffled[j] = v
    end
    return shuffled
  end

  -- Both tables hold the same values (at any keys).
  function M.same(a, b)
    for _, v in pairs(a) do if not M.include(b, v) then return false end end
    for _, v in pairs(b) do if not M.include(a, v) then return false end end
    return true
  end

  function M.sort(t, comp)
    table.sort(t, comp)
    return t
  end

  -- Sorted by transform(v) (a function, or the name of a field of each value).
  function M.sortBy(t, transform, comp)
    local key = transform or M.identity
    if type(transform) == 'string' then key = function(v) return v[transform] end end
    comp = comp or function(a, b) return a < b end
    table.sort(t, function(a, b) return comp(key(a), key(b)) end)
    return t
  end

  function M.groupBy(t, iter, ...)
    local groups = {}
    for k, v in pairs(t) do
      local g = iter(k, v, ...)
      if g ~= nil then
        groups[g] = groups[g] or {}
        groups[g][#groups[g] + 1] = v
      end
    end
    return groups
  end

  function M.countBy(t, iter, ...)
    local counts = {}
    for k, v in pairs(t) do
      local g = iter(k, v, ...)
      if g ~= nil then counts[g] = (counts[g] or 0) + 1 end
    end
    return counts
  end

  -- The number of entries of a table given first, else the number of non-nil arguments.
  function M.size(...)
    local first = ...
    local n = 0
    if type(first) == 'table' then
      for _ in pairs(first) do n = n + 1 end
    else
      for i = 1, select('#', ...) do if select(i, ...) ~= nil then n = n + 1 end end
    end
    return n
  end

  function M.containsKeys(t, other)
    for k in pairs(other) do if t[k] == nil then return false end end
    return true
  end

  function M.sameKeys(a, b)
    return M.containsKeys(a, b) and M.containsKeys(b, a)
  end
end
