-- trepl.colorize.red('text') and so on: the text between a colour's escape code and the reset.
local colors = require 'trepl.colors'

local colorize = {}
for name, code in pairs(colors) do
  colorize[name] = function(text) return code .. text .. colors.none end
end
return colorize
