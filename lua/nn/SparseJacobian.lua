-- Gradient checks for modules taking a sparse input: an nnz x 2 tensor of (index, value) rows,
-- as nn.SparseLinear reads. Only the value column (column 2) is differentiated and randomised;
-- the indices stay fixed. Each check is nn.Jacobian's, run on a view of the module as a function
-- of that value column, so results follow nn.Jacobian's conventions (one row per value or
-- parameter element, one column per output element).
local check = require 'torch.core.check'
nn.SparseJacobian = {}
local SparseJacobian, Jacobian = nn.SparseJacobian, nn.Jacobian

-- module seen as values -> output, where values (a 1-D tensor) is written into input's value
-- column before each forward and the gradient w.r.t. the values is gradInput's value column.
local ValueView = {}
ValueView.__index = ValueView

local function valueView(module, input)
  return setmetatable({ module = module, input = input, column = input:select(2, 2) }, ValueView)
end

function ValueView:forward(values)
  self.column:copy(values)
  self.output = self.module:forward(self.input)
  return self.output
end

function ValueView:updateGradInput(_, gradOutput)
  local gradInput = self.module:updateGradInput(self.input, gradOutput)
  if not torch.isTensor(gradInput) or gradInput:dim() ~= 2 or gradInput:size(1) ~= self.input:size(1) then
    check.error(('nn.SparseJacobian: the gradInput of %s must be a tensor shaped like its %s input, got %s')
      :format(torch.type(self.module), check.sizestr(self.input),
        torch.isTensor(gradInput) and check.sizestr(gradInput) or torch.type(gradInput)))
  end
  self.gradInput = gradInput:select(2, 2)
  return self.gradInput
end

function ValueView:accGradParameters(_, gradOutput, scale)
  self.module:accGradParameters(self.input, gradOutput, scale)
end

function ValueView:accUpdateGradParameters(_, gradOutput, lr)
  self.module:accUpdateGradParameters(self.input, gradOutput, lr)
end

function ValueView:zeroGradParameters() self.module:zeroGradParameters() end
function ValueView:parameters() return self.module:parameters() end

-- Column 2 holds the values; other modules (nn.PartialLinear's tests) pass any 2-D input, of
-- which column 2 is then the one checked.
local function checkSparse(name, input)
  if not torch.isTensor(input) or input:dim() ~= 2 or input:size(2) < 2 then
    check.error(('nn.SparseJacobian.%s: expected a 2-D input with (index, value) columns, got %s')
      :format(name, torch.isTensor(input) and check.sizestr(input) or torch.type(input)))
  end
end

-- SparseJacobian.f(module, input, ...) = Jacobian.f(view, values, ...) on a contiguous copy of
-- the value column; the column holds that copy afterwards (so a test leaves it randomised, as
-- torch7 does, and a finite-difference pass leaves it unperturbed).
for _, name in ipairs { 'backward', 'backwardUpdate', 'forward', 'forwardUpdate', 'testJacobian',
                        'testJacobianParameters', 'testJacobianUpdateParameters' } do
  SparseJacobian[name] = function(module, input, ...)
    checkSparse(name, input)
    local view = valueView(module, input)
    local values = view.column:clone()
    local result = Jacobian[name](view, values, ...)
    view.column:copy(values)
    return result
  end
end

-- These treat the input as a whole, so the dense versions apply unchanged.
SparseJacobian.testIO = Jacobian.testIO
SparseJacobian.testAllUpdate = Jacobian.testAllUpdate

return SparseJacobian
