-- A decorator that changes how its module is written: the module tree goes to the file as its
-- serial state (see Module:serialMode / lightSerial / mediumSerial), optionally cast to
-- tensortype first (e.g. save a CUDA model as floats).
local _ = require 'moses'
local Serial, parent = torch.class('nn.Serial', 'nn.Decorator')

function Serial:__init(module, tensortype)
  parent.__init(self, module)
  if tensortype then
    assert(tensortype:find('torch.*Tensor'), 'nn.Serial: expecting a tensor type (e.g. torch.FloatTensor) at arg 2, got ' .. tostring(tensortype))
  end
  self.tensortype = tensortype
end

-- Gives each state table back the class it was taken from.
local function restoreClasses(state)
  for _, v in pairs(state) do
    if torch.type(v) == 'table' then restoreClasses(v) end
  end
  if state.dpnn_typename then torch.setmetatable(state, state.dpnn_typename) end
end

function Serial:write(file)
  local state = self:getSerialState()
  restoreClasses(state)
  if self.tensortype then state:type(self.tensortype) end
  local fields = {}
  for k, v in pairs(state) do fields[k] = v end   -- the Serial itself goes as its fields
  file:writeObject(fields)
end

function Serial:read(file)
  for k, v in pairs(file:readObject()) do self[k] = v end
end

-- A copy made through write and read (nn's clone copies fields directly, which would skip the
-- serial state), as torch7's clone always did.
function Serial:clone(...)
  local copy = torch.deserialize(torch.serialize(self))
  if select('#', ...) > 0 then copy:share(self, ...) end
  return copy
end
