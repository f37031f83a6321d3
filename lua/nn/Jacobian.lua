-- Gradient checks: Jacobians of a module by backpropagation and by central finite
-- differences, and the test helpers comparing them. A Jacobian has one row per element of the
-- input (or parameter) and one column per element of the output.
nn.Jacobian = {}
local Jacobian = nn.Jacobian

-- Fills x (in place) with uniform values in [minval, maxval] (defaults -2, 2).
local function randomize(x, minval, maxval)
  minval, maxval = minval or -2, maxval or 2
  x:copy(torch.rand(x:nElement()):mul(maxval - minval):add(minval))
end

-- A 1-D tensor of gradOutput's elements, sharing its storage (gradOutput is contiguous).
local function flatView(t)
  return t.new(t:storage(), t:storageOffset(), t:nElement())
end

-- d output / d param by backpropagation, one output element at a time. param defaults to the
-- input (its gradient is read from updateGradInput); for a parameter give dparam, its gradient.
function Jacobian.backward(module, input, param, dparam)
  local wrtParam = param ~= nil
  param = param or input
  module:forward(input)
  local dout = module.output.new():resizeAs(module.output)
  local sdout = flatView(dout)
  local jacobian = torch.Tensor(param:nElement(), dout:nElement()):zero()
  for i = 1, sdout:nElement() do
    dout:zero()
    sdout[i] = 1
    module:zeroGradParameters()
    local din = module:updateGradInput(input, dout)
    module:accGradParameters(input, dout)
    jacobian:select(2, i):copy(wrtParam and dparam or din)
  end
  return jacobian
end

-- The parameter values after one accUpdateGradParameters(lr = 1) step per output element
-- (the parameters are restored in between and at the end).
function Jacobian.backwardUpdate(module, input, param)
  module:forward(input)
  local dout = module.output.new():resizeAs(module.output)
  local sdout = flatView(dout)
  local jacobian = torch.Tensor(param:nElement(), dout:nElement()):zero()
  local params = module:parameters()
  local saved = {}
  for j, p in ipairs(params) do saved[j] = p:clone() end
  local function restore() for j, p in ipairs(params) do p:copy(saved[j]) end end
  for i = 1, sdout:nElement() do
    restore()
    dout:zero()
    sdout[i] = 1
    module:updateGradInput(input, dout)
    module:accUpdateGradParameters(input, dout, 1)
    jacobian:select(2, i):copy(param)
  end
  restore()
  return jacobian
end

-- d output / d param by central differences (param, default the input, must be contiguous).
-- With `update`, each row becomes param - row: what one gradient step of rate 1 would give.
local function finiteDifferences(module, input, param, perturbation, update)
  perturbation = perturbation or 1e-6
  local flat = param.new(param):resize(param:nElement())
  local jacobian = torch.Tensor():resize(param:nElement(), module:forward(input):nElement())
  local outa, outb = torch.Tensor(jacobian:size(2)), torch.Tensor(jacobian:size(2))
  for i = 1, flat:nElement() do
    local orig = flat[i]
    flat[i] = orig - perturbation
    outa:copy(module:forward(input))
    flat[i] = orig + perturbation
    outb:copy(module:forward(input))
    flat[i] = orig
    outb:add(-1, outa):div(2 * perturbation)
    local row = jacobian:select(1, i):copy(outb)
    if update then row:mul(-1):add(orig) end
  end
  return jacobian
end

function Jacobian.forward(module, input, param, perturbation)
  return finiteDifferences(module, input, param or input, perturbation, false)
end

function Jacobian.forwardUpdate(module, input, param, perturbation)
  return finiteDifferences(module, input, param, perturbation, true)
end

local function maxAbsDiff(a, b) return (a - b):abs():max() end

-- Largest difference between the backprop and finite-difference Jacobians w.r.t. the input
-- (the input is first filled with uniform values in [minval, maxval]).
function Jacobian.testJacobian(module, input, minval, maxval, perturbation)
  randomize(input, minval, maxval)
  local fprop = Jacobian.forward(module, input, input, perturbation)
  return maxAbsDiff(fprop, Jacobian.backward(module, input))
end

-- The same w.r.t. a parameter tensor param whose gradient is dparam.
function Jacobian.testJacobianParameters(module, input, param, dparam, minval, maxval, perturbation)
  randomize(input, minval, maxval)
  randomize(param, minval, maxval)
  local bprop = Jacobian.backward(module, input, param, dparam)
  return maxAbsDiff(Jacobian.forward(module, input, param, perturbation), bprop)
end

-- Checks accUpdateGradParameters against a finite-difference gradient step on param.
function Jacobian.testJacobianUpdateParameters(module, input, param, minval, maxval, perturbation)
  randomize(input, minval, maxval)
  randomize(param, minval, maxval)
  local bprop = Jacobian.backwardUpdate(module, input, param)
  return maxAbsDiff(Jacobian.forwardUpdate(module, input, param, perturbation), bprop)
end

-- Diagonal Hessian of F = sum(output^2) / 2 (whose Hessian w.r.t. the output is all ones)
-- w.r.t. the field diagHessianParamName, by the methods of nn.hessian.
function Jacobian.backwardDiagHessian(module, input, diagHessianParamName)
  module:forward(input)
  local ones = module.output.new():resizeAs(module.output):fill(1)
  module.diagHessianWeight:zero()
  if module.diagHessianBias then module.diagHessianBias:zero() end
  module:updateDiagHessianInput(input, ones)
  module:accDiagHessianParameters(input, ones)
  return module[diagHessianParamName]
end

-- The same Hessian for a module linear in its input and parameters, from first derivatives:
-- d2F/dx_i^2 = sum_k (dy_k/dx_i)^2, one backward pass per output element k.
function Jacobian.linearModuleDiagHessian(module, input, gradParamName)
  local diag = module[gradParamName].new()
  module:forward(input)
  local dout = module.output.new():resizeAs(module.output)
  local sdout = flatView(dout)
  for k = 1, sdout:nElement() do
    dout:zero()
    sdout[k] = 1
    module:zeroGradParameters()
    module:updateGradInput(input, dout)
    module:accGradParameters(input, dout)
    local g = module[gradParamName]:contiguous()
    if k == 1 then diag:resize(g:nElement()):zero() end -- gradInput is sized by the first pass
    diag:addcmul(flatView(g), flatView(g))
  end
  return diag
end

-- Largest difference between the two Hessian computations above (input randomised first).
function Jacobian.testDiagHessian(module, input, gradParamName, diagHessianParamName, minval, maxval)
  randomize(input, minval, maxval)
  module:initDiagHessianParameters()
  local bprop = Jacobian.backwardDiagHessian(module, input, diagHessianParamName)
  local linear = Jacobian.linearModuleDiagHessian(module, input, gradParamName)
  return maxAbsDiff(flatView(bprop:contiguous()), linear)
end

for _, field in ipairs { 'Input', 'Weight', 'Bias' } do
  Jacobian['testDiagHessian' .. field] = function(module, input, minval, maxval)
    return Jacobian.testDiagHessian(module, input, 'grad' .. field, 'diagHessian' .. field, minval, maxval)
  end
end

-- A copy of module as saving and loading would give (through a torch.MemoryFile).
local function roundTrip(module)
  local f = torch.MemoryFile('rw'):binary()
  f:writeObject(module)
  f:seek(1)
  local copy = f:readObject()
  f:close()
  return copy
end

-- Runs module and a saved-and-loaded copy of it (after clearState, which must return self) on
-- the same data; returns the largest output and gradInput differences.
function Jacobian.testIO(module, input, minval, maxval)
  minval, maxval = minval or -2, maxval or 2
  local inputCopy = input:clone()
  module:forward(input)
  local go = module.output:clone()
  randomize(go, minval, maxval)
  local goCopy = go:clone()
  module:zeroGradParameters()
  module:updateGradInput(input, go)
  module:accGradParameters(input, go)
  local fo, bo = module.output:clone(), module.gradInput:clone()

  assert(module == module:clearState(), 'clearState did not return self')
  local m = roundTrip(module)
  m:forward(inputCopy)
  m:zeroGradParameters()
  m:updateGradInput(inputCopy, goCopy)
  m:accGradParameters(inputCopy, goCopy)
  local errb = bo:nElement() == 0 and 0 or maxAbsDiff(bo, m.gradInput)
  return maxAbsDiff(fo, m.output), errb
end

-- Compares the ways of updating the parameter field `weight` (gradient field `gradWeight`):
-- accGradParameters + updateParameters, accUpdateGradParameters, and both on two clones
-- sharing the weight. Returns {name = error norm}.
function Jacobian.testAllUpdate(module, input, weight, gradWeight)
  local lr = torch.uniform(0.1, 1)
  local errors = {}

  local plain = module:clone()
  local weightBefore = plain[weight]:clone()
  plain:forward(input)
  local gradOutput = torch.rand(plain.output:size())
  plain:zeroGradParameters()
  plain:updateGradInput(input, gradOutput)
  plain:accGradParameters(input, gradOutput)
  plain:updateParameters(lr)
  errors['accGradParameters'] = (weightBefore - plain[gradWeight] * lr - plain[weight]):norm()

  local direct = module:clone()
  direct:forward(input)
  direct:updateGradInput(input, gradOutput)
  direct:accUpdateGradParameters(input, gradOutput, lr)
  errors['accUpdateGradParameters'] = (direct[weight] - plain[weight]):norm()

  -- two clones sharing the weight: each one's step moves both, so the weight moves twice
  local expected = weightBefore - plain[gradWeight] * (lr * 2)
  local function sharedPair(step)
    local m1, m2 = module:clone(), module:clone()
    m2:share(m1, weight)
    for _, m in ipairs({ m1, m2 }) do m:forward(input) end
    step(m1, m2)
    return (expected - m1[weight]):norm() + (expected - m2[weight]):norm()
  end
  errors['accGradParameters [shared]'] = sharedPair(function(m1, m2)
    for _, m in ipairs({ m1, m2 }) do m:zeroGradParameters() end
    for _, m in ipairs({ m1, m2 }) do m:updateGradInput(input, gradOutput) end
    for _, m in ipairs({ m1, m2 }) do m:accGradParameters(input, gradOutput) end
    for _, m in ipairs({ m1, m2 }) do m:updateParameters(lr) end
  end)
  errors['accUpdateGradParameters [shared]'] = sharedPair(function(m1, m2)
    for _, m in ipairs({ m1, m2 }) do m:updateGradInput(input, gradOutput) end
    for _, m in ipairs({ m1, m2 }) do m:accUpdateGradParameters(input, gradOutput, lr) end
  end)
  return errors
end

return Jacobian
