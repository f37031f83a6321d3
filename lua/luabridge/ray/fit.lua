-- The worker's half of luabridge.ray.fit (luabridge/ray/fit.py): a replica of the model in
-- training mode with its criterion, flat parameters and optim state. Each step every replica
-- computes the gradient on its shard of the global batch; the driver averages those gradients,
-- and every replica applies the same optim step with that average, so the replicas stay equal.
require 'nn'
require 'optim'

local Replica = {}
Replica.__index = Replica

local M = {}

-- A replica of module (which it trains in place) with criterion; method names an optim
-- function (optim.sgd, optim.adam...) that gets config as its config table on every step.
function M.replica(module, criterion, method, config)
  local optimize = optim[method]
  if type(optimize) ~= 'function' then
    error(string.format("luabridge.ray.fit: optim.%s is not an optim method", tostring(method)), 2)
  end
  module:training()
  local self = setmetatable({ module = module, criterion = criterion, optimize = optimize,
                              config = config, state = {} }, Replica)
  self.params, self.gradParams = module:getParameters()
  return self
end

-- Whether the criterion's loss is a mean over the batch (sizeAverage, torch7's default), so that
-- the global batch's gradient is the mean of the shards' weighted by their sizes, not their sum.
function Replica:averages()
  return self.criterion.sizeAverage ~= false
end

-- The criterion's loss on (input, target) and the flat gradient of the parameters (a buffer
-- that the next call overwrites).
function Replica:gradient(input, target)
  self.module:zeroGradParameters()
  local output = self.module:forward(input)
  local loss = self.criterion:forward(output, target)
  self.module:backward(input, self.criterion:backward(output, target))
  return loss, self.gradParams
end

-- One optim step with the global batch's loss and gradient.
function Replica:step(loss, gradient)
  self.gradParams:copy(gradient)
  local function feval() return loss, self.gradParams end
  self.optimize(feval, self.params, self.config, self.state)
end

return M
