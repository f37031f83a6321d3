-- xlua.unpack / unpack_class / usage: the named-or-positional argument convention of torch7's
-- older packages (image, nnx, csvigo, dok). A definition is {arg=, type=, help=, default=,
-- defaulta= (default to another argument), req= (required)}.
local unpack_ = unpack or table.unpack

-- The help text of a function taking the definitions defs (named form when they have names).
function xlua.usage(funcname, description, example, ...)
  local defs = { ... }
  if defs[1] and defs[1].tabled then defs = defs[1].tabled end
  local lines = { ('+'):rep(69), funcname }
  if description then lines[#lines + 1] = '\n' .. description end
  lines[#lines + 1] = '\n> usage:'
  local named = defs[1] and defs[1].arg
  lines[#lines + 1] = funcname .. (named and '{' or '(')
  for _, d in ipairs(defs) do
    local key = named and (d.arg .. ' = ' .. d.type) or d.type
    if not d.req then key = '[' .. key .. ']' end
    local line = ('    %-36s-- %s'):format(key, d.help or '')
    if d.default ~= nil then
      line = line .. '  [default = ' .. (type(d.default) == 'table' and xlua.table2string(d.default)
                                          or tostring(d.default)) .. ']'
    elseif d.defaulta then
      line = line .. '  [default == ' .. d.defaulta .. ']'
    end
    lines[#lines + 1] = line
  end
  lines[#lines + 1] = named and '}' or ')'
  if example then lines[#lines + 1] = '\n' .. example end
  lines[#lines + 1] = ('+'):rep(69)
  return table.concat(lines, '\n')
end

-- args is {...} of the caller: one plain table (not a tensor) is named arguments, anything else
-- positional in the order of the definitions. Returns the table of values (by name and by
-- position, with .usage) followed by the values in order.
function xlua.unpack(args, funcname, description, ...)
  local defs = { ... }
  local usage = setmetatable({}, { __tostring = function()
    return xlua.usage(funcname, description, nil, { tabled = defs })
  end })
  local given
  local first = args[1]
  if #args == 1 and type(first) == 'table' and #first == 0 and not torch.typename(first) then
    given = first
  else
    given = {}
    for i, d in ipairs(defs) do given[d.arg] = args[i] end
  end
  local values = { usage = usage }
  for i, d in ipairs(defs) do
    local v = given[d.arg]
    if v == nil then v = d.default end
    if v == nil and d.defaulta then v = values[d.defaulta] end
    if v == nil and d.req then
      error(('%s: missing argument: %s\n%s'):format(funcname, d.arg, tostring(usage)), 3)
    end
    values[d.arg], values[i] = v, v
  end
  return values, unpack_(values, 1, #defs)
end

-- As xlua.unpack, setting each named value as a field of object.
function xlua.unpack_class(object, args, funcname, description, ...)
  local values = xlua.unpack(args, funcname, description, ...)
  for k, v in pairs(values) do
    if type(k) ~= 'number' then object[k] = v end
  end
end

-- '{a = 1, b = "x"}'-style text of a flat table.
function xlua.table2string(t, newline)
  local parts = {}
  for k, v in pairs(t) do
    local key = type(k) == 'string' and k:match('^[%a_][%w_]*$') and k or ('[' .. tostring(k) .. ']')
    parts[#parts + 1] = key .. ' = ' .. (type(v) == 'string' and ('%q'):format(v) or tostring(v))
  end
  return '{' .. table.concat(parts, newline and ',\n ' or ', ') .. '}'
end
