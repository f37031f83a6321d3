-- Walker's alias method for drawing many samples from one fixed categorical distribution in
-- O(1) each (torchx's torch.AliasMultinomial, which dpnn's NCEModule uses and saves): after an
-- O(n) setup, a draw picks a column i uniformly and keeps it with probability q[i], else takes
-- its alias J[i].
if rawget(torch, 'AliasMultinomial') then return torch.AliasMultinomial end
local AliasMultinomial = torch.class('torch.AliasMultinomial')

function AliasMultinomial:__init(probs)
  if not torch.isTensor(probs) or probs:dim() ~= 1 or probs:nElement() == 0 then
    error('torch.AliasMultinomial: expecting a non-empty vector of probabilities', 2)
  end
  local n = probs:nElement()
  local p = probs:double():div(probs:sum())
  self.J = torch.LongTensor(n):zero()
  self.q = torch.DoubleTensor(n)
  local small, large = {}, {}
  for i = 1, n do
    self.q[i] = p[i] * n
    if self.q[i] < 1 then small[#small + 1] = i else large[#large + 1] = i end
  end
  while #small > 0 and #large > 0 do
    local s, l = table.remove(small), large[#large]
    self.J[s] = l
    self.q[l] = self.q[l] - (1 - self.q[s])
    if self.q[l] < 1 then table.remove(large); small[#small + 1] = l end
  end
  for _, i in ipairs(small) do self.q[i] = 1 end   -- rounding leftovers
  for _, i in ipairs(large) do self.q[i] = 1 end
end

-- Fills the LongTensor output (any size) with independent draws.
function AliasMultinomial:batchdraw(output)
  local n = self.q:nElement()
  local flat = output:view(-1)
  flat:random(1, n)
  self._u = self._u or torch.DoubleTensor()
  self._u:resize(flat:nElement()):uniform(0, 1)
  local alias = self._u:ge(self.q:index(1, flat))   -- the columns that take their alias
  if alias:sum() > 0 then flat:maskedCopy(alias, self.J:index(1, flat):maskedSelect(alias)) end
  return output
end

-- One draw.
function AliasMultinomial:draw()
  local i = math.random(self.q:nElement())
  if math.random() < self.q[i] then return i end
  return self.J[i]
end
