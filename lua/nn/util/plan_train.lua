-- Whole-model plans in training mode (issue 25; nn/util/plan_conv.lua plans evaluation): an
-- nn.Sequential in training mode, on its first forward for an input's type and sizes, runs layer
-- by layer and then plans what it saw, as evaluation plans do, from these units:
--   - SpatialConvolution [+ SpatialBatchNormalization (batch statistics) [+ ReLU]]: the batch
--     norm and its ReLU as one oneDNN primitive (fuse_norm_relu; the mask kept for the backward);
--   - ConcatTable { body, shortcut } + CAddTable [+ ReLU] (fb.resnet.torch's residual blocks, as
--     plan_conv.lua recognizes them: shortcut nn.Identity, a chain of convolution units or a bare
--     convolution), the add and its ReLU one primitive;
--   - SpatialBatchNormalization [+ ReLU] following no convolution (pre-activation blocks), the
--     same fused primitive;
--   - SpatialMaxPooling.
-- A run of these (a segment) keeps its activations and their gradients in oneDNN's layouts,
-- forward and backward (backend op family nn_plan: plan_train_*). A backward right after a
-- planned forward, of the same input, runs the plan backward: the gradients of the weights
-- accumulate into the modules' gradWeight / gradBias (scale as torch7's), and the running
-- statistics, save_mean and save_std are torch7's. Every other module runs as before.
--
-- What a program sees stays torch7's: the modules inside a segment lack their `output` after a
-- planned forward and their `gradInput` after a planned backward, until something reads one:
-- then every module of the root is put back and the forward (and, after a backward, the
-- updateGradInput) reruns layer by layer on copies of the input and gradient, the batch norms'
-- running statistics put back after it (a rerun is not a training step) and the gradients of
-- the weights untouched. A plan is dropped when the tree, a module's fields (tensors replaced
-- or resized, settings, train flags), the input's sizes or the mode change, and
-- planTrain.enabled (or nn.plans.enabled) off runs every container layer by layer.
local backend = require 'torch.backend'
local plans = require 'nn.util.plans'
local planConv = require 'nn.util.plan_conv'
local I = planConv.internal

local planTrain = { enabled = not os.getenv('LUABRIDGE_NO_TRAIN_PLANS') }

local states = setmetatable({}, { __mode = 'k' })
local WEAK = I.WEAK
local sizesOf, sameSizes, floatTensor = I.sizesOf, I.sameSizes, I.floatTensor

-- the tensors a training plan reads or writes beyond those evaluation plans record
local EXTRA = {
  ['nn.SpatialConvolution'] = { 'gradWeight', 'gradBias' },
  ['nn.SpatialConvolutionMM'] = { 'gradWeight', 'gradBias' },
  ['nn.SpatialBatchNormalization'] = { 'gradWeight', 'gradBias', 'save_mean', 'save_std' },
}

local function record(sig, m)
  I.record(sig, m)
  for _, k in ipairs(EXTRA[torch.typename(m)] or {}) do
    local t = rawget(m, k)
    local n = #sig.tensors + 1
    sig.owners[n], sig.names[n], sig.tensors[n] = m, k, t or false
    if t then
      sig.shapes[n] = { t:storage() and torch.pointer(t:storage()) or 0, t:storageOffset(), t:nElement(), t:dim(),
        t:isContiguous() }
    end
  end
end

local function vector(t, n) return floatTensor(t) and t:nElement() == n end

-- batch norm in training (with the batch's statistics) [+ ReLU] at items[i], over an input of
-- `sizes`: its step (the ReLU fused: fuse_norm_relu, the mask kept for the backward)
local function batchNorm(items, i, sizes)
  local bn, C = items[i] and items[i].m, sizes[2]
  if #sizes ~= 4 or torch.typename(bn) ~= 'nn.SpatialBatchNormalization' or bn.train == false or sizes[1] <= 1
      or bn.eps <= 0 or not (vector(bn.running_mean, C) and vector(bn.running_var, C))
      or not (torch.isTensor(rawget(bn, 'save_mean')) and torch.isTensor(rawget(bn, 'save_std')))
      or not ((bn.weight == nil and bn.bias == nil) or (vector(bn.weight, C) and vector(bn.bias, C)
        and vector(bn.gradWeight, C) and vector(bn.gradBias, C))) then
    return nil
  end
  local out = sizesOf(rawget(bn, 'output'))
  if not out or not sameSizes(out, sizes) then return nil end
  local s = { kind = 'bn', affine = bn.weight ~= nil, eps = bn.eps, out = out }
  local mods, j = { bn }, i + 1
  if I.isReLU(items[j] and items[j].m) then
    s.relu = true
    mods[2], j = items[j].m, j + 1
  end
  return { steps = { s }, params = { { module = bn } }, mods = mods, next = j, sizes = out, convs = 0 }
end

-- conv [+ batch norm in training [+ ReLU]] at items[i]
local function convUnit(items, i, sizes)
  local c = items[i] and items[i].m
  if not I.CONVS[torch.typename(c)] or #sizes ~= 4 or sizes[2] ~= c.nInputPlane
      or (c.dilationW or 1) ~= 1 or (c.dilationH or 1) ~= 1 or not floatTensor(c.weight)
      or c.weight:nElement() ~= c.nOutputPlane * c.nInputPlane * c.kH * c.kW
      or not floatTensor(c.gradWeight) or not c.gradWeight:isContiguous()
      or c.gradWeight:nElement() ~= c.weight:nElement()
      or (c.bias and not (vector(c.bias, c.nOutputPlane) and vector(c.gradBias, c.nOutputPlane))) then
    return nil
  end
  local out = sizesOf(rawget(c, 'output'))
  if not out or #out ~= 4 then return nil end
  local steps = { { kind = 'conv', kH = c.kH, kW = c.kW, dH = c.dH, dW = c.dW, padH = c.padH, padW = c.padW,
    bias = c.bias ~= nil, out = out } }
  local params = { { weight = c.weight, bias = c.bias, gradWeight = c.gradWeight, gradBias = c.gradBias } }
  local u = { steps = steps, params = params, mods = { c }, next = i + 1, sizes = out, convs = 1 }
  local bn = batchNorm(items, i + 1, out)
  if bn then
    steps[2], params[2] = bn.steps[1], bn.params[1]
    for _, m in ipairs(bn.mods) do u.mods[#u.mods + 1] = m end
    u.next = bn.next
  end
  return u
end

-- a batch norm [+ ReLU] that follows no convolution (a pre-activation block's): a unit of its own
local function bnUnit(items, i, sizes)
  if not planConv.preactivation then return nil end
  return batchNorm(items, i, sizes)
end

-- wires a unit's steps into segment seg (value ids)
local function append(seg, u)
  local function new(s)
    seg.count = seg.count + 1
    s.dst = seg.count
    seg.program.values[s.dst] = s.out
    return s.dst
  end
  local current = seg.value
  if u.residual then
    local r = u.residual
    local short = current
    for _, s in ipairs(r.shortcut.steps) do s.src = short; short = new(s) end
    local v = current
    for _, s in ipairs(r.body.steps) do s.src = v; v = new(s) end
    r.sum.a, r.sum.b = v, short
    current = new(r.sum)
  else
    for _, s in ipairs(u.steps) do s.src = current; current = new(s) end
  end
  for k, s in ipairs(u.steps) do
    seg.program.steps[#seg.program.steps + 1] = s
    seg.params[#seg.program.steps] = u.params[k]
  end
  seg.value = current
end

-- What training plans make of plan_conv.lua's pieces (I.cut): their own convolution unit, a
-- residual block's add a step of its own (a oneDNN binary add, the ReLU after it a post-op),
-- and a segment without a batch norm run as it is: little to fuse, and eager's convolutions
-- pick channels-last where the blocked layouts pad channels (LeNet's)
local TRAIN = { record = record, append = append,
  unit = function(items, i, sizes) return convUnit(items, i, sizes) or bnUnit(items, i, sizes) end,
  sum = function(u)
    local sum = { kind = 'add', out = u.sizes, relu = u.relu ~= nil }
    u.residual.sum = sum
    u.steps[#u.steps + 1], u.params[#u.params + 1] = sum, {}
  end,
  keep = function(seg)
    if seg.convs == 0 then return false end
    for _, s in ipairs(seg.program.steps) do if s.kind == 'bn' then return true end end
    return false
  end }

-- the pieces of root's flattened tree: segments and modules run as they are; nil when no
-- convolution is planned
local function build(root, input, sig)
  local pieces, items, ranges = I.cut(TRAIN, root, input, sig)
  if not pieces then return nil end
  -- outputs left lazy: a segment's modules but its last; gradInputs: all but its first
  local fields, isLazyOut, isLazyGrad = setmetatable({}, { __mode = 'k' }), {}, {}
  for _, p in ipairs(pieces) do
    if p.program then
      p.first = p.items[1].m
      local g = rawget(p.first, 'gradInput')
      if g == nil and torch.typename(p.first) == 'nn.SpatialConvolution' then
        p.program.inputGrad = false
      elseif torch.isTensor(g) then
        p.program.inputGrad = true
      else
        return nil
      end
      for _, m in ipairs(p.mods) do
        if m ~= p.last then isLazyOut[m] = true end
        if m ~= p.first then isLazyGrad[m] = true end
      end
    end
  end
  local links, gradLinks = {}, {}
  for _, r in ipairs(ranges) do
    local lastModule, firstModule = items[r.last].m, items[r.first].m
    if isLazyOut[lastModule] then isLazyOut[r.seq] = true
    else links[#links + 1] = { seq = r.seq, from = lastModule } end
    if isLazyGrad[firstModule] then isLazyGrad[r.seq] = true
    else gradLinks[#gradLinks + 1] = { seq = r.seq, from = firstModule } end
  end
  local lazyFwd, lazyAll = {}, {}
  for m in pairs(isLazyOut) do lazyFwd[#lazyFwd + 1] = m end
  for m in pairs(isLazyOut) do lazyAll[#lazyAll + 1] = m end
  for m in pairs(isLazyGrad) do if not isLazyOut[m] then lazyAll[#lazyAll + 1] = m end end
  local OUT, GRAD, BOTH = { 'output', 'indices' }, { 'gradInput' }, { 'output', 'indices', 'gradInput' }
  for m in pairs(isLazyOut) do fields[m] = isLazyGrad[m] and BOTH or OUT end
  for m in pairs(isLazyGrad) do if not isLazyOut[m] then fields[m] = GRAD end end
  return { pieces = pieces, lazyFwd = lazyFwd, lazyAll = lazyAll, fields = fields, links = links,
    gradLinks = gradLinks }
end

------------------------------------------------------------------------------------------------
-- Running

local inputKey = I.inputKey

-- The running statistics of root's modules (every batch norm, those the plan runs as they are
-- too): what a forward in training changes besides outputs.
local function runningStats(root)
  local stats = {}
  for _, m in ipairs(root:listModules()) do
    if torch.isTensor(rawget(m, 'running_mean')) and torch.isTensor(rawget(m, 'running_var')) then
      stats[#stats + 1] = { m, m.running_mean:clone(), m.running_var:clone() }
    end
  end
  return stats
end

local function putBack(stats)
  for _, s in ipairs(stats) do s[1].running_mean:copy(s[2]); s[1].running_var:copy(s[3]) end
end

-- The rerun that materializes a training plan's modules: the forward (as evaluation plans'), then
-- the gradients of the inputs after a planned backward; running statistics put back, the
-- gradInputs of the modules not left lazy kept.
local function rerun(st, root, lazy)
  local stats = runningStats(root)
  local outLazy, gradLazy = {}, {}
  for m, saved in pairs(lazy) do
    for _, k in ipairs(saved.fields) do
      if k == 'output' then outLazy[m] = saved elseif k == 'gradInput' then gradLazy[m] = true end
    end
  end
  local ok, err = I.rerun(st, root, outLazy)
  if ok and st.backed then
    local kept = {}
    local function spare(mod)
      if not gradLazy[mod] then
        local g = rawget(mod, 'gradInput')
        kept[mod] = { g }
        if torch.isTensor(g) then rawset(mod, 'gradInput', g.new()) elseif type(g) == 'table' then rawset(mod, 'gradInput', {}) end
      end
      local list = rawget(mod, 'modules')
      if type(list) == 'table' then for _, c in ipairs(list) do spare(c) end end
    end
    spare(root)
    ok, err = pcall(root.updateGradInput, root, st.inputCopy, st.gradOutputCopy)
    for mod, k in pairs(kept) do rawset(mod, 'gradInput', k[1]) end
  end
  putBack(stats)
  return ok, err
end

TRAIN.inputs = true
TRAIN.compile = function(b, program, threads) return b.plan_train_compile(program, threads) end
TRAIN.run = function(b, exe, src, out, params) b.plan_train_forward(exe, src, out, params) end
TRAIN.lazy = function(st, plan) I.makeLazy(st, plan.lazyFwd) end
local function runForward(st, root, input) return I.runPieces(TRAIN, st, input) end

function planTrain.forward(root, input, layerByLayer)
  local st = states[root]
  if st then I.settle(st); st.ran, st.failed, st.backed = false, nil, nil end
  if not planTrain.enabled or I.busy() or not torch.isTensor(input) or input:dim() ~= 4
      or not backend.of(input).plan_conv_supported(input) then
    return layerByLayer(root, input)
  end
  local key = inputKey(input)
  if st and st.key == key and I.holds(st.sig) then
    if not st.plan then return layerByLayer(root, input) end
    local plan = st.plan
    local ok, out = pcall(runForward, st, root, input)
    if not ok then
      st.failed = true
      I.makeLazy(st, plan.lazyFwd)
      error(out, 0)
    end
    if out ~= nil then st.ran, st.input = true, input; return out end
    if not st.plan then return layerByLayer(root, input) end
  end
  local stats, rng = runningStats(root), torch.getRNGState()
  I.enter()
  local ok, out = pcall(layerByLayer, root, input)
  I.leave()
  if not ok then error(out, 0) end
  st = { root = setmetatable({ root }, WEAK), layerByLayer = layerByLayer, key = key, sig = I.newSignature(),
    rerun = rerun }
  local planned, plan = pcall(build, root, input, st.sig)
  st.plan = planned and plan or nil
  states[root] = st
  if not st.plan or not I.rerunnable(st.plan) then return out end
  -- As in evaluation (plan_conv.lua), this first forward's output comes from the plan too, so
  -- that every forward of one input gives the same bits: from the statistics and the generator
  -- as they were before it, so that it changes them once, as one forward does.
  putBack(stats)
  torch.setRNGState(rng)
  I.release(plan.lazyFwd, I.LAZY_FIELDS)
  local ran, planOut = pcall(runForward, st, root, input)
  if ran and planOut ~= nil then st.ran, st.input = true, input; return planOut end
  -- the plan could not run after all (oneDNN refused a step): layer by layer again, from the
  -- same statistics and generator
  I.settle(st)
  st.plan = nil
  putBack(stats)
  torch.setRNGState(rng)
  I.enter()
  ok, out = pcall(layerByLayer, root, input)
  I.leave()
  if not ok then error(out, 0) end
  return out
end

-- The backward of root after its planned forward of `input`: true and the gradient of the
-- input; false when the plan does not serve it (the caller runs layer by layer: reading the
-- modules' outputs materializes them).
function planTrain.backward(root, input, gradOutput, scale)
  local st = states[root]
  if not (st and st.ran and st.plan and plans.enabled and planTrain.enabled) or st.backed or I.busy()
      or input ~= st.input or not torch.isTensor(gradOutput) or not I.holds(st.sig) then
    return false
  end
  local plan = st.plan
  local last = plan.pieces[#plan.pieces]
  local out = last.program and last.out or rawget(last.m, 'output')
  if not torch.isTensor(out) or not gradOutput:isSameSizeAs(out) then return false end
  local current = gradOutput
  for k = #plan.pieces, 1, -1 do
    local p = plan.pieces[k]
    if p.program then
      local b = backend.of(current)
      if torch.typename(current) ~= 'torch.FloatTensor' or not sameSizes(sizesOf(current), p.program.values[p.program.output]) then
        error(('plan_train: the gradient reaching %s has sizes %s, its output %s'):format(torch.typename(p.last),
          table.concat(sizesOf(current) or {}, 'x'), table.concat(p.program.values[p.program.output], 'x')), 0)
      end
      local gi = nil
      if p.exe.inputGrad then
        gi = rawget(p.first, 'gradInput')
        if not (torch.isTensor(gi) and torch.typename(gi) == 'torch.FloatTensor') then gi = current.new() end
        gi:resize(unpack(p.program.input))
        if not gi:isContiguous() then gi = current.new():resize(unpack(p.program.input)) end
      end
      b.plan_train_backward(p.exe, current:contiguous(), gi, p.params, scale or 1)
      -- a ReLU in place at the end writes its mask into the gradient it got, as torch7's
      local lastM = p.last
      if I.isReLU(lastM) and rawget(lastM, 'inplace') then
        p.mask = p.mask or torch.ByteTensor()
        p.mask:resize(p.out:size()):copy(p.out:le(0))
        current:maskedFill(p.mask, 0)
      end
      rawset(p.first, 'gradInput', gi)
      current = gi
    else
      local r = p.owner:rethrowErrors(p.m, p.index, 'backward', p.input, current, scale)
      if p.index > 1 then p.m.gradInput = r end
      current = r
    end
  end
  for _, l in ipairs(plan.gradLinks) do rawset(l.seq, 'gradInput', rawget(l.from, 'gradInput')) end
  st.gradOutputCopy = (st.gradOutputCopy or gradOutput.new()):resizeAs(gradOutput):copy(gradOutput)
  st.backed = true
  I.makeLazy(st, plan.lazyAll, function(m) return plan.fields[m] end)
  return true, current
end

function planTrain.settle(root)
  local st = states[root]
  if st then I.settle(st); st.ran, st.backed = false, nil end
end

-- The oneDNN implementations root's last planned run ran, one list per segment (tests).
function planTrain.steps(root)
  local st = states[root]
  local lists = {}
  for _, p in ipairs(st and st.plan and st.plan.pieces or {}) do
    if p.exe then lists[#lists + 1] = backend.of(p.out).plan_train_steps(p.exe) end
  end
  return lists
end

-- What root's training plan holds (tests, bench/plans_train_memory.lua): lazy, the bytes its
-- lazy modules keep beside the plan; buffers, the bytes of its exes' buffers (forward and
-- backward) and pool, of the slots they share.
function planTrain.memory(root)
  local st = states[root]
  local r = { lazy = st and I.lazyBytes(st) or 0, buffers = 0, pool = 0 }
  for _, p in ipairs(st and st.plan and st.plan.pieces or {}) do
    for _, exe in pairs(p.exes or {}) do
      r.buffers, r.pool = r.buffers + (exe.bufferBytes or 0), r.pool + (exe.slotBytes or 0)
    end
  end
  return r
end

function planTrain.planned(root)
  local st = states[root]
  return st ~= nil and st.ran == true
end

return planTrain
