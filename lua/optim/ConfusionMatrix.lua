-- A confusion matrix for classification: mat[target][prediction] counts samples, and
-- updateValids computes the per-class and global accuracies.
--   conf = optim.ConfusionMatrix({'cat', 'dog'})     -- or ConfusionMatrix(nclasses[, classes])
--   conf:add(prediction, target); conf:batchAdd(predictions, targets); print(conf)
local ConfusionMatrix = torch.class('optim.ConfusionMatrix')

function ConfusionMatrix:__init(nclasses, classes)
  if type(nclasses) == 'table' then classes, nclasses = nclasses, #nclasses end
  self.nclasses = nclasses
  self.classes = classes or {}
  self.mat = torch.LongTensor(nclasses, nclasses):zero()
  self.valids = torch.FloatTensor(nclasses):zero()
  self.unionvalids = torch.FloatTensor(nclasses):zero()
  self.totalValid, self.averageValid = 0, 0
  self._prediction, self._target = torch.FloatTensor(), torch.FloatTensor()
  self._max, self._pred_idx, self._targ_idx = torch.FloatTensor(), torch.LongTensor(), torch.LongTensor()
end

-- c must be an integer up to nclasses, and at least 1 unless `lowIgnored`.
local function checkClass(self, what, c, lowIgnored)
  if type(c) ~= 'number' or c ~= math.floor(c) or c > self.nclasses or (c < 1 and not lowIgnored) then
    error(('ConfusionMatrix: %s must be a class index in [1, %d], got %s'):format(
      what, self.nclasses, tostring(c)), 3)
  end
end

-- Counts one sample; targets below 1 are ignored (as torch7).
function ConfusionMatrix:_add(p, t)
  checkClass(self, 'prediction', p)
  checkClass(self, 'target', t, true)
  if t > 0 then self.mat[t][p] = self.mat[t][p] + 1 end
end

-- The index of the largest element of a 1-D tensor.
function ConfusionMatrix:_argmax(v, buf)
  if v:dim() ~= 1 then error('ConfusionMatrix: expected a 1D tensor of class scores, got ' .. v:dim() .. 'D', 3) end
  buf:resize(v:size()):copy(v)
  self._max:max(self._pred_idx, buf, 1)
  return self._pred_idx[1]
end

-- torch7 takes the max of a prediction over its first dimension whatever its dimension. For a
-- 2-D prediction (a 1 x nclasses output, as nn.Reshape gives for a single 1 x H x W image) that
-- index is a row of indices, and its mat[t][p] = mat[t][p] + 1 with that LongTensor p adds one
-- at each distinct index (for 1 x K: always class 1). Kept as torch7 counted it.
function ConfusionMatrix:_addIndexRow(prediction, t)
  self._prediction:resize(prediction:size()):copy(prediction)
  self._max:max(self._pred_idx, self._prediction, 1)
  local row = self._pred_idx[1]
  checkClass(self, 'target', t, true)
  if t <= 0 then return end
  local seen = {}
  for i = 1, row:size(1) do
    local p = row[i]
    if not seen[p] then
      seen[p] = true
      checkClass(self, 'prediction', p)
      self.mat[t][p] = self.mat[t][p] + 1
    end
  end
end

-- prediction: a class index or a vector of scores; target: a class index or a one-hot/score vector.
function ConfusionMatrix:add(prediction, target)
  if type(prediction) ~= 'number' and prediction:dim() == 2 then
    if type(target) ~= 'number' then target = self:_argmax(target, self._target) end
    return self:_addIndexRow(prediction, target)
  end
  if type(prediction) ~= 'number' then prediction = self:_argmax(prediction, self._prediction) end
  if type(target) ~= 'number' then target = self:_argmax(target, self._target) end
  self:_add(prediction, target)
end

-- Class indices of a batch: a vector of indices, an N x 1 column of them, or N x nclasses scores.
function ConfusionMatrix:_batchClasses(x, buf, idx, what)
  buf:resize(x:size()):copy(x)
  if x:dim() == 1 then return buf end
  if x:dim() ~= 2 then error(what .. ' has invalid number of dimensions', 3) end
  if x:size(2) == 1 then return buf:select(2, 1) end
  self._max:max(idx, buf, 2)
  return idx:select(2, 1)
end

function ConfusionMatrix:batchAdd(predictions, targets)
  local preds = self:_batchClasses(predictions, self._prediction, self._pred_idx, 'predictions')
  local targs = self:_batchClasses(targets, self._target, self._targ_idx, 'targets')
  if preds:size(1) ~= targs:size(1) then
    error(('ConfusionMatrix.batchAdd: %d predictions for %d targets'):format(preds:size(1), targs:size(1)), 2)
  end
  local keep = targs:ge(1)
  if keep:sum() == 0 then return end
  targs, preds = targs:typeAs(self.mat)[keep], preds:typeAs(self.mat)[keep]
  if targs:max() > self.nclasses or preds:min() < 1 or preds:max() > self.nclasses then
    error(('ConfusionMatrix.batchAdd: class indices must be in [1, %d]'):format(self.nclasses), 2)
  end
  local flat = (targs - 1) * self.nclasses + preds
  self.mat:view(-1):indexAdd(1, flat, torch.LongTensor(1):fill(1):expand(flat:size(1)))
end

function ConfusionMatrix:zero()
  self.mat:zero()
  self.valids:zero()
  self.unionvalids:zero()
  self.totalValid, self.averageValid = 0, 0
end

-- valids[c]: recall of class c (NaN when it has no sample); unionvalids[c]: its intersection over
-- union; totalValid: global accuracy; averageValid / averageUnionValid: means over classes
-- whose value is defined.
function ConfusionMatrix:updateValids()
  local rows, cols = self.mat:sum(2), self.mat:sum(1)
  local diag = 0
  for c = 1, self.nclasses do
    local hit = self.mat[c][c]
    self.valids[c] = hit / rows[c][1]
    self.unionvalids[c] = hit / (rows[c][1] + cols[1][c] - hit)
    diag = diag + hit
  end
  self.totalValid = diag / self.mat:sum()
  local sum, n, usum, un = 0, 0, 0, 0
  for c = 1, self.nclasses do
    local v, u = self.valids[c], self.unionvalids[c]
    if v == v then
      sum, n = sum + v, n + 1
      if u == u then usum, un = usum + u, un + 1 end
    end
  end
  self.averageValid = sum / n
  self.averageUnionValid = usum / un
end

-- False rejection and false acceptance rates per class: classFrrs[c] = 1 - recall of c,
-- classFars[c] = mean over the other classes k with samples of the fraction of k's samples
-- predicted as c (both -1 for a class without samples); then the same two lists for the
-- classes with samples only.
function ConfusionMatrix:farFrr()
  local n = self.nclasses
  local rows = self.mat:sum(2):select(2, 1)
  local classFrrs, classFars = torch.Tensor(n):fill(-1), torch.Tensor(n):fill(-1)
  local frrs, fars = {}, {}
  for c = 1, n do
    if rows[c] ~= 0 then
      local share, others = 0, 0
      for k = 1, n do
        if k ~= c and rows[k] ~= 0 then share, others = share + self.mat[k][c] / rows[k], others + 1 end
      end
      classFrrs[c] = 1 - self.mat[c][c] / rows[c]
      classFars[c] = share / others
      frrs[#frrs + 1], fars[#fars + 1] = classFrrs[c], classFars[c]
    end
  end
  return classFrrs, classFars, torch.Tensor(frrs), torch.Tensor(fars)
end

function ConfusionMatrix:__tostring__()
  self:updateValids()
  local maxCount = self.mat:max()
  local width = math.max(8, 1 + math.ceil(math.log10(maxCount)))
  local lines = { 'ConfusionMatrix:\n[' }
  local labelled = self.classes[1] ~= nil
  for t = 1, self.nclasses do
    local row = { t == 1 and '[' or ' [' }
    for p = 1, self.nclasses do row[#row + 1] = ('%' .. width .. 'd'):format(self.mat[t][p]) end
    row[#row + 1] = (t == self.nclasses and ']]  ' or ']   ') .. ('%2.3f'):format(self.valids[t] * 100) .. '% '
    if labelled then row[#row + 1] = '\t[class: ' .. (self.classes[t] or '') .. ']' end
    lines[#lines + 1] = table.concat(row) .. '\n'
  end
  lines[#lines + 1] = ' + average row correct: ' .. (self.averageValid * 100) .. '% \n'
  lines[#lines + 1] = ' + average rowUcol correct (VOC measure): ' .. (self.averageUnionValid * 100) .. '% \n'
  lines[#lines + 1] = ' + global correct: ' .. (self.totalValid * 100) .. '%'
  return table.concat(lines)
end
