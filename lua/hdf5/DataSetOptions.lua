-- How a dataset is written: chunked (needed to append and to compress), DEFLATE-compressed.
local DataSetOptions = torch.class('hdf5.DataSetOptions')

function DataSetOptions:__init()
  self._chunking = nil
  self._deflate = nil
end

function DataSetOptions:setChunked(...)
  local chunking = { ... }
  for k, size in ipairs(chunking) do
    if type(size) ~= 'number' or size < 1 then
      error('DataSetOptions:setChunked() - chunk size ' .. k .. ' must be a positive number', 2)
    end
  end
  self._chunking = chunking
  return self
end

function DataSetOptions:setDeflate(level)
  level = level or 6
  if type(level) ~= 'number' or level < 0 or level > 9 then
    error('DataSetOptions:setDeflate() - level must be 0..9, got ' .. tostring(level), 2)
  end
  self._deflate = level
  return self
end

-- chunks no larger than the data, one per dimension
function DataSetOptions:adjustForData(tensor)
  if not self._chunking then return end
  if #self._chunking ~= tensor:nDimension() then
    error('Chunk size must have same number of dimensions as data! Chunk size has '
          .. #self._chunking .. ' dimensions; data has ' .. tensor:nDimension(), 4)
  end
  for k, size in ipairs(self._chunking) do
    self._chunking[k] = math.max(1, math.min(size, tensor:size(k)))
  end
end

function DataSetOptions:creationProperties()
  return self
end

function DataSetOptions:close()
end

function DataSetOptions:__tostring()
  local chunks = self._chunking and table.concat(self._chunking, 'x') or 'none'
  return '[DataSetOptions: chunking=' .. chunks .. ' deflate=' .. tostring(self._deflate or 'off') .. ']'
end
