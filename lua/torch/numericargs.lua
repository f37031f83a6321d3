-- Numeric strings are numbers to the tensor library, as to torch7's C functions (cwrap and luaT
-- read every number with lua_isnumber / luaL_checknumber): scripts pass arg[1] or a string option
-- straight in (t:fill('3'), torch.randn('2', '3')). Loaded last by init.lua, this gives every
-- tensor and storage method and the torch.* math functions check.numericArgs once, so each
-- overload dispatch and argument check below sees numbers; a non-numeric string stays a string
-- and meets the op's own error.
local torch = require 'torch.env'
local check = require 'torch.core.check'

-- Methods and functions whose string arguments are names (types, files, class names, a
-- CharStorage's text), never numbers.
local NAMES = {
  type = true, typename = true, isTensor = true, isStorage = true, isTypeOf = true,
  getmetatable = true, string = true, factory = true, pointer = true,
}

-- torch.* functions with number arguments that are not also tensor methods.
local FUNCTIONS = {
  'manualSeed', 'cudaManualSeed', 'setnumthreads', 'toc', 'multinomialAlias', 'multinomialAliasSetup',
  'eig', 'gels', 'geqrf', 'gesv', 'inverse', 'orgqr', 'ormqr', 'potrf', 'potri', 'potrs', 'pstrf',
  'qr', 'svd', 'symeig', 'trtrs',
}

local wrapped = {}   -- function -> its wrapper, so a method shared by several tables is wrapped once
local function numeric(fn)
  local w = wrapped[fn]
  if not w then w = check.numericArgs(fn) wrapped[fn] = w end
  return w
end

-- Wraps the public functions of t (names starting with _ are metamethods and internals).
local function wrapTable(t)
  for k, v in pairs(t) do
    if type(v) == 'function' and type(k) == 'string' and k:sub(1, 1) ~= '_' and not NAMES[k] then
      t[k] = numeric(v)
    end
  end
end

local methods = torch._TensorMethods
for name, fn in pairs(torch) do
  if type(fn) == 'function' and methods[name] and not NAMES[name] then torch[name] = numeric(fn) end
end
for _, name in ipairs(FUNCTIONS) do
  if torch[name] then torch[name] = numeric(torch[name]) end
end
wrapTable(methods)
-- every tensor and storage class, CPU and CUDA (whose classes hold their own method tables)
for name in pairs(torch) do
  local mt = type(name) == 'string' and torch.getmetatable('torch.' .. name)
  if mt and (rawget(mt, '__tensor') or rawget(mt, '__storage')) then wrapTable(mt) end
end
