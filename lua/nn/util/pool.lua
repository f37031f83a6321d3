-- The front end of the pooling modules (max, average, adaptive, unpooling): their checks and
-- geometry, then one call into the op table of the input's device (the passes: the ops
-- pool_max_forward ..., backend/cpu/nn_pool.lua and backend/cuda/nn_pool.lua).
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local sizesOf, dtypeOf = require('torch.core.apply').sizes, require('torch.core.dtype').of
local shape = require 'nn.util.shape'
local extremum = require 'nn.util.extremum'

local pool = {}
local floor, ceil = math.floor, math.ceil

-- The output size along one dim, as torch7: floor or ceil, and a last window that starts in
-- the padding dropped.
local function outSize(n, k, d, pad, dil, ceilMode)
  local span = dil * (k - 1) + 1
  local o = (ceilMode and ceil or floor)((n - span + 2 * pad) / d) + 1
  if pad > 0 and (o - 1) * d >= n + pad then o = o - 1 end
  return o
end

-- Checks input and returns the geometry of pooling it with `p` = { k = {kT,kH,kW}, d, pad,
-- dil, ceil } over its last `sdims` dims (the missing leading ones are 1).
function pool.geometry(self, input, sdims, p)
  shape.positive(self, 'kernel sizes, strides and dilations', unpack(p.k, 4 - sdims))
  shape.positive(self, 'kernel sizes, strides and dilations', unpack(p.d, 4 - sdims))
  shape.positive(self, 'kernel sizes, strides and dilations', unpack(p.dil, 4 - sdims))
  for d = 4 - sdims, 3 do
    -- unpack above stops at a nil: a missing kernel size is caught here
    if not check.isInt(p.k[d]) then shape.fail(self, 'kernel size %d must be a positive integer, got %s', 4 - d, tostring(p.k[d])) end
    if not check.isInt(p.pad[d]) or p.pad[d] < 0 or p.pad[d] > p.k[d] / 2 then
      shape.fail(self, 'padding must be at most half the kernel size (a non-negative integer), got padding %s for kernel %s',
        tostring(p.pad[d]), table.concat(p.k, 'x', 4 - sdims))
    end
  end
  local batch, B, C, s = shape.input(self, input, sdims)
  local I = { 1, 1, 1 }
  for d = 1, sdims do I[3 - sdims + d] = s[d] end
  local O, sizes = {}, {}
  for d = 1, 3 do O[d] = outSize(I[d], p.k[d], p.d[d], p.pad[d], p.dil[d], p.ceil) end
  local shown = { unpack(O, 4 - sdims) }
  shape.output(self, input, shown, ('kernel %s, stride %s, padding %s'):format(
    table.concat(p.k, 'x', 4 - sdims), table.concat(p.d, ',', 4 - sdims), table.concat(p.pad, ',', 4 - sdims)))
  if batch then sizes[1] = B end
  sizes[#sizes + 1] = C
  for d = 1, sdims do sizes[#sizes + 1] = shown[d] end
  return { P = B * C, I = I, O = O, p = p, sizes = sizes, batch = batch, B = B, C = C }
end

-- Adaptive max ('max') or average ('avg') pooling of input to the module's W x H planes.
function pool.adaptiveForward(self, input, mode)
  shape.positive(self, 'output sizes', self.W, self.H)
  local batch, B, C = shape.input(self, input, 2)
  input = input:contiguous()
  self.output:resize(batch and { B, C, self.H, self.W } or { C, self.H, self.W })
  local ops = backend.of(input)
  if mode == 'max' then
    extremum.indices(self, 'indices', input):resize(self.output:size())
    ops.adaptive_max_forward(self.output, self.indices, input, self.H, self.W)
  else
    ops.adaptive_avg_forward(self.output, input, self.H, self.W)
  end
  return self.output
end

function pool.adaptiveBackward(self, input, gradOutput, mode)
  local batch, B, C = shape.input(self, input, 2)
  shape.gradOutput(self, gradOutput, batch and { B, C, self.H, self.W } or { C, self.H, self.W })
  gradOutput = gradOutput:contiguous()
  self.gradInput:resizeAs(input)
  local gi = self.gradInput
  local ops = backend.of(input)
  if mode == 'max' then
    ops.adaptive_max_backward(gi, gradOutput, self.indices)
  else
    ops.adaptive_avg_backward(gi, gradOutput, self.H, self.W)
  end
  return self.gradInput
end

-- Max unpooling: each of the P planes of n values of small goes to its 1-based index in an
-- m-element plane of big (forward), or reads its gradient back from there (backward).
function pool.unpool(small, big, indices, P, n, m, backward)
  backend.of(small).max_unpool(small, big, indices, P, n, m, backward)
end

-- ops.pool_max_indices_ok(indices, plane): whether every index is in 1..plane (the CPU has its
-- own, on threads; elsewhere their min and max)
backend.define('pool_max_indices_ok', function(ops)
  if rawget(ops, 'pool_max_indices_ok') then return nil end
  return function(indices, plane)
    return indices:nElement() == 0 or indices:min() >= 1 and indices:max() <= plane
  end
end)

-- output, indices = max pooling of input (the module's fields are resized; indices are a
-- LongTensor of input's device)
function pool.maxForward(self, input, g)
  -- the input sizes, read by the unpooling modules (as torch7's)
  self.itime, self.iheight, self.iwidth = self.kT and g.I[1] or nil, g.I[2], g.I[3]
  input = input:contiguous()
  shape.resize(self.output, g.sizes)
  shape.resize(extremum.indices(self, 'indices', input), g.sizes)
  backend.of(input).pool_max_forward(g, self.output, self.indices, input)
  return self.output
end

function pool.maxBackward(self, input, gradOutput, g)
  shape.gradOutput(self, gradOutput, g.sizes)
  gradOutput = gradOutput:contiguous()
  self.gradInput:resizeAs(input)
  local ix = self.indices
  if not ix or ix:nElement() ~= gradOutput:nElement() then
    shape.fail(self, 'call updateOutput with this input before updateGradInput')
  end
  -- indices is a public field: one check keeps a changed one from writing outside gradInput
  local plane = g.I[1] * g.I[2] * g.I[3]
  if not backend.of(input).pool_max_indices_ok(ix, plane) then
    shape.fail(self, ('indices outside 1..%d (changed since updateOutput?)'):format(plane))
  end
  backend.of(input).pool_max_backward(g, self.gradInput, gradOutput, ix)
  return self.gradInput
end

-- out (default self.output) = average pooling of input
function pool.avgForward(self, input, g, countPad, divide, out)
  input = input:contiguous()
  out = out or self.output
  out:resize(g.sizes)
  backend.of(input).pool_avg_forward(g, out, input, countPad, divide)
  return out
end

function pool.avgBackward(self, input, gradOutput, g, countPad, divide)
  shape.gradOutput(self, gradOutput, g.sizes)
  gradOutput = gradOutput:contiguous()
  self.gradInput:resizeAs(input)
  backend.of(input).pool_avg_backward(g, self.gradInput, gradOutput, countPad, divide)
  return self.gradInput
end

-- The pooling parameters of a module from its torch7 fields (kT kH kW, dT.., padT.., dilationT..;
-- absent ones are 1, or 0 for padding).
function pool.params(self)
  return {
    k = { self.kT or 1, self.kH or 1, self.kW },
    d = { self.dT or 1, self.dH or 1, self.dW },
    pad = { self.padT or 0, self.padH or 0, self.padW or 0 },
    dil = { self.dilationT or 1, self.dilationH or 1, self.dilationW or 1 },
    ceil = self.ceil_mode,
  }
end

-- pool.geometry(self, input, sdims, pool.params(self)), remembered per module while the
-- input's type and sizes and the module's settings stay those it was made for (written out:
-- no loop per call; the table is kept off the module, so it is neither saved nor cloned).
local memo = setmetatable({}, { __mode = 'k' })
local function geometryOf(self, input, sdims)
  local e = memo[self]
  if e and torch.isTensor(input) then
    local sz = sizesOf(input)
    if e.dt == dtypeOf(input) and e.nd == #sz and e.s1 == sz[1] and e.s2 == sz[2] and e.s3 == sz[3]
        and e.s4 == sz[4] and e.s5 == sz[5] and e.kT == self.kT and e.kH == self.kH
        and e.kW == self.kW and e.dT == self.dT and e.dH == self.dH and e.dW == self.dW
        and e.padT == self.padT and e.padH == self.padH and e.padW == self.padW
        and e.lT == self.dilationT and e.lH == self.dilationH and e.lW == self.dilationW
        and e.ceil == self.ceil_mode then
      return e.g
    end
  end
  local g = pool.geometry(self, input, sdims, pool.params(self))
  local sz = sizesOf(input)
  memo[self] = { g = g, dt = dtypeOf(input), nd = #sz, s1 = sz[1], s2 = sz[2], s3 = sz[3], s4 = sz[4],
    s5 = sz[5], kT = self.kT, kH = self.kH, kW = self.kW, dT = self.dT, dH = self.dH, dW = self.dW,
    padT = self.padT, padH = self.padH, padW = self.padW, lT = self.dilationT, lH = self.dilationH,
    lW = self.dilationW, ceil = self.ceil_mode }
  return g
end

-- Installs the methods shared by the max (kind 'max') or average ('avg') pooling modules over
-- `sdims` spatial dims: ceil/floor and the forward and backward passes.
function pool.install(cls, kind, sdims)
  function cls:ceil() self.ceil_mode = true; return self end
  function cls:floor() self.ceil_mode = false; return self end
  local forward, backward = pool[kind .. 'Forward'], pool[kind .. 'Backward']
  function cls:updateOutput(input)
    return forward(self, input, geometryOf(self, input, sdims),
      self.count_include_pad ~= false, self.divide ~= false)
  end
  function cls:updateGradInput(input, gradOutput)
    if not self.gradInput then return end
    return backward(self, input, gradOutput, geometryOf(self, input, sdims),
      self.count_include_pad ~= false, self.divide ~= false)
  end
  if kind == 'max' then
    function cls:clearState() return nn.Module.clearState(self, 'indices') end
  end
end

return pool
