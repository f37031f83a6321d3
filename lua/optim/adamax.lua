-- AdaMax (Kingma & Ba 2014, section 7): Adam with the infinity norm, u = max(beta2 * u, |g| + eps).
--   config: learningRate (2e-3), beta1 (0.9), beta2 (0.999), epsilon (1e-38), weightDecay (0)
--   state:  t (step count), m, u, max (a 2 x size buffer holding both candidates of the max)
function optim.adamax(opfunc, x, config, state)
  config = config or {}
  state = state or config
  local lr = config.learningRate or 2e-3
  local beta1 = config.beta1 or 0.9
  local beta2 = config.beta2 or 0.999
  local epsilon = config.epsilon or 1e-38

  local fx, dfdx = optim._evaluate('adamax', opfunc, x)

  state.t = (state.t or 0) + 1
  local m = optim._buffer(state, 'm', x, dfdx, 0)
  local u = optim._buffer(state, 'u', x, dfdx, 0)
  if optim._fused(config, 'm = m*b1 + c1*g; u = maximum(u*b2, abs(g) + eps); x = x + s*m/u',
                  { x = x, g = dfdx, m = m, u = u },
                  { b1 = beta1, c1 = 1 - beta1, b2 = beta2, eps = epsilon, s = -lr / (1 - beta1 ^ state.t) }) then
    return x, { fx }
  end
  optim._weightDecay(config, x, dfdx)
  if not state.max then
    local sz = dfdx:size():totable()
    table.insert(sz, 1, 2)
    state.max = x.new(torch.LongStorage(sz)):zero()
  end
  m:mul(beta1):add(1 - beta1, dfdx)
  state.max[1]:copy(u):mul(beta2)
  state.max[2]:copy(dfdx):abs():add(epsilon)
  u:copy(state.max:max(1))
  x:addcdiv(-lr / (1 - beta1 ^ state.t), m, u)
  return x, { fx }
end
