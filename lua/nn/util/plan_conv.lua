-- Whole-model plans for conv nets (issue 25; the switch: nn.util.plans): an nn.Sequential in
-- evaluation mode, on its first forward for an input's type and sizes, runs layer by layer
-- (so any error is the one torch7 gave) and then plans its subtree from what it saw:
--   - nested nn.Sequentials are flattened into one list of modules;
--   - SpatialConvolution [+ SpatialBatchNormalization in evaluation] [+ ReLU] becomes one oneDNN
--     convolution with post-ops (the batch norm as a per-channel multiply and add, computed from
--     the running statistics at each run; the ReLU as an eltwise post-op);
--   - ConcatTable { body, shortcut } + CAddTable [+ ReLU] (fb.resnet.torch's residual blocks;
--     shortcut nn.Identity, a convolution or a chain of them) becomes the shortcut's
--     convolutions, then the body's, the last with a sum post-op over the shortcut (and the ReLU);
--   - SpatialMaxPooling becomes oneDNN's pooling;
--   - a SpatialBatchNormalization [+ ReLU] that follows no convolution (pre-activation blocks)
--     becomes one oneDNN batch normalization with the running statistics (planConv.preactivation);
--   - cudnn's SpatialConvolution (one group), SpatialBatchNormalization, ReLU and
--     SpatialMaxPooling count as nn's (kindOf: their forward is the nn class's);
--   - runs of these (segments) keep their activations in oneDNN's blocked layouts: the input
--     is read in place, the output reordered once into a plain tensor; every other module runs
--     as it always did, between segments (a module whose output is a table too: no segment
--     starts on a table). planConv.why(root) says why a forward ran no plan.
-- The later forwards with the same input sizes, tree, fields and mode run the plan (the backend
-- family nn_plan; a device without it and other element types run layer by layer; training mode plans
-- itself in nn/util/plan_train.lua).
--
-- What a program sees stays torch7's: the modules a segment skips (all but its last) lose their
-- `output` (and a max pooling its `indices`) until something reads them: their metatable is
-- then a stand-in for their class's (same typename, isTypeOf, getmetatable, methods) whose
-- first read of a field they lack, or pairs over them (torch.save, :type(), :clone()), puts
-- every module back and reruns the forward layer by layer on a copy of the input, so every
-- output then holds the value torch7 gave it (in-place aliasing included). A plan is dropped when the tree, a
-- module's fields (tensors replaced or resized, settings, train flags) or the input's sizes change.
local backend = require 'torch.backend'

-- preactivation: whether a batch norm that follows no convolution (pre-activation blocks) runs
-- in a segment, as one oneDNN pass (off: such a batch norm and its ReLU run as they are, between
-- segments; for tests and measurements)
-- reruns: how many layer-by-layer reruns materialized lazy modules (tests: a planned step runs none)
local planConv = { preactivation = true, reruns = 0 }

-- root Sequential -> its state. LuaJIT has no ephemerons: nothing in a state refers to its root
-- but through weak tables (WEAK), or a planned model would never be collected.
local states = setmetatable({}, { __mode = 'k' })
local WEAK = { __mode = 'v' }
local lazyOf = setmetatable({}, { __mode = 'k' })   -- module left lazy -> the state holding it
local whyNot = setmetatable({}, { __mode = 'k' })   -- root -> why its last forward ran no plan
local learning = 0   -- > 0 while a root runs (or reruns) layer by layer: nothing plans then

------------------------------------------------------------------------------------------------
-- Lazily materialized modules

local materialize
local LAZY_FIELDS = { 'output', 'indices' }
-- (a training plan's modules lack their gradInput too: nn/util/plan_train.lua)
local LAZY = { output = true, indices = true, gradInput = true }

-- The stand-in of class metatable mt on a lazy module.
local standins = setmetatable({}, { __mode = 'k' })
local function standinOf(mt)
  local s = standins[mt]
  if s then return s end
  s = {}
  for k, v in pairs(mt) do
    if type(k) == 'string' and k:sub(1, 2) == '__' then s[k] = v end
  end
  -- a lazy module differs from itself only by the fields it lacks: reading (or setting) one of
  -- those, or going through all fields, materializes; the rest is its class's as before
  s.__index = function(m, k)
    if LAZY[k] then
      materialize(m)
      -- never left a stand-in with no state to settle it (its read would loop)
      if debug.getmetatable(m) == s then debug.setmetatable(m, mt) end
      return m[k]
    end
    return mt[k]
  end
  s.__newindex = function(m, k, v)
    if LAZY[k] then materialize(m) end
    rawset(m, k, v)
  end
  s.__pairs = function(m) materialize(m); return next, m, nil end
  s.__metatable = mt
  torch._standin(s, mt)
  standins[mt] = s
  return s
end


-- Puts the modules st left lazy back as they were, their fields emptied (no rerun: for a
-- forward or clearState about to replace them).
local function settle(st)
  local lazy = st.lazy
  if not lazy then return end
  st.lazy = nil
  for m, saved in pairs(lazy) do
    debug.setmetatable(m, saved.mt)
    for _, k in ipairs(saved.fields) do rawset(m, k, saved[k]) end
    lazyOf[m] = nil
  end
end

-- The rerun writes only the lazy modules' outputs: every other module of root's tree keeps the
-- output the plan's run left it, which modules after root may have changed in place since
-- (fb.resnet.torch's CAddTable(true) and ReLU(true) after a planned branch write into the
-- branch's output), as torch7's would hold. The rerun computes those into spare tensors, and a
-- lazy output that aliased one of them is pointed at the kept one, as torch7's aliasing was.
local function rerun(st, root, lazy)
  planConv.reruns = planConv.reruns + 1
  local kept, keptStorages = {}, {}
  local function spare(mod)
    if not lazy[mod] then
      local o = rawget(mod, 'output')
      if torch.isTensor(o) then
        kept[mod] = o; rawset(mod, 'output', o.new())
        if o:storage() then keptStorages[torch.pointer(o:storage())] = true end
      elseif type(o) == 'table' then kept[mod] = o; rawset(mod, 'output', {}) end
    end
    local list = rawget(mod, 'modules')
    if type(list) == 'table' then
      for _, c in ipairs(list) do spare(c) end
    end
  end
  spare(root)
  -- the random numbers the plan's run drew (a module between segments drawing noise): drawn again
  -- the same, and the program's stream left where it was
  local rng, now = st.rng, nil
  if rng then now = torch.getRNGState(); torch.setRNGState(rng) end
  -- a lazy module whose own tensor is a kept one (a segment's last module in place: its output
  -- is the one before it) computes into a spare too
  for l in pairs(lazy) do
    local o = rawget(l, 'output')
    if torch.isTensor(o) and o:storage() and keptStorages[torch.pointer(o:storage())] then
      rawset(l, 'output', o.new())
    end
  end
  local ok, err = pcall(st.layerByLayer, root, st.inputCopy)
  if rng then torch.setRNGState(now) end
  local moved = {}
  for mod, o in pairs(kept) do
    local x = rawget(mod, 'output')
    if torch.isTensor(x) and torch.isTensor(o) and x:storage() and o:storage() and x:isContiguous()
        and o:isContiguous() and x:nElement() == o:nElement() then
      moved[#moved + 1] = { x = x, o = o }
    end
    rawset(mod, 'output', o)
  end
  -- t, or the view of the kept tensor at t's place where t lies in a spare
  local function repointed(t)
    if not (torch.isTensor(t) and t:storage()) then return t end
    for _, mv in ipairs(moved) do
      if torch.pointer(t:storage()) == torch.pointer(mv.x:storage()) then
        local offset = t:storageOffset() - mv.x:storageOffset()
        if offset >= 0 and offset + t:nElement() <= mv.o:nElement() then
          return mv.o.new():set(mv.o:storage(), mv.o:storageOffset() + offset, t:size(), t:stride())
        end
        return t
      end
    end
    return t
  end
  for l in pairs(lazy) do
    local t = rawget(l, 'output')
    if torch.isTensor(t) then
      rawset(l, 'output', repointed(t))
    elseif type(t) == 'table' then
      -- a lazy ConcatTable's entries are its branches' outputs: the same tensors as theirs
      for i, v in ipairs(t) do t[i] = repointed(v) end
    end
  end
  return ok, err
end

function materialize(m)
  local st = lazyOf[m]
  if not st then return end
  local lazy = st.lazy
  settle(st)
  learning = learning + 1
  local root = st.root[1]
  if not root then learning = learning - 1; return end
  local ok, err = (st.rerun or rerun)(st, root, lazy)
  learning = learning - 1
  -- after a planned forward that failed, the rerun fails at the same module: the outputs up to
  -- it are torch7's after that forward, and the error was the forward's to raise
  if not ok and not st.failed then error(err, 0) end
end

-- What a lazy module keeps of a field's value while the plan serves the module: the value's
-- kind without its memory (an empty tensor of its type, an empty table), which a rerun fills.
-- The value was the last layer-by-layer run's, which nothing reads until a rerun replaces it:
-- kept, those tensors sat beside the plan's buffers (ResNet-18's training at batch 8: 164 MB).
-- A program holding the old tensor keeps it (and its memory) as it was.
local function emptied(v)
  if torch.isTensor(v) then return v.new() end
  if type(v) == 'table' and getmetatable(v) == nil then return {} end
  return v
end

-- Before a new plan's first run: the fields the run leaves lazy emptied already, so that the
-- layer-by-layer run's tensors go before the plan makes its buffers (the collector runs: a
-- dead tensor's memory goes back after three cycles, core/memory.lua).
local function release(modules, fields)
  for _, m in ipairs(modules) do
    for _, k in ipairs(fields) do rawset(m, k, emptied(rawget(m, k))) end
  end
  for _ = 1, 3 do collectgarbage() end
end

-- The bytes of the distinct storages the modules st left lazy keep beside the plan (tests)
local function lazyBytes(st)
  local seen, bytes = {}, 0
  local function count(v)
    if torch.isTensor(v) then
      local s = v:storage()
      if s and not seen[torch.pointer(s)] then
        seen[torch.pointer(s)] = true
        bytes = bytes + s:size() * s:elementSize()
      end
    elseif type(v) == 'table' and getmetatable(v) == nil then
      for _, x in pairs(v) do count(x) end
    end
  end
  for _, saved in pairs(st.lazy or {}) do
    for _, k in ipairs(saved.fields) do count(saved[k]) end
  end
  return bytes
end

-- fieldsOf(m): the fields module m lacks until read (default output and indices)
local function makeLazy(st, modules, fieldsOf)
  -- modules this state left lazy already (a forward of root from inside one of its modules
  -- ran a plan too): back as they were first, or their stand-in would be saved as their class
  settle(st)
  local lazy = {}
  for _, m in ipairs(modules) do
    local fields = fieldsOf and fieldsOf(m) or LAZY_FIELDS
    -- lazy from another root's plan (a container planned on its own too): back as it was first
    local other = lazyOf[m]
    if other and other ~= st then settle(other) end
    local mt = debug.getmetatable(m)
    local saved = { mt = mt, fields = fields }
    for _, k in ipairs(fields) do saved[k] = emptied(rawget(m, k)); rawset(m, k, nil) end
    lazy[m] = saved
    lazyOf[m] = st
    debug.setmetatable(m, standinOf(mt))
  end
  st.lazy = lazy
end

------------------------------------------------------------------------------------------------
-- Signatures: what a plan depends on, checked before each run

local FIELDS = {
  ['nn.SpatialConvolution'] = { 'nInputPlane', 'nOutputPlane', 'kW', 'kH', 'dW', 'dH', 'padW', 'padH',
    'dilationW', 'dilationH', 'train' },
  ['nn.SpatialBatchNormalization'] = { 'eps', 'momentum', 'affine', 'train' },
  ['nn.ReLU'] = { 'threshold', 'val', 'inplace', 'train' },
  ['nn.SpatialMaxPooling'] = { 'kW', 'kH', 'dW', 'dH', 'padW', 'padH', 'ceil_mode', 'train' },
  ['nn.CAddTable'] = { 'inplace', 'train' },
}
local TENSORS = {
  ['nn.SpatialConvolution'] = { 'weight', 'bias' },
  ['nn.SpatialBatchNormalization'] = { 'weight', 'bias', 'running_mean', 'running_var' },
}
local NONE = { 'train' }
FIELDS['nn.SpatialConvolutionMM'], TENSORS['nn.SpatialConvolutionMM'] = FIELDS['nn.SpatialConvolution'],
  TENSORS['nn.SpatialConvolution']
-- convolutions planned (SpatialConvolutionMM's 2D weight has the 4D one's memory order)
local CONVS = { ['nn.SpatialConvolution'] = true, ['nn.SpatialConvolutionMM'] = true }

-- cudnn's layers (lua/cudnn: subclasses of nn's, as checkpoints and cudnn.convert make them) plan
-- as the nn class they derive from where their forward is that class's own function: the
-- activations, poolings and batch normalizations (cudnn's batch norm differs in its backward
-- only), and cudnn.SpatialConvolution with one group (its forward calls nn's then; `groups` is
-- in its signature, so a grouped one is never run by a plan made for one group).
local CUDNN = { SpatialConvolution = true, SpatialBatchNormalization = true, ReLU = true, SpatialMaxPooling = true }
for name in pairs(CUDNN) do
  FIELDS['cudnn.' .. name], TENSORS['cudnn.' .. name] = FIELDS['nn.' .. name], TENSORS['nn.' .. name]
end
FIELDS['cudnn.SpatialConvolution'] = { 'groups', unpack(FIELDS['nn.SpatialConvolution']) }

-- The class m is planned as ('nn.SpatialConvolution', ...), or nil.
local function kindOf(m)
  local name = torch.typename(m)
  if not name or name:sub(1, 6) ~= 'cudnn.' then return name end
  local short = name:sub(7)
  if not CUDNN[short] then return nil end
  local cls, base = torch.getmetatable(name), torch.getmetatable('nn.' .. short)
  if not cls or not base then return nil end
  if short == 'SpatialConvolution' then
    if (rawget(m, 'groups') or 1) ~= 1 then return nil end
  elseif cls.updateOutput ~= base.updateOutput then
    return nil
  end
  return 'nn.' .. short
end

local function storagePointer(t)
  local s = t:storage()
  return s and torch.pointer(s) or 0
end

-- Records what module m's plan depends on into sig (flat lists, compared in order).
local function record(sig, m)
  local name = torch.typename(m)
  for _, k in ipairs(FIELDS[name] or NONE) do
    local n = #sig.objects + 1
    sig.objects[n], sig.keys[n], sig.values[n] = m, k, rawget(m, k)
  end
  for _, k in ipairs(TENSORS[name] or {}) do
    local t = rawget(m, k)
    local n = #sig.tensors + 1
    sig.owners[n], sig.names[n], sig.tensors[n] = m, k, t or false
    if t then sig.shapes[n] = { storagePointer(t), t:storageOffset(), t:nElement(), t:dim(), t:isContiguous() } end
  end
  local list = rawget(m, 'modules')
  if type(list) == 'table' then
    local n = #sig.containers + 1
    sig.containers[n], sig.lists[n], sig.counts[n] = m, list, #list
    sig.children[n] = { unpack(list) }
  end
end

local function newSignature()
  return { objects = setmetatable({}, WEAK), keys = {}, values = {}, owners = setmetatable({}, WEAK),
    names = {}, tensors = {}, shapes = {},
    containers = setmetatable({}, WEAK), lists = {}, counts = {}, children = {} }
end

local function holds(sig)
  local objects, keys, values = sig.objects, sig.keys, sig.values
  for i = 1, #objects do
    if rawget(objects[i], keys[i]) ~= values[i] then return false end
  end
  local owners, names, tensors, shapes = sig.owners, sig.names, sig.tensors, sig.shapes
  for i = 1, #owners do
    local t = rawget(owners[i], names[i])
    if (t or false) ~= tensors[i] then return false end
    if t then
      local was = shapes[i]
      if storagePointer(t) ~= was[1] or t:storageOffset() ~= was[2] or t:nElement() ~= was[3]
          or t:dim() ~= was[4] or t:isContiguous() ~= was[5] then
        return false
      end
    end
  end
  for i, c in ipairs(sig.containers) do
    local list = rawget(c, 'modules')
    if list ~= sig.lists[i] or #list ~= sig.counts[i] then return false end
    local children = sig.children[i]
    for j = 1, #children do
      if list[j] ~= children[j] then return false end
    end
  end
  return true
end

------------------------------------------------------------------------------------------------
-- Planning

local function sizesOf(t)
  if not torch.isTensor(t) then return nil end
  return t:size():totable()
end

-- Module lists flattened through nested nn.Sequentials: items { m, owner, index }; ranges
-- { seq, first, last } for each nested Sequential (last < first when it is empty).
local function flatten(seq, items, ranges, sig)
  record(sig, seq)
  for i, m in ipairs(seq.modules) do
    if torch.typename(m) == 'nn.Sequential' then
      local first = #items + 1
      flatten(m, items, ranges, sig)
      ranges[#ranges + 1] = { seq = m, first = first, last = #items }
    else
      items[#items + 1] = setmetatable({ m = m, owner = seq, index = i }, WEAK)
    end
  end
end

local function isReLU(m)
  return kindOf(m) == 'nn.ReLU' and rawget(m, 'threshold') == 0 and rawget(m, 'val') == 0
end

local function floatTensor(t) return torch.typename(t) == 'torch.FloatTensor' end

local function sameSizes(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

-- Whether m is a batch norm in evaluation over C channels that plans serve
local function evalBN(m, C)
  return kindOf(m) == 'nn.SpatialBatchNormalization' and m.train == false and m.eps > 0
    and floatTensor(m.running_mean) and floatTensor(m.running_var)
    and m.running_mean:nElement() == C and m.running_var:nElement() == C
    and (m.weight == nil or floatTensor(m.weight) and m.weight:nElement() == C)
    and (m.bias == nil or floatTensor(m.bias) and m.bias:nElement() == C)
end

-- A convolution unit at items[i] for input sizes `sizes`: the step, its modules, the index
-- after it and its output sizes; nil when items[i] does not start one.
local function convUnit(items, i, sizes)
  local c = items[i] and items[i].m
  if not CONVS[kindOf(c)] or #sizes ~= 4 or sizes[2] ~= c.nInputPlane
      or (c.dilationW or 1) ~= 1 or (c.dilationH or 1) ~= 1 or not floatTensor(c.weight)
      or c.weight:nElement() ~= c.nOutputPlane * c.nInputPlane * c.kH * c.kW
      or (c.bias and (not floatTensor(c.bias) or c.bias:nElement() ~= c.nOutputPlane)) then
    return nil
  end
  local out = sizesOf(rawget(c, 'output'))
  if not out or #out ~= 4 then return nil end
  local step = { kind = 'conv', kH = c.kH, kW = c.kW, dH = c.dH, dW = c.dW, padH = c.padH, padW = c.padW,
    bias = c.bias ~= nil, out = out }
  local param = { weight = c.weight, bias = c.bias }
  local mods, j = { c }, i + 1
  local bn = items[j] and items[j].m
  if evalBN(bn, out[2]) then
    step.bn = true
    param.bn = { mean = bn.running_mean, var = bn.running_var, weight = bn.weight, bias = bn.bias, eps = bn.eps }
    mods[#mods + 1], j = bn, j + 1
  end
  local relu = items[j] and items[j].m
  if isReLU(relu) then
    step.relu = true
    mods[#mods + 1], j = relu, j + 1
  end
  return { steps = { step }, params = { param }, mods = mods, next = j, sizes = out, convs = 1 }
end

-- A batch norm in evaluation [+ ReLU] that follows no convolution (a pre-activation block's, as
-- fb.resnet.torch's preresnet.lua and wide-residual-networks build them): one oneDNN batch
-- normalization with the running statistics, the ReLU fused, over the activation where it lies.
local function bnUnit(items, i, sizes)
  local bn = items[i] and items[i].m
  if not planConv.preactivation or #sizes ~= 4 or not evalBN(bn, sizes[2]) then return nil end
  local out = sizesOf(rawget(bn, 'output'))
  if not out or not sameSizes(out, sizes) then return nil end
  local step = { kind = 'bn', eps = bn.eps, out = out }
  local mods, j = { bn }, i + 1
  if isReLU(items[j] and items[j].m) then
    step.relu = true
    mods[2], j = items[j].m, j + 1
  end
  return { steps = { step }, params = { { mean = bn.running_mean, var = bn.running_var, weight = bn.weight,
    bias = bn.bias } }, mods = mods, next = j, sizes = out, convs = 0 }
end

local function maxPoolUnit(items, i, sizes)
  local p = items[i] and items[i].m
  if kindOf(p) ~= 'nn.SpatialMaxPooling' or #sizes ~= 4 then return nil end
  local out = sizesOf(rawget(p, 'output'))
  if not out or #out ~= 4 or out[2] ~= sizes[2] then return nil end
  return { steps = { { kind = 'maxpool', kH = p.kH, kW = p.kW, dH = p.dH, dW = p.dW, padH = p.padH,
    padW = p.padW, out = out } }, params = {}, mods = { p }, next = i + 1, sizes = out, convs = 0 }
end

-- What evaluation plans and training plans (nn/util/plan_train.lua) each make of the units they
-- share, the residual blocks: kind.unit(items, i, sizes) is a convolution unit as the kind plans
-- it (nil where items[i] starts none), kind.record(sig, m) records what it depends on, and
-- kind.sum(u) makes the block's add of u.residual = { body, shortcut, last } (u.relu: the ReLU
-- after the add, or nil).

-- A branch of a residual block: nn.Identity (nil steps), a convolution (wide-residual-networks'
-- shortcut) or an nn.Sequential made only of convolution units; false when it is none of these.
local function chain(kind, branch, sizes, sig)
  local name = torch.typename(branch)
  if name == 'nn.Identity' then
    kind.record(sig, branch)
    return { steps = {}, params = {}, mods = { branch }, sizes = sizes, convs = 0, identity = true }
  end
  local items, ranges = {}, {}
  local whole = { steps = {}, params = {}, mods = {}, sizes = sizes, convs = 0 }
  if CONVS[kindOf(branch)] then
    items[1] = setmetatable({ m = branch }, WEAK)
  elseif name == 'nn.Sequential' then
    flatten(branch, items, ranges, sig)
    whole.mods[1] = branch
  else
    return false
  end
  for _, r in ipairs(ranges) do
    if r.last < r.first then return false end
    whole.mods[#whole.mods + 1] = r.seq
  end
  local i = 1
  while i <= #items do
    local u = kind.unit(items, i, whole.sizes)
    if not u then return false end
    for k, s in ipairs(u.steps) do whole.steps[#whole.steps + 1], whole.params[#whole.params + 1] = s, u.params[k] end
    for _, m in ipairs(u.mods) do whole.mods[#whole.mods + 1] = m; kind.record(sig, m) end
    whole.sizes, whole.convs, i = u.sizes, whole.convs + u.convs, u.next
  end
  if #whole.steps == 0 then return false end
  return whole
end

-- sig gets what probe recorded
local function merge(sig, probe)
  for k = 1, #probe.objects do
    local n = #sig.objects + 1
    sig.objects[n], sig.keys[n], sig.values[n] = probe.objects[k], probe.keys[k], probe.values[k]
  end
  for k = 1, #probe.owners do
    local n = #sig.owners + 1
    sig.owners[n], sig.names[n], sig.tensors[n], sig.shapes[n] = probe.owners[k], probe.names[k],
      probe.tensors[k], probe.shapes[k]
  end
  for k = 1, #probe.containers do
    local n = #sig.containers + 1
    sig.containers[n], sig.lists[n], sig.counts[n], sig.children[n] = probe.containers[k], probe.lists[k],
      probe.counts[k], probe.children[k]
  end
end

-- ConcatTable { body, shortcut } + CAddTable [+ ReLU] at items[i], planned as `kind`: the
-- shortcut's steps, then the body's, then what kind.sum adds; nil when it is no such block.
local function residualUnit(kind, items, i, sizes, sig)
  local ct, add = items[i] and items[i].m, items[i + 1] and items[i + 1].m
  if torch.typename(ct) ~= 'nn.ConcatTable' or #ct.modules ~= 2 or torch.typename(add) ~= 'nn.CAddTable'
      or #sizes ~= 4 then
    return nil
  end
  local probe = newSignature()
  local a, b = chain(kind, ct.modules[1], sizes, probe), chain(kind, ct.modules[2], sizes, probe)
  if not a or not b or (a.identity and b.identity) then return nil end
  -- in place, the sum goes into the first branch's output: not into the block's input
  if a.identity and add.inplace then return nil end
  local body, shortcut = a, b
  if a.identity or (a.steps[#a.steps].relu and not b.identity) then body, shortcut = b, a end
  local last = body.steps[#body.steps]
  if last.relu or not sameSizes(body.sizes, shortcut.sizes) then return nil end
  local out = sizesOf(rawget(add, 'output'))
  if not out or not sameSizes(out, body.sizes) then return nil end
  local u = { steps = {}, params = {}, mods = { ct }, sizes = out, convs = body.convs + shortcut.convs,
    residual = { body = body, shortcut = shortcut, last = last } }
  for _, part in ipairs { shortcut, body } do
    for k, s in ipairs(part.steps) do u.steps[#u.steps + 1], u.params[#u.params + 1] = s, part.params[k] end
    for _, m in ipairs(part.mods) do u.mods[#u.mods + 1] = m end
  end
  u.mods[#u.mods + 1] = add
  local j = i + 2
  local relu = items[j] and items[j].m
  if isReLU(relu) then
    u.relu = relu
    u.mods[#u.mods + 1], j = relu, j + 1
  end
  u.next = j
  if kind.sum(u) == false then return nil end
  merge(sig, probe)
  return u
end

-- The unit of a plan of `kind` starting at items[i]: a convolution unit, a residual block or a
-- max pooling; nil where none starts.
local function unitAt(kind, items, i, sizes, sig)
  return kind.unit(items, i, sizes) or residualUnit(kind, items, i, sizes, sig) or maxPoolUnit(items, i, sizes)
end


-- Wires a unit's steps into segment seg: value ids, the sum of a residual block.
local function append(seg, u)
  local current = seg.value
  if u.residual then
    local short = current
    local r = u.residual
    for _, s in ipairs(r.shortcut.steps) do
      seg.count = seg.count + 1
      s.src, s.dst = short, seg.count
      short = s.dst
    end
    local v = current
    for _, s in ipairs(r.body.steps) do
      seg.count = seg.count + 1
      s.src, s.dst = v, seg.count
      v = s.dst
    end
    r.last.sum = short
    current = v
  else
    for _, s in ipairs(u.steps) do
      seg.count = seg.count + 1
      s.src, s.dst = current, seg.count
      current = s.dst
    end
  end
  for k, s in ipairs(u.steps) do
    seg.program.values[s.dst] = s.out
    seg.program.steps[#seg.program.steps + 1] = s
    if s.kind == 'conv' then seg.params[#seg.params + 1] = u.params[k] end
    if s.kind == 'bn' then
      seg.params.bn = seg.params.bn or {}
      seg.params.bn[#seg.params.bn + 1] = u.params[k]
    end
  end
  seg.value = current
end

-- Plans root's flattened modules (their outputs hold the layer-by-layer run's): pieces, each a
-- segment or a module run as it is; nil and the reason when nothing is planned.
-- Root's tree flattened (through nested nn.Sequentials: flatten) and cut into pieces for plans
-- of `kind`: segments (runs of the kind's units, their modules' outputs holding the layer-by-
-- layer run's) and items run as they are, with how many convolutions the segments plan; a
-- segment kind.keep(seg) declines runs as it is too. Nil and the reason when nothing can be
-- planned.
local function cut(kind, root, input, sig)
  local items, ranges = {}, {}
  flatten(root, items, ranges, sig)
  for _, r in ipairs(ranges) do
    if r.last < r.first then return nil, 'an empty nn.Sequential inside' end
  end
  local seen = {}
  for _, it in ipairs(items) do
    if seen[it.m] then   -- a module met twice: its output is not one value
      return nil, ('%s is in the tree twice'):format(torch.type(it.m))
    end
    seen[it.m] = true
    kind.record(sig, it.m)
  end
  local pieces, seg = {}, nil
  local sizes = sizesOf(input)
  local convs = 0
  local function close()
    if not seg then return end
    if not kind.keep(seg) then
      for _, it in ipairs(seg.items) do pieces[#pieces + 1] = it end
    else
      seg.program.output = seg.value
      pieces[#pieces + 1] = seg
      convs = convs + seg.convs
    end
    seg = nil
  end
  local i = 1
  while i <= #items do
    local u = unitAt(kind, items, i, sizes, sig)
    if u then
      if not seg then
        seg = { program = { input = sizes, steps = {}, values = { [0] = sizes }, pool = {} }, params = {}, value = 0,
          count = 0, items = {}, mods = {}, convs = 0, exes = {} }
      end
      for k = i, u.next - 1 do seg.items[#seg.items + 1] = items[k] end
      for _, m in ipairs(u.mods) do seg.mods[#seg.mods + 1] = m end
      kind.append(seg, u)
      seg.convs = seg.convs + u.convs
      seg.last = u.mods[#u.mods]
      sizes, i = u.sizes, u.next
    else
      close()
      pieces[#pieces + 1] = items[i]
      local o = rawget(items[i].m, 'output')
      if torch.isTensor(o) then
        sizes = sizesOf(o)
      elseif type(o) == 'table' then
        sizes = {}   -- a table (a ConcatTable's branches): no segment starts on it
      else
        return nil, ('%s left no output'):format(torch.type(items[i].m))
      end
      i = i + 1
    end
  end
  close()
  if convs == 0 then return nil, 'no convolution the planner knows' end
  return pieces, items, ranges
end

-- evaluation plans: the add a binary post-op of the body's last convolution (append), with
-- the ReLU after it; a segment without a convolution is not worth two reorders
local EVAL = { record = record, append = append,
  unit = function(items, i, sizes) return convUnit(items, i, sizes) or bnUnit(items, i, sizes) end,
  -- (a body ending in a pre-activation's batch norm has no convolution to take the add)
  sum = function(u)
    local last = u.residual.last
    if last.kind ~= 'conv' then return false end
    if u.relu then last.relu = true end
  end,
  keep = function(seg) return seg.convs > 0 end }

local function build(root, input, sig)
  local pieces, items, ranges = cut(EVAL, root, input, sig)
  if not pieces then return nil, items end
  -- the modules left lazy: all those of a segment but its last, and the nested Sequentials
  -- whose last module is one of those
  local lazy, isLazy = {}, {}
  for _, p in ipairs(pieces) do
    if p.program then
      for _, m in ipairs(p.mods) do
        if m ~= p.last then lazy[#lazy + 1], isLazy[m] = m, true end
      end
    end
  end
  local links = {}
  for _, r in ipairs(ranges) do
    local lastModule = items[r.last].m
    if isLazy[lastModule] then
      lazy[#lazy + 1], isLazy[r.seq] = r.seq, true
    else
      links[#links + 1] = { seq = r.seq, from = lastModule }
    end
  end
  return { pieces = pieces, lazy = lazy, links = links }
end

------------------------------------------------------------------------------------------------
-- Running

local function inputKey(input)
  local s = input:size()
  return ('%s %d %d %d %d %s %s'):format(torch.typename(input), s[1], s[2], s[3], s[4], tostring(input:isContiguous()),
    tostring(planConv.preactivation))
end

-- Runs st's plan on input, as `kind` (evaluation's or training's: kind.compile / kind.run, the
-- backend's ops; kind.lazy, what a run leaves lazy; kind.inputs, whether each piece keeps its
-- input for the backward): the output, or nil when the plan cannot run (oneDNN refused a step,
-- or a module before a segment gave other sizes than when planned: plan again).
local function runPieces(kind, st, input)
  local plan = st.plan
  local current = input
  local b = backend.of(input)
  local threads = b.plan_conv_threads()
  st.inputCopy = st.inputCopy or input.new()
  st.inputCopy:resizeAs(input):copy(input)
  if plan.mixed == nil then
    plan.mixed = false
    for _, p in ipairs(plan.pieces) do if not p.program then plan.mixed = true end end
  end
  st.rng = plan.mixed and torch.getRNGState() or nil
  for _, p in ipairs(plan.pieces) do
    if kind.inputs then p.input = current end
    if p.program then
      local exe = p.exes[threads]
      if exe == nil then
        local why
        exe, why = kind.compile(b, p.program, threads)
        if not exe then
          st.plan = nil   -- oneDNN refuses a step: layer by layer while this signature holds
          st.why = 'oneDNN refused a step: ' .. tostring(why)
          return nil
        end
        p.exes[threads] = exe
      end
      local now = sizesOf(current)
      if not now or not sameSizes(now, p.program.input) or not b.plan_conv_supported(current) then
        return nil
      end
      if not p.out then
        -- the tensor the layer-by-layer run left in the segment's last module, as torch7 reuses
        -- it: a program holding the output of an earlier forward sees the later ones
        local o = rawget(p.last, 'output')
        if torch.isTensor(o) and torch.typename(o) == torch.typename(current) and o:isContiguous() then p.out = o end
      end
      if not p.out or not p.out:isContiguous() then p.out = current.new() end
      p.out:resize(unpack(p.program.values[p.program.output]))
      p.exe = exe
      kind.run(b, exe, current:contiguous(), p.out, p.params)
      rawset(p.last, 'output', p.out)
      current = p.out
    else
      current = p.owner:rethrowErrors(p.m, p.index, 'updateOutput', current)
    end
  end
  for _, l in ipairs(plan.links) do rawset(l.seq, 'output', rawget(l.from, 'output')) end
  kind.lazy(st, plan)
  return current
end

EVAL.compile = function(b, program, threads) return b.plan_conv_compile(program, threads) end
EVAL.run = function(b, exe, src, out, params) b.plan_conv_run(exe, src, out, params) end
EVAL.lazy = function(st, plan) makeLazy(st, plan.lazy) end
local function runPlan(st, root, input) return runPieces(EVAL, st, input) end

-- The folders of nn's and cudnn's own classes (this file is nn/util/plan_conv.lua).
local LUA_FOLDER = debug.getinfo(1, 'S').source:match('^(@.*[/\\])nn[/\\]util[/\\]plan_conv%.lua$')
local OWN_FOLDERS = LUA_FOLDER and { LUA_FOLDER .. 'nn/', LUA_FOLDER .. 'cudnn/' } or {}

-- Whether module m's forward, and its children's, is nn's or cudnn's own (not a class or an
-- instance method of the program's, nor another package's): run twice on one input, no
-- program sees it.
local function nnForward(m)
  if rawget(m, 'updateOutput') ~= nil then return false end
  local f = m.updateOutput
  local source = type(f) == 'function' and debug.getinfo(f, 'S').source or ''
  local own = false
  for _, folder in ipairs(OWN_FOLDERS) do own = own or source:sub(1, #folder) == folder end
  if not own then return false end
  for _, child in ipairs(rawget(m, 'modules') or {}) do
    if not nnForward(child) then return false end
  end
  return true
end

-- Whether the first forward of plan may run the plan after the layer-by-layer run that made it:
-- every module it runs as it is (between segments) has nn's own forward.
local function rerunnable(plan)
  for _, p in ipairs(plan.pieces) do
    if not p.program and not nnForward(p.m) then return false end
  end
  return true
end

-- The forward of root (an nn.Sequential) with plans on: its plan where one holds, else
-- layerByLayer(root, input), then a plan is made from what that run saw.
function planConv.forward(root, input, layerByLayer)
  local st = states[root]
  if st then settle(st); st.ran, st.failed = false, nil end
  if root.train ~= false and planConv.training and learning == 0 then
    return planConv.training.forward(root, input, layerByLayer)
  end
  if learning > 0 then return layerByLayer(root, input) end
  local why
  if root.train ~= false then why = 'training mode'
  elseif not torch.isTensor(input) or input:dim() ~= 4 then why = 'the input is not a 4D tensor'
  elseif not backend.of(input).plan_conv_supported(input) then
    why = torch.type(input) .. ' has no plans here (Float on the CPU with oneDNN only)'
  end
  if why then
    whyNot[root] = why
    return layerByLayer(root, input)
  end
  local key = inputKey(input)
  if st and st.key == key and holds(st.sig) then
    whyNot[root] = st.why
    if not st.plan then return layerByLayer(root, input) end
    local plan = st.plan
    local ok, out = pcall(runPlan, st, root, input)
    if not ok then
      -- a module between segments failed: the segments' inner modules materialize from a
      -- rerun of this input (up to the failing module, as torch7's run left them), not with
      -- the outputs of an earlier forward
      st.failed = true
      makeLazy(st, plan.lazy)
      error(out, 0)
    end
    if out ~= nil then st.ran = true; return out end
    whyNot[root] = st.why or 'a module before a segment gave other sizes than when planned'
    if not st.plan then return layerByLayer(root, input) end
  end
  learning = learning + 1
  local ok, out = pcall(layerByLayer, root, input)
  learning = learning - 1
  if not ok then error(out, 0) end
  st = { root = setmetatable({ root }, WEAK), layerByLayer = layerByLayer, key = key, sig = newSignature() }
  local planned, plan, reason = pcall(build, root, input, st.sig)
  st.plan = planned and plan or nil
  if not st.plan then st.why = planned and reason or 'the planner failed: ' .. tostring(plan) end
  whyNot[root] = st.why or 'planned from this forward (run layer by layer: a module between segments is the program\'s)'
  states[root] = st
  if not st.plan or not rerunnable(st.plan) then return out end
  -- The output of this first forward comes from the plan too, so that every forward of one input
  -- gives the same bits (the plan rounds float32 otherwise than the layers: a program comparing
  -- two forwards exactly, as optnet's tests do, must see them equal). Only where the modules
  -- between segments are nn's own: a module of the program's may count, print or draw.
  release(st.plan.lazy, LAZY_FIELDS)
  local ran, planOut = pcall(runPlan, st, root, input)
  if ran and planOut ~= nil then st.ran, whyNot[root] = true, nil; return planOut end
  -- the plan could not run after all (oneDNN refused a step): the layers' values throughout
  settle(st)
  learning = learning + 1
  ok, out = pcall(layerByLayer, root, input)
  learning = learning - 1
  if not ok then error(out, 0) end
  whyNot[root] = st.why or (ran and 'the plan declined its first run' or 'the plan failed: ' .. tostring(planOut))
  st.plan = nil
  return out
end

-- Puts back the modules a plan of root left lazy, without rerunning anything (a forward or
-- clearState is about to replace their outputs).
function planConv.settle(root)
  local st = states[root]
  if st then settle(st); st.ran = false end
  if planConv.training then planConv.training.settle(root) end
end

-- The backward of root after a planned training-mode forward (nn/util/plan_train.lua): true and
-- the input's gradient, or false when no plan serves it.
function planConv.backward(root, input, gradOutput, scale)
  if not planConv.training then return false end
  return planConv.training.backward(root, input, gradOutput, scale)
end

-- Whether root's last forward ran a plan (for tests and docs).
function planConv.planned(root)
  local st = states[root]
  if st == nil and planConv.training then return planConv.training.planned(root) end
  return st ~= nil and st.ran == true
end

-- What root's evaluation plan runs, in order (tests, docs): for each segment the kinds of its
-- steps ('segment conv conv+sum maxpool bn ...'), for each module run as it is its type.
function planConv.pieces(root)
  local st = states[root]
  local list = {}
  for _, p in ipairs(st and st.plan and st.plan.pieces or {}) do
    if p.program then
      local kinds = { 'segment' }
      for _, s in ipairs(p.program.steps) do kinds[#kinds + 1] = s.kind .. (s.sum and '+sum' or '') end
      list[#list + 1] = table.concat(kinds, ' ')
    else
      list[#list + 1] = torch.type(p.m)
    end
  end
  return list
end

-- Why root's last forward ran no evaluation-mode plan (a sentence), or nil when it ran one (or
-- never ran with plans on, or ran inside another root's layer-by-layer run).
function planConv.why(root)
  if planConv.planned(root) then return nil end
  return whyNot[root]
end

-- What nn/util/plan_train.lua (training mode) shares with this file.
planConv.internal = {
  makeLazy = makeLazy, settle = settle, rerun = rerun, record = record, newSignature = newSignature,
  holds = holds, flatten = flatten, sizesOf = sizesOf, sameSizes = sameSizes, isReLU = isReLU,
  floatTensor = floatTensor, WEAK = WEAK, CONVS = CONVS, cut = cut, runPieces = runPieces, kindOf = kindOf,
  release = release, LAZY_FIELDS = LAZY_FIELDS, lazyBytes = lazyBytes, inputKey = inputKey,
  rerunnable = rerunnable,
  -- while > 0 nothing plans (a root runs or reruns layer by layer)
  enter = function() learning = learning + 1 end, leave = function() learning = learning - 1 end,
  busy = function() return learning > 0 end,
}
package.loaded['nn.util.plan_conv'] = planConv
planConv.training = require 'nn.util.plan_train'
return planConv
