-- cjson: lua-cjson's API (encode, decode, null, and its configuration functions) in Lua, for
-- Torch7 programs that keep vocabularies and options in JSON. Arrays are tables with keys
-- 1..n (mostly dense, as lua-cjson decides), other tables are objects; cjson.null stands for
-- JSON null both ways; numbers print with 14 significant digits and '/' is escaped, as lua-cjson.
local cjson = { _NAME = 'cjson', _VERSION = '2.1devel (luabridge)' }
cjson.null = newproxy(false)

local settings = { sparse_convert = false, sparse_ratio = 2, sparse_safe = 10, encode_max_depth = 1000,
                   decode_max_depth = 1000, precision = 14, invalid_encode = false, invalid_decode = true }

function cjson.encode_sparse_array(convert, ratio, safe)
  if convert ~= nil then settings.sparse_convert = convert end
  settings.sparse_ratio = ratio or settings.sparse_ratio
  settings.sparse_safe = safe or settings.sparse_safe
  return settings.sparse_convert, settings.sparse_ratio, settings.sparse_safe
end
function cjson.encode_max_depth(n) settings.encode_max_depth = n or settings.encode_max_depth return settings.encode_max_depth end
function cjson.decode_max_depth(n) settings.decode_max_depth = n or settings.decode_max_depth return settings.decode_max_depth end
function cjson.encode_number_precision(n) settings.precision = n or settings.precision return settings.precision end
function cjson.encode_invalid_numbers(on) if on ~= nil then settings.invalid_encode = on end return settings.invalid_encode end
function cjson.decode_invalid_numbers(on) if on ~= nil then settings.invalid_decode = on end return settings.invalid_decode end
function cjson.encode_keep_buffer(on) return true end
function cjson.new() return cjson end

---------------------------------------------------------------------------------------- encode
local escapes = { ['"'] = '\\"', ['\\'] = '\\\\', ['/'] = '\\/', ['\b'] = '\\b', ['\f'] = '\\f',
                  ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t' }
local function escape(c) return escapes[c] or ('\\u%04x'):format(c:byte()) end

local function encodeString(s) return '"' .. s:gsub('[%c"\\/]', escape) .. '"' end

local function encodeNumber(x)
  if x ~= x or x == math.huge or x == -math.huge then
    if not settings.invalid_encode then error('Cannot serialise number: must not be NaN or Inf', 0) end
    return x ~= x and 'nan' or (x > 0 and 'inf' or '-inf')
  end
  if x == math.floor(x) and math.abs(x) < 1e15 then return ('%d'):format(x) end
  return ('%.' .. settings.precision .. 'g'):format(x)
end

-- The length of t as an array, or nil when t is an object (lua-cjson's rule, sparse ones too).
local function arrayLength(t)
  local max, count = 0, 0
  for k in pairs(t) do
    if type(k) ~= 'number' or k < 1 or k ~= math.floor(k) then return nil end
    if k > max then max = k end
    count = count + 1
  end
  if max > settings.sparse_safe and max > count * settings.sparse_ratio then
    if not settings.sparse_convert then error('Cannot serialise table: excessively sparse array', 0) end
    return nil
  end
  return max
end

local encodeValue
local function encodeTable(t, depth, out)
  if depth > settings.encode_max_depth then
    error(('Cannot serialise, excessive nesting (%d)'):format(depth), 0)
  end
  local n = arrayLength(t)
  if n and n > 0 then
    out[#out + 1] = '['
    for i = 1, n do
      if i > 1 then out[#out + 1] = ',' end
      encodeValue(t[i], depth, out)
    end
    out[#out + 1] = ']'
    return
  end
  out[#out + 1] = '{'
  local first = true
  for k, v in pairs(t) do
    local kt = type(k)
    if kt ~= 'string' and kt ~= 'number' then
      error('Cannot serialise ' .. kt .. ': table key must be a number or string', 0)
    end
    if not first then out[#out + 1] = ',' end
    first = false
    out[#out + 1] = encodeString(kt == 'number' and encodeNumber(k) or k)
    out[#out + 1] = ':'
    encodeValue(v, depth, out)
  end
  out[#out + 1] = '}'
end

function encodeValue(v, depth, out)
  local tv = type(v)
  if tv == 'string' then out[#out + 1] = encodeString(v)
  elseif tv == 'number' then out[#out + 1] = encodeNumber(v)
  elseif tv == 'boolean' then out[#out + 1] = tostring(v)
  elseif v == nil or v == cjson.null then out[#out + 1] = 'null'
  elseif tv == 'table' then encodeTable(v, depth + 1, out)
  else error('Cannot serialise ' .. tv .. ': type not supported', 0) end
end

function cjson.encode(value)
  local out = {}
  encodeValue(value, 0, out)
  return table.concat(out)
end

---------------------------------------------------------------------------------------- decode
local unescapes = { b = '\b', f = '\f', n = '\n', r = '\r', t = '\t', ['"'] = '"', ['\\'] = '\\', ['/'] = '/' }

-- UTF-8 bytes of a code point.
local function utf8(cp)
  if cp < 0x80 then return string.char(cp) end
  if cp < 0x800 then return string.char(0xC0 + math.floor(cp / 64), 0x80 + cp % 64) end
  if cp < 0x10000 then
    return string.char(0xE0 + math.floor(cp / 4096), 0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
  end
  return string.char(0xF0 + math.floor(cp / 262144), 0x80 + math.floor(cp / 4096) % 64,
                     0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
end

local Decoder = {}
Decoder.__index = Decoder

function Decoder:fail(what)
  error(('Expected %s but found %s at character %d'):format(what, self:token(), self.pos), 0)
end

-- A short description of what stands at the current position (lua-cjson's wording).
function Decoder:token()
  local c = self.s:sub(self.pos, self.pos)
  if c == '' then return 'T_END' end
  if c:match('[%[%]{}:,]') then return "'" .. c .. "'" end
  return 'invalid token'
end

function Decoder:skip()
  self.pos = self.s:find('[^ \t\r\n]', self.pos) or #self.s + 1
end

function Decoder:string()
  local s, pos, parts = self.s, self.pos + 1, {}
  while true do
    local stop = s:find('["\\%c]', pos)
    if not stop then self.pos = #s + 1 self:fail('string end') end
    parts[#parts + 1] = s:sub(pos, stop - 1)
    local c = s:sub(stop, stop)
    if c == '"' then self.pos = stop + 1 return table.concat(parts) end
    if c ~= '\\' then self.pos = stop self:fail('string character') end
    local e = s:sub(stop + 1, stop + 1)
    if e == 'u' then
      local hex = s:match('^%x%x%x%x', stop + 2)
      if not hex then self.pos = stop error(('Expected unicode escape but found invalid token at character %d'):format(stop), 0) end
      local cp, nextPos = tonumber(hex, 16), stop + 6
      if cp >= 0xD800 and cp < 0xDC00 then   -- a surrogate pair
        local low = s:match('^\\u(%x%x%x%x)', nextPos)
        if low then
          cp = 0x10000 + (cp - 0xD800) * 1024 + (tonumber(low, 16) - 0xDC00)
          nextPos = nextPos + 6
        end
      end
      parts[#parts + 1] = utf8(cp)
      pos = nextPos
    else
      local u = unescapes[e]
      if not u then self.pos = stop error(('Expected escape sequence but found invalid token at character %d'):format(stop), 0) end
      parts[#parts + 1] = u
      pos = stop + 2
    end
  end
end

function Decoder:number()
  local text = self.s:match('^-?%d+%.?%d*[eE]?[-+]?%d*', self.pos)
  if not text or text == '' or text == '-' then
    text = self.s:match('^-?[iI]nfinity', self.pos) or self.s:match('^-?[iI][nN][fF]', self.pos)
        or self.s:match('^-?[nN][aA][nN]', self.pos)
    if not (text and settings.invalid_decode) then self:fail('value') end
    self.pos = self.pos + #text
    local lower = text:lower()
    return lower:find('nan') and 0 / 0 or (lower:sub(1, 1) == '-' and -math.huge or math.huge)
  end
  local x = tonumber(text)
  if not x then self:fail('value') end
  self.pos = self.pos + #text
  return x
end

function Decoder:value(depth)
  self:skip()
  local c = self.s:sub(self.pos, self.pos)
  if c == '{' or c == '[' then
    if depth >= settings.decode_max_depth then
      error(('Found too many nested data structures (%d) at character %d'):format(depth + 1, self.pos), 0)
    end
    return c == '{' and self:object(depth + 1) or self:array(depth + 1)
  elseif c == '"' then return self:string()
  elseif self.s:find('^true', self.pos) then self.pos = self.pos + 4 return true
  elseif self.s:find('^false', self.pos) then self.pos = self.pos + 5 return false
  elseif self.s:find('^null', self.pos) then self.pos = self.pos + 4 return cjson.null
  end
  return self:number()
end

-- After an element: ',' continues (true), close ends (false).
function Decoder:separator(close, what)
  self:skip()
  local c = self.s:sub(self.pos, self.pos)
  self.pos = self.pos + 1
  if c == ',' then return true end
  if c == close then return false end
  self.pos = self.pos - 1
  self:fail(what)
end

function Decoder:array(depth)
  local t, n = {}, 0
  self.pos = self.pos + 1
  self:skip()
  if self.s:sub(self.pos, self.pos) == ']' then self.pos = self.pos + 1 return t end
  repeat
    n = n + 1
    t[n] = self:value(depth)
  until not self:separator(']', "comma or array end")
  return t
end

function Decoder:object(depth)
  local t = {}
  self.pos = self.pos + 1
  self:skip()
  if self.s:sub(self.pos, self.pos) == '}' then self.pos = self.pos + 1 return t end
  repeat
    self:skip()
    if self.s:sub(self.pos, self.pos) ~= '"' then self:fail('object key string') end
    local key = self:string()
    self:skip()
    if self.s:sub(self.pos, self.pos) ~= ':' then self:fail('colon') end
    self.pos = self.pos + 1
    t[key] = self:value(depth)
  until not self:separator('}', "comma or object end")
  return t
end

function cjson.decode(s)
  if type(s) ~= 'string' then
    error(("bad argument #1 to 'decode' (string expected, got %s)"):format(type(s)), 2)
  end
  local d = setmetatable({ s = s, pos = 1 }, Decoder)
  local value = d:value(0)
  d:skip()
  if d.pos <= #s then d:fail('the end') end
  return value
end

package.loaded['cjson.safe'] = setmetatable({
  encode = function(v) local ok, r = pcall(cjson.encode, v) if ok then return r end return nil, r end,
  decode = function(s) local ok, r = pcall(cjson.decode, s) if ok then return r end return nil, r end,
}, { __index = cjson })

return cjson
