-- One [[model]] of the corpus (tools/real_programs.py): build it as its repository does, then a
-- forward and a backward pass, checking what came out. arg[1] is a spec file returning
-- { name, build, input, output, setup, backward }: Lua chunks and sizes from the manifest.
require 'torch'
require 'nn'

local spec = dofile(arg[1])

local function chunk(code, what)
   local f, err = loadstring(code, '=' .. what)
   if not f then error(what .. ' does not parse: ' .. err, 0) end
   return f
end

local function sizes(t)
   return table.concat(t:size():totable(), 'x')
end

-- a value of the same structure as x (tensors, nested tables), filled with N(0,1)
local function randomLike(x)
   if torch.isTensor(x) then
      return x.new():resizeAs(x):normal()
   elseif type(x) == 'table' then
      local y = {}
      for k, v in pairs(x) do y[k] = randomLike(v) end
      return y
   end
   return x
end

local function describe(x)
   if torch.isTensor(x) then return sizes(x) end
   if type(x) == 'table' then
      local parts = {}
      for _, v in ipairs(x) do parts[#parts + 1] = describe(v) end
      return '{' .. table.concat(parts, ', ') .. '}'
   end
   return type(x)
end

-- every tensor in x is finite; `where` names x in the error
local function checkFinite(x, where)
   if torch.isTensor(x) then
      if x:nElement() > 0 and x:type() ~= 'torch.LongTensor' and x:type() ~= 'torch.ByteTensor' then
         local s = x:double():sum()
         if s ~= s or s == math.huge or s == -math.huge then error(where .. ' is not finite', 0) end
      end
   elseif type(x) == 'table' then
      for k, v in pairs(x) do checkFinite(v, where .. '[' .. tostring(k) .. ']') end
   end
end

-- gradInput has input's structure, and a floating input's sizes
local function checkLike(grad, input, where)
   if torch.isTensor(input) then
      local floating = input:type() == 'torch.DoubleTensor' or input:type() == 'torch.FloatTensor'
         or input:type() == 'torch.CudaTensor'
      if floating then
         if not torch.isTensor(grad) then error(where .. ' is a ' .. torch.type(grad) .. ', not a tensor', 0) end
         if not grad:isSameSizeAs(input) then
            error(where .. ' has size ' .. sizes(grad) .. ' but the input has ' .. sizes(input), 0)
         end
      end
   elseif type(input) == 'table' then
      if type(grad) ~= 'table' then error(where .. ' is a ' .. torch.type(grad) .. ', not a table', 0) end
      for k, v in pairs(input) do checkLike(grad[k], v, where .. '[' .. tostring(k) .. ']') end
   end
end

torch.manualSeed(1234)
if spec.setup then chunk(spec.setup, 'setup')() end
local model = chunk(spec.build, 'build')()
if not torch.isTypeOf(model, 'nn.Module') then
   error('build returned ' .. torch.type(model) .. ', not an nn.Module', 0)
end
local input
if type(spec.input) == 'table' then
   input = torch.Tensor(torch.LongStorage(spec.input)):normal()
else
   input = chunk('return ' .. spec.input, 'input')()
end

model:training()
local output = model:forward(input)
checkFinite(output, 'output')
print('corpus-model: output ' .. describe(output))
-- the expected sizes written as describe writes an output: {2, 10} is 2x10, {{2, 10}, {2, 5}} {2x10, 2x5}
local function describeSizes(t)
   if type(t[1]) == 'table' then
      local parts = {}
      for _, v in ipairs(t) do parts[#parts + 1] = describeSizes(v) end
      return '{' .. table.concat(parts, ', ') .. '}'
   end
   return table.concat(t, 'x')
end
if spec.output then
   local want = describeSizes(spec.output)
   if describe(output) ~= want then
      error('output is ' .. describe(output) .. ', expected ' .. want, 0)
   end
end
if spec.backward ~= false then
   model:zeroGradParameters()
   local gradInput = model:backward(input, randomLike(output))
   checkFinite(gradInput, 'gradInput')
   checkLike(gradInput, input, 'gradInput')
   local _, gradParams = model:parameters()
   local moved = 0
   for _, g in ipairs(gradParams or {}) do
      if g:nElement() > 0 and g:double():abs():sum() > 0 then moved = moved + 1 end
   end
   print(('corpus-model: backward, %d of %d gradient tensors non-zero'):format(moved, #(gradParams or {})))
   if gradParams and #gradParams > 0 and moved == 0 then
      error('backward left every parameter gradient at zero', 0)
   end
end
print('corpus-model: ok')
