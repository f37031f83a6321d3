-- Ctrl-C for running Lua code, as LuaJIT's own interpreter stops it: luabridge/th/interrupt.py
-- turns LuaJIT's hooks on from another thread when SIGINT comes, and the hook raises
-- 'interrupted!' in whatever Lua code runs. LuaJIT keeps one hook per runtime (not per
-- coroutine), so any of the runtime's threads serves as the lua_State that lua_sethook takes.
local interrupt = {}

local anchor = coroutine.create(function() end)   -- kept alive: its address is handed to C

-- The error level (seen from stop) of the innermost frame of the user's own code, as the
-- traceback counts frames (core/runtime.lua): the message names the user's line, not a line of torch's
-- Lua library that happened to be running.
local function userLevel()
  for level = 3, 200 do
    local info = debug.getinfo(level, 'Sn')
    if not info then break end
    if __luabridge_frame_kind(info) == 'user' then return level - 1 end
  end
  return 2
end

local function stop()
  debug.sethook(stop, '', 0)   -- hooks off, and this function still the one the C hook calls
  error('interrupted!', userLevel())
end

-- Registers stop with debug.sethook's C hook; a count far beyond what Python needs to read that
-- hook (then turn it off) keeps it from firing. Returns the address of a lua_State of this runtime.
function interrupt.prepare()
  debug.sethook(stop, '', 0x7fffffff)
  return tostring(anchor):match('0x%x+')
end

return interrupt
