-- A group of an HDF5 file: named children, groups or datasets.
local py = rawget(_G, '__luabridge_py')

local HDF5Group = torch.class('hdf5.HDF5Group')

function HDF5Group:__init(file, path)
  self._file, self._path = file, path
end

function HDF5Group:__tostring()
  return '[HDF5Group ' .. (self._path == '' and '/' or self._path) .. ' of ' .. tostring(self._file) .. ']'
end

local function join(path, name)
  return path == '' and name or path .. '/' .. name
end

-- the names of the children, sorted
function HDF5Group:_children()
  local _, names = py.hdf5_kind(self._file:_handle(), self._path)
  return names
end

-- datapath: a table of names below this group (a string is split at '/')
function HDF5Group:read(datapath)
  if type(datapath) == 'string' then datapath = hdf5._splitPath(datapath) end
  if type(datapath) ~= 'table' then error('HDF5Group:read() expects table as first parameter', 2) end
  local node, path = self, self._path
  for _, name in ipairs(datapath) do
    if torch.typename(node) ~= 'hdf5.HDF5Group' then
      error("HDF5Group:read() - no such child '" .. name .. "' for " .. tostring(node), 2)
    end
    path = join(path, name)
    local kind = py.hdf5_kind(self._file:_handle(), path)
    if kind == 'group' then
      node = hdf5.HDF5Group(self._file, path)
    elseif kind == 'dataset' then
      node = hdf5.HDF5DataSet(self._file, path)
    elseif kind == nil then
      error("HDF5Group:read() - no such child '" .. name .. "' for " .. tostring(node), 2)
    else
      error('Unsupported data type at ' .. path, 2)
    end
  end
  return node
end

-- every dataset below, as nested tables of tensors
function HDF5Group:all()
  local out = {}
  for _, name in ipairs(self:_children()) do
    out[name] = self:read({ name }):all()
  end
  return out
end

function HDF5Group:write(datapath, data, options)
  self:_store('write', datapath, data, options)
end

function HDF5Group:append(datapath, data, options)
  self:_store('append', datapath, data, options)
end

function HDF5Group:_store(method, datapath, data, options)
  if type(datapath) == 'string' then datapath = hdf5._splitPath(datapath) end
  local path = self._path
  for _, name in ipairs(datapath) do path = join(path, name) end
  if type(data) == 'table' then
    for k, v in pairs(data) do
      hdf5.HDF5Group(self._file, path):_store(method, { tostring(k) }, v, options)
    end
    return
  end
  if #datapath == 0 then
    error('HDF5File:' .. method .. '() - must provide a table when writing to the root location', 3)
  end
  local typename = torch.typename(data)
  if not typename or typename:sub(-6) ~= 'Tensor' then
    error('torch-hdf5: writing data of type ' .. (typename or type(data)) .. ' is not supported', 3)
  end
  if not data:isContiguous() and data:nElement() > 0 then data = data:contiguous() end
  local chunks, deflate
  if options then
    options:adjustForData(data)
    chunks, deflate = options._chunking, options._deflate
  end
  local ok, err = py.hdf5_write(self._file:_handle(), path, data, chunks, deflate, method == 'append')
  if not ok then error('HDF5Group: error writing ' .. path .. ' in ' .. tostring(self._file) .. ': ' .. tostring(err), 3) end
end

function HDF5Group:close()
end
