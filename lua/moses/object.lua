-- moses's object functions: properties of tables, and type tests.
return function(M)
  function M.keys(obj)
    local keys = {}
    for k in pairs(obj) do keys[#keys + 1] = k end
    return keys
  end

  -- Values in array order first, then the rest in pairs order.
  function M.values(obj)
    local values, n = {}, #obj
    for i = 1, n do values[i] = obj[i] end
    for k, v in pairs(obj) do
      if not (type(k) == 'number' and k >= 1 and k <= n and k % 1 == 0) then values[#values + 1] = v end
    end
    return values
  end

  function M.kvpairs(obj)
    local list = {}
    for k, v in pairs(obj) do list[#list + 1] = { k, v } end
    return list
  end

  function M.toObj(kvpairs)
    local obj = {}
    for _, kv in ipairs(kvpairs) do obj[kv[1]] = kv[2] end
    return obj
  end

  function M.property(key)
    return function(obj) return obj[key] end
  end

  function M.propertyOf(obj)
    return function(key) return obj[key] end
  end

  function M.toBoolean(value) return not not value end

  -- Copies the fields of each source into destObj (later sources win).
  function M.extend(destObj, ...)
    for i = 1, select('#', ...) do
      for k, v in pairs(select(i, ...)) do destObj[k] = v end
    end
    return destObj
  end

  -- Sorted names of obj's functions (moses's own by default), with its __index chain when
  -- recurseMt is given.
  function M.functions(obj, recurseMt)
    obj = obj or M
    local names, seen = {}, {}
    local t = obj
    while type(t) == 'table' do
      for k, v in pairs(t) do
        if type(v) == 'function' and not seen[k] then seen[k] = true; names[#names + 1] = k end
      end
      local mt = recurseMt and getmetatable(t)
      t = type(mt) == 'table' and mt.__index or nil
    end
    table.sort(names, function(a, b) return tostring(a) < tostring(b) end)
    return names
  end

  -- A copy of obj: nested tables copied too, unless shallow (non-tables returned as they are;
  -- tensors and other userdata are shared).
  function M.clone(obj, shallow)
    if type(obj) ~= 'table' then return obj end
    local copy = {}
    for k, v in pairs(obj) do
      if type(v) == 'table' and not shallow then copy[k] = M.clone(v) else copy[k] = v end
    end
    return copy
  end

  function M.tap(obj, f, ...)
    f(obj, ...)
    return obj
  end

  function M.has(obj, key) return obj[key] ~= nil end

  function M.pick(obj, ...)
    local picked = {}
    for _, k in ipairs(M.flatten({ ... })) do
      if obj[k] ~= nil then picked[k] = obj[k] end
    end
    return picked
  end

  function M.omit(obj, ...)
    local drop = M.invert(M.flatten({ ... }))
    local kept = {}
    for k, v in pairs(obj) do if drop[k] == nil then kept[k] = v end end
    return kept
  end

  -- Fills obj's missing fields from template.
  function M.template(obj, template)
    for k, v in pairs(template or {}) do
      if obj[k] == nil then obj[k] = v end
    end
    return obj
  end

  -- Deep equality of values; tables compare field by field (==, through __eq, when useMt and
  -- either has an __eq).
  function M.isEqual(a, b, useMt)
    if a == b then return true end
    if type(a) ~= 'table' or type(b) ~= 'table' then return false end
    local ma, mb = getmetatable(a), getmetatable(b)
    if useMt and ((ma and ma.__eq) or (mb and mb.__eq)) then return a == b end
    for k, v in pairs(a) do
      if not M.isEqual(v, b[k], useMt) then return false end
    end
    for k in pairs(b) do
      if a[k] == nil then return false end
    end
    return true
  end

  -- obj[method](obj, ...) when callable (method may be the function itself), else obj[method].
  function M.result(obj, method, ...)
    if type(method) == 'function' then return method(obj, ...) end
    local v = obj[method]
    if M.isCallable(v) then return v(obj, ...) end
    return v
  end

  function M.isTable(t) return type(t) == 'table' end

  function M.isCallable(obj)
    if type(obj) == 'function' then return true end
    local mt = getmetatable(obj)
    return type(mt) == 'table' and mt.__call ~= nil
  end

  -- A table whose keys are exactly 1..n.
  function M.isArray(obj)
    if type(obj) ~= 'table' then return false end
    local n = 0
    for _ in pairs(obj) do
      n = n + 1
      if obj[n] == nil then return false end
    end
    return true
  end

  function M.isIterable(obj)
    return type(obj) == 'table' or (getmetatable(obj) or {}).__pairs ~= nil
  end

  -- nil, and everything but non-empty strings and tables, is empty.
  function M.isEmpty(obj)
    if type(obj) == 'string' then return #obj == 0 end
    if type(obj) == 'table' then return next(obj) == nil end
    return true
  end

  function M.isString(obj) return type(obj) == 'string' end
  function M.isFunction(obj) return type(obj) == 'function' end
  function M.isNil(obj) return obj == nil end
  function M.isNumber(obj) return type(obj) == 'number' end
  function M.isNaN(obj) return type(obj) == 'number' and obj ~= obj end
  function M.isFinite(obj) return type(obj) == 'number' and obj > -math.huge and obj < math.huge end
  function M.isBoolean(obj) return type(obj) == 'boolean' end
  function M.isInteger(obj) return type(obj) == 'number' and obj % 1 == 0 end
end
