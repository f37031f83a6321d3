-- The constructor of a numbered kind of object (Mutex, Condition): new(), or new(id) for the
-- object another one's :id() names, as torch7 passes them between threads; class gets id()
-- and free().
return function(kind, class)
  local byId, lastId = {}, 0
  function class:id() return self._id end
  function class:free() byId[self._id] = nil end
  return function(id)
    if id ~= nil then
      local obj = byId[id]
      if not obj then error(('threads.%s: none with id %s'):format(kind, tostring(id)), 2) end
      return obj
    end
    lastId = lastId + 1
    local obj = setmetatable({ _id = lastId }, class)
    byId[lastId] = obj
    return obj
  end
end
