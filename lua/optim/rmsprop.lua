-- RMSprop: each element's step is lr * gradient / (sqrt(running mean of squared gradients) + epsilon).
--   config: learningRate (1e-2), alpha (0.99), epsilon (1e-8), weightDecay (0), initialMean (0)
--   state:  m (the running mean), tmp
function optim.rmsprop(opfunc, x, config, state)
  config = config or {}
  state = state or config
  local lr = config.learningRate or 1e-2
  local alpha = config.alpha or 0.99
  local epsilon = config.epsilon or 1e-8

  local fx, dfdx = optim._evaluate('rmsprop', opfunc, x)

  local m = optim._buffer(state, 'm', x, dfdx, config.initialMean or 0)
  if optim._fused(config, 'm = m*a + c*g*g; x = x + s*g/(sqrt(m) + eps)', { x = x, g = dfdx, m = m },
                  { a = alpha, c = 1 - alpha, s = -lr, eps = epsilon }) then
    return x, { fx }
  end
  optim._weightDecay(config, x, dfdx)
  local tmp = optim._buffer(state, 'tmp', x, dfdx)
  m:mul(alpha):addcmul(1 - alpha, dfdx, dfdx)
  tmp:sqrt(m):add(epsilon)
  x:addcdiv(-lr, dfdx, tmp)
  return x, { fx }
end
