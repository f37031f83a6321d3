-- threads.Thread(code): runs the Lua chunk code on a new OS thread, in a Lua runtime of its
-- own (package.path as every runtime's); free() waits for it to end. An error in code is
-- printed, as torch7's.
local py = rawget(_G, '__luabridge_py')

local Thread = {}
Thread.__index = Thread

function Thread:free()
  if self._thread then
    py.threads_join(self._thread)
    self._thread = nil
  end
end

return function(code)
  if type(code) ~= 'string' then error('threads.Thread: a string of Lua code expected', 2) end
  return setmetatable({ _thread = py.threads_thread(code) }, Thread)
end
