-- Mini-batch k-means as a module: weight holds k centroids (k x dim). forward(batch x dim)
-- returns each sample's nearest centroid (1-based, in the weight's type) and sets self.loss, the
-- within-cluster sum of squared distances; gradWeight then moves each centroid towards the mean
-- of its samples, so weight:add(-lr, gradWeight) with lr = 1 is a Lloyd step.
local check = require 'torch.core.check'
local extremum = require 'nn.util.extremum'
local Kmeans, parent = torch.class('nn.Kmeans', 'nn.Module')

function Kmeans:__init(k, dim, scale)
  parent.__init(self)
  self.k = check.int('nn.Kmeans', k, 'k (the number of clusters)', 1)
  self.dim = check.int('nn.Kmeans', dim, 'dim', 1)
  self.scale = check.optNumber('nn.Kmeans', scale, 'scale')
  self.weight = torch.Tensor(k, dim)
  self.gradWeight = torch.Tensor(k, dim)
  self.clusterSampleCount = torch.Tensor(k)
  self.loss = 0
  self:reset()
end

function Kmeans:reset(stdev)
  stdev = stdev or 1
  self.weight:uniform(-stdev, stdev)
  return self
end

local function checkInput(self, input, atLeastK)
  if not torch.isTensor(input) or input:dim() ~= 2 or input:size(2) ~= self.dim then
    check.error(('nn.Kmeans: expected a batch x %d input, got %s'):format(self.dim,
      torch.isTensor(input) and check.sizestr(input) or torch.type(input)))
  end
  if atLeastK and input:size(1) < self.k then
    check.error(('nn.Kmeans: need at least k = %d samples to initialize, got %d'):format(self.k, input:size(1)))
  end
end

-- Centroids drawn uniformly (with replacement) from the samples.
function Kmeans:initRandom(input)
  checkInput(self, input, true)
  local picks = torch.LongTensor(self.k):random(1, input:size(1))
  self.weight:index(input, 1, picks)
end

-- The squared distances from every sample to the centroids rows (rows x batch).
local function sqDistances(input, centroids, into)
  local n, B = centroids:size(1), input:size(1)
  into:resize(n, B)
  local diff = input.new()
  for c = 1, n do
    diff:resizeAs(input):copy(input):add(-1, centroids[c]:view(1, -1):expandAs(input))
    into[c]:copy(diff:cmul(diff):sum(2):view(B))
  end
  return into
end

-- k-means++-like seeding: the first centroid is a random sample; each next one is drawn among
-- the ceil((1 - p) * N) samples farthest from the centroids so far (p defaults to 0.95).
function Kmeans:initKmeansPlus(input, p)
  checkInput(self, input, false)
  self.p = p or self.p or 0.95
  if self.p < 0 or self.p > 1 then check.error('nn.Kmeans: p must lie in [0, 1], got ' .. self.p) end
  local N = input:size(1)
  local pcount = math.max(math.ceil((1 - self.p) * N), 1)
  self.weight[1]:copy(input[torch.random(N)])
  local nearest = input.new(N):fill(math.huge)
  local d = input.new()
  for c = 2, self.k do
    nearest:cmin(sqDistances(input, self.weight:narrow(1, c - 1, 1), d)[1])
    local _, order = nearest:sort(1, true)
    self.weight[c]:copy(input[order[torch.random(pcount)]])
  end
end

function Kmeans:updateOutput(input)
  checkInput(self, input, false)
  self._dist = self._dist or input.new()
  sqDistances(input, self.weight, self._dist)
  self._minScore = self._minScore or input.new()
  -- min's indices are a CudaLongTensor for CUDA input, as in cutorch
  self._minScore:min(extremum.indices(self, '_minIndx', input), self._dist, 1)
  self._minIndx = self._minIndx:view(input:size(1))
  self.output:resize(input:size(1)):copy(self._minIndx)
  self.loss = self._minScore:sum()
  return self.output
end

function Kmeans:updateGradInput(input, gradOutput)
  self.gradInput:resize(input:size()):zero()
  return self.gradInput
end

-- gradWeight[c] += -scale * (the sum of (x - w_c) over c's samples) / (their count + 1e-7)
function Kmeans:accGradParameters(input, gradOutput, scale)
  scale = self.scale or scale or 1
  if scale <= 0 then check.error('nn.Kmeans: scale must be positive, got ' .. scale) end
  checkInput(self, input, false)
  if not self._minIndx or self._minIndx:nElement() ~= input:size(1) then
    check.error('nn.Kmeans: call forward with this input before accGradParameters')
  end
  self.clusterSampleCount:zero():indexAdd(1, self._minIndx, input.new(input:size(1)):fill(1))
  local pull = self.weight:index(1, self._minIndx):mul(-1):add(input):mul(-scale)
  local sums = self.gradWeight.new():resizeAs(self.gradWeight):zero():indexAdd(1, self._minIndx, pull)
  local counts = self.clusterSampleCount:clone():add(1e-7)
  self.gradWeight:add(sums:cdiv(counts:view(self.k, 1):expandAs(sums)))
end

function Kmeans:clearState()
  self._dist, self._minScore, self._minIndx = nil, nil, nil
  return parent.clearState(self)
end

function Kmeans:type(type, tensorCache)
  self:clearState()
  return parent.type(self, type, tensorCache)
end
