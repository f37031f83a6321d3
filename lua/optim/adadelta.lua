-- AdaDelta (Zeiler 2012): steps are the gradient scaled by RMS(previous steps) / RMS(gradients),
-- both running averages with factor rho.
--   config: rho (0.9), eps (1e-6), weightDecay (0)
--   state:  evalCounter, paramVariance, paramStd, delta, accDelta
function optim.adadelta(opfunc, x, config, state)
  config = config or {}
  state = state or config
  local rho = config.rho or 0.9
  local eps = config.eps or 1e-6
  state.evalCounter = state.evalCounter or 0

  local fx, dfdx = optim._evaluate('adadelta', opfunc, x)

  local variance = optim._buffer(state, 'paramVariance', x, dfdx, 0)
  local delta = optim._buffer(state, 'delta', x, dfdx, 0)
  local accDelta = optim._buffer(state, 'accDelta', x, dfdx, 0)
  if optim._fused(config, 'w = w*rho + c*g*g; d = sqrt(a + eps)/sqrt(w + eps)*g; x = x - d; a = a*rho + c*d*d',
                  { x = x, g = dfdx, w = variance, d = delta, a = accDelta }, { rho = rho, c = 1 - rho, eps = eps }) then
    state.evalCounter = state.evalCounter + 1
    return x, { fx }
  end
  optim._weightDecay(config, x, dfdx)
  local std = optim._buffer(state, 'paramStd', x, dfdx, 0)
  variance:mul(rho):addcmul(1 - rho, dfdx, dfdx)
  std:copy(variance):add(eps):sqrt()
  delta:copy(accDelta):add(eps):sqrt():cdiv(std):cmul(dfdx)
  x:add(-1, delta)
  accDelta:mul(rho):addcmul(1 - rho, delta, delta)
  state.evalCounter = state.evalCounter + 1
  return x, { fx }
end
