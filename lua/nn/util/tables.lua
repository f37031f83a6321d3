-- Checks shared by the table layers, and the CMaxTable / CMinTable kernels.
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local loss = require 'nn.util.loss'

local tables = {}

-- input must be a table of at least `count` tensors; returns it.
function tables.tensors(module, input, count, what)
  local name = torch.type(module)
  what = what or 'input'
  if torch.type(input) ~= 'table' then
    check.error(('%s: %s must be a table of tensors, got %s'):format(name, what, torch.type(input)))
  end
  if #input < (count or 1) then
    check.error(('%s: %s must hold at least %d tensors, got %d'):format(name, what, count or 1, #input))
  end
  for i = 1, #input do
    if not torch.isTensor(input[i]) then
      check.error(('%s: %s[%d] must be a tensor, got %s'):format(name, what, i, torch.type(input[i])))
    end
  end
  return input
end

-- Every tensor of the table must have a's element count (elementwise table ops).
function tables.sameElements(module, input, what)
  local n = input[1]:nElement()
  for i = 2, #input do
    if input[i]:nElement() ~= n then
      check.error(('%s: inconsistent tensor sizes, %s[1] is %s and %s[%d] is %s'):format(
        torch.type(module), what or 'input', check.sizestr(input[1]), what or 'input', i,
        check.sizestr(input[i])))
    end
  end
end

-- Each tensor of list (from index `from`, but `skip`) must be of like's type: the tensor methods
-- the elementwise table modules run (add, cmul, cdiv, ...) take operands of one element type,
-- and raised from inside them naming the method, not the module. `role` says what like is
-- ("the output's type: convert the module or the input"), `what` names the list ('input').
function tables.typesLike(module, like, role, list, what, from, skip)
  local want = like:type()
  for i = from or 1, #list do
    local t = list[i]
    if i ~= skip and t:type() ~= want then
      check.error(('%s: %s[%d] is a %s of size %s, expected a %s (%s)'):format(torch.type(module),
        what or 'input', i, t:type(), check.sizestr(t), want, role))
    end
  end
end

-- gradOutput must be of like's type (where it is combined with, or set into, tensors of it).
function tables.gradOutputType(module, gradOutput, like, role)
  if gradOutput:type() ~= like:type() then
    check.error(('%s: gradOutput is a %s of size %s, expected a %s (%s)'):format(torch.type(module),
      gradOutput:type(), check.sizestr(gradOutput), like:type(), role))
  end
end

-- gradOutput must be a tensor with as many elements as `like` (a tensor or a size storage).
function tables.gradOutputLike(module, gradOutput, like)
  local size = torch.isTensor(like) and like:size() or like
  local n = #size > 0 and 1 or 0
  for k = 1, #size do n = n * size[k] end
  if not torch.isTensor(gradOutput) or gradOutput:nElement() ~= n then
    check.error(('%s: gradOutput must be a tensor of size %s, got %s'):format(torch.type(module),
      table.concat(size:totable(), 'x'),
      torch.isTensor(gradOutput) and check.sizestr(gradOutput) or torch.type(gradOutput)))
  end
end

-- input must be two vectors or two matrices of the same size (the pair layers DotProduct,
-- CosineDistance, PairwiseDistance); returns them.
function tables.pair(module, input)
  tables.tensors(module, input, 2)
  local x1, x2 = input[1], input[2]
  if (x1:dim() ~= 1 and x1:dim() ~= 2) or not x1:isSameSizeAs(x2) then
    check.error(('%s: input must be two vectors or matrices of the same size, got %s and %s')
      :format(torch.type(module), check.sizestr(x1), check.sizestr(x2)))
  end
  tables.typesLike(module, x1, "input[1]'s type", { x1, x2 }, 'input', 2)
  return x1, x2
end

-- tables.pair's two tensors as N x D matrices (a vector is one row).
function tables.pairRows(module, input)
  local x1, x2 = tables.pair(module, input)
  if x1:dim() == 1 then return x1:contiguous():view(1, -1), x2:contiguous():view(1, -1) end
  return x1, x2
end

-- out = first op t[1] op t[2] ... over the tensors of t but t[skip] (op: kind 'add' or 'mul'),
-- in that order; out may be first. Each step is the op table's nn_binary (oneDNN on all
-- threads, where it pays: it declines otherwise) or the tensor method.
local method = { add = 'add', mul = 'cmul' }
function tables.chain(kind, out, first, t, skip)
  local from = first
  for j = 1, #t do
    if j ~= skip then
      if not backend.of(out).nn_binary(kind, out, from, t[j]) then
        if from ~= out then out:copy(from) end
        out[method[kind]](out, t[j])
      end
      from = out
    end
  end
  if from ~= out then out:copy(from) end
  return out
end

-- out:copy(x) (as many elements), by the op table's nn_copy where it pays (oneDNN on all threads).
function tables.copy(out, x)
  if not backend.of(out).nn_copy(out, x) then out:copy(x) end
  return out
end

-- Drops gradInput entries past n (a smaller input table than last time).
function tables.trim(gradInput, n)
  for i = #gradInput, n + 1, -1 do gradInput[i] = nil end
  return gradInput
end

-- The positive dim of a SplitTable/JoinTable dimension: negative counts from the end; with
-- nInputDims, an input with one more dim is a batch and the dim moves one right.
function tables.dimension(module, nDim)
  local d = module.dimension
  if type(d) ~= 'number' then
    check.error(('%s: dimension must be a number, got %s'):format(torch.type(module), torch.type(d)))
  end
  if d < 0 then
    d = nDim + d + 1
  elseif module.nInputDims and nDim == module.nInputDims + 1 then
    d = d + 1
  end
  if d < 1 or d > nDim then
    check.error(('%s: dimension %d out of range for a %dD input'):format(
      torch.type(module), module.dimension, nDim))
  end
  return d
end

-- updateOutput / updateGradInput of CMaxTable (compare '>') and CMinTable ('<'): the
-- elementwise extremum of the input tensors; each element's gradient goes to the first input
-- holding the extremum. `indexField` names the tensor of winning input indices.
function tables.extremum(cls, compare, indexField)
  -- the passes are the op table's (nn_pointwise): table_extremum_update, table_extremum_route
  cls._deviceKernel = true

  function cls:updateOutput(input)
    tables.tensors(self, input)
    tables.sameElements(self, input)
    loss.checkHost(self, input[1])
    tables.typesLike(self, self.output, "the output's type: convert the module or the input", input, 'input', 2)
    local index = self[indexField]:resizeAs(input[1]):fill(1)
    self.output:resizeAs(input[1]):copy(input[1])
    for i = 2, #input do
      backend.of(index).table_extremum_update(self, compare, self.output, index, input[i], i)
    end
    return self.output
  end

  function cls:updateGradInput(input, gradOutput)
    tables.tensors(self, input)
    tables.gradOutputLike(self, gradOutput, self[indexField])
    tables.gradOutputType(self, gradOutput, self[indexField], "the type of " .. indexField)
    for i = 1, #input do
      self.gradInput[i] = self.gradInput[i] or input[i].new()
      local gi = self.gradInput[i]:resizeAs(input[i])
      backend.of(gi).table_extremum_route(gi, self[indexField], gradOutput, i)
    end
    tables.trim(self.gradInput, #input)
    return self.gradInput
  end
end

return tables
