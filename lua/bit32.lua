-- bit32: Lua 5.2's bitwise library on LuaJIT's bit, for code written for Lua 5.2 or run under
-- Torch7 with the bit32 rock (OpenNMT's tools/utils/unicode.lua requires it "if using LuaJIT").
-- As in Lua 5.2 every argument is taken modulo 2^32 and every result is an unsigned integer in
-- [0, 2^32); shifts by 32 or more places give 0 (arshift: the sign bit everywhere).
local bit = require 'bit'
local tobit, band, bor, bxor, bnot = bit.tobit, bit.band, bit.bor, bit.bxor, bit.bnot
local lsh, rsh, arsh, rol = bit.lshift, bit.rshift, bit.arshift, bit.rol

local M = {}
local TWO32 = 4294967296

local function num(x, i, name)
  if type(x) ~= 'number' then
    local n = tonumber(x)
    if type(x) ~= 'string' or n == nil then
      error(("bad argument #%d to '%s' (number expected, got %s)"):format(i, name, type(x) == 'nil' and 'no value' or type(x)), 3)
    end
    x = n
  end
  return x
end

local function u(x)   -- a signed 32-bit result of bit.* as Lua 5.2's unsigned
  if x < 0 then return x + TWO32 end
  return x
end

local function fold(name, op, empty)
  return function(...)
    local n = select('#', ...)
    if n == 0 then return empty end
    local r = tobit(num((...), 1, name))
    for i = 2, n do r = op(r, tobit(num(select(i, ...), i, name))) end
    return u(r)
  end
end

M.band = fold('band', band, TWO32 - 1)
M.bor = fold('bor', bor, 0)
M.bxor = fold('bxor', bxor, 0)

function M.btest(...) return M.band(...) ~= 0 end

function M.bnot(x) return u(bnot(tobit(num(x, 1, 'bnot')))) end

local function shift(x, disp, name)
  x, disp = tobit(num(x, 1, name)), num(disp, 2, name)
  disp = disp >= 0 and math.floor(disp) or math.ceil(disp)
  if disp <= -32 or disp >= 32 then return 0 end
  if disp >= 0 then return u(lsh(x, disp)) end
  return u(rsh(x, -disp))
end

function M.lshift(x, disp) return shift(x, disp, 'lshift') end
function M.rshift(x, disp) return shift(x, -num(disp, 2, 'rshift'), 'rshift') end

function M.arshift(x, disp)
  x, disp = tobit(num(x, 1, 'arshift')), num(disp, 2, 'arshift')
  if disp < 0 then return shift(x, -disp, 'arshift') end
  if disp >= 32 then return x < 0 and TWO32 - 1 or 0 end
  return u(arsh(x, math.floor(disp)))
end

function M.lrotate(x, disp)
  x, disp = tobit(num(x, 1, 'lrotate')), num(disp, 2, 'lrotate')
  return u(rol(x, math.floor(disp) % 32))
end

function M.rrotate(x, disp)
  return M.lrotate(x, -num(disp, 2, 'rrotate'))
end

local function field(name, f, w)
  f = math.floor(num(f, 2, name))
  w = w == nil and 1 or math.floor(num(w, 3, name))
  if f < 0 then error(("bad argument #2 to '%s' (field cannot be negative)"):format(name), 3) end
  if w <= 0 then error(("bad argument #3 to '%s' (width must be positive)"):format(name), 3) end
  if f + w > 32 then error('trying to access non-existent bits', 3) end
  return f, w
end

local function mask(w)   -- w ones, as a signed 32-bit value
  if w == 32 then return -1 end
  return lsh(1, w) - 1
end

function M.extract(n, f, w)
  n = tobit(num(n, 1, 'extract'))
  f, w = field('extract', f, w)
  return u(band(rsh(n, f), mask(w)))
end

function M.replace(n, v, f, w)
  n, v = tobit(num(n, 1, 'replace')), tobit(num(v, 2, 'replace'))
  f, w = field('replace', f, w)
  local m = mask(w)
  return u(bor(band(n, bnot(lsh(m, f))), lsh(band(v, m), f)))
end

return M
