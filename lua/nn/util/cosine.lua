-- Row-wise cosine similarity of two N x D matrices and its gradient, shared by CosineDistance
-- and CosineEmbeddingCriterion. Buffers live in the module's fields (buffer, w1, w22, w32, w):
-- w1 = <x1, x2>, w22 = 1 / (|x1|^2 + eps), w32 = 1 / (|x2|^2 + eps), w = sqrt(w22 w32),
-- all N x 1.
local cosine = {}

local eps = 1e-12

local function buffers(self, like)
  for _, name in ipairs { 'buffer', 'w1', 'w22', 'w32', 'w', '_scale' } do
    self[name] = self[name] or like.new()
  end
end

-- The N x 1 cosines, in `out`.
function cosine.forward(self, x1, x2, out)
  buffers(self, x1)
  self.w1:sum(self.buffer:cmul(x1, x2), 2)
  self.w22:sum(self.buffer:cmul(x1, x1), 2):add(eps):pow(-1)
  self.w32:sum(self.buffer:cmul(x2, x2), 2):add(eps):pow(-1)
  self.w:cmul(self.w22, self.w32):sqrt()
  return out:cmul(self.w1, self.w)
end

-- d cos / d x1 = w (x2 - w1 w22 x1), and symmetrically for x2, each row scaled by coef[i]
-- (N x 1); forward must have run on the same x1, x2.
function cosine.backward(self, x1, x2, coef, gw1, gw2)
  local scale = self._scale:cmul(self.w, coef):expandAs(x1)
  local function side(g, other, own, wOwn)
    self.buffer:cmul(self.w1, wOwn)
    g:resizeAs(own):copy(other):addcmul(-1, self.buffer:expandAs(own), own):cmul(scale)
  end
  side(gw1, x2, x1, self.w22)
  side(gw2, x1, x2, self.w32)
end

return cosine
