-- A dataset of an HDF5 file: read whole (all) or in part (partial), as a tensor of its type.
local py = rawget(_G, '__luabridge_py')

local HDF5DataSet = torch.class('hdf5.HDF5DataSet')

function HDF5DataSet:__init(file, path)
  self._file, self._path = file, path
end

function HDF5DataSet:__tostring()
  return '[HDF5DataSet /' .. self._path .. ' of ' .. tostring(self._file) .. ']'
end

-- the tensor type's constructor and the sizes (a table)
function HDF5DataSet:_describe()
  local kind, why, size = py.hdf5_info(self._file:_handle(), self._path)
  if not kind then error(why .. ' at /' .. self._path, 3) end
  local sizes = {}
  for i = 1, #size do sizes[i] = size[i] end
  return torch[kind .. 'Tensor'], sizes
end

function HDF5DataSet:getTensorFactory()
  return (self:_describe())
end

function HDF5DataSet:dataspaceSize()
  local _, sizes = self:_describe()
  return sizes
end

local function read(self, factory, starts, counts)
  local tensor = factory()
  if #counts > 0 then tensor:resize(torch.LongStorage(counts)) else tensor:resize(1) end
  if tensor:nElement() > 0 then py.hdf5_read(self._file:_handle(), self._path, tensor, starts, counts) end
  return tensor
end

function HDF5DataSet:all()
  local factory, sizes = self:_describe()
  local starts = {}
  for i = 1, #sizes do starts[i] = 0 end
  return read(self, factory, starts, sizes)
end

-- one range per dimension: {first, last} (1-based, inclusive) or an index
function HDF5DataSet:partial(...)
  local ranges = { ... }
  local factory, sizes = self:_describe()
  if #ranges ~= #sizes then
    error('HDF5DataSet:partial() - dimension mismatch. Expected ' .. #sizes .. ' but ' .. #ranges .. ' were given.', 2)
  end
  local starts, counts = {}, {}
  for k, range in ipairs(ranges) do
    if type(range) ~= 'table' then range = { range, range } end
    local first, last = tonumber(range[1]), tonumber(range[2])
    if not first or not last or first < 1 or last > sizes[k] or first > last then
      error(('HDF5DataSet:partial() - range %s..%s of dimension %d is outside 1..%d of %s')
            :format(tostring(range[1]), tostring(range[2]), k, sizes[k], tostring(self)), 2)
    end
    starts[k], counts[k] = first - 1, last - first + 1
  end
  return read(self, factory, starts, counts)
end

function HDF5DataSet:close()
end
