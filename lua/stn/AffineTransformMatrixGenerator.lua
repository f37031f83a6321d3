-- nn.AffineTransformMatrixGenerator(useRotation, useScale, useTranslation): B x k parameters ->
-- B x 2 x 3 affine matrices for nn.AffineGridGeneratorBHWD. With none of the three, the 6
-- parameters are the matrix (row-major). Else the parameters are, in this order, the rotation
-- angle a, the scale s and the translation (tx, ty) of those used, and the matrix is the top two
-- rows of R(a) S(s) T(tx, ty): [s R | s R t] with R = [cos a, -sin a; sin a, cos a].
local ATMG, parent = torch.class('nn.AffineTransformMatrixGenerator', 'nn.Module')

function ATMG:__init(useRotation, useScale, useTranslation)
  parent.__init(self)
  self.fullMode = not (useRotation or useScale or useTranslation)
  if not self.fullMode then
    self.useRotation, self.useScale, self.useTranslation = useRotation, useScale, useTranslation
  end
end

function ATMG:nParameters()
  if self.fullMode then return 6 end
  return (self.useRotation and 1 or 0) + (self.useScale and 1 or 0) + (self.useTranslation and 2 or 0)
end

-- per sample: angle, scale, tx, ty (defaults 0, 1, 0, 0), as B-vectors
local function params(self, input)
  local single = input:dim() == 1
  local p = single and input:view(1, input:size(1)) or input
  if p:dim() ~= 2 or p:size(2) ~= self:nParameters() then
    error(('nn.AffineTransformMatrixGenerator: Expected %d parameters, got input of size %s'):format(
      self:nParameters(), table.concat(input:size():totable(), 'x')), 3)
  end
  if self.fullMode then return p, single end
  local B, k = p:size(1), 1
  local function take() local v = p:select(2, k); k = k + 1; return v end
  local a = self.useRotation and take() or p.new(B):zero()
  local s = self.useScale and take() or p.new(B):fill(1)
  local tx, ty = p.new(B):zero(), p.new(B):zero()
  if self.useTranslation then tx = take(); ty = take() end
  return p, single, a, s, tx, ty
end

function ATMG:updateOutput(input)
  local p, single, a, s, tx, ty = params(self, input)
  if self.fullMode then
    self.output = p:contiguous():view(p:size(1), 2, 3)
  else
    local c, sn = torch.cos(a):cmul(s), torch.sin(a):cmul(s)   -- s R = [c, -sn; sn, c]
    local out = p.new(p:size(1), 2, 3)
    out:select(3, 1):select(2, 1):copy(c); out:select(3, 2):select(2, 1):copy(-sn)
    out:select(3, 1):select(2, 2):copy(sn); out:select(3, 2):select(2, 2):copy(c)
    out:select(3, 3):select(2, 1):copy(torch.cmul(c, tx) - torch.cmul(sn, ty))
    out:select(3, 3):select(2, 2):copy(torch.cmul(sn, tx) + torch.cmul(c, ty))
    self.output = out
  end
  if single then self.output = self.output[1] end
  return self.output
end

function ATMG:updateGradInput(input, gradOutput)
  local p, single, a, s, tx, ty = params(self, input)
  local B = p:size(1)
  local G = gradOutput:contiguous():view(B, 2, 3)
  if self.fullMode then
    self.gradInput = G:view(B, 6):clone()
  else
    -- output = [A | A t], A = s R: dA = G[:, :2] + G[:, 3] t', dt = A' G[:, 3]
    local g11, g12, g13 = G[{ {}, 1, 1 }], G[{ {}, 1, 2 }], G[{ {}, 1, 3 }]
    local g21, g22, g23 = G[{ {}, 2, 1 }], G[{ {}, 2, 2 }], G[{ {}, 2, 3 }]
    local dA11, dA12 = g11 + torch.cmul(g13, tx), g12 + torch.cmul(g13, ty)
    local dA21, dA22 = g21 + torch.cmul(g23, tx), g22 + torch.cmul(g23, ty)
    local cos, sin = torch.cos(a), torch.sin(a)
    local gi = p.new(B, self:nParameters())
    local k = 1
    if self.useRotation then   -- d(s R)/da = s [-sin, -cos; cos, -sin]
      local d = torch.cmul(dA11, -sin) - torch.cmul(dA12, cos) + torch.cmul(dA21, cos) - torch.cmul(dA22, sin)
      gi:select(2, k):copy(d:cmul(s)); k = k + 1
    end
    if self.useScale then   -- d(s R)/ds = R
      gi:select(2, k):copy(torch.cmul(dA11, cos) - torch.cmul(dA12, sin) + torch.cmul(dA21, sin) + torch.cmul(dA22, cos))
      k = k + 1
    end
    if self.useTranslation then   -- dt = (s R)' G[:, 3]
      local c, sn = torch.cmul(cos, s), torch.cmul(sin, s)
      gi:select(2, k):copy(torch.cmul(c, g13) + torch.cmul(sn, g23))
      gi:select(2, k + 1):copy(torch.cmul(-sn, g13) + torch.cmul(c, g23))
    end
    self.gradInput = gi
  end
  if single then self.gradInput = self.gradInput[1] end
  return self.gradInput
end
