-- Noise-contrastive estimation's loss (Gutmann & Hyvarinen; Mnih & Teh, eq. 5-6) for
-- nn.NCEModule's output {Pmt, Pms, Pnt, Pns}: with P(model | target) = Pmt / (Pmt + k Pnt) and
-- P(noise | sample) = k Pns / (Pms + k Pns), the loss is -(sum log of both) (/ batch with
-- sizeAverage). Gradients go to Pmt and Pms only.
local NCECriterion, parent = torch.class('nn.NCECriterion', 'nn.Criterion')

local EPS = 1e-7

function NCECriterion:__init()
  parent.__init(self)
  self.sizeAverage = true
  self.gradInput = { torch.Tensor(), torch.Tensor(), torch.Tensor(), torch.Tensor() }
end

local function unpackInput(input)
  if torch.type(input) ~= 'table' or #input ~= 4 then
    error('nn.NCECriterion: expecting the input {Pmt, Pms, Pnt, Pns} of nn.NCEModule', 3)
  end
  local Pmt, Pms, Pnt, Pns = input[1], input[2], input[3], input[4]
  if Pmt:dim() ~= 1 or Pms:dim() ~= 2 or Pnt:dim() ~= 1 or Pns:dim() ~= 2 then
    error(('nn.NCECriterion: expecting Pmt, Pms, Pnt, Pns of 1, 2, 1, 2 dimensions, got %d, %d, %d, %d'):format(
      Pmt:dim(), Pms:dim(), Pnt:dim(), Pns:dim()), 3)
  end
  return Pmt, Pms, Pnt, Pns, Pms:size(2)
end

function NCECriterion:updateOutput(input, target)
  local Pmt, Pms, Pnt, Pns, k = unpackInput(input)
  self._Pomdiv = self._Pomdiv or Pmt.new()
  self._Pomdiv:resizeAs(Pmt):copy(Pmt):add(k, Pnt):add(EPS)           -- Pmt + k Pnt
  self._Pondiv = self._Pondiv or Pms.new()
  self._Pondiv:resizeAs(Pms):copy(Pms):add(k, Pns):add(EPS)           -- Pms + k Pns
  local logModel = torch.cdiv(Pmt, self._Pomdiv):log():sum()
  local logNoise = torch.mul(Pns, k):cdiv(self._Pondiv):log():sum()
  self.output = -(logModel + logNoise)
  if self.sizeAverage then self.output = self.output / Pmt:size(1) end
  return self.output
end

-- d loss / d Pmt = -k Pnt / ((Pmt + k Pnt) Pmt);  d loss / d Pms = 1 / (Pms + k Pns)
-- (written as Pms / ((Pms + k Pns) Pms), with eps as dpnn has it).
function NCECriterion:updateGradInput(input, target)
  local Pmt, Pms, Pnt, Pns, k = unpackInput(input)
  local gradPmt, gradPms = self.gradInput[1], self.gradInput[2]
  gradPmt:resizeAs(Pnt):copy(Pnt):mul(-k):cdiv(self._Pomdiv):cdiv(torch.add(Pmt, EPS))
  gradPms:resizeAs(Pms):copy(Pms):cdiv(self._Pondiv):cdiv(torch.add(Pms, EPS))
  if self.gradInput[3]:nElement() ~= Pnt:nElement() then self.gradInput[3]:resizeAs(Pnt):zero() end
  if self.gradInput[4]:nElement() ~= Pns:nElement() then self.gradInput[4]:resizeAs(Pns):zero() end
  if self.sizeAverage then
    gradPmt:div(Pmt:size(1))
    gradPms:div(Pmt:size(1))
  end
  return self.gradInput
end
