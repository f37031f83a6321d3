-- Argument checking and torch7-style error messages, raised at the caller's line.
local check = {}

-- luabridge's own Lua tree (torch, nn, optim, ...): errors are reported outside it
local here = debug.getinfo(1, 'S').source:match('^@(.*)torch[/\\]core[/\\]check%.lua$') or ''

-- The stack level of the first function outside luabridge's Lua libraries, so that the message
-- names the user's file and line.
local function userLevel()
  local level = 3
  while true do
    local info = debug.getinfo(level, 'S')
    if not info then return 0 end
    local src = info.source or ''
    if info.what ~= 'C' and not (here ~= '' and src:sub(2, #here + 1) == here) then
      return level - 1
    end
    level = level + 1
  end
end

function check.error(msg)
  error(msg, userLevel())
end

-- Sizes as messages write them: 2x3x4, or [] for none.
function check.sizes(sz)
  if #sz == 0 then return '[]' end
  return table.concat(sz, 'x')
end

-- A tensor's sizes, as check.sizes writes them.
function check.sizestr(t)
  return check.sizes(t._sz)
end

function check.tensorOf(op, x, name)
  if not torch.isTensor(x) then
    check.error(('%s: %s must be a tensor, got %s'):format(op, name or 'argument', torch.type(x)))
  end
  return x
end

-- What a bad argument was, for a message: a number's value, a short string quoted, or any
-- other value's type.
local function got(x)
  if type(x) == 'number' then return tostring(x) end
  if type(x) == 'string' and #x <= 40 then return ("'%s'"):format(x) end
  return torch.type(x)
end

-- torch7's argcheck message: "<op>: <name> must be <what>, got <what x is>".
local function badArgument(op, name, what, x)
  check.error(('%s: %s must be %s, got %s'):format(op, name or 'argument', what, got(x)))
end

-- x as torch7's C functions read a number (lua_isnumber): a number, or a string Lua's tonumber
-- reads (' 2.5 ', '0x10'), so a script's arg[1] works; nil for anything else.
local function toNumber(x)
  if type(x) == 'string' then return tonumber(x) end
  if type(x) == 'number' then return x end
end
check.toNumber = toNumber

-- fn with every numeric string among its arguments read as a number first (the rest unchanged,
-- so a non-numeric string still meets fn's own check). Strings are rare: one pass finds none.
function check.numericArgs(fn)
  return function(...)
    local n = select('#', ...)
    for i = 1, n do
      if type((select(i, ...))) == 'string' then
        local args = { ... }
        for j = i, n do args[j] = toNumber(args[j]) or args[j] end
        return fn(unpack(args, 1, n))
      end
    end
    return fn(...)
  end
end

-- check.string, check.boolean (op, x, name): x, when it has that Lua type.
for _, luaType in ipairs { 'string', 'boolean' } do
  check[luaType] = function(op, x, name)
    if type(x) ~= luaType then badArgument(op, name, 'a ' .. luaType, x) end
    return x
  end
end

-- check.number(op, x, name): x as a number (a numeric string read as one, as torch7).
function check.number(op, x, name)
  local v = toNumber(x)
  if not v then badArgument(op, name, 'a number', x) end
  return v
end

-- A value that becomes a tensor or storage element (a constructor's table entry, an assigned
-- element): a number or a numeric string (CSV fields like '3'), returned as a number.
check.element = check.number

-- The name of a tensor class ('torch.FloatTensor'...).
function check.tensorType(op, x, name)
  local mt = type(x) == 'string' and torch.getmetatable(x)
  if not (mt and rawget(mt, '__tensor')) then
    badArgument(op, name, 'a tensor type name', x)
  end
  return x
end

-- A module argument (a container's child, a decorator's module), or an instance of className
-- (nn.Criterion...).
function check.module(op, x, name, className)
  className = className or 'nn.Module'
  if not torch.isTypeOf(x, className) then badArgument(op, name, 'an ' .. className, x) end
  return x
end

-- nn's kernels compute in floating point: integer and half tensors are refused by name.
function check.floating(op, x, name)
  if x._dt.integer or x._dt.half then
    check.error(('%s: %s must be a FloatTensor or DoubleTensor, got %s'):format(op, name or 'input', torch.typename(x)))
  end
  return x
end

function check.sameType(op, a, b)
  if a._dt ~= b._dt then
    check.error(('%s: expected %s, got %s'):format(op, torch.typename(a), torch.typename(b)))
  end
end

function check.sameElements(op, a, b)
  if a:nElement() ~= b:nElement() then
    check.error(('%s: inconsistent tensor size, %s (%d elements) and %s (%d elements)'):format(
      op, check.sizestr(a), a:nElement(), check.sizestr(b), b:nElement()))
  end
end

-- Sizes, strides, offsets, dims and indices are integers exact in a double. NaN fails every
-- comparison, so it must be ruled out before any range check, and so must the infinities.
local MAXINT = 2 ^ 53
check.MAXINT = MAXINT
function check.isInt(x)
  return type(x) == 'number' and x == math.floor(x) and x > -MAXINT and x < MAXINT
end

-- A count or size as torch7's C code read it (a cast to long): a finite number truncated toward
-- zero, so legacy sizes such as n / 2 work; NaN, the infinities and anything else are returned
-- unchanged for the integer checks to refuse.
function check.truncate(x)
  x = toNumber(x) or x
  if type(x) == 'number' and x > -MAXINT and x < MAXINT and x ~= math.floor(x) then
    return x >= 0 and math.floor(x) or math.ceil(x)
  end
  return x
end

-- The largest tensor rank accepted anywhere (torch7's readers and ours use the same bound).
check.MAXDIM = 64

-- x as an integer in [lo, hi] (either bound may be nil), or an error naming op and what x is.
function check.int(op, x, what, lo, hi)
  x = toNumber(x) or x
  if not check.isInt(x) or (lo and x < lo) or (hi and x > hi) then
    local range = (lo and hi) and (' in [%d, %d]'):format(lo, hi)
      or lo and (' >= %d'):format(lo) or hi and (' <= %d'):format(hi) or ''
    badArgument(op, what, 'an integer' .. range, x)
  end
  return x
end

-- The optional form of a check: nil passes (and is returned, so `or default` gives a default).
local function optional(required)
  return function(op, x, ...)
    if x == nil then return nil end
    return required(op, x, ...)
  end
end
check.optInt = optional(check.int)
check.optNumber = optional(check.number)
check.optString = optional(check.string)
check.optBoolean = optional(check.boolean)
check.optModule = optional(check.module)
check.optTensorType = optional(check.tensorType)
check.optTensorOf = optional(check.tensorOf)

-- Sizes given as numbers or as one LongStorage (nn.Reshape, View, CMul...): a new LongStorage,
-- each size an integer >= lo.
function check.sizeArgs(op, lo, ...)
  local n, first = select('#', ...), ...
  local sizes = { ... }
  if n == 1 and torch.typename(first) == 'torch.LongStorage' then sizes, n = first:totable(), #first end
  for i = 1, n do sizes[i] = check.int(op, sizes[i], 'size ' .. i, lo) end
  return torch.LongStorage(sizes)
end

-- The name of the luabridge function the user's code called (the op an error is about); a tail
-- call leaves no frame of the user's, so the outermost named library frame stands in.
function check.userOp()
  for level = userLevel() - 1, 2, -1 do   -- frames seen from here
    local info = debug.getinfo(level, 'n')
    local name = info and info.name
    if name and name ~= 'pcall' and name ~= 'xpcall' then return name end
  end
end

-- A dimension argument (1-based; negative counts from the end when allowNeg) checked against t.
function check.dim(op, t, d, extra)
  local nd = #t._sz + (extra or 0)
  d = toNumber(d) or d
  if not check.isInt(d) then
    check.error(('%s: dimension must be an integer, got %s'):format(op, tostring(d)))
  end
  if d < 1 or d > nd then
    check.error(('%s: dimension %d out of range of %dD tensor'):format(op, d, #t._sz))
  end
  return d
end

return check
