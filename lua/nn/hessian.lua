-- Diagonal Hessian estimates (Gauss-Newton style, as in LeCun's "Efficient BackProp"), used to
-- condition per-parameter learning rates. Off by default: nn.hessian.enable() adds the methods
-- updateDiagHessianInput, accDiagHessianParameters and initDiagHessianParameters to modules, and
-- makes parameters()/getParameters() also return the diagonal Hessian tensors.
nn.hessian = {}
local hessian = nn.hessian

-- Swaps the tensors held in fields a[i] and b[i] of module, for every i.
local function swapFields(module, a, b)
  for i = 1, #a do
    module[a[i]], module[b[i]] = module[b[i]], module[a[i]]
  end
end

-- Parameter Hessians: the gradient of the squared input against diagHessianOutput, accumulated
-- (scale 1) into the Hessian fields hw instead of the gradient fields gw.
function hessian.accDiagHessianParameters(module, input, diagHessianOutput, gw, hw)
  assert(#gw == #hw, 'accDiagHessianParameters: number of gradients is not equal to number of hessians')
  module.inputSq = module.inputSq or input.new()
  torch.cmul(module.inputSq:resizeAs(input), input, input)
  for i = 1, #gw do
    local g = module[gw[i]]
    module[hw[i]] = module[hw[i]] or g.new():resizeAs(g):zero()
  end
  swapFields(module, gw, hw)
  -- the forward on the squares must not disturb the output; its values are kept as well, as
  -- modules delegating to a helper (the Map convolutions) write into the helper's tensor
  local output, kept = module.output, module.output:clone()
  module.output = output.new():resizeAs(output)
  module:forward(module.inputSq)
  module:accGradParameters(module.inputSq, diagHessianOutput, 1)
  module.output = output:copy(kept)
  swapFields(module, gw, hw)
end

-- Input Hessian: updateGradInput run with every weight field w[i] squared (the squares are kept
-- in the fields wsq[i]), written to module.diagHessianInput.
function hessian.updateDiagHessianInput(module, input, diagHessianOutput, w, wsq)
  assert(#w == #wsq, 'updateDiagHessianInput: number of weights is not equal to number of weight squares')
  module.diagHessianInput = module.diagHessianInput or input.new()
  module.diagHessianInput:resizeAs(input):zero()
  for i = 1, #w do
    local val = module[w[i]]
    local sq = module[wsq[i]] or val.new()
    torch.cmul(sq:resizeAs(val), val, val)
    module[wsq[i]] = sq
  end
  local gradInput = module.gradInput
  module.gradInput = module.diagHessianInput
  swapFields(module, w, wsq)
  module:updateGradInput(input, diagHessianOutput)
  swapFields(module, w, wsq)
  -- some modules (the Map convolutions) return a helper's gradInput instead of filling theirs
  local result = module.gradInput
  if result ~= module.diagHessianInput then module.diagHessianInput:resizeAs(result):copy(result) end
  module.gradInput = gradInput
end

-- Element-wise modules: (d output / d input)^2 * diagHessianOutput.
function hessian.updateDiagHessianInputPointWise(module, input, diagHessianOutput)
  local ones = diagHessianOutput.new():resizeAs(diagHessianOutput):fill(1)
  hessian.updateDiagHessianInput(module, input, ones, {}, {})
  module.diagHessianInput:cmul(module.diagHessianInput):cmul(diagHessianOutput)
end

function hessian.initDiagHessianParameters(module, gw, hw)
  module.diagHessianInput = module.diagHessianInput or module.gradInput.new()
  for i = 1, #gw do
    local g = module[gw[i]]
    module[hw[i]] = module[hw[i]] or g.new():resizeAs(g):zero()
  end
end

local GRADS, HESSIANS = { 'gradWeight', 'gradBias' }, { 'diagHessianWeight', 'diagHessianBias' }

-- Modules linear in their weights; `squared` names the fields squared for the input Hessian.
local function defineLinear(class, squared)
  local sq = {}
  for i, name in ipairs(squared) do sq[i] = name .. 'Sq' end
  function class:updateDiagHessianInput(input, diagHessianOutput)
    hessian.updateDiagHessianInput(self, input, diagHessianOutput, squared, sq)
    return self.diagHessianInput
  end
  function class:accDiagHessianParameters(input, diagHessianOutput)
    hessian.accDiagHessianParameters(self, input, diagHessianOutput, GRADS, HESSIANS)
  end
  function class:initDiagHessianParameters()
    hessian.initDiagHessianParameters(self, GRADS, HESSIANS)
  end
end

local function definePointWise(class)
  function class:updateDiagHessianInput(input, diagHessianOutput)
    hessian.updateDiagHessianInputPointWise(self, input, diagHessianOutput)
    return self.diagHessianInput
  end
end

local function defineModule()
  function nn.Module:updateDiagHessianInput()
    error(torch.typename(self) .. ':updateDiagHessianInput() is undefined')
  end
  function nn.Module:accDiagHessianParameters() end
  function nn.Module:initDiagHessianParameters() end
  nn.Criterion.updateDiagHessianInput = nn.Module.updateDiagHessianInput
end

-- Sequential: the Hessians flow backwards through the children like gradients.
local function defineSequential()
  function nn.Sequential:initDiagHessianParameters()
    for _, m in ipairs(self.modules) do m:initDiagHessianParameters() end
  end
  function nn.Sequential:updateDiagHessianInput(input, diagHessianOutput)
    local h = diagHessianOutput
    for i = #self.modules, 1, -1 do
      local below = i > 1 and self.modules[i - 1].output or input
      h = self.modules[i]:updateDiagHessianInput(below, h)
    end
    self.diagHessianInput = h
    return h
  end
  function nn.Sequential:accDiagHessianParameters(input, diagHessianOutput)
    local h = diagHessianOutput
    for i = #self.modules, 1, -1 do
      local m = self.modules[i]
      m:accDiagHessianParameters(i > 1 and self.modules[i - 1].output or input, h)
      h = m.diagHessianInput
    end
  end
end

local function defineCriterions()
  -- d^2 (x - t)^2 / dx^2 = 2, divided by the element count when averaging.
  function nn.MSECriterion:updateDiagHessianInput(input)
    self.diagHessianInput = self.diagHessianInput or input.new()
    local val = self.sizeAverage and 2 / input:nElement() or 2
    self.diagHessianInput:resizeAs(input):fill(val)
    return self.diagHessianInput
  end
  nn.WeightedMSECriterion.updateDiagHessianInput = nn.MSECriterion.updateDiagHessianInput
  -- torch7's convention for |x|: 1 where x ~= 0, else 0.
  function nn.L1Cost:updateDiagHessianInput(input)
    self.diagHessianInput = self.diagHessianInput or input.new()
    self.diagHessianInput:resizeAs(input):fill(1):maskedFill(torch.eq(input, 0), 0)
    return self.diagHessianInput
  end
end

-- Reshape: the Hessian of the output viewed with the input's shape.
local function defineReshape()
  function nn.Reshape:updateDiagHessianInput(input, diagHessianOutput)
    self.diagHessianInput = self.diagHessianInput or input.new()
    self.diagHessianInput:set(diagHessianOutput:contiguous()):resizeAs(input)
    return self.diagHessianInput
  end
end

-- parameters() and getParameters() also give the diagonal Hessians (a third list / flat tensor)
-- once initDiagHessianParameters has made them; other modules keep their two results.
local function defineParameters()
  function nn.Module:parameters()
    local w, g, h = {}, {}, {}
    for _, name in ipairs { 'Weight', 'Bias' } do
      local p = self[name:lower()]
      if p then
        w[#w + 1], g[#g + 1] = p, self['grad' .. name]
        h[#h + 1] = self['diagHessian' .. name]
      end
    end
    if #w == 0 then return end
    if #h > 0 then return w, g, h end
    return w, g
  end
  local containerParameters = nn.Container.parameters
  function nn.Container:parameters()
    local w, g = containerParameters(self)
    local h = {}
    for _, m in ipairs(self.modules) do
      local _, _, mh = m:parameters()
      for _, t in ipairs(mh or {}) do h[#h + 1] = t end
    end
    if #h > 0 then return w, g, h end
    return w, g
  end
  local getParameters = nn.Module.getParameters
  function nn.Module:getParameters()
    local _, _, h = self:parameters()
    local p, g = getParameters(self)
    if h then return p, g, nn.Module.flatten(h) end
    return p, g
  end
end

function hessian.enable()
  defineModule()
  defineSequential()
  defineCriterions()
  defineReshape()
  defineParameters()
  defineLinear(nn.Linear, { 'weight' })
  defineLinear(nn.SpatialConvolution, { 'weight' })
  defineLinear(nn.SpatialConvolutionLocal, { 'weight' })
  defineLinear(nn.SpatialFullConvolution, { 'weight' })
  defineLinear(nn.SpatialConvolutionMap, { 'weight', 'bias' })
  defineLinear(nn.SpatialFullConvolutionMap, { 'weight' })
  for _, name in ipairs { 'Tanh', 'TanhShrink', 'Square', 'Sqrt' } do definePointWise(nn[name]) end
  hessian.enable = function() end -- enabling twice would wrap the parameter methods twice
end

return hessian
