-- `require 'trepl'`, as scripts do to get th's globals when started by a plain luajit: the same
-- require (relative paths, .t7/.json/.net files), who() and import() that `luabridge th` installs.
-- Torch7's module returned its read-eval-print loop; here the prompt is `luabridge th`'s.
local installed = require('luabridge.th.trepl')
if rawget(_G, 'require') ~= installed.require then installed.install() end

return function()
  error('trepl: the interactive prompt is `luabridge th` (a script cannot open one from Lua)', 2)
end
