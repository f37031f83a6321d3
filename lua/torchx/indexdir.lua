-- paths.indexdir(path[, ext, use_cache, ignore]): every file under path (a folder or a list) whose
-- name ends in .ext (case-insensitive; a string or a list; default the image extensions), found
-- by GNU find and kept as one row of a zero-padded CharTensor per path, for folders of millions
-- of files. The list goes to a cache file in the temporary folder named by the md5 of the
-- folders and extensions; use_cache reuses it. ignore is a find -iname pattern to leave out.
local ffi = require 'ffi'

local imageExtensions = { 'jpg', 'png', 'JPG', 'PNG', 'JPEG', 'ppm', 'PPM', 'bmp', 'BMP' }

local function quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

local function findCommand(path, extensions, ignorePattern, cachefile)
  local names = {}
  for i, ext in ipairs(extensions) do names[i] = '-iname ' .. quote('*.' .. ext) end
  local test = '\\( ' .. table.concat(names, ' -o ') .. ' \\)'
  if ignorePattern then test = '! -iname ' .. quote(ignorePattern) .. ' ' .. test end
  return table.concat({ 'find', quote(path), test, '>>', quote(cachefile) }, ' ')
end

local function temporaryFolder()
  local probe = os.tmpname()
  os.remove(probe)
  return paths.dirname(probe)
end

-- the lines of file as one CharTensor, a zero-padded row each
local function readRows(file)
  local lines, width = {}, 0
  for line in io.lines(file) do
    lines[#lines + 1] = line
    width = math.max(width, #line)
  end
  local padded = {}
  for i, line in ipairs(lines) do padded[i] = line .. string.rep('\0', width + 1 - #line) end
  local storage = torch.CharStorage():string(table.concat(padded))
  return torch.CharTensor(storage, 1, torch.LongStorage({ #lines, width + 1 }))
end

local Index = {}
Index.__index = Index

function Index:size()
  return self.tensor:size(1)
end

function Index:filename(i)
  return ffi.string(torch.data(self.tensor[i]))
end

function paths.indexdir(pathList, extensionList, use_cache, ignorePattern)
  extensionList = extensionList or imageExtensions
  extensionList = type(extensionList) == 'string' and { extensionList } or extensionList
  pathList = type(pathList) == 'string' and { pathList } or pathList
  if type(pathList) ~= 'table' or #pathList == 0 then
    error('paths.indexdir: expecting a folder or a list of folders at arg 1', 2)
  end
  local cachefile = paths.concat(temporaryFolder(),
    torch.md5.sumhexa(table.concat(pathList) .. table.concat(extensionList)))
  if not (use_cache and paths.filep(cachefile)) then
    os.remove(cachefile)
    local file, message = io.open(cachefile, 'w')
    if not file then error('paths.indexdir: cannot write the cache file: ' .. message, 2) end
    file:close()
    for _, path in ipairs(pathList) do
      os.execute(findCommand(path, extensionList, ignorePattern, cachefile))
    end
  end
  local tensor = readRows(cachefile)
  if tensor:nElement() == 0 then
    error('paths.indexdir: could not find any files in ' .. table.concat(pathList, ', '), 2)
  end
  return setmetatable({ tensor = tensor, cachefile = cachefile }, Index)
end
