-- Adam (Kingma & Ba 2014): bias-corrected running means of the gradient and its square.
--   config: learningRate (1e-3), learningRateDecay (0), beta1 (0.9), beta2 (0.999),
--           epsilon (1e-8), weightDecay (0)
--   state:  t (step count), m, v (the moments), denom
function optim.adam(opfunc, x, config, state)
  config = config or {}
  state = state or config
  local lr = config.learningRate or 1e-3
  local lrd = config.learningRateDecay or 0
  local beta1 = config.beta1 or 0.9
  local beta2 = config.beta2 or 0.999
  local epsilon = config.epsilon or 1e-8

  local fx, dfdx = optim._evaluate('adam', opfunc, x)

  state.t = state.t or 0
  local m = optim._buffer(state, 'm', x, dfdx, 0)
  local v = optim._buffer(state, 'v', x, dfdx, 0)
  local clr = lr / (1 + state.t * lrd)
  state.t = state.t + 1
  local stepSize = clr * math.sqrt(1 - beta2 ^ state.t) / (1 - beta1 ^ state.t)
  if optim._fused(config, 'm = m*b1 + c1*g; v = v*b2 + c2*g*g; x = x + s*m/(sqrt(v) + eps)',
                  { x = x, g = dfdx, m = m, v = v },
                  { b1 = beta1, c1 = 1 - beta1, b2 = beta2, c2 = 1 - beta2, s = -stepSize, eps = epsilon }) then
    return x, { fx }
  end
  optim._weightDecay(config, x, dfdx)
  local denom = optim._buffer(state, 'denom', x, dfdx, 0)
  m:mul(beta1):add(1 - beta1, dfdx)
  v:mul(beta2):addcmul(1 - beta2, dfdx, dfdx)
  denom:copy(v):sqrt():add(epsilon)
  x:addcdiv(-stepSize, m, denom)
  return x, { fx }
end
