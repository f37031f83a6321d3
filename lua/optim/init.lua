-- torch7's optim: each algorithm is optim.X(opfunc, x[, config][, state]) -> x, {f(x) before the
-- step}; opfunc(x) returns f(x) and df/dx. The state table (config when not given) keeps the
-- algorithm's buffers and counters between calls, under torch7's field names.
-- Algorithms: sgd, asgd, nag, adagrad, adadelta, rmsprop, rprop, adam, adamax, cg, lbfgs (with the
-- line search lswolfe and its helper polyinterp), FistaLS, and the gradient-free cmaes and de;
-- the gradient checker checkgrad; classes ConfusionMatrix and Logger.
require 'torch'
optim = rawget(_G, 'optim') or {}

-- state[name], made on first use as a tensor of x's type shaped like `like` and filled with `value`
-- (left uninitialised when value is nil).
function optim._buffer(state, name, x, like, value)
  local b = state[name]
  if not b then
    b = x.new():resizeAs(like)
    if value then b:fill(value) end
    state[name] = b
  end
  return b
end

-- f(x) and df/dx from opfunc, the gradient checked against x's size (torch7 fails later, in a
-- tensor op that does not say which).
function optim._evaluate(name, opfunc, x)
  local fx, dfdx = opfunc(x)
  if not torch.isTensor(dfdx) or dfdx:nElement() ~= x:nElement() then
    error(string.format('optim.%s: opfunc must return f(x) and df/dx with as many elements as x (%d), got %s',
                        name, x:nElement(), torch.isTensor(dfdx) and dfdx:nElement() .. ' elements' or type(dfdx)), 3)
  end
  return fx, dfdx
end

-- Adds the L2 penalty wd * x to the gradient (the config.weightDecay every algorithm takes).
function optim._weightDecay(config, x, dfdx)
  local wd = config.weightDecay or 0
  if wd ~= 0 then dfdx:add(wd, x) end
end

-- One step of an algorithm as a single elementwise program over the flattened tensors
-- (torch.elementwise: one threaded pass over memory instead of one per tensor op), with the
-- weight decay (config.weightDecay, on g and x) put first when it is set. True when it ran; false
-- when the tensors do not qualify (small, strided, CUDA, ...): the algorithm then runs its tensor
-- ops, the same formulas op by op. The program writes every tensor that the ops write but the
-- scratch buffers (adam's denom, rmsprop's tmp, adagrad's and adadelta's paramStd, adamax's max),
-- which it does not need. (sgd and nag keep their ops: BLAS axpy passes, which the program matched
-- on one thread and beat by 3% at most on two, losing at 0.67M: bench/blocked.py.)
function optim._fused(config, program, tensors, scalars)
  local wd = config.weightDecay or 0
  if wd ~= 0 then
    program = 'g = g + wd*x; ' .. program
    scalars.wd = wd
  end
  return torch.elementwise(program, tensors, scalars)
end

for _, name in ipairs { 'sgd', 'asgd', 'nag', 'adagrad', 'adadelta', 'rmsprop', 'rprop', 'adam',
                        'adamax', 'cg', 'polyinterp', 'lswolfe', 'lbfgs', 'fista', 'cmaes', 'de',
                        'checkgrad', 'ConfusionMatrix', 'Logger' } do
  require('optim.' .. name)
end
return optim
