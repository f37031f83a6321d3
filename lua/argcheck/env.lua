-- argcheck.env: how argcheck tells types. istype(obj, name): torch classes (and their parents)
-- match name, or a Lua pattern on names such as 'torch.*Tensor'; anything else compares
-- type(obj). Replace env.istype to use another class system (checkers made before keep theirs).
local env = {}

function env.istype(obj, typename)
  if torch and torch.typename(obj) then return torch.isTypeOf(obj, typename) end
  local mt = getmetatable(obj)
  local own = type(mt) == 'table' and rawget(mt, '__typename')
  if own then return own == typename end
  return type(obj) == typename
end

function env.type(obj)
  if torch then return torch.type(obj) end
  local mt = getmetatable(obj)
  return type(mt) == 'table' and rawget(mt, '__typename') or type(obj)
end

return env
