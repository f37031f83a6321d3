-- nn framework: Module, containers, getParameters, clone, type, printing, error prefixes and
-- Jacobian checks, on small modules defined here. Expected values are written out by hand or
-- computed with explicit element loops, not with the code under test.
require 'nn'
local tester = torch.Tester()
local tests = torch.TestSuite()
local precision = 1e-5

-- Test modules (guarded: the file may be loaded more than once in one runtime) -----------------

if not torch.getmetatable('fwtest.Linear') then
  -- y = W x + b for a vector x, or one row per sample for a matrix.
  local Linear, parent = torch.class('fwtest.Linear', 'nn.Module')
  function Linear:__init(nIn, nOut)
    parent.__init(self)
    self.weight, self.gradWeight = torch.randn(nOut, nIn), torch.zeros(nOut, nIn)
    self.bias, self.gradBias = torch.randn(nOut), torch.zeros(nOut)
  end
  function Linear:updateOutput(x)
    if x:dim() == 1 then
      self.output:resize(self.weight:size(1)):copy(self.bias):addmv(1, self.weight, x)
    else
      self.output:resize(x:size(1), self.weight:size(1)):zero():addr(1, torch.ones(x:size(1)), self.bias)
      self.output:addmm(1, x, self.weight:t())
    end
    return self.output
  end
  function Linear:updateGradInput(x, g)
    self.gradInput:resizeAs(x)
    if x:dim() == 1 then self.gradInput:zero():addmv(1, self.weight:t(), g)
    else self.gradInput:zero():addmm(1, g, self.weight) end
    return self.gradInput
  end
  function Linear:accGradParameters(x, g, scale)
    scale = scale or 1
    if x:dim() == 1 then
      self.gradWeight:addr(scale, g, x)
      self.gradBias:add(scale, g)
    else
      self.gradWeight:addmm(scale, g:t(), x)
      self.gradBias:add(scale, g:sum(1):resize(g:size(2)))
    end
  end
  function Linear:reset() self.weight:normal(); self.bias:normal() end
  function Linear:__tostring__()
    return ('fwtest.Linear(%d -> %d)'):format(self.weight:size(2), self.weight:size(1))
  end

  -- y = x .* x (a nonlinearity, so Jacobians depend on the input)
  local Square = torch.class('fwtest.Square', 'nn.Module')
  function Square:updateOutput(x) self.output:resizeAs(x):copy(x):cmul(x); return self.output end
  function Square:updateGradInput(x, g)
    self.gradInput:resizeAs(x):copy(x):mul(2):cmul(g)
    return self.gradInput
  end

  -- The window [first, first + length) of dimension dim.
  local Crop, cparent = torch.class('fwtest.Crop', 'nn.Module')
  function Crop:__init(dim, first, length)
    cparent.__init(self)
    self.dim, self.first, self.length = dim, first, length
  end
  function Crop:updateOutput(x)
    self.output:resize(x:narrow(self.dim, self.first, self.length):size())
    self.output:copy(x:narrow(self.dim, self.first, self.length))
    return self.output
  end
  function Crop:updateGradInput(x, g)
    self.gradInput:resizeAs(x):zero():narrow(self.dim, self.first, self.length):copy(g)
    return self.gradInput
  end

  -- Fails in updateOutput with the given error value.
  local Fail, fparent = torch.class('fwtest.Fail', 'nn.Module')
  function Fail:__init(err) fparent.__init(self); self.err = err end
  function Fail:updateOutput() error(self.err) end

  -- A legacy module: never calls parent.__init, so output and gradInput start nil.
  local Bare = torch.class('fwtest.Bare', 'nn.Module')
  function Bare:__init(k) self.k = k end
  function Bare:updateOutput(x) self.output = x * self.k; return self.output end
  function Bare:updateGradInput(x, g) self.gradInput = g * self.k; return self.gradInput end
end

local Lin, Square, Crop = fwtest.Linear, fwtest.Square, fwtest.Crop

-- W x + b with explicit loops, as a reference.
local function linearRef(m, x)
  local W, b = m.weight, m.bias
  local y = torch.Tensor(W:size(1))
  for i = 1, W:size(1) do
    local s = b[i]
    for j = 1, W:size(2) do s = s + W[i][j] * x[j] end
    y[i] = s
  end
  return y
end

local function maxDiff(a, b) return (a - b):abs():max() end

-- Printing ---------------------------------------------------------------------------------------

function tests.printSequential()
  local s = nn.Sequential():add(Lin(3, 4)):add(nn.Identity())
  tester:asserteq(tostring(s), 'nn.Sequential {\n'
    .. '  [input -> (1) -> (2) -> output]\n'
    .. '  (1): fwtest.Linear(3 -> 4)\n'
    .. '  (2): nn.Identity\n'
    .. '}')
  tester:asserteq(tostring(nn.Sequential()), 'nn.Sequential {\n  [input -> output]\n}')
end

function tests.printNested()
  local s = nn.Sequential()
    :add(nn.ConcatTable():add(Lin(2, 2)):add(nn.Sequential():add(nn.Identity())))
    :add(nn.ParallelTable():add(nn.Identity()):add(nn.Identity()))
  tester:asserteq(tostring(s), table.concat({
    'nn.Sequential {',
    '  [input -> (1) -> (2) -> output]',
    '  (1): nn.ConcatTable {',
    '    input',
    '      |`-> (1): fwtest.Linear(2 -> 2)',
    '       `-> (2): nn.Sequential {',
    '             [input -> (1) -> output]',
    '             (1): nn.Identity',
    '           }',
    '       ... -> output',
    '  }',
    '  (2): nn.ParallelTable {',
    '    input',
    '      |`-> (1): nn.Identity',
    '       `-> (2): nn.Identity',
    '       ... -> output',
    '  }',
    '}' }, '\n'))
end

function tests.printBranchContinuation()
  -- a multi-line child that is not last keeps the "|" rail on its continuation lines
  local c = nn.Concat(1):add(nn.Sequential():add(nn.Identity())):add(nn.Identity())
  tester:asserteq(tostring(c), table.concat({
    'nn.Concat {',
    '  input',
    '    |`-> (1): nn.Sequential {',
    '    |      [input -> (1) -> output]',
    '    |      (1): nn.Identity',
    '    |    }',
    '     `-> (2): nn.Identity',
    '     ... -> output',
    '}' }, '\n'))
  tester:asserteq(tostring(nn.Parallel(1, 1):add(nn.Identity())),
    'nn.Parallel {\n  input\n     `-> (1): nn.Identity\n     ... -> output\n}')
  tester:asserteq(tostring(nn.DepthConcat(1):add(nn.Identity())),
    'nn.DepthConcat {\n  input\n     `-> (1): nn.Identity\n     ... -> output\n}')
end

function tests.printMapTableAndDecorators()
  tester:asserteq(tostring(nn.MapTable(Lin(2, 3))), 'nn.MapTable {\n  fwtest.Linear(2 -> 3)\n}')
  tester:asserteq(tostring(nn.MapTable(nn.Sequential():add(nn.Identity()))),
    'nn.MapTable {\n  nn.Sequential {\n          [input -> (1) -> output]\n          (1): nn.Identity\n        }\n}')
  tester:asserteq(tostring(nn.Decorator(nn.Identity())), 'nn.Decorator @ nn.Identity')
  tester:asserteq(tostring(nn.Bottle(Lin(2, 3))), 'nn.Bottle @ fwtest.Linear(2 -> 3)')
  tester:asserteq(tostring(nn.Module()), 'nn.Module')
end

-- Errors inside containers -------------------------------------------------------------------------

function tests.errorPrefixes()
  local inner = nn.Concat(1):add(nn.Identity()):add(fwtest.Fail('broken module'))
  local model = nn.Sequential():add(nn.Identity()):add(nn.Identity()):add(inner)
  local ok, err = pcall(model.forward, model, torch.randn(3))
  tester:assert(not ok)
  local path = err:find('In 3 module of nn.Sequential:\nIn 2 module of nn.Concat:\n', 1, true)
  tester:assert(path ~= nil, 'path prefix missing: ' .. tostring(err))
  tester:assert(err:find('broken module', path, true) ~= nil, 'original message missing')
  -- the prefix comes first, right after the position of the rethrow
  tester:assert(err:find('^[^\n]*\nIn 3 module of nn.Sequential:') ~= nil)
  tester:asserteq(select(2, err:gsub('In %d module of', '')), 2, 'one prefix per container')
end

function tests.errorPrefixesInBackward()
  local bad = Lin(3, 2)
  local model = nn.Sequential():add(Lin(4, 3)):add(bad)
  model:forward(torch.randn(4))
  local ok, err = pcall(model.backward, model, torch.randn(4), torch.randn(5))
  tester:assert(not ok)
  tester:assert(err:find('In 2 module of nn.Sequential:\n', 1, true) ~= nil, tostring(err))
end

function tests.errorObjectsPassThrough()
  local obj = { code = 7 }
  local model = nn.Sequential():add(nn.ConcatTable():add(fwtest.Fail(obj)))
  local ok, err = pcall(model.forward, model, torch.randn(2))
  tester:assert(not ok)
  tester:assert(err == obj, 'a non-string error is rethrown as it is')
end

-- getParameters ------------------------------------------------------------------------------------

function tests.getParametersLayout()
  local a, b = Lin(3, 2), Lin(2, 4)
  local wa, ba, wb, bb = a.weight:clone(), a.bias:clone(), b.weight:clone(), b.bias:clone()
  local s = nn.Sequential():add(a):add(nn.Identity()):add(b)
  local p, g = s:getParameters()
  tester:asserteq(p:nElement(), 6 + 2 + 8 + 4)
  tester:asserteq(g:nElement(), 20)
  tester:asserteq(p:dim(), 1)
  local expect = {}
  for _, t in ipairs({ wa, ba, wb, bb }) do
    for _, v in ipairs(t:view(t:nElement()):totable()) do expect[#expect + 1] = v end
  end
  tester:assertTableEq(p:totable(), expect, 'values in module order, weights row-major')
  -- the modules' tensors are views into the flat ones
  p:fill(3); g:fill(5)
  tester:asserteq(a.weight:storage(), p:storage())
  tester:asserteq(b.bias[4], 3)
  tester:asserteq(b.gradWeight[2][1], 5)
  tester:asserteq(a.gradBias:storageOffset(), a.bias:storageOffset())
  tester:assertTableEq(a.weight:size():totable(), { 2, 3 })
end

function tests.getParametersSharedCountedOnce()
  local a = Lin(3, 3)
  local b = a:clone('weight', 'bias', 'gradWeight', 'gradBias')
  local c = Lin(3, 1)
  local s = nn.Sequential():add(a):add(b):add(c)
  local p, g = s:getParameters()
  tester:asserteq(p:nElement(), 12 + 4)
  tester:asserteq(a.weight:storageOffset(), b.weight:storageOffset())
  p:zero()
  a.weight[1][1] = 7
  tester:asserteq(b.weight[1][1], 7, 'still shared after flattening')
  tester:asserteq(g:nElement(), 16)
end

function tests.getParametersTwiceAndGrowing()
  local s = nn.Sequential():add(Lin(2, 2))
  local p1 = s:getParameters()
  local w = s.modules[1].weight:clone()
  s:add(Lin(2, 3))
  local p2 = s:getParameters()
  tester:asserteq(p2:nElement(), 6 + 9)
  tester:asserteq(maxDiff(s.modules[1].weight, w), 0, 'values kept by re-flattening')
  tester:asserteq(p2[1], w[1][1])
  tester:asserteq(s.modules[1].weight:storage(), s.modules[2].bias:storage())
  tester:asserteq(p1:nElement(), 6)
end

function tests.getParametersCompactsHoles()
  -- bias is one row of a 4x5 storage: its 15 other elements are dropped
  local m = Lin(5, 4)
  m.weight = torch.Tensor(5, 4):fill(1):t()          -- transposed: compact, not contiguous
  local big = torch.Tensor(4, 5)
  for i = 1, 4 do for j = 1, 5 do big[i][j] = 10 * i + j end end
  m.bias, m.gradBias = big:select(1, 3), torch.zeros(5)
  local p, g = m:getParameters()
  tester:asserteq(p:nElement(), 25)
  tester:asserteq(p:storage():size(), 25)
  tester:asserteq(g:nElement(), 25)
  tester:assertTableEq(m.bias:totable(), { 31, 32, 33, 34, 35 })
  tester:asserteq(m.weight:storage(), m.bias:storage())
  tester:asserteq(maxDiff(m.weight, torch.Tensor(4, 5):fill(1)), 0)
  tester:assertTableEq(m.weight:stride():totable(), { 1, 4 }, 'geometry kept')
end

function tests.getParametersNonCompactFails()
  local m = Lin(2, 4)
  m.bias = torch.Tensor(4, 4):fill(2):select(2, 2)   -- stride 4: holes between its elements
  tester:assertErrorPattern(function() m:getParameters() end, 'not compact')
end

function tests.getParametersExpanded()
  local m = Lin(3, 3)
  m.weight = torch.Tensor(3, 1):fill(1):expand(3, 3)
  m.gradWeight = torch.Tensor(3, 1):fill(0):expand(3, 3)
  m.bias = torch.Tensor(3):fill(2)
  local p = m:getParameters()
  tester:asserteq(p:nElement(), 6)
  tester:asserteq(m.weight:mean(), 1)
  tester:asserteq(m.bias:mean(), 2)
  tester:assertTableEq(m.weight:stride():totable(), { 1, 0 })
end

function tests.getParametersEmpty()
  local p, g = nn.Sequential():add(nn.Identity()):getParameters()
  tester:asserteq(p:nElement(), 0)
  tester:asserteq(g:nElement(), 0)
end

-- clone, share, type --------------------------------------------------------------------------------

function tests.cloneIsDeep()
  local s = nn.Sequential():add(Lin(3, 2)):add(Square())
  s.extra = { tag = 'x', size = torch.LongStorage({ 4, 5 }) }
  local c = s:clone()
  tester:asserteq(torch.type(c), 'nn.Sequential')
  tester:asserteq(torch.type(c.modules[1]), 'fwtest.Linear')
  tester:asserteq(maxDiff(c.modules[1].weight, s.modules[1].weight), 0)
  c.modules[1].weight:fill(0)
  c.extra.size[1] = 9
  tester:assert(s.modules[1].weight:abs():sum() > 0, 'original untouched')
  tester:asserteq(s.extra.size[1], 4, 'storages are copied too')
  tester:asserteq(c.extra.tag, 'x')
  -- output is the last module's output in the copy as in the original
  tester:asserteq(c.output, c.modules[2].output)
end

function tests.cloneKeepsSharing()
  local a = Lin(2, 2)
  local b = Lin(2, 2):share(a, 'weight')
  local s = nn.Sequential():add(a):add(b)
  s.loop = s   -- cycles are fine
  local c = s:clone()
  c.modules[1].weight[1][1] = 42
  tester:asserteq(c.modules[2].weight[1][1], 42, 'sharing inside the copy')
  tester:assert(a.weight[1][1] ~= 42, 'not shared with the original')
  tester:asserteq(c.loop, c)
end

function tests.cloneWithSharedFields()
  local a = Lin(3, 2)
  local b = a:clone('weight', 'bias')
  b.weight[2][3] = 11
  b.bias[1] = -4
  tester:asserteq(a.weight[2][3], 11)
  tester:asserteq(a.bias[1], -4)
  b.gradWeight[1][1] = 5
  tester:asserteq(a.gradWeight[1][1], 0, 'gradWeight was not shared')
  tester:assert(a.shared and b.shared)
  -- through containers: every submodule shares
  local s = nn.Sequential():add(Lin(2, 2)):add(Lin(2, 2))
  local t = s:clone('weight')
  t.modules[2].weight:fill(1)
  tester:asserteq(s.modules[2].weight:sum(), 4)
end

function tests.typeConversion()
  local a = Lin(3, 2)
  local b = Lin(3, 2):share(a, 'weight', 'bias')
  local s = nn.Sequential():add(a):add(b)
  s.buffers = { torch.Tensor(2), { torch.Tensor(1) } }
  local w = a.weight:clone()
  tester:asserteq(s:float(), s)
  tester:asserteq(s:type(), 'torch.FloatTensor')
  tester:asserteq(torch.type(a.weight), 'torch.FloatTensor')
  tester:asserteq(torch.type(b.gradBias), 'torch.FloatTensor')
  tester:asserteq(torch.type(s.buffers[2][1]), 'torch.FloatTensor')
  tester:asserteq(torch.type(s.output), 'torch.FloatTensor')
  tester:assert(maxDiff(a.weight:double(), w) < 1e-6)
  a.weight[1][1] = 9
  tester:asserteq(b.weight[1][1], 9, 'sharing kept across the conversion')
  s:double()
  tester:asserteq(torch.type(b.weight), 'torch.DoubleTensor')
  a.bias[2] = 3
  tester:asserteq(b.bias[2], 3)
  -- a cache shared between two calls keeps sharing across networks
  local n1, n2 = Lin(2, 2), Lin(2, 2)
  n2.weight = n1.weight
  local cache = {}
  n1:float(cache); n2:float(cache)
  tester:asserteq(n1.weight, n2.weight)
end

function tests.criterionBase()
  local Crit = torch.getmetatable('fwtest.Half') and fwtest.Half
  if not Crit then
    -- loss = sum(input) / 2, gradient 1/2
    local C, parent = torch.class('fwtest.Half', 'nn.Criterion')
    function C:__init() parent.__init(self) end
    function C:updateOutput(x) self.output = x:sum() / 2; return self.output end
    function C:updateGradInput(x) self.gradInput:resizeAs(x):fill(0.5); return self.gradInput end
    Crit = fwtest.Half
  end
  local c = Crit()
  local loss, grad = c(torch.Tensor({ 1, 2, 3 }))
  tester:asserteq(loss, 3)
  tester:assertTableEq(grad:totable(), { 0.5, 0.5, 0.5 })
  tester:asserteq(c:forward(torch.Tensor({ 4 })), 2)
  local copy = c:clone()
  copy.gradInput:fill(7)
  tester:asserteq(c.gradInput[1], 0.5)
  tester:asserteq(torch.type(c:float().gradInput), 'torch.FloatTensor')
  tester:assertErrorPattern(function() c:type() end, 'type')
end

-- Module API ----------------------------------------------------------------------------------------

function tests.forwardBackwardCall()
  local m = Lin(3, 2)
  local x, g = torch.randn(3), torch.randn(2)
  local y = m:forward(x)
  tester:assertlt(maxDiff(y, linearRef(m, x)), 1e-12)
  local gi = m:backward(x, g, 0.5)
  for j = 1, 3 do
    local s = 0
    for i = 1, 2 do s = s + m.weight[i][j] * g[i] end
    tester:assertalmosteq(gi[j], s, 1e-12)
  end
  tester:assertalmosteq(m.gradWeight[2][3], 0.5 * g[2] * x[3], 1e-12)
  local out, gin = m(x, g)
  tester:asserteq(out, m.output)
  tester:asserteq(gin, m.gradInput)
  tester:asserteq(m(x), m.output)
end

function tests.updateParameters()
  local m = Lin(2, 2)
  local w = m.weight:clone()
  m:zeroGradParameters()
  tester:asserteq(m.gradWeight:abs():sum(), 0)
  m.gradWeight:fill(1); m.gradBias:fill(2)
  local b = m.bias:clone()
  m:updateParameters(0.1)
  tester:asserteq(maxDiff(m.weight, w - 0.1), 0)
  tester:assert(maxDiff(m.bias, b - 0.2) < 1e-15)
end

function tests.accUpdateGradParameters()
  local x, g = torch.randn(3), torch.randn(2)
  local m = Lin(3, 2)
  local w = m.weight:clone()
  local gw = m.gradWeight:clone()
  m:forward(x)
  m:accUpdateGradParameters(x, g, 0.5)
  for i = 1, 2 do for j = 1, 3 do
    tester:assertalmosteq(m.weight[i][j], w[i][j] - 0.5 * g[i] * x[j], 1e-12)
  end end
  tester:asserteq(maxDiff(m.gradWeight, gw), 0, 'gradients untouched')
  -- shared modules go through the gradient buffers
  local s = Lin(3, 2)
  local s2 = Lin(3, 2):share(s, 'weight', 'bias')
  local sw = s.weight:clone()
  s2:accUpdateGradParameters(x, g, 1)
  for i = 1, 2 do for j = 1, 3 do
    tester:assertalmosteq(s.weight[i][j], sw[i][j] - g[i] * x[j], 1e-12)
  end end
end

function tests.trainingEvaluate()
  local inner = nn.Identity()
  local s = nn.Sequential():add(nn.ConcatTable():add(inner))
  s:evaluate()
  tester:asserteq(inner.train, false)
  s:training()
  tester:asserteq(inner.train, true)
  tester:asserteq(s.train, true)
end

function tests.traversal()
  local l1, l2, id = Lin(2, 2), Lin(2, 2), nn.Identity()
  local inner = nn.Sequential():add(l2):add(id)
  local s = nn.Sequential():add(l1):add(inner)
  local list = s:listModules()
  tester:asserteq(#list, 5)
  for i, m in ipairs({ s, l1, inner, l2, id }) do tester:asserteq(list[i], m) end
  local found, holders = s:findModules('fwtest.Linear')
  tester:asserteq(#found, 2)
  tester:asserteq(found[2], l2)
  tester:asserteq(holders[1], s)
  tester:asserteq(holders[2], inner)
  local seen = {}
  s:apply(function(m) seen[#seen + 1] = torch.type(m) end)
  tester:assertTableEq(seen, { 'nn.Sequential', 'fwtest.Linear', 'nn.Sequential', 'fwtest.Linear', 'nn.Identity' })
  local r = s:replace(function(m) return torch.type(m) == 'nn.Identity' and Square() or m end)
  tester:asserteq(r, s)
  tester:asserteq(torch.type(inner:get(2)), 'fwtest.Square')
end

function tests.clearState()
  local s = nn.Sequential():add(Lin(3, 2)):add(nn.Identity())
  local x = torch.randn(3)
  s:forward(x)
  local out = s.modules[1].output
  tester:asserteq(s:clearState(), s)
  tester:asserteq(out:nElement(), 0, 'a module clears its own output')
  local keep = torch.randn(4)
  local id = nn.Identity()
  id:forward(keep)
  id:clearState()
  tester:asserteq(keep:nElement(), 4, 'Identity does not resize the tensor it passed through')
  tester:assertTableEq(nn.utils.clear({ a = torch.ones(2), b = { 1 }, c = 3 }, { 'a', 'b', 'c' }).b, {})
end

function tests.legacyModules()
  -- never called parent.__init: output/gradInput nil until used
  local b = fwtest.Bare(3)
  tester:asserteq(b.output, nil)
  local s = nn.Sequential():add(b):add(fwtest.Bare(2))
  local x = torch.Tensor({ 1, 2 })
  tester:assertTableEq(s:forward(x):totable(), { 6, 12 })
  tester:assertTableEq(s:backward(x, torch.Tensor({ 1, 1 })):totable(), { 6, 6 })
  tester:asserteq(s:float(), s)
  local p, g = s:getParameters()
  tester:asserteq(p:nElement(), 0)
  tester:asserteq(torch.type(s:clone().modules[1]), 'fwtest.Bare')
  -- a class named without package prefix becomes a global
  if not torch.getmetatable('FwTestGlobal') then torch.class('FwTestGlobal', 'nn.Module') end
  tester:asserteq(torch.type(FwTestGlobal()), 'FwTestGlobal')
  tester:assert(torch.isTypeOf(FwTestGlobal(), 'nn.Module'))
end

-- Containers ------------------------------------------------------------------------------------------

function tests.sequentialEdit()
  local a, b, c = nn.Identity(), Lin(2, 2), Square()
  local s = nn.Sequential():add(a):add(b)
  tester:asserteq(s:size(), 2)
  tester:asserteq(s:get(2), b)
  s:insert(c, 1)
  tester:asserteq(s:get(1), c)
  tester:asserteq(s.gradInput, c.gradInput)
  s:remove(1)
  tester:asserteq(s:get(1), a)
  s:remove()
  tester:asserteq(s:size(), 1)
  tester:asserteq(s.output, a.output)
  tester:assertErrorPattern(function() s:insert(c, 5) end, 'contiguous')
  tester:assertErrorPattern(function() s:remove(3) end, 'out of range')
  s:remove()
  tester:asserteq(s:size(), 0)
  local x = torch.randn(2)
  tester:asserteq(s:forward(x), x, 'empty Sequential passes its input on')
end

function tests.sequentialValues()
  local l1, l2 = Lin(3, 4), Lin(4, 2)
  local s = nn.Sequential():add(l1):add(Square()):add(l2)
  local x = torch.randn(3)
  local h = linearRef(l1, x)
  local expect = linearRef(l2, torch.cmul(h, h))
  tester:assert(maxDiff(s:forward(x), expect) < 1e-12)
end

function tests.jacobianSequential()
  local s = nn.Sequential():add(Lin(3, 4)):add(Square()):add(Lin(4, 2))
  local x = torch.Tensor(3)
  tester:assertlt(nn.Jacobian.testJacobian(s, x), precision)
  local p, g = s:getParameters()
  tester:assertlt(nn.Jacobian.testJacobianParameters(s, x, p, g), precision)
  local l = s.modules[3]
  tester:assertlt(nn.Jacobian.testJacobianParameters(s, x, l.weight, l.gradWeight), precision)
  tester:assertlt(nn.Jacobian.testJacobianUpdateParameters(s, x, l.weight), precision)
  for name, err in pairs(nn.Jacobian.testAllUpdate(Lin(3, 2), torch.randn(3), 'weight', 'gradWeight')) do
    tester:assertlt(err, precision, name)
  end
  local ferr, berr = nn.Jacobian.testIO(s, torch.randn(3))
  tester:asserteq(ferr, 0)
  tester:asserteq(berr, 0)
end

function tests.jacobianBatchSequential()
  local s = nn.Sequential():add(Lin(3, 4)):add(Square())
  tester:assertlt(nn.Jacobian.testJacobian(s, torch.Tensor(5, 3)), precision)
end

function tests.jacobianFiniteDifferencesAgainstKnown()
  -- d(x .* x)/dx = diag(2x): checks Jacobian.forward / backward themselves
  local x = torch.Tensor({ 1, -2, 3 })
  local jf = nn.Jacobian.forward(Square(), x)
  local jb = nn.Jacobian.backward(Square(), x)
  local expect = torch.zeros(3, 3)
  for i = 1, 3 do expect[i][i] = 2 * x[i] end
  tester:assertlt(maxDiff(jf, expect), 1e-6)
  tester:asserteq(maxDiff(jb, expect), 0)
end

function tests.jacobianConcat()
  local c = nn.Concat(1):add(Lin(3, 2)):add(Square()):add(Lin(3, 4))
  local x = torch.Tensor(3)
  tester:assertlt(nn.Jacobian.testJacobian(c, x), precision)
  tester:asserteq(c.output:size(1), 9)
  local p, g = c:getParameters()
  tester:assertlt(nn.Jacobian.testJacobianParameters(c, x, p, g), precision)
  -- batch: joined along dimension 2
  local cb = nn.Concat(2):add(Lin(3, 2)):add(Square())
  tester:assertlt(nn.Jacobian.testJacobian(cb, torch.Tensor(4, 3)), precision)
  tester:assertTableEq(cb.output:size():totable(), { 4, 5 })
end

function tests.concatSizeMismatch()
  local c = nn.Concat(2):add(Lin(3, 2)):add(nn.Identity())
  tester:assertErrorPattern(function() c:forward(torch.randn(3)) end, 'nn.Concat')
end

function tests.jacobianDepthConcat()
  -- 2x5x4 input; the second branch crops to 2x3x2, which is centred with zero padding
  local d = nn.DepthConcat(1)
    :add(Square())
    :add(nn.Sequential():add(Crop(2, 2, 3)):add(Crop(3, 2, 2)))
  local x = torch.randn(2, 5, 4)
  local y = d:forward(x)
  tester:assertTableEq(y:size():totable(), { 4, 5, 4 })
  for c = 1, 2 do for i = 1, 5 do for j = 1, 4 do
    tester:assertalmosteq(y[c][i][j], x[c][i][j] ^ 2, 1e-12)
    local inside = i >= 2 and i <= 4 and j >= 2 and j <= 3
    tester:asserteq(y[c + 2][i][j], inside and x[c][i][j] or 0)
  end end end
  tester:assertlt(nn.Jacobian.testJacobian(d, x), precision)
end

function tests.jacobianParallel()
  local p = nn.Parallel(1, 1):add(Lin(3, 2)):add(Square())
  local x = torch.Tensor(2, 3)
  tester:assertlt(nn.Jacobian.testJacobian(p, x), precision)
  tester:assertTableEq(p.output:size():totable(), { 5 })
  local params, grads = p:getParameters()
  tester:assertlt(nn.Jacobian.testJacobianParameters(p, x, params, grads), precision)
  tester:assertErrorPattern(function() p:forward(torch.randn(3, 3)) end, 'only 2 modules')
end

function tests.jacobianTables()
  -- x -> {Lin(x), x .* x} -> {Lin'(.), .} -> Concat-free check of table paths
  local branch = nn.Sequential()
    :add(nn.ConcatTable():add(Lin(3, 2)):add(Square()))
    :add(nn.ParallelTable():add(Lin(2, 3)):add(nn.Identity()))
  -- join the table with a Concat of selectors, so the whole thing maps tensor -> tensor
  local Select = torch.getmetatable('fwtest.Select') and fwtest.Select
  if not Select then
    local S, parent = torch.class('fwtest.Select', 'nn.Module')
    function S:__init(i) parent.__init(self); self.i = i end
    function S:updateOutput(t) self.output = t[self.i]; return self.output end
    function S:updateGradInput(t, g)
      self.gradInput = {}
      for k, v in ipairs(t) do self.gradInput[k] = k == self.i and g or v.new():resizeAs(v):zero() end
      return self.gradInput
    end
    Select = fwtest.Select
  end
  local net = nn.Sequential():add(branch):add(nn.Concat(1):add(Select(1)):add(Select(2)))
  local x = torch.Tensor(3)
  tester:assertlt(nn.Jacobian.testJacobian(net, x), precision)
  local p, g = net:getParameters()
  tester:assertlt(nn.Jacobian.testJacobianParameters(net, x, p, g), precision)
  tester:asserteq(torch.type(net.modules[2].gradInput), 'table')
end

function tests.mapTable()
  local lin = Lin(3, 2)
  local m = nn.MapTable(lin)
  local xs = { torch.randn(3), torch.randn(3), torch.randn(3) }
  local ys = m:forward(xs)
  tester:asserteq(#ys, 3)
  for i = 1, 3 do tester:assert(maxDiff(ys[i], linearRef(lin, xs[i])) < 1e-12) end
  tester:asserteq(m:size(), 3)
  m.modules[3].weight[1][1] = 100
  tester:asserteq(lin.weight[1][1], 100, 'clones share the weight')
  local gs = { torch.randn(2), torch.randn(2), torch.randn(2) }
  m:zeroGradParameters()
  m:backward(xs, gs)
  local expect = torch.zeros(2, 3)
  for k = 1, 3 do for i = 1, 2 do for j = 1, 3 do
    expect[i][j] = expect[i][j] + gs[k][i] * xs[k][j]
  end end end
  tester:assert(maxDiff(lin.gradWeight, expect) < 1e-12, 'gradients accumulate in the shared buffer')
  m:resize(1)
  tester:asserteq(m:size(), 1)
  tester:asserteq(m:clearState(), m)
  local un = nn.MapTable(Lin(2, 2), false)
  un:forward({ torch.randn(2), torch.randn(2) })
  un.modules[2].weight:fill(0)
  tester:assert(un.modules[1].weight:abs():sum() > 0, 'unshared clones')
end

function tests.bottle()
  local lin = Lin(3, 2)
  local b = nn.Bottle(lin)
  local x = torch.randn(2, 4, 3)
  local y = b:forward(x)
  tester:assertTableEq(y:size():totable(), { 2, 4, 2 })
  for i = 1, 2 do for j = 1, 4 do
    tester:assert(maxDiff(y[i][j], linearRef(lin, x[i][j])) < 1e-12)
  end end
  tester:assertlt(nn.Jacobian.testJacobian(b, torch.Tensor(2, 4, 3)), precision)
  tester:assertlt(nn.Jacobian.testJacobianParameters(b, torch.Tensor(2, 4, 3), lin.weight, lin.gradWeight), precision)
  -- no extra dims: passes straight through
  tester:assertTableEq(b:forward(torch.randn(5, 3)):size():totable(), { 5, 2 })
  local wrong = nn.Bottle(Lin(3, 2), 2, 3)
  tester:assertErrorPattern(function() wrong:forward(torch.randn(2, 4, 3)) end, 'expected 3')
end

function tests.decorator()
  local lin = Lin(3, 2)
  local d = nn.Decorator(lin)
  local x = torch.randn(3)
  tester:asserteq(d:forward(x), lin.output)
  tester:assertlt(nn.Jacobian.testJacobian(d, torch.Tensor(3)), precision)
  tester:assertlt(nn.Jacobian.testJacobianUpdateParameters(d, torch.Tensor(3), lin.weight), precision)
  local params = d:parameters()
  tester:asserteq(#params, 2)
end

-- utils -----------------------------------------------------------------------------------------------

function tests.utilsRecursive()
  local u = nn.utils
  local src = { torch.Tensor({ 1, 2 }), { torch.Tensor({ { 3 } }) } }
  local dst = u.recursiveCopy(nil, src)
  tester:assertTableEq(dst[1]:totable(), { 1, 2 })
  tester:assertTableEq(dst[2][1]:totable(), { { 3 } })
  dst[1][1] = 9
  tester:asserteq(src[1][1], 1, 'copies, not views')
  u.recursiveAdd(dst, 2, src)
  tester:assertTableEq(dst[1]:totable(), { 11, 6 })
  u.recursiveAdd(dst, src)
  tester:assertTableEq(dst[2][1]:totable(), { { 12 } })
  u.recursiveFill(dst, 0.5)
  tester:assertTableEq(dst[1]:totable(), { 0.5, 0.5 })
  local shaped = u.recursiveResizeAs({ torch.Tensor(7), torch.Tensor(1), torch.Tensor(1) }, src)
  tester:asserteq(#shaped, 2)
  tester:assertTableEq(shaped[1]:size():totable(), { 2 })
  tester:assertTableEq(shaped[2][1]:size():totable(), { 1, 1 })
  tester:assertErrorPattern(function() u.recursiveCopy(nil, 3) end, 'expecting')
  tester:assertErrorPattern(function() u.recursiveFill('x', 1) end, 'expecting')
  local f = u.recursiveType({ torch.Tensor(2), 'keep' }, 'torch.FloatTensor')
  tester:asserteq(torch.type(f[1]), 'torch.FloatTensor')
  tester:asserteq(f[2], 'keep')
end

function tests.utilsViews()
  local u = nn.utils
  local t = torch.randn(3, 4):t()   -- 4x3, non-contiguous
  local v = u.addSingletonDimension(t, 2)
  tester:assertTableEq(v:size():totable(), { 4, 1, 3 })
  tester:asserteq(maxDiff(v:select(2, 1), t), 0)
  tester:asserteq(v:storage(), t:storage())
  tester:assertTableEq(u.addSingletonDimension(t):size():totable(), { 1, 4, 3 })
  local out = torch.Tensor()
  tester:asserteq(u.addSingletonDimension(out, t, 3), out)
  tester:assertTableEq(out:size():totable(), { 4, 3, 1 })
  tester:assertErrorPattern(function() u.addSingletonDimension(t, 4) end, 'invalid dimension')
  local cv = u.contiguousView(nil, t, 12)
  tester:assertTableEq(cv:size():totable(), { 12 })
  tester:asserteq(cv[2], t[1][2])
  local c = torch.randn(2, 6)
  tester:asserteq(u.contiguousView(nil, c, 3, 4):storage(), c:storage(), 'contiguous input is viewed')
end

tester:add(tests):run()
