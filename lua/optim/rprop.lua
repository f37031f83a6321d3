-- Rprop (Riedmiller): each element moves by its own step size against its gradient's sign; the
-- step grows by etaplus while the sign holds and shrinks by etaminus when it flips, within
-- [stepsizemin, stepsizemax]. After a flip the element does not move and forgets its gradient.
--   config: stepsize (0.1, the initial step of every element), etaplus (1.2), etaminus (0.5),
--           stepsizemax (50), stepsizemin (1e-6), niter (1: steps per call)
--   state:  delta (the last gradient kept), stepsize (the steps, a tensor), sign, and the masks
--           psign, nsign, zsign, dminmax (ByteTensors)
-- Returns x and the values f(x) before each step.
local function initialise(state, dfdx, stepsize)
  state.delta = dfdx.new(dfdx:size()):zero()
  state.stepsize = dfdx.new(dfdx:size()):fill(stepsize)
  state.sign = dfdx.new(dfdx:size())
  for _, mask in ipairs { 'psign', 'nsign', 'zsign', 'dminmax' } do
    state[mask] = torch.ByteTensor(dfdx:size())
    if dfdx:type() == 'torch.CudaTensor' then state[mask] = state[mask]:cuda() end
  end
end

function optim.rprop(opfunc, x, config, state)
  if config == nil and state == nil then print('no state table RPROP initializing') end
  config = config or {}
  state = state or config
  local etaplus, etaminus = config.etaplus or 1.2, config.etaminus or 0.5
  local stepsizemax, stepsizemin = config.stepsizemax or 50.0, config.stepsizemin or 1e-6

  local fs = {}
  for i = 1, config.niter or 1 do
    local fx, dfdx = optim._evaluate('rprop', opfunc, x)
    -- with state == config, config.stepsize becomes the tensor of steps after the first call
    if not state.delta then initialise(state, dfdx, config.stepsize or 0.1) end
    local sign, steps = state.sign, state.stepsize

    -- the factor of each step: etaplus where the gradient kept its sign, etaminus where it flipped
    torch.sign(sign, torch.cmul(sign, dfdx, state.delta))
    sign.gt(state.psign, sign, 0)
    sign.lt(state.nsign, sign, 0)
    sign.eq(state.zsign, sign, 0)
    sign[state.psign] = etaplus
    sign[state.nsign] = etaminus
    sign[state.zsign] = 1
    steps:cmul(sign)
    steps.gt(state.dminmax, steps, stepsizemax)
    steps[state.dminmax] = stepsizemax
    steps.lt(state.dminmax, steps, stepsizemin)
    steps[state.dminmax] = stepsizemin

    dfdx[state.nsign] = 0   -- a flipped element waits one step
    x:addcmul(-1, torch.sign(sign, dfdx), steps)
    state.delta:copy(dfdx)
    fs[i] = fx
  end
  return x, fs
end
