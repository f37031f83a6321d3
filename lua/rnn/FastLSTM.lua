-- nn.FastLSTM(inputSize, outputSize[, rho, eps, momentum, affine, p, mono]): an LSTM without
-- peepholes whose four gates come from one Linear(x) and one LinearNoBias(h), gate order
-- {input, hidden (tanh), forget, output}. FastLSTM.usenngraph builds the step as an nngraph
-- gModule; FastLSTM.bn adds batch normalization of both projections and of the cell (Cooijmans 2016).
local FastLSTM, parent = torch.class('nn.FastLSTM', 'nn.LSTM')

FastLSTM.usenngraph = false
FastLSTM.bn = false

function FastLSTM:__init(inputSize, outputSize, rho, eps, momentum, affine, p, mono)
  self.eps = eps
  self.momentum = momentum
  self.affine = affine == nil and true or affine
  parent.__init(self, inputSize, outputSize, rho, nil, p, mono)
end

-- n maps of size -> outputSize joined along the feature dimension, each after its own dropout.
function FastLSTM:droppedProjections(build, count)
  local dropouts, maps = nn.ConcatTable(), nn.ParallelTable()
  for _ = 1, count do
    dropouts:add(self:dropout())
    maps:add(build())
  end
  return nn.Sequential():add(dropouts):add(maps):add(nn.JoinTable(2))
end

function FastLSTM:buildProjections(gates)
  if self.p ~= 0 then
    self.i2g = self:droppedProjections(function() return nn.Linear(self.inputSize, self.outputSize) end, gates)
    self.o2g = self:droppedProjections(function() return nn.LinearNoBias(self.outputSize, self.outputSize) end, gates)
  else
    self.i2g = nn.Linear(self.inputSize, gates * self.outputSize)
    self.o2g = nn.LinearNoBias(self.outputSize, gates * self.outputSize)
  end
end

function FastLSTM:buildModel()
  self:buildProjections(4)
  if self.usenngraph or self.bn then
    require 'nngraph'
    return self:nngraphModel()
  end
  -- {x, h, c} -> {i, z, f, o, c}
  local gates = nn.Sequential()
    :add(nn.NarrowTable(1, 2))
    :add(nn.ParallelTable():add(self.i2g):add(self.o2g))
    :add(nn.CAddTable())
    :add(nn.Reshape(4, self.outputSize))
    :add(nn.SplitTable(1, 2))
    :add(nn.ParallelTable():add(nn.Sigmoid()):add(nn.Tanh()):add(nn.Sigmoid()):add(nn.Sigmoid()))
  local function product(a, b)
    return nn.Sequential():add(nn.ConcatTable():add(a):add(b)):add(nn.CMulTable())
  end
  local nextCell = nn.Sequential() -- i.z + f.c
    :add(nn.ConcatTable()
      :add(product(nn.SelectTable(1), nn.SelectTable(2)))
      :add(product(nn.SelectTable(3), nn.SelectTable(5))))
    :add(nn.CAddTable())
  local nextOutput = product(nn.Sequential():add(nn.SelectTable(1)):add(nn.Tanh()), nn.SelectTable(2))
  return nn.Sequential()
    :add(nn.ConcatTable():add(gates):add(nn.SelectTable(3)))
    :add(nn.FlattenTable()) -- {i, z, f, o, c}
    :add(nn.ConcatTable():add(nextCell):add(nn.SelectTable(4)))
    :add(nn.FlattenTable()) -- {c', o}
    :add(nn.ConcatTable():add(nextOutput):add(nn.SelectTable(1))) -- {h', c'}
end

function FastLSTM:nngraphModel()
  local x, prevH, prevC = nn.Identity()(), nn.Identity()(), nn.Identity()()
  local fromInput, fromHidden, normCell
  if self.bn then
    local size = self.outputSize
    local function norm(n)
      local bn = nn.BatchNormalization(n, self.eps, self.momentum, self.affine)
      bn.weight:fill(0.1)
      return bn
    end
    fromInput = norm(4 * size)(self.i2g(x):annotate({ name = 'i2h' })):annotate({ name = 'bn_wx' })
    fromHidden = norm(4 * size)(self.o2g(prevH):annotate({ name = 'h2h' })):annotate({ name = 'bn_wh' })
    fromHidden = nn.Add(4 * size)(fromHidden)
    normCell = norm(size)
  else
    fromInput = self.i2g(x):annotate({ name = 'i2h' })
    fromHidden = self.o2g(prevH):annotate({ name = 'h2h' })
  end
  local sums = nn.Reshape(4, self.outputSize)(nn.CAddTable()({ fromInput, fromHidden }))
  local n1, n2, n3, n4 = nn.SplitTable(2)(sums):split(4)
  local inGate, inTransform = nn.Sigmoid()(n1), nn.Tanh()(n2)
  local forgetGate, outGate = nn.Sigmoid()(n3), nn.Sigmoid()(n4)
  local nextC = nn.CAddTable()({ nn.CMulTable()({ forgetGate, prevC }), nn.CMulTable()({ inGate, inTransform }) })
  local cellOut = normCell and normCell(nextC):annotate({ name = 'bn_c' }) or nextC
  local nextH = nn.CMulTable()({ outGate, nn.Tanh()(cellOut) })
  nngraph.annotateNodes()
  return nn.gModule({ x, prevH, prevC }, { nextH, nextC })
end

for _, method in ipairs({ 'buildGate', 'buildInputGate', 'buildForgetGate', 'buildHidden', 'buildCell', 'buildOutputGate' }) do
  FastLSTM[method] = function() error("FastLSTM:" .. method .. ": Not Implemented") end
end
