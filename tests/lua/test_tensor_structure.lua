-- Structure methods of Tensor.lua (views, shapes, indexing, element callbacks), checked from Lua.
-- Expected values come from the index formulas: m[i][j] = 10 * i + j, c[i][j][k] = 100i + 10j + k.
local tester = torch.Tester()
local tests = torch.TestSuite()

-- a rows x cols DoubleTensor holding 10 * i + j
local function matrix(rows, cols)
  local m = torch.Tensor(rows, cols)
  for i = 1, rows do for j = 1, cols do m[i][j] = 10 * i + j end end
  return m
end

local function cube(a, b, c)
  local t = torch.Tensor(a, b, c)
  for i = 1, a do for j = 1, b do for k = 1, c do t[{i, j, k}] = 100 * i + 10 * j + k end end end
  return t
end

local function sizes(t) return t:size():totable() end
local function strides(t) return t:stride():totable() end

function tests.constructFromTable()
  local v = torch.Tensor({ 3, 1, 4, 1, 5 })
  tester:assertTableEq(sizes(v), { 5 })
  tester:assertTableEq(v:totable(), { 3, 1, 4, 1, 5 })
  local m = torch.LongTensor({ { 1, 2, 3 }, { 4, 5, 6 } })
  tester:asserteq(torch.typename(m), 'torch.LongTensor')
  tester:assertTableEq(sizes(m), { 2, 3 })
  tester:asserteq(m[2][3], 6)
  local c = torch.FloatTensor({ { { 1, 2 } }, { { 3, 4 } } })
  tester:assertTableEq(sizes(c), { 2, 1, 2 })
  tester:asserteq(c[{2, 1, 1}], 3)
  tester:assertErrorPattern(function() torch.Tensor({ { 1, 2 }, { 3 } }) end, 'regular')
  tester:assertErrorPattern(function() torch.Tensor({ 1, 'x' }) end, 'number')
  tester:asserteq(torch.Tensor({}):dim(), 0)
end

function tests.constructFromSizesAndStorage()
  local t = torch.Tensor(2, 3, 4)
  tester:assertTableEq(sizes(t), { 2, 3, 4 })
  tester:assertTableEq(strides(t), { 12, 4, 1 })
  tester:asserteq(t:nElement(), 24)
  tester:asserteq(t:dim(), 3)
  local u = torch.Tensor(torch.LongStorage({ 4, 5 }))
  tester:assertTableEq(sizes(u), { 4, 5 })
  local s = torch.DoubleStorage({ 1, 2, 3, 4, 5, 6, 7 })
  local view = torch.Tensor(s, 2, torch.LongStorage({ 2, 3 }))
  tester:assertTableEq(view:totable(), { { 2, 3, 4 }, { 5, 6, 7 } })
  tester:asserteq(view:storageOffset(), 2)
  local strided = torch.Tensor(s, 1, 2, 3, 2, 2)   -- sizes 2, 2 with strides 3, 2
  tester:assertTableEq(strided:totable(), { { 1, 3 }, { 4, 6 } })
  s[1] = 100
  tester:asserteq(strided[1][1], 100)
  tester:assertErrorPattern(function() torch.Tensor(s, 1, 5, 2) end, 'storage')
  tester:asserteq(torch.Tensor():dim(), 0)
  tester:asserteq(torch.Tensor():nElement(), 0)
  tester:asserteq(torch.Tensor(0):nElement(), 0)
end

function tests.sizeAndStride()
  local t = torch.Tensor(2, 5)
  tester:asserteq(t:size(1), 2)
  tester:asserteq(t:size(2), 5)
  tester:asserteq(t:stride(1), 5)
  tester:asserteq(t:size():size(), 2)
  tester:assertErrorPattern(function() t:size(3) end, 'out of range')
  tester:assertErrorPattern(function() t:stride(0) end, 'out of range')
  tester:assert(t:isContiguous())
  tester:assert(not t:t():isContiguous())
  tester:assert(t:isSize(torch.LongStorage({ 2, 5 })))
  tester:assert(not t:isSize(torch.LongStorage({ 5, 2 })))
  tester:assert(t:isSameSizeAs(torch.FloatTensor(2, 5)))
end

function tests.narrow()
  local m = matrix(4, 5)
  local n = m:narrow(2, 2, 3)
  tester:assertTableEq(sizes(n), { 4, 3 })
  tester:assertTableEq(strides(n), { 5, 1 })
  tester:asserteq(n[1][1], 12)
  tester:asserteq(n[4][3], 44)
  tester:asserteq(n:storageOffset(), 2)
  tester:assert(not n:isContiguous())
  n[2][2] = -1                               -- a view: writes reach m
  tester:asserteq(m[2][3], -1)
  local rows = m:narrow(1, 3, 2)
  tester:assert(rows:isContiguous())
  tester:asserteq(rows[1][1], 31)
  tester:asserteq(m:narrow(1, 2, 0):nElement(), 0)
  tester:assertErrorPattern(function() m:narrow(2, 4, 3) end, 'narrow')
  tester:assertErrorPattern(function() m:narrow(3, 1, 1) end, 'narrow')
  tester:assertErrorPattern(function() m:narrow(1, 0, 1) end, 'narrow')
end

function tests.select()
  local m = matrix(3, 4)
  local row = m:select(1, 2)
  tester:assertTableEq(row:totable(), { 21, 22, 23, 24 })
  local col = m:select(2, 3)
  tester:assertTableEq(col:totable(), { 13, 23, 33 })
  tester:asserteq(col:stride(1), 4)
  tester:asserteq(m:select(1, 3):select(1, 4), 34)   -- 1D select gives a number
  col[1] = 0
  tester:asserteq(m[1][3], 0)
  local c = cube(2, 3, 4)
  tester:assertTableEq(sizes(c:select(2, 2)), { 2, 4 })
  tester:asserteq(c:select(2, 2)[2][4], 224)
  tester:assertErrorPattern(function() m:select(1, 4) end, 'out of range')
  tester:assertErrorPattern(function() m:select(3, 1) end, 'select')
end

function tests.sub()
  local m = matrix(4, 5)
  local s = m:sub(2, 3, 2, -1)
  tester:assertTableEq(sizes(s), { 2, 4 })
  tester:assertTableEq(s:totable(), { { 22, 23, 24, 25 }, { 32, 33, 34, 35 } })
  tester:assertTableEq(m:sub(-2, -1):totable()[2], { 41, 42, 43, 44, 45 })
  tester:assertErrorPattern(function() m:sub(1, 5) end, 'sub')
end

function tests.transposeAndT()
  local m = matrix(2, 3)
  local t = m:t()
  tester:assertTableEq(sizes(t), { 3, 2 })
  tester:assertTableEq(strides(t), { 1, 3 })
  tester:assertTableEq(t:totable(), { { 11, 21 }, { 12, 22 }, { 13, 23 } })
  t[3][1] = 0
  tester:asserteq(m[1][3], 0)
  local c = cube(2, 3, 4)
  local tr = c:transpose(1, 3)
  tester:assertTableEq(sizes(tr), { 4, 3, 2 })
  tester:asserteq(tr[{4, 1, 2}], 214)
  tester:assertErrorPattern(function() torch.Tensor(3):t() end, '2D')
  tester:assertErrorPattern(function() c:transpose(1, 4) end, 'transpose')
end

function tests.permute()
  local c = cube(2, 3, 4)
  local p = c:permute(3, 1, 2)
  tester:assertTableEq(sizes(p), { 4, 2, 3 })
  tester:assertTableEq(strides(p), { 1, 12, 4 })
  for i = 1, 4 do for j = 1, 2 do for k = 1, 3 do
    tester:asserteq(p[{i, j, k}], 100 * j + 10 * k + i)
  end end end
  tester:assertErrorPattern(function() c:permute(1, 1, 2) end, 'permutation')
  tester:assertErrorPattern(function() c:permute(1, 2) end, 'permute')
end

function tests.view()
  local m = matrix(3, 4)
  local flat = m:view(-1)
  tester:assertTableEq(sizes(flat), { 12 })
  tester:asserteq(flat[5], 21)
  local v = m:view(2, -1)
  tester:assertTableEq(sizes(v), { 2, 6 })
  tester:asserteq(v[2][1], 23)
  tester:assertTableEq(sizes(m:view(torch.LongStorage({ 4, 3 }))), { 4, 3 })
  tester:assertTableEq(sizes(m:view(6, 2):viewAs(torch.Tensor(2, 2, 3))), { 2, 2, 3 })
  v[1][1] = -5
  tester:asserteq(m[1][1], -5)
  tester:assertErrorPattern(function() m:view(5, -1) end, 'view')
  tester:assertErrorPattern(function() m:view(-1, -1) end, 'view')
  tester:assertErrorPattern(function() m:view(5) end, 'view')
  tester:assertErrorPattern(function() m:t():view(-1) end, 'contiguous')
end

function tests.expand()
  local col = torch.Tensor({ { 1 }, { 2 }, { 3 } })
  local e = col:expand(3, 4)
  tester:assertTableEq(sizes(e), { 3, 4 })
  tester:assertTableEq(strides(e), { 1, 0 })
  tester:assertTableEq(e:totable()[2], { 2, 2, 2, 2 })
  tester:assertTableEq(sizes(col:expandAs(torch.Tensor(3, 2))), { 3, 2 })
  tester:assertTableEq(sizes(torch.Tensor(1, 1):expand(torch.LongStorage({ 2, 5 }))), { 2, 5 })
  tester:assertErrorPattern(function() col:expand(4, 4) end, 'expand')
  tester:assertErrorPattern(function() col:expand(3) end, 'expand')
end

function tests.squeezeUnsqueeze()
  local t = torch.Tensor(1, 3, 1, 2)
  tester:assertTableEq(sizes(t:squeeze()), { 3, 2 })
  tester:assertTableEq(sizes(t:squeeze(1)), { 3, 1, 2 })
  tester:assertTableEq(sizes(t:squeeze(2)), { 1, 3, 1, 2 })
  -- a lone element comes back as a number, as in torch7
  tester:asserteq(torch.Tensor(1, 1):fill(7):squeeze(), 7)
  tester:asserteq(torch.Tensor(1):fill(5):squeeze(1), 5)
  local m = matrix(2, 3)
  local u = m:unsqueeze(2)
  tester:assertTableEq(sizes(u), { 2, 1, 3 })
  tester:asserteq(u[{2, 1, 3}], 23)
  tester:assertTableEq(sizes(m:unsqueeze(3)), { 2, 3, 1 })
  tester:assertTableEq(sizes(m:unsqueeze(1)), { 1, 2, 3 })
  tester:assertErrorPattern(function() m:unsqueeze(4) end, 'unsqueeze')
end

function tests.unfold()
  local v = torch.Tensor({ 1, 2, 3, 4, 5, 6, 7 })
  local u = v:unfold(1, 3, 2)
  tester:assertTableEq(sizes(u), { 3, 3 })
  tester:assertTableEq(strides(u), { 2, 1 })
  tester:assertTableEq(u:totable(), { { 1, 2, 3 }, { 3, 4, 5 }, { 5, 6, 7 } })
  local m = matrix(2, 5)
  local w = m:unfold(2, 2, 3)
  tester:assertTableEq(sizes(w), { 2, 2, 2 })
  tester:asserteq(w[{2, 2, 1}], 24)
  tester:assertErrorPattern(function() v:unfold(1, 8, 1) end, 'unfold')
  tester:assertErrorPattern(function() v:unfold(1, 2, 0) end, 'step')
end

function tests.setAndIsSetTo()
  local m = matrix(3, 4)
  local t = torch.Tensor()
  t:set(m)
  tester:assert(t:isSetTo(m))
  tester:assert(not t:isSetTo(m:t()))
  t[1][1] = 0
  tester:asserteq(m[1][1], 0)
  local s = torch.DoubleStorage({ 1, 2, 3, 4, 5, 6 })
  local v = torch.Tensor():set(s, 3, torch.LongStorage({ 2, 2 }))
  tester:assertTableEq(v:totable(), { { 3, 4 }, { 5, 6 } })
  tester:asserteq(v:storage(), s)
  tester:assert(not torch.Tensor():isSetTo(torch.Tensor()))
  tester:assertErrorPattern(function() torch.Tensor():set(s, 4, torch.LongStorage({ 2, 2 })) end, 'set')
  tester:assertErrorPattern(function() torch.Tensor():set(torch.FloatStorage(3)) end, 'set')
  tester:asserteq(t:set():dim(), 0)
end

function tests.resizeSemantics()
  local t = torch.Tensor({ 1, 2, 3, 4, 5, 6 })
  local st = t:storage()
  t:resize(2, 2)                         -- shrinking keeps the storage and its first elements
  tester:asserteq(t:storage(), st)
  tester:asserteq(st:size(), 6)
  tester:assertTableEq(t:totable(), { { 1, 2 }, { 3, 4 } })
  t:resize(3, 3)                         -- growing keeps the existing elements in order
  tester:assertTableEq(t:totable()[1], { 1, 2, 3 })
  tester:assertTableEq({ t[2][1], t[2][2], t[2][3] }, { 4, 5, 6 })
  tester:assert(t:storage():size() >= 9)
  local u = torch.Tensor():resizeAs(t)
  tester:assertTableEq(sizes(u), { 3, 3 })
  tester:assertTableEq(sizes(t:resize(torch.LongStorage({ 9 }))), { 9 })
  tester:assertTableEq(sizes(t:resize(0)), { 0 })
  tester:assertErrorPattern(function() t:resize(-1) end, 'resize')
end

function tests.indexing()
  local m = matrix(3, 4)
  tester:asserteq(m[2][3], 23)
  tester:asserteq(m[{3, 4}], 34)
  tester:asserteq(m[{-1, -1}], 34)
  tester:assertTableEq(m[2]:totable(), { 21, 22, 23, 24 })
  tester:assertTableEq(m[{{}, 2}]:totable(), { 12, 22, 32 })
  tester:assertTableEq(m[{{2, 3}, {3}}]:totable(), { { 23 }, { 33 } })
  tester:assertTableEq(m[{2, {2, 3}}]:totable(), { 22, 23 })
  m[1][2] = -7
  tester:asserteq(m[1][2], -7)
  m[{3, 1}] = 99
  tester:asserteq(m[3][1], 99)
  m[{{1, 2}, {3, 4}}] = 0
  tester:assertTableEq(m:totable()[2], { 21, 22, 0, 0 })
  m[3] = torch.Tensor({ 5, 6, 7, 8 })
  tester:assertTableEq(m[3]:totable(), { 5, 6, 7, 8 })
  local v = torch.IntTensor({ 4, 5, 6 })
  tester:asserteq(v[3], 6)
  tester:assertErrorPattern(function() return m[4] end, 'out of range')
  tester:assertErrorPattern(function() return m[{1, 5}] end, 'out of range')
  tester:assertErrorPattern(function() m[{1, 1}] = 'x' end, 'number')
end

function tests.applyMapMap2()
  local m = matrix(2, 3):t()                    -- non-contiguous: row-major order of the view
  local seen = {}
  m:apply(function(x) seen[#seen + 1] = x end)
  tester:assertTableEq(seen, { 11, 21, 12, 22, 13, 23 })
  m:apply(function(x) return x * 2 end)
  tester:assertTableEq(m:totable(), { { 22, 42 }, { 24, 44 }, { 26, 46 } })
  local a = torch.Tensor({ 1, 2, 3 })
  local b = torch.Tensor({ 10, 20, 30 })
  a:map(b, function(x, y) return x + y end)
  tester:assertTableEq(a:totable(), { 11, 22, 33 })
  local c = torch.Tensor({ 100, 200, 300 })
  a:map2(b, c, function(x, y, z) return z - y - x end)
  tester:assertTableEq(a:totable(), { 79, 158, 237 })
  tester:assertErrorPattern(function() a:map(torch.Tensor(2), function() end) end, 'map')
end

function tests.totableAndClone()
  local c = cube(2, 2, 2)
  tester:assertTableEq(c:totable(), { { { 111, 112 }, { 121, 122 } }, { { 211, 212 }, { 221, 222 } } })
  local t = c:transpose(1, 3):clone()
  tester:assert(t:isContiguous())
  tester:asserteq(t[{2, 1, 1}], 112)
  t[{1, 1, 1}] = 0
  tester:asserteq(c[{1, 1, 1}], 111)
  tester:assertTableEq(torch.Tensor():totable(), {})
  tester:assertTableEq(torch.Tensor({ 1.5, -2.5 }):long():totable(), { 1, -2 })
end

tester:add(tests):run()
