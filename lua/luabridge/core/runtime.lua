-- The start of every runtime, the Lua half of luabridge/core/runtime.py (run with loadfile, before
-- package.path knows this tree): the Python callbacks as __luabridge_py, package.path over
-- luabridge's Lua dirs, and the protected call Python makes every call through, which keeps the
-- traceback of the user's frames only. Arguments: the callbacks table, the array of declared
-- callback names (luabridge/providers/callbacks.py), the dirs joined by ';', the library dir
-- (this tree).
local py, declared, lua_dirs, library = ...
for _, name in ipairs(declared) do
  if py[name] == nil then
    error(("luabridge: the Python callback '%s' is declared in luabridge/providers/callbacks.py but no "
      .. "provider gives it (registered by luabridge/providers/__init__.py)"):format(name), 0)
  end
end
rawset(_G, '__luabridge_py', py)
local parts = {}
for dir in lua_dirs:gmatch('[^;]+') do
  parts[#parts + 1] = dir .. '/?.lua;' .. dir .. '/?/init.lua'
end
package.path = table.concat(parts, ';') .. ';' .. package.path

-- Torch7's LuaJIT was built with LUAJIT_ENABLE_LUA52COMPAT, and so is luabridge's
-- (luabridge/lua52.py); on the stock lupa's, which lacks it, these stand in for the library
-- functions that switch adds, which scripts call freely (table.unpack above all). Its language
-- part (__len on tables, the parser) cannot be added from Lua.
table.unpack = table.unpack or unpack
table.pack = table.pack or function(...) return { n = select('#', ...), ... } end
package.searchers = package.searchers or package.loaders
rawset(_G, 'rawlen', rawlen or function(v)
  if type(v) ~= 'table' and type(v) ~= 'string' then
    error(("bad argument #1 to 'rawlen' (table or string expected, got %s)"):format(type(v)), 2)
  end
  return #v
end)

local protected
local library_source = '@' .. library .. '/'
local full_traceback = os.getenv('LUABRIDGE_FULL_TRACEBACK') == '1'

-- 'user' (the caller's own Lua), 'C' (a named C function) or 'hidden': luabridge's Lua library
-- (torch7's C core, written in Lua here, and the element-wise kernels it compiles, which
-- torch/backend/cpu/apply.lua names '=kernel(...)'), LuaJIT's unnamed builtins (dofile's frame).
local function frame_kind(info)
  if info.what == 'C' then return info.namewhat ~= '' and 'C' or 'hidden' end
  if info.source:sub(1, #library_source) == library_source or info.source:find('^=kernel%(') then
    return 'hidden'
  end
  return 'user'
end

local function frame_line(info)
  local where = info.what == 'C' and '[C]' or info.short_src
  if info.currentline > 0 then where = where .. ':' .. info.currentline end
  if info.what == 'main' then return where .. ': in main chunk' end
  if info.namewhat ~= '' then return where .. ": in function '" .. info.name .. "'" end
  return where .. ': in function <' .. info.short_src .. ':' .. info.linedefined .. '>'
end

-- The traceback of the user's frames, from `level` down to the call Python made: a C function
-- stays only between two user frames (require, pcall), long stacks keep their two ends.
local function user_traceback(level)
  local frames = {}
  while true do
    local info = debug.getinfo(level, 'Slnf')
    if not info or info.func == protected then break end
    frames[#frames + 1] = { kind = frame_kind(info), info = info }
    level = level + 1
  end
  local lines, lastUser = {}, nil
  for i, frame in ipairs(frames) do
    if frame.kind == 'user' then
      lastUser = i
    elseif frame.kind == 'C' and lastUser then
      local outer = frames[i + 1]
      if not (outer and outer.kind == 'user') then frame.kind = 'hidden' end
    else
      frame.kind = 'hidden'
    end
    if frame.kind ~= 'hidden' then lines[#lines + 1] = '\t' .. frame_line(frame.info) end
  end
  if #lines == 0 then return '' end
  if #lines > 22 then
    local tail = { unpack(lines, #lines - 9) }
    lines = { unpack(lines, 1, 12) }
    lines[13] = '\t...'
    for _, line in ipairs(tail) do lines[#lines + 1] = line end
  end
  return 'stack traceback:\n' .. table.concat(lines, '\n')
end

-- Calls f(...) and returns true, results... or false, message, traceback.
function protected(f, ...)
  local tb
  local function handler(e)
    -- walking the frames in Lua needs more stack than an overflow leaves: then the whole stack
    local overflow = type(e) == 'string' and e:find('stack overflow', 1, true)
    tb = (full_traceback or overflow) and debug.traceback('', 2) or user_traceback(3)
    return e
  end
  local r = { xpcall(f, handler, ...) }
  if r[1] then return unpack(r, 1, table.maxn(r)) end
  local e, raw = r[2], nil
  if type(e) ~= 'string' then
    raw = e   -- Python raises it again when it is Python's own (KeyboardInterrupt)
    local ok, s = pcall(tostring, e)
    e = ok and s or '(error object is not a string)'
  end
  -- an error blaming its caller names this wrapper when Python made the call: drop that place
  e = e:gsub('^%[string "<python>"%]:%d+: ', '')
  return false, e, tb, raw
end
rawset(_G, '__luabridge_protected', protected)
-- True for Ctrl-C's KeyboardInterrupt raised in a Python callback: a pcall of the library must
-- rethrow it (error(e, 0)) rather than make it a message or take it for a failure it handles.
rawset(_G, '__luabridge_interrupt', function(e) return type(e) == 'userdata' and py.is_interrupt(e) end)
rawset(_G, '__luabridge_frame_kind', frame_kind)   -- for code that names the user's line (th's Ctrl-C)
-- debug.traceback('', level) as the user should see it, for tracebacks put into messages (nn's
-- containers): level counts from the caller, as debug.traceback's does.
rawset(_G, '__luabridge_traceback', function(level)
  if full_traceback then return (debug.traceback('', level + 1):gsub('^\n', '')) end
  return user_traceback(level + 2)
end)
rawset(_G, '__luabridge_kind', function(x)
  local mt = debug.getmetatable(x)  -- a class constructor's own, not the class metatable
  if type(mt) ~= 'table' then return 'table' end
  if rawget(mt, '__tensor') then return 'tensor' end
  if rawget(mt, '__storage') then return 'storage' end
  if rawget(mt, '__typename') then return 'object' end
  return 'table'
end)
return protected
