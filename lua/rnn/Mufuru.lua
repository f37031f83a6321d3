-- nn.MuFuRu(inputSize, outputSize[, ops, rho]): the multi-function recurrent unit (Weissenborn
-- and Rocktaschel 2016). Each step mixes several operations of {s(t-1), v(t)} with softmax
-- weights p(t):  r = s(Wr x + Ur s),  v = s(Wv [x, r.s]),  p = softmax_ops(Wp [x, s]),
--   s'_j = sum_k p_kj op_k(s, v)_j.
-- ops: names among keep, replace, mul, diff, forget, sqrt_diff, max, min (all by default).
local MuFuRu, parent = torch.class('nn.MuFuRu', 'nn.GRU')

local function extremum(reduce)
  return nn.Sequential():add(nn.MapTable(nn.Unsqueeze(1))):add(nn.JoinTable(1)):add(reduce(1))
end

-- Each op maps {s(t-1), v(t)} to one tensor shaped as s.
local operationBuilders = {
  keep = function() return nn.SelectTable(1) end,
  replace = function() return nn.SelectTable(2) end,
  mul = function() return nn.CMulTable() end,
  diff = function() return nn.CSubTable() end,
  forget = function() return nn.Sequential():add(nn.SelectTable(1)):add(nn.MulConstant(0.0)) end,
  sqrt_diff = function()
    return nn.Sequential():add(nn.CSubTable()):add(nn.Abs()):add(nn.Sqrt()):add(nn.MulConstant(0.25))
  end,
  max = function() return extremum(nn.Max) end,
  min = function() return extremum(nn.Min) end,
}

function MuFuRu:__init(inputSize, outputSize, ops, rho)
  self.ops = ops or { 'keep', 'replace', 'mul', 'diff', 'forget', 'sqrt_diff', 'max', 'min' }
  self.num_ops = #self.ops
  self.operations = {}
  for i, name in ipairs(self.ops) do
    local build = operationBuilders[name]
    if not build then error("MuFuRu: unknown operation '" .. tostring(name) .. "'") end
    self.operations[i] = build()
  end
  parent.__init(self, inputSize, outputSize, rho or 9999)
end

-- {x, s} -> s'
function MuFuRu:buildModel()
  local featureDim = 2 -- batch x features
  local resetGate = nn.Sequential()
    :add(nn.ParallelTable()
      :add(nn.Linear(self.inputSize, self.outputSize))
      :add(nn.Linear(self.outputSize, self.outputSize)))
    :add(nn.CAddTable())
    :add(nn.Sigmoid())
  local features = nn.Sequential() -- {x, s, r} -> v
    :add(nn.ConcatTable()
      :add(nn.SelectTable(1))
      :add(nn.Sequential():add(nn.NarrowTable(2, 2)):add(nn.CMulTable())))
    :add(nn.JoinTable(featureDim))
    :add(nn.Linear(self.inputSize + self.outputSize, self.outputSize))
    :add(nn.Sigmoid())
  local opWeights = nn.Sequential() -- {x, s, r} -> p (ops x batch x size)
    :add(nn.NarrowTable(1, 2))
    :add(nn.JoinTable(featureDim))
    :add(nn.Linear(self.inputSize + self.outputSize, self.num_ops * self.outputSize))
    :add(nn.View(self.num_ops, self.outputSize):setNumInputDims(1))
    :add(nn.Transpose({ 1, 2 }))
    :add(nn.SoftMax())
  local allOps = nn.ConcatTable()
  for _, op in ipairs(self.operations) do allOps:add(op) end
  local opOutputs = nn.Sequential() -- {s, v, p} -> op outputs stacked (ops x batch x size)
    :add(nn.NarrowTable(1, 2))
    :add(allOps)
    :add(nn.MapTable(nn.Unsqueeze(1)))
    :add(nn.JoinTable(1, 3))
  local combine = nn.Sequential()
    :add(nn.ConcatTable():add(opOutputs):add(nn.SelectTable(3)))
    :add(nn.CMulTable())
    :add(nn.Sum(1, 3))
  return nn.Sequential()
    :add(nn.ConcatTable():add(nn.SelectTable(1)):add(nn.SelectTable(2)):add(resetGate)) -- {x, s, r}
    :add(nn.ConcatTable():add(nn.SelectTable(2)):add(features):add(opWeights)) -- {s, v, p}
    :add(combine)
end

function MuFuRu:__tostring__()
  return ('%s(%d -> %d) { %s }'):format(torch.type(self), self.inputSize, self.outputSize, table.concat(self.ops, ' '))
end

function MuFuRu:migrate() error("MuFuRu: migrate is not supported") end
