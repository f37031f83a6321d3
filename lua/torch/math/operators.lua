-- Tensor operators, as torch7's TensorOperator.c: + - * / % and unary -, each making a new
-- tensor of the tensor operand's type (the first one's when both are tensors). A number may
-- stand on either side of + - *, only on the right of / and %. Tensor * tensor is dot (1D.1D),
-- mv (2D.1D) or mm (2D.2D).
local torch = require 'torch.env'
local check = require 'torch.core.check'

local isTensor = torch.isTensor

local function operand(x) return isTensor(x) or type(x) == 'number' end

-- Two tensors, or a tensor and a number.
local function checkOperands(op, a, b)
  if not (operand(a) and operand(b) and (isTensor(a) or isTensor(b))) then
    check.error(('%s: expected two tensors or a tensor and a number, got %s and %s'):format(
      op, torch.type(a), torch.type(b)))
  end
end

local function add(a, b)
  checkOperands('__add', a, b)
  if not isTensor(a) then a, b = b, a end
  return torch.add(a, b)
end

local function sub(a, b)
  checkOperands('__sub', a, b)
  if isTensor(a) then return torch.csub(a, b) end
  return torch.mul(b, -1):add(a)   -- number - tensor
end

local function mul(a, b)
  checkOperands('__mul', a, b)
  if not isTensor(a) then a, b = b, a end
  if not isTensor(b) then return torch.mul(a, b) end
  local da, db = a:dim(), b:dim()
  if da == 1 and db == 1 then return torch.dot(a, b) end
  if da == 2 and db == 1 then return torch.mv(a, b) end
  if da == 2 and db == 2 then return torch.mm(a, b) end
  check.error(('__mul: multiplication between %dD and %dD tensors not yet supported'):format(da, db))
end

-- t / v and t % v: a tensor on the left, a number on the right.
local function byNumber(op, name)
  return function(a, b)
    if not isTensor(a) or type(b) ~= 'number' then
      check.error(('%s: expected a tensor and a number, got %s and %s'):format(op, torch.type(a), torch.type(b)))
    end
    return torch[name](a, b)
  end
end

local function unm(a) return torch.mul(a, -1) end

local operators = {
  __add = add, __sub = sub, __mul = mul, __unm = unm,
  __div = byNumber('__div', 'div'), __mod = byNumber('__mod', 'remainder'),
}
for _, mt in pairs(torch._tensorMetatables) do
  for k, fn in pairs(operators) do mt[k] = fn end
end
