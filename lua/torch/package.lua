-- Finding and loading a package's own Lua files, as torch7's init.lua: torch.packageLuaPath,
-- torch.include and the global include.
local torch = require 'torch.env'

-- The directory of the first package.path entry where package `name` exists (nil when none);
-- without a name, the directory holding torch's own.
function torch.packageLuaPath(name)
  if name == nil then
    local torchDir = torch.packageLuaPath('torch')
    return torchDir and torchDir:match('^(.*)/')
  end
  for template in package.path:gmatch('[^;]+') do
    local candidate = template:gsub('%?', (name:gsub('%%', '%%%%')))
    local f = io.open(candidate)
    if f then
      f:close()
      return candidate:match('^(.*)/')
    end
  end
end

-- Runs `file` of package `name` (relative to its packageLuaPath directory).
function torch.include(name, file)
  local dir = torch.packageLuaPath(name)
  if dir == nil then error(('torch.include: package %s not found on package.path'):format(tostring(name)), 2) end
  dofile(dir .. '/' .. file)
end

-- include('File.lua'): runs a file beside the calling file (how torch7 packages load their
-- class files); depth counts extra stack levels between the caller and include.
-- (not a tail call: the caller's frame must stay where paths.dofile looks for it)
rawset(_G, 'include', function(file, depth)
  paths.dofile(file, 3 + (depth or 0))
end)

return torch
