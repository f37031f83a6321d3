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

return M
