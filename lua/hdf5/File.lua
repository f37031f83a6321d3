-- An open HDF5 file: read and write tensors (or nested tables of them) at data paths.
local py = rawget(_G, '__luabridge_py')

local HDF5File = torch.class('hdf5.HDF5File')

function HDF5File:__init(filename, number)
  assert(type(filename) == 'string' and type(number) == 'number',
         'HDF5File(filename, fileID): use hdf5.open(filename, mode)')
  self._filename = filename
  self._number = number
end

-- mode: 'a' (default: read/write, created if missing), 'r', 'r+', 'w' (truncate), 'w-' (must not exist)
function HDF5File.open(filename, mode)
  if type(filename) ~= 'string' then
    error('hdf5.open: expected a file name (string), got ' .. type(filename), 2)
  end
  if filename:sub(1, 2) == '~/' then filename = paths.concat(os.getenv('HOME') or '', filename:sub(3)) end
  if not py.hdf5_exists_dir(filename) then
    error('HDF5File.open: no such directory ' .. paths.dirname(filename), 2)
  end
  mode = mode or 'a'
  if mode == 'a' then mode = paths.filep(filename) and 'r+' or 'w' end
  if mode ~= 'r' and mode ~= 'r+' and mode ~= 'w' and mode ~= 'w-' then
    error("Unknown mode '" .. tostring(mode) .. "' for hdf5.open()", 2)
  end
  local number, err = py.hdf5_open(filename, mode)
  if not number then error(err, 2) end
  return hdf5.HDF5File(filename, number)
end

function HDF5File:_handle()
  if not self._number then error('hdf5: ' .. tostring(self) .. ' is closed', 3) end
  return self._number
end

function HDF5File:filename()
  return self._filename
end

function HDF5File:__tostring()
  return '[HDF5File: ' .. self._filename .. (self._number and '' or ' (closed)') .. ']'
end

function HDF5File:close()
  if self._number then py.hdf5_close(self._number) end
  self._number = nil
end

function HDF5File:_root()
  return hdf5.HDF5Group(self, '')
end

function HDF5File:write(datapath, data, options)
  self:_root():_store('write', hdf5._splitPath(datapath), data, options)
end

function HDF5File:append(datapath, data, options)
  self:_root():_store('append', hdf5._splitPath(datapath), data, options)
end

-- the group or dataset at datapath ('/' or nothing: the root group)
function HDF5File:read(datapath)
  return self:_root():read(hdf5._splitPath(datapath or '/'))
end

function HDF5File:all()
  return self:_root():all()
end

-- serialized as its name and handle, as torch-hdf5 wrote its fields: valid in this process while open
function HDF5File.__write(object, file)
  file:writeObject({ _filename = object._filename, _number = object._number })
end

function HDF5File.__read(object, file)
  for k, v in pairs(file:readObject()) do object[k] = v end
end
