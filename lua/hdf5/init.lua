-- hdf5: deepmind/torch-hdf5's package. Files open, read and write through h5py
-- (luabridge/hdf5_files.py), into and out of tensor memory; this side keeps torch-hdf5's classes,
-- paths, types and messages.
require 'torch'

local py = rawget(_G, '__luabridge_py')
local missing = py.hdf5_missing()
if missing then error(missing, 2) end

hdf5 = rawget(_G, 'hdf5') or {}
hdf5.version = py.hdf5_version()   -- the HDF5 library's, {major, minor, release}

-- '/a//b/' -> { 'a', 'b' }
function hdf5._splitPath(datapath)
  if type(datapath) ~= 'string' then
    error('hdf5: a data path is a string such as "/group/data", not a ' .. type(datapath), 3)
  end
  local parts = {}
  for part in datapath:gmatch('[^/]+') do parts[#parts + 1] = part end
  return parts
end

require 'hdf5.DataSetOptions'
require 'hdf5.DataSet'
require 'hdf5.Group'
require 'hdf5.File'
require 'hdf5.testUtils'

function hdf5.open(...)
  return hdf5.HDF5File.open(...)
end

return hdf5
