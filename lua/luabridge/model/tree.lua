-- The shape of a module tree, for the Python layers that walk it recursively
-- (luabridge.torch.convert, load_lua): how many modules it holds (their recursion depth is at
-- most that) and the first cycle, a module holding itself directly or through others, which
-- torch7's recursive methods (parameters, type, training) would follow to a stack overflow.
-- Iterative (an explicit stack): any depth, no Lua stack limit.
local torch = require 'torch'

local M = {}

-- The fields through which torch7's containers, decorators and criterion wrappers hold their
-- children: a module, or a table of them (modules, criterions). A gModule's are also in its nodes.
M.childFields = { 'modules', 'module', 'criterions', 'criterion', 'inputModule', 'targetModule' }

local function isModule(v)
  return type(v) == 'table' and (torch.isTypeOf(v, 'nn.Module') or torch.isTypeOf(v, 'nn.Criterion'))
end

local function isPlainTable(v)
  return type(v) == 'table' and torch.typename(v) == nil
end

-- {key, child} for each child of m; key is its name in a path (an index, or the field's name).
local function children(m)
  local out = {}
  for _, field in ipairs(M.childFields) do
    local v = rawget(m, field)
    if isModule(v) then
      out[#out + 1] = { field, v }
    elseif isPlainTable(v) then
      for k, c in pairs(v) do
        if isModule(c) then out[#out + 1] = { tostring(k), c } end
      end
    end
  end
  local nodes = rawget(m, 'forwardnodes')
  if isPlainTable(nodes) then
    for i, node in pairs(nodes) do
      local data = type(node) == 'table' and rawget(node, 'data')
      local c = type(data) == 'table' and rawget(data, 'module')
      if isModule(c) then out[#out + 1] = { 'node' .. tostring(i), c } end
    end
  end
  return out
end

local function join(path, key) return path == '' and key or path .. '.' .. key end

-- shape(root) -> count, and for the first cycle met: the typename of the module met again, the
-- path where it is met again and the path where it was met first ('' is the root).
function M.shape(root)
  local onPath, seen, count = {}, {}, 0
  local stack = { { module = root, path = '', children = children(root), next = 1 } }
  onPath[root], seen[root] = '', true
  while #stack > 0 do
    local top = stack[#stack]
    local entry = top.children[top.next]
    if entry == nil then
      onPath[top.module] = nil
      count = count + 1
      stack[#stack] = nil
    else
      top.next = top.next + 1
      local key, child = entry[1], entry[2]
      local path = join(top.path, key)
      if onPath[child] then return count, torch.typename(child), path, onPath[child] end
      if not seen[child] then
        seen[child], onPath[child] = true, path
        stack[#stack + 1] = { module = child, path = path, children = children(child), next = 1 }
      end
    end
  end
  return count
end

local function describe(v)
  if torch.isTensor(v) then return ('a %s of size %s'):format(torch.typename(v), table.concat(v:size():totable(), 'x')) end
  if type(v) == 'string' then return ('the string %q'):format(v) end
  if type(v) == 'number' or type(v) == 'boolean' or v == nil then return tostring(v) end
  return 'a ' .. (torch.typename(v) or type(v))
end

local function fieldHolding(m, v)
  for k, x in pairs(m) do
    if type(k) == 'string' and rawequal(x, v) then return k end
  end
end

-- What is wrong in module m for the walk of its parameters: field, reason; nil when all is well.
local function paramsProblem(m)
  local ok, params, grads = pcall(m.parameters, m)
  if not ok and __luabridge_interrupt(params) then error(params, 0) end   -- Ctrl-C is no bad module
  if not ok then return 'parameters', 'cannot be listed: ' .. tostring(params) end
  if params == nil then return end
  if type(params) ~= 'table' or type(grads) ~= 'table' then return 'parameters', 'are not listed as tables' end
  for i = 1, table.maxn(params) do   -- a nil among them (a field it lists is nil) included
    local p = params[i]
    local field = p ~= nil and fieldHolding(m, p)
    if not (torch.isTensor(p) and not getmetatable(p).__dtype.integer) then
      return field or ('parameters()[' .. i .. ']'), 'is ' .. describe(p) .. ', expected a floating-point tensor'
    end
    if not field then return 'parameters()[' .. i .. ']', 'is a tensor held in no field' end
    local grad = grads[i]
    if not (torch.isTensor(grad) and grad:nElement() == p:nElement()) then
      -- torch7's name for it (gradWeight) when that field is missing: dpnn's parameters() skips
      -- nil gradients, so grads[i] may then be the next parameter's
      local usual = 'grad' .. field:sub(1, 1):upper() .. field:sub(2)
      local name = torch.isTensor(rawget(m, usual)) and fieldHolding(m, grad) or usual
      return name, ('is %s, expected a tensor of %d elements (the gradient of %s)'):format(describe(grad), p:nElement(), field)
    end
  end
end

-- malformed(root) -> typename, path, field, reason for the first module whose children (its
-- `modules`: a table of modules, keys 1..n) or parameters (floating-point tensors in fields, with
-- gradients of their size) torch7's recursive methods and a LuaModule could not use; nil when
-- none. Walks `modules` only, as those methods do; call it on a tree without cycles (shape).
function M.malformed(root)
  local stack, seen = { { root, '' } }, {}
  while #stack > 0 do
    local m, path = unpack(table.remove(stack))
    local children = rawget(m, 'modules')
    if children == nil and torch.isTypeOf(m, 'nn.Container') then
      return torch.typename(m), path, 'modules', 'is nil, expected a table of modules'
    elseif children == nil then
      local field, reason = paramsProblem(m)
      if field then return torch.typename(m), path, field, reason end
    else
      if not isPlainTable(children) then
        return torch.typename(m), path, 'modules', 'is ' .. describe(children) .. ', expected a table of modules'
      end
      local n = 0
      for _ in pairs(children) do n = n + 1 end
      for i = 1, n do
        local c = children[i]
        if c == nil then return torch.typename(m), path, 'modules', 'has a gap at ' .. i .. ', or keys that are not 1..n' end
        if not (type(c) == 'table' and torch.isTypeOf(c, 'nn.Module')) then
          return torch.typename(m), path, ('modules[%d]'):format(i), 'is ' .. describe(c) .. ', expected a module'
        end
        if not seen[c] then
          seen[c] = true
          stack[#stack + 1] = { c, join(path, tostring(i)) }
        end
      end
    end
  end
end

return M
