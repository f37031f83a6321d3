-- A Linear layer trained with a quasi-diagonal Riemannian metric (Ollivier's "Riemannian metrics
-- for neural networks"): each accGradParameters keeps running averages (rate gamma, the first
-- call sets them) over the batch of gradOutput^2-weighted statistics of the input,
--   Mii = g^2' x^2,  M0i = g^2' x,  M00 = g^2' 1,
-- and rescales the accumulated gradients by their inverse: per weight (i, j)
--   gradWeight = (gradWeight M00 - M0i gradBias) / (Mii M00 - M0i^2),
--   gradBias = (gradBias - sum_j M0i gradWeight) / M00;
-- with qdFlag = false only the diagonal: gradWeight / Mii, gradBias / M00. Batch inputs only.
-- nnx registers it as nnx.QDRiemaNNLinear.
local QDRiemaNNLinear, parent = torch.class('nnx.QDRiemaNNLinear', 'nn.Linear')

local matReg = 1e-12 -- keeps the divisions finite

function QDRiemaNNLinear:__init(inputSize, outputSize, gamma, qdFlag)
  parent.__init(self, inputSize, outputSize)
  self.qdFlag = qdFlag == nil and true or qdFlag
  self.gamma = gamma or 0.01
  self.matReg = matReg
  self.initMetric = true
  self.Mii = torch.Tensor(outputSize, inputSize)
  if self.qdFlag then self.M0i = torch.Tensor(outputSize, inputSize) end
  self.M00 = torch.Tensor(outputSize)
end

function QDRiemaNNLinear:reset()
  self.initMetric = true
  self.weight:normal(0, 1 / math.sqrt(self.weight:size(2)))
  self.bias:zero()
  return self
end

-- metric = (1 - gamma) metric + gamma * fresh, or fresh on the first call.
function QDRiemaNNLinear:_average(metric, fresh)
  if self.initMetric then
    metric:copy(fresh)
  else
    metric:mul(1 - self.gamma):add(self.gamma, fresh)
  end
end

function QDRiemaNNLinear:accGradParameters(input, gradOutput, scale)
  if input:dim() ~= 2 then
    error(('nnx.QDRiemaNNLinear: batch (2D) input expected, got size [%s]')
      :format(table.concat(input:size():totable(), 'x')), 2)
  end
  parent.accGradParameters(self, input, gradOutput, scale)
  local g2t = torch.pow(gradOutput, 2):t()
  self:_average(self.Mii, torch.mm(g2t, torch.pow(input, 2)))
  self:_average(self.M00, g2t:sum(2):view(-1))
  if self.qdFlag then self:_average(self.M0i, torch.mm(g2t, input)) end
  self.initMetric = false
  if self.qdFlag then
    local M00 = self.M00:view(-1, 1):expandAs(self.gradWeight)
    local numerator = torch.cmul(self.gradWeight, M00):add(-1, torch.cmul(self.M0i, self.gradBias:view(-1, 1):expandAs(self.M0i)))
    local denominator = torch.cmul(self.Mii, M00):add(-1, torch.pow(self.M0i, 2)):clamp(self.matReg, 1e25)
    self.gradWeight:copy(numerator:cdiv(denominator))
    self.gradBias:add(-1, torch.cmul(self.M0i, self.gradWeight):sum(2):view(-1)):cdiv(self.M00 + self.matReg)
  else
    self.gradWeight:cdiv(self.Mii + self.matReg)
    self.gradBias:cdiv(self.M00 + self.matReg)
  end
end
