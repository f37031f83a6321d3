-- torchx.Queue: first in, first out: put(value), get() (an error when empty), empty().
local Queue = torch.class('torchx.Queue')

function Queue:__init()
  self.first, self.last = 0, -1 -- put goes below first, get takes last
  self.list = {}
end

function Queue:put(value)
  self.first = self.first - 1
  self.list[self.first] = value
end

function Queue:empty()
  return self.first > self.last
end

function Queue:get()
  if self:empty() then error('torchx.Queue: get from an empty queue', 2) end
  local value = self.list[self.last]
  self.list[self.last] = nil
  self.last = self.last - 1
  return value
end
