-- The base of modules made of submodules (self.modules): bookkeeping, parameter gathering,
-- and errors raised inside a child rethrown with the path to it ("In 2 module of nn.Sequential:").
local check = require 'torch.core.check'
local Container, parent = torch.class('nn.Container', 'nn.Module')

function Container:__init(...)
  parent.__init(self, ...)
  self.modules = {}
end

-- add(nil) does nothing, as torch7's table.insert(self.modules, nil) did (OpenNMT's onmt.Network is
-- built empty and :set() later); anything else that is not a module is refused.
function Container:add(module)
  if module == nil then return self end
  table.insert(self.modules, check.module(torch.type(self) .. ':add', module, 'module'))
  return self
end

function Container:get(index) return self.modules[index] end
function Container:size() return #self.modules end

-- Marks a message that already carries the child path and the traceback of the failure point.
local TRACE_MARK = '(stack traceback of the failing call above; tracebacks below are of the rethrows)'

-- Prefixes the error with "In i module of <container type>:". The innermost container also
-- appends the traceback at the failure point; outer ones strip the "file:line:" position that
-- error() put in front of the inner message. Non-string errors pass through untouched.
local function prefixed(self, index, err)
  if type(err) ~= 'string' then return err end
  if err:find(TRACE_MARK, 1, true) then
    err = err:sub((err:find('\n', 1, true) or 0) + 1)
  else
    local trace = __luabridge_traceback(2)
    err = err .. '\n' .. trace .. '\n\n' .. TRACE_MARK
  end
  -- starts with a newline: error() puts the position of the rethrow in front of it
  return ('\nIn %d module of %s:\n%s'):format(index, torch.type(self), err)
end

-- module[funcName](module, ...) with errors rethrown as described above; returns its result.
function Container:rethrowErrors(module, moduleIndex, funcName, ...)
  assert(module == self.modules[moduleIndex], 'rethrowErrors: module is not self.modules[moduleIndex]')
  local ok, result = xpcall(module[funcName], function(err) return prefixed(self, moduleIndex, err) end,
    module, ...)
  if not ok then error(result) end
  return result
end

function Container:applyToModules(fn)
  for _, module in ipairs(self.modules) do fn(module) end
end

function Container:zeroGradParameters()
  self:applyToModules(function(m) m:zeroGradParameters() end)
end

function Container:updateParameters(learningRate)
  self:applyToModules(function(m) m:updateParameters(learningRate) end)
end

function Container:training()
  self:applyToModules(function(m) m:training() end)
  parent.training(self)
end

function Container:evaluate()
  self:applyToModules(function(m) m:evaluate() end)
  parent.evaluate(self)
end

-- Each child shares the named fields with the child at the same place in mlp.
function Container:share(mlp, ...)
  for i, m in ipairs(self.modules) do m:share(mlp.modules[i], ...) end
  return self
end

function Container:reset(stdv)
  self:applyToModules(function(m) m:reset(stdv) end)
end

-- Appends the tensors of `from` (a tensor or nested tables of them) to the list `to`.
local function flattenInto(to, from)
  if torch.type(from) == 'table' then
    for i = 1, #from do flattenInto(to, from[i]) end
  else
    to[#to + 1] = from
  end
end

-- The children's parameters and gradients, in order, as two flat lists.
function Container:parameters()
  local params, grads = {}, {}
  for _, m in ipairs(self.modules) do
    local p, g = m:parameters()
    if p then
      flattenInto(params, p)
      flattenInto(grads, g)
    end
  end
  return params, grads
end

-- Drops output and gradInput without resizing them (they may be a child's tensors) and
-- clears every child.
function Container:clearState()
  nn.utils.release(self, 'output', 'gradInput')
  for _, m in pairs(self.modules or {}) do m:clearState() end
  return self
end

-- "<type> {" and one branch per child, drawn as torch7 draws Concat-like containers.
function Container:_branchesToString()
  local lines = { torch.type(self) .. ' {', '  input' }
  local n = #self.modules
  for i, m in ipairs(self.modules) do
    local last = i == n
    local body = tostring(m):gsub('\n', last and '\n         ' or '\n    |    ')
    lines[#lines + 1] = (last and '     `-> ' or '    |`-> ') .. '(' .. i .. '): ' .. body
  end
  lines[#lines + 1] = '     ... -> output'
  lines[#lines + 1] = '}'
  return table.concat(lines, '\n')
end

-- Copies (first) or adds (later) the tensors of src into dst, following nested tables; dst's
-- tensors are reused, missing ones cloned, and entries past #src dropped.
local function accumulate(dst, src, first)
  for k, v in ipairs(src) do
    if torch.type(v) == 'table' then
      dst[k] = accumulate(dst[k] or {}, v, first)
    elseif dst[k] == nil then
      dst[k] = v:clone()
    elseif first then
      dst[k]:resize(v:size()):copy(v)
    else
      dst[k]:add(v)
    end
  end
  for k = #src + 1, #dst do dst[k] = nil end
  return dst
end

-- For containers feeding one input to every child (Concat, ConcatTable): calls
-- method(input, gradOutputOf(i, child), scale) on each child and sums their gradInputs into
-- self.gradInput (a tensor, or a table like the input). Children returning nil are skipped
-- when the input is a tensor.
function Container:_sumGradInputs(method, input, gradOutputOf, scale)
  local isTable = torch.type(input) == 'table'
  local gradInput, first = self.gradInput, true
  if isTable then
    gradInput = torch.type(gradInput) == 'table' and gradInput or {}
  else
    gradInput = torch.isTensor(gradInput) and gradInput or input.new()
  end
  for i, m in ipairs(self.modules) do
    local g = self:rethrowErrors(m, i, method, input, gradOutputOf(i, m), scale)
    if isTable then
      if torch.type(g) ~= 'table' then
        error(('%s: the gradInput of module %d is a %s, expected a table as the input is one')
          :format(torch.type(self), i, torch.type(g)))
      end
      if #g ~= #input then
        error(('%s: table size mismatch: input has %d entries, gradInput of module %d has %d')
          :format(torch.type(self), #input, i, #g))
      end
      accumulate(gradInput, g, first)
      first = false
    elseif g then
      if first then gradInput:resize(g:size()):copy(g) else gradInput:add(g) end
      first = false
    end
  end
  if first and not isTable then gradInput:resizeAs(input):zero() end
  self.gradInput = gradInput
  return gradInput
end
