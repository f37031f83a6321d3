-- libunsup: the C half of koraykv/unsup, a Torch7 package. Its init.c makes the global `unsup`
-- table and adds one method to torch.FloatTensor and torch.DoubleTensor, shrinkage(lambda): the
-- soft threshold in place, x - lambda above lambda, x + lambda below -lambda, 0 between (a NaN
-- fails both comparisons and becomes 0, as in the C); lambda 0 leaves the tensor as it is. The C
-- returned the top of the Lua stack, which is lambda.
require 'torch'

local unsup = {}
_G.unsup = unsup

local function shrinkage(t, lambda)
  if not torch.isTensor(t) then
    error("bad argument #1 to 'shrinkage' (" .. torch.typename(torch.Tensor()) .. ' expected)', 2)
  end
  if type(lambda) ~= 'number' then
    error("bad argument #2 to 'shrinkage' (number expected, got " .. type(lambda) .. ')', 2)
  end
  if not (lambda >= 0) then error("bad argument #2 to 'shrinkage' (Lambda should be non-negative)", 2) end
  if lambda == 0 then return lambda end
  local above, below = torch.gt(t, lambda), torch.lt(t, -lambda)
  local down, up = torch.add(t, -lambda), torch.add(t, lambda)
  t:zero()
  if above:sum() > 0 then t[above] = down[above] end
  if below:sum() > 0 then t[below] = up[below] end
  return lambda
end

torch.FloatTensor.shrinkage = shrinkage
torch.DoubleTensor.shrinkage = shrinkage

return unsup
