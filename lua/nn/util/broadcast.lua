-- The layout shared by nn.CMul and nn.CAdd: a parameter tensor w applied elementwise to an
-- input t, either element for element (same element count), broadcast over w's size-1 dims
-- (same dim count), or to each sample of a batch (t viewed as batch x w:nElement()).
local check = require 'torch.core.check'

local broadcast = {}

-- tv (t, or a view of it) and w expanded to tv's sizes. t must be contiguous in the batch case.
function broadcast.views(m, w, t)
  local name = torch.type(m)
  check.tensorOf(name, t, 'input')
  local n = w:nElement()
  if t:nElement() == n then return t, w:view(t:size()) end
  if w:dim() == t:dim() then
    for d = 1, w:dim() do
      if w:size(d) ~= 1 and w:size(d) ~= t:size(d) then
        check.error(('%s: input size %s does not match parameter size %s'):format(name,
          check.sizestr(t), check.sizestr(w)))
      end
    end
    return t, w:expandAs(t)
  end
  if t:dim() < 1 or t:nElement() ~= t:size(1) * n then
    check.error(('%s: input size %s does not match parameter size %s (or a batch of it)'):format(
      name, check.sizestr(t), check.sizestr(w)))
  end
  local tv = t:view(t:size(1), n)
  return tv, w:view(1, n):expandAs(tv)
end

-- A contiguous version of t, through the buffer m[name] when t is not.
function broadcast.contiguous(m, name, t)
  if t:isContiguous() then return t end
  m[name] = m[name] or t.new()
  return m[name]:resizeAs(t):copy(t)
end

-- Adds scale * t summed over the broadcast dims (those where wv, w as views() expanded it,
-- has stride 0) into g, the gradient of w.
function broadcast.accumulate(g, wv, t, scale)
  for d = 1, t:dim() do
    if wv:stride(d) == 0 and t:size(d) > 1 then t = torch.sum(t, d) end
  end
  g:add(scale, t:view(g:size()))
end

-- __init(size...), reset(stdv) and updateOutput of CMul (param 'weight', op 'cmul') and CAdd
-- ('bias', 'add'): the parameter m[param] and its gradient m[gradParam], of the size given as
-- numbers or as one LongStorage, drawn uniform in +-stdv * sqrt(3), by default +-1/sqrt(its
-- element count); the output is input `op` the parameter.
function broadcast.parameter(cls, parent, param, gradParam, op)
  function cls:__init(...)
    parent.__init(self)
    self.size = check.sizeArgs(torch.type(self), 1, ...)
    self[param] = torch.Tensor(self.size)
    self[gradParam] = torch.Tensor(self.size)
    self.output:resize(self.size)
    self:reset()
  end

  function cls:reset(stdv)
    local w = self[param]
    stdv = stdv and stdv * math.sqrt(3) or 1 / math.sqrt(w:nElement())
    w:uniform(-stdv, stdv)
  end

  function cls:updateOutput(input)
    input = broadcast.contiguous(self, '_input', input)
    local x, w = broadcast.views(self, self[param], input)
    local out = self.output:resizeAs(input):view(x:size())
    out[op](out, x, w)
    return self.output
  end
end

return broadcast
