-- Nesterov's accelerated gradient in Sutskever's form: the parameters first move along the
-- previous update (state.dfdx), the gradient is taken there, and the update is
-- momentum * previous update - lr * gradient.
--   config: learningRate (1e-3), learningRateDecay (0), weightDecay (0), momentum (0.9),
--           learningRates (tensor)
--   state:  evalCounter, dfdx (the previous update), deltaParameters
function optim.nag(opfunc, x, config, state)
  config = config or {}
  state = state or config
  local lr = config.learningRate or 1e-3
  local lrd = config.learningRateDecay or 0
  local mom = config.momentum or 0.9
  local lrs = config.learningRates
  if mom <= 0 then error('Momentum must be positive for Nesterov Accelerated Gradient', 2) end
  state.evalCounter = state.evalCounter or 0

  if state.dfdx then x:add(mom, state.dfdx) end
  local fx, dfdx = optim._evaluate('nag', opfunc, x)
  optim._weightDecay(config, x, dfdx)

  local clr = lr / (1 + state.evalCounter * lrd)
  if state.dfdx then state.dfdx:mul(mom) else state.dfdx = x.new():resizeAs(dfdx):zero() end
  local step = dfdx
  if lrs then step = optim._buffer(state, 'deltaParameters', x, dfdx):copy(lrs):cmul(dfdx) end
  x:add(-clr, step)
  state.dfdx:add(-clr, step)
  state.evalCounter = state.evalCounter + 1
  return x, { fx }
end
