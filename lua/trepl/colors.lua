-- trepl's terminal escape codes: name (normal), Name (bold) and _name (background).
require 'sys'
local colors = {}
for name, code in pairs(sys.COLORS) do colors[name] = code end
return colors
