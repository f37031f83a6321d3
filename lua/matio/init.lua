-- matio: soumith/matio-ffi.torch's package for MATLAB .mat files, read and written by scipy.io
-- (luabridge/matio_files.py). As matio-ffi: load returns a tensor (one name), a table (several
-- names, or all), or prints why and returns nil; save writes a tensor as 'x', or a table's
-- entries as variables (nested tables as structs).
require 'torch'

local py = rawget(_G, '__luabridge_py')
local missing = py.matio_missing()
if missing then error(missing, 2) end

local matio = {}
matio.use_lua_strings = false      -- characters as Lua strings instead of CharTensors
matio.ffi = { COMPRESSION_NONE = 0, COMPRESSION_ZLIB = 1 }
matio.compression = matio.ffi.COMPRESSION_ZLIB

function matio.load(filename, name)
  if type(filename) ~= 'string' then
    error('matio.load: expected a file name (string), got ' .. type(filename), 2)
  end
  local names
  if type(name) == 'string' then
    names = { name }
  elseif type(name) == 'table' then
    names = name
  elseif name ~= nil then
    error('matio.load: a variable name, a table of names or nothing expected, got ' .. type(name), 2)
  end
  local out = py.matio_load(filename, names, matio.use_lua_strings == true)
  if out == nil then return nil end
  if type(name) == 'string' then return out[name] end
  return out
end

-- the leaves of data as {path, kind, value}, nested tables becoming structs
local function flatten(data, path, into)
  for key, value in pairs(data) do
    local where = { unpack(path) }
    where[#where + 1] = tostring(key)
    local kind = torch.isTensor(value) and 'tensor' or type(value)
    if kind == 'table' then
      flatten(value, where, into)
    elseif kind == 'tensor' or kind == 'number' or kind == 'string' or kind == 'boolean' then
      if kind == 'tensor' and value:type() == 'torch.CudaTensor' then value = value:float() end
      into[#into + 1] = { path = where, kind = kind, value = value }
    else
      error('matio.save: unsupported type ' .. (torch.typename(value) or type(value)) .. ' at ' .. table.concat(where, '.'), 3)
    end
  end
  return into
end

function matio.save(filename, data)
  if type(filename) ~= 'string' then
    error('matio.save: expected a file name (string), got ' .. type(filename), 2)
  end
  if torch.isTensor(data) then
    data = { x = data }
  elseif type(data) ~= 'table' then
    error('matio.save: expected a tensor or a table of variables, got ' .. type(data), 2)
  end
  local ok, err = py.matio_save(filename, flatten(data, {}, {}), matio.compression ~= matio.ffi.COMPRESSION_NONE)
  if not ok then error(err, 2) end
end

return matio
