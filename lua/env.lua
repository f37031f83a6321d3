-- env: Torch 7.0's first environment package (torch/env, 2012), which trepl replaced. Scripts of
-- that time begin with `require 'env'` (wojciechz/learning_to_execute's main.lua). It loaded
-- torch, gnuplot and dok and set the prompt's globals: who(), exit(), import(), table() as a
-- constructor of a table holding table's functions, and setprintlevel(). Its welcome line and
-- colored recursive print belong to a prompt: `luabridge th` prints tables already, so
-- setprintlevel(n) only checks n, and level 0 gives back Lua's own print.
require 'torch'
require 'paths'
require 'gnuplot'
require 'dok'

local installed = require('luabridge.th.trepl')
if rawget(_G, 'require') ~= installed.require then installed.install() end

local luaPrint = print
local thPrint = print

function setprintlevel(n)
  if type(n) ~= 'number' or n ~= n or n < 0 then error('expected number [0,+)', 2) end
  n = math.floor(n)
  if n == 0 then
    print = luaPrint
  else
    print = thPrint
  end
end

function exit()
  os.exit()
end

if getmetatable(table) == nil then
  setmetatable(table, {__call = function()
    local t = {}
    for k, v in pairs(table) do t[k] = v end
    return t
  end})
end

return {}
