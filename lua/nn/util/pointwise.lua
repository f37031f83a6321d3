-- Elementwise layers: updateOutput / updateGradInput built from kernel bodies or tensor ops,
-- in place when the module's `inplace` field is set (output then shares input's storage, and
-- gradInput shares gradOutput's).
--   forward:  '$1 = f($2)'           $1 output, $2 input (a loop); or
--   forwardOp(m, output, input, ...) tensor ops, for every device (m: the module)
--   backward: '$1 = g($2, $3, $4)'   $1 gradInput, $2 input, $3 gradOutput, $4 output; or
--   backwardOp(m, gradInput, input, gradOutput, output, ...)
--   params(self) gives the scalars (v1..v3 in the bodies, ... above).
--   deviceForward / deviceBackward(m, ...): as forwardOp / backwardOp, tensor ops that stand in
--     for the loop bodies on devices that compile no loops (CUDA).
--   op: with a backward body, the op-table name of the backward pass: <op>_backward(gradInput,
--     input, gradOutput, output, ...), the body's loop on the CPU (backend/cuda/nn.lua has the
--     CUDA ones).
--   eltwise = { forward = f, backward = g }: the oneDNN eltwise kind that computes a pass
--     exactly as above (the op table's nn_eltwise_forward / _backward, which run it on all
--     threads where it pays and otherwise decline): f(m, ...) and g(m, ...) (... the params)
--     give (alg, alpha, beta) or nil where the parameters have no such kind; a string is an
--     alg without parameters. An alg named *_dst reads the output in the backward pass.
-- define makes each body an op of every device (backend.define): <Module>_forward and
-- <Module>_backward, the body's loop where the device compiles loops (the op table's nn_loop),
-- else the device pass; a device with neither raises this file's error for the module.
local check = require 'torch.core.check'
local backend = require 'torch.backend'

local pointwise = {}

local function none() end

-- A backward body as a loop over (gradInput, input, gradOutput, output, ...), built by the
-- device's builder (nil where the device compiles no loops). A body that never reads the input
-- loops over the other three: a strided input (an LSTM's narrowed gate) would otherwise put
-- the whole loop on its strided path.
local function backwardLoop(ops, body)
  if body:find('$2', 1, true) then return ops.nn_loop(4, body) end
  local loop = ops.nn_loop(3, (body:gsub('%$3', '$2'):gsub('%$4', '$3')))
  return loop and function(gradInput, _, gradOutput, output, ...) loop(gradInput, gradOutput, output, ...) end
end

local function onDevice(t) return not backend.onHost(t) end

-- The errors for an input that is not a CPU tensor (the loops here run on CPU memory), or a
-- gradOutput whose size differs.
function pointwise.checkInput(module, input, deviceOk)
  if not torch.isTensor(input) then
    check.error(('%s: input must be a tensor, got %s'):format(torch.type(module), torch.type(input)))
  end
  if not deviceOk and onDevice(input) then
    check.error(('%s: %s is not supported (CPU kernel)'):format(torch.type(module), torch.type(input)))
  end
  check.floating(torch.type(module), input)
end

function pointwise.checkGradOutput(module, input, gradOutput, deviceOk)
  pointwise.checkInput(module, input, deviceOk)
  if not torch.isTensor(gradOutput) then
    check.error(('%s: gradOutput must be a tensor, got %s'):format(torch.type(module),
      torch.type(gradOutput)))
  end
  if gradOutput:nElement() ~= input:nElement() then
    check.error(('%s: gradOutput size %s (%d elements) does not match input size %s (%d elements)')
      :format(torch.type(module), check.sizestr(gradOutput), gradOutput:nElement(),
        check.sizestr(input), input:nElement()))
  end
end

-- m._mask: 1 where lo < x (and x < hi when hi is given), else 0, as a tensor of x's type.
pointwise.mask = backend.mask

-- m[name] as a tensor of like's type and size (a scratch buffer reused across calls).
pointwise.scratch = backend.moduleScratch

-- The op `name` of every device: the loop `loop(ops)` builds, with the module first, or the
-- device pass.
local function defineOp(name, loop, devicePass)
  backend.define(name, function(ops)
    local l = loop(ops)
    if l then return function(_, ...) l(...) end end
    return devicePass
  end)
  return function(m, r, ...) backend.of(r)[name](m, r, ...) end
end

-- The op table's whole-tensor passes of spec.eltwise's kinds (nn_eltwise_forward / _backward:
-- on the CPU oneDNN's, on all threads where they pay): each returns whether it ran (false: the
-- module's own pass runs).
local function constant(alg) return function() return alg end end
local readsOutput = setmetatable({}, { __index = function(t, alg)
  t[alg] = alg:sub(-4) == '_dst'
  return t[alg]
end })
local function eltwisePasses(name, kinds)
  local f, g = kinds and kinds.forward, kinds and kinds.backward
  if type(f) == 'string' then f = constant(f) end
  if type(g) == 'string' then g = constant(g) end
  local forward = f and function(m, output, input, ...)
    local alg, alpha, beta = f(m, ...)
    return alg ~= nil and backend.of(input).nn_eltwise_forward(name, alg, alpha or 0, beta or 0, output, input)
  end
  local backward = g and function(m, gradInput, input, gradOutput, output, ...)
    local alg, alpha, beta = g(m, ...)
    if alg == nil then return false end
    local data = readsOutput[alg] and output or input
    return backend.of(input).nn_eltwise_backward(name, alg, alpha or 0, beta or 0, gradInput, gradOutput, data)
  end
  return forward or function() return false end, backward or function() return false end
end

function pointwise.define(cls, spec)
  local params = spec.params or none
  local forward, backward = spec.forwardOp, spec.backwardOp
  local prefix = rawget(cls, '__typename'):gsub('^nn%.', '')
  local fastForward, fastBackward = eltwisePasses(prefix, spec.eltwise)
  if not forward then
    forward = defineOp(prefix .. '_forward', function(ops) return ops.nn_loop(2, spec.forward) end,
                       spec.deviceForward)
  end
  if not backward then
    if spec.op then
      local name = spec.op .. '_backward'
      backend.define(name, function(ops) return backwardLoop(ops, spec.backward) end)
      backward = function(_, gradInput, ...) backend.of(gradInput)[name](gradInput, ...) end
    else
      backward = defineOp(prefix .. '_backward', function(ops) return backwardLoop(ops, spec.backward) end,
                          spec.deviceBackward)
    end
  end
  -- a backward body reading the output ($4) reads the last forward's: it must still be the
  -- input's size (an input resized since then would have the loop read past the output's memory)
  local readsOut = spec.backward ~= nil and spec.backward:find('$4', 1, true) ~= nil
  local deviceOk = (spec.forwardOp or spec.deviceForward) ~= nil
    and (spec.backwardOp or spec.op or spec.deviceBackward) ~= nil

  function cls:updateOutput(input)
    pointwise.checkInput(self, input, deviceOk)
    local output = input
    if not self.inplace then output = self.output:resizeAs(input) end
    local p1, p2, p3 = params(self)
    if not fastForward(self, output, input, p1, p2, p3) then forward(self, output, input, p1, p2, p3) end
    if self.inplace then self.output:set(input) end
    return self.output
  end

  function cls:updateGradInput(input, gradOutput)
    pointwise.checkGradOutput(self, input, gradOutput, deviceOk)
    if self.inplace then
      -- gradOutput becomes gradInput: it must have the input's type before it is written
      check.sameType(torch.type(self), input, gradOutput)
    end
    -- in place, input holds the output and gradOutput becomes gradInput
    local gradInput, output = gradOutput, input
    if not self.inplace then
      output = self.output
      if readsOut and (not torch.isTensor(output) or output:nElement() ~= input:nElement()) then
        check.error(('%s: the output of the last forward (%s) does not match input size %s: call forward with this input before backward')
          :format(torch.type(self), torch.isTensor(output) and check.sizestr(output) or torch.type(output),
            check.sizestr(input)))
      end
      gradInput = self.gradInput:resizeAs(input)
    end
    local p1, p2, p3 = params(self)
    if not fastBackward(self, gradInput, input, gradOutput, output, p1, p2, p3) then
      backward(self, gradInput, input, gradOutput, output, p1, p2, p3)
    end
    if self.inplace then self.gradInput:set(gradOutput) end
    return self.gradInput
  end
end

return pointwise
