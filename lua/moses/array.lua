-- moses's array functions: they take sequences (1..#array) and return new arrays unless they say
-- they change the one given.
return function(M)
  -- n random values (one value when n is 1, the default), from a shuffled copy.
  function M.sample(array, n, seed)
    n = n or 1
    if n < 1 then return end
    if n == 1 then
      if seed then math.randomseed(seed) end
      return array[math.random(#array)]
    end
    return M.slice(M.shuffle(array, seed), 1, n)
  end

  function M.sampleProb(array, prob, seed)
    if seed then math.randomseed(seed) end
    local kept = {}
    for _, v in ipairs(array) do
      if math.random() < prob then kept[#kept + 1] = v end
    end
    return kept
  end

  function M.toArray(...) return { ... } end

  function M.find(array, value, from)
    for i = from or 1, #array do
      if M.isEqual(array[i], value) then return i end
    end
  end

  function M.reverse(array)
    local reversed, n = {}, #array
    for i = n, 1, -1 do reversed[n - i + 1] = array[i] end
    return reversed
  end

  -- Sets array[i..j] to value (in place); j past the end lengthens the array.
  function M.fill(array, value, i, j)
    j = j or #array
    for k = i or 1, j do array[k] = value end
    return array
  end

  function M.selectWhile(array, f, ...)
    local kept = {}
    for i, v in ipairs(array) do
      if not f(i, v, ...) then break end
      kept[#kept + 1] = v
    end
    return kept
  end

  function M.dropWhile(array, f, ...)
    local start = #array + 1
    for i, v in ipairs(array) do
      if not f(i, v, ...) then start = i; break end
    end
    return M.slice(array, start)
  end

  -- Where value would go to keep the (sorted, or sorted first when sort is true) array in order.
  function M.sortedIndex(array, value, comp, sort)
    comp = comp or function(a, b) return a < b end
    if sort then table.sort(array, comp) end
    for i = 1, #array do
      if not comp(array[i], value) then return i end
    end
    return #array + 1
  end

  function M.indexOf(array, value)
    for i = 1, #array do if array[i] == value then return i end end
  end

  function M.lastIndexOf(array, value)
    for i = #array, 1, -1 do if array[i] == value then return i end end
  end

  function M.findIndex(array, predicate, ...)
    for i = 1, #array do if predicate(i, array[i], ...) then return i end end
  end

  function M.findLastIndex(array, predicate, ...)
    for i = #array, 1, -1 do if predicate(i, array[i], ...) then return i end end
  end

  -- Each value in turn goes to the front (the last one ends first).
  function M.addTop(array, ...)
    for i = 1, select('#', ...) do table.insert(array, 1, (select(i, ...))) end
    return array
  end

  function M.push(array, ...)
    for i = 1, select('#', ...) do array[#array + 1] = select(i, ...) end
    return array
  end

  -- Removes and returns the first n values (pop) or the last n (unshift), in removal order.
  function M.pop(array, n)
    n = math.min(n or 1, #array)
    local removed = {}
    for i = 1, n do removed[i] = table.remove(array, 1) end
    return unpack(removed, 1, n)
  end

  function M.unshift(array, n)
    n = math.min(n or 1, #array)
    local removed = {}
    for i = 1, n do removed[i] = table.remove(array) end
    return unpack(removed, 1, n)
  end

  function M.pull(array, ...)
    local drop = { ... }
    for i = #array, 1, -1 do
      for _, d in ipairs(drop) do
        if M.isEqual(array[i], d) then table.remove(array, i); break end
      end
    end
    return array
  end

  -- Removes array[start..finish] in place (bounds clamped; nothing when finish < start).
  function M.removeRange(array, start, finish)
    start = math.max(start or 1, 1)
    finish = math.min(finish or #array, #array)
    if finish < start then return array end
    for _ = start, finish do table.remove(array, start) end
    return array
  end

  -- Runs of consecutive values for which f(i, v, ...) returns the same value.
  function M.chunk(array, f, ...)
    if not M.isArray(array) then return array end
    local chunks, last = {}, nil
    for i, v in ipairs(array) do
      local key = f(i, v, ...)
      if i == 1 or key ~= last then chunks[#chunks + 1] = {} end
      local c = chunks[#chunks]
      c[#c + 1] = v
      last = key
    end
    return chunks
  end

  function M.slice(array, start, finish)
    local sliced = {}
    for i = math.max(start or 1, 1), math.min(finish or #array, #array) do sliced[#sliced + 1] = array[i] end
    return sliced
  end

  function M.first(array, n)
    return M.slice(array, 1, n or 1)
  end

  function M.initial(array, n)
    n = n or 1
    if n < 0 then return nil end
    return M.slice(array, 1, #array - n)
  end

  -- The last n values; without n, all but the first; nil when n <= 0.
  function M.last(array, n)
    if n and n <= 0 then return nil end
    return M.slice(array, n and #array - n + 1 or 2)
  end

  function M.rest(array, index)
    return M.slice(array, index or 1)
  end

  function M.nth(array, index) return array[index] end

  -- The truthy values among array[1..maxn] (holes and false dropped).
  function M.compact(array)
    local kept = {}
    for i = 1, table.maxn(array) do
      if array[i] then kept[#kept + 1] = array[i] end
    end
    return kept
  end

  function M.flatten(array, shallow)
    local flat = {}
    for _, v in ipairs(array) do
      if type(v) == 'table' and getmetatable(v) == nil then
        local inner = shallow and v or M.flatten(v)
        for _, w in ipairs(inner) do flat[#flat + 1] = w end
      else
        flat[#flat + 1] = v
      end
    end
    return flat
  end

  function M.difference(array, array2)
    if not array2 then return M.clone(array) end
    return M.select(array, function(_, v) return not M.include(array2, v) end)
  end

  function M.union(...)
    return M.unique(M.flatten({ ... }))
  end

  function M.intersection(array, ...)
    local others = { ... }
    local common = {}
    for _, v in ipairs(array) do
      local everywhere = true
      for _, other in ipairs(others) do
        if not M.include(other, v) then everywhere = false; break end
      end
      if everywhere and not M.include(common, v) then common[#common + 1] = v end
    end
    return common
  end

  function M.symmetricDifference(array, array2)
    return M.difference(M.union(array, array2), M.intersection(array, array2))
  end

  function M.unique(array)
    local kept = {}
    for _, v in ipairs(array) do
      if not M.include(kept, v) then kept[#kept + 1] = v end
    end
    return kept
  end

  function M.isunique(array)
    return #M.unique(array) == #array
  end

  -- {{a[1], b[1], ...}, {a[2], b[2], ...}, ...} up to the longest array.
  function M.zip(...)
    local arrays, n = { ... }, 0
    for _, a in ipairs(arrays) do n = math.max(n, #a) end
    local zipped = {}
    for i = 1, n do
      zipped[i] = {}
      for _, a in ipairs(arrays) do zipped[i][#zipped[i] + 1] = a[i] end
    end
    return zipped
  end

  function M.append(array, other)
    local joined = {}
    for _, v in ipairs(array) do joined[#joined + 1] = v end
    for _, v in ipairs(other) do joined[#joined + 1] = v end
    return joined
  end

  function M.interleave(...)
    return M.flatten(M.zip(...), true)
  end

  function M.interpose(value, array)
    local out = {}
    for i, v in ipairs(array) do
      if i > 1 then out[#out + 1] = value end
      out[#out + 1] = v
    end
    return out
  end

  -- range(to) counts 0..to; range(from, to[, step]); empty when step cannot reach to.
  function M.range(...)
    local from, to, step = ...
    if select('#', ...) == 1 then from, to = 0, from end
    from, to, step = from or 0, to or 0, step or 1
    local values = {}
    if step == 0 or (to - from) * step < 0 then return values end
    for i = 0, math.floor((to - from) / step + 1e-9) do values[#values + 1] = from + i * step end
    return values
  end

  function M.rep(value, n)
    local values = {}
    for i = 1, n do values[i] = value end
    return values
  end

  -- Iterators over consecutive slices of n values starting every `stride` values; pad fills
  -- the last one up to n.
  local function slices(array, n, stride, pad)
    local start, done = 1, #array == 0
    return function()
      if done then return nil end
      local part = M.slice(array, start, start + n - 1)
      if pad ~= nil then for i = #part + 1, n do part[i] = pad end end
      done = start + n - 1 >= #array
      start = start + stride
      return part
    end
  end

  function M.partition(array, n, pad)
    n = n or 1
    if n <= 0 then return function() end end
    return slices(array, n, n, pad)
  end

  function M.sliding(array, n, pad)
    n = n or 2
    if n <= 1 then return function() end end
    return slices(array, n, n - 1, pad)
  end

  -- Every ordering of array (Heap's algorithm), one new array per call.
  function M.permutation(array)
    return coroutine.wrap(function()
      local a = M.slice(array)
      local function permute(k)
        if k <= 1 then coroutine.yield(M.slice(a)); return end
        for i = 1, k do
          permute(k - 1)
          local j = k % 2 == 0 and i or 1
          a[j], a[k] = a[k], a[j]
        end
      end
      permute(#a)
    end)
  end

  function M.invert(array)
    local inverted = {}
    for k, v in pairs(array) do inverted[v] = k end
    return inverted
  end

  function M.concat(array, sep, i, j)
    local strings = {}
    for k, v in ipairs(array) do strings[k] = tostring(v) end
    return table.concat(strings, sep or '', i or 1, j or #array)
  end
end
