-- AdaGrad: each element's step is lr / sqrt(sum of its squared gradients).
--   config: learningRate (1e-3), learningRateDecay (0), weightDecay (0)
--   state:  evalCounter, paramVariance (sum of squared gradients), paramStd
function optim.adagrad(opfunc, x, config, state)
  config = config or {}
  state = state or config
  local lr = config.learningRate or 1e-3
  local lrd = config.learningRateDecay or 0
  state.evalCounter = state.evalCounter or 0

  local fx, dfdx = optim._evaluate('adagrad', opfunc, x)

  local clr = lr / (1 + state.evalCounter * lrd)
  local variance = optim._buffer(state, 'paramVariance', x, dfdx, 0)
  if optim._fused(config, 'w = w + g*g; x = x + s*g/(sqrt(w) + e)', { x = x, g = dfdx, w = variance },
                  { s = -clr, e = 1e-10 }) then
    state.evalCounter = state.evalCounter + 1
    return x, { fx }
  end
  optim._weightDecay(config, x, dfdx)
  local std = optim._buffer(state, 'paramStd', x, dfdx)
  variance:addcmul(1, dfdx, dfdx)
  std:resizeAs(variance):copy(variance):sqrt():add(1e-10)
  x:addcdiv(-clr, dfdx, std)
  state.evalCounter = state.evalCounter + 1
  return x, { fx }
end
