-- Where the threaded loops (lua/torch/backend/cpu/parallel.lua: max pooling's loops, LeNet's
-- first convolution split over the batch in conv_threads.lua) pay on 2 threads: LeNet's two max
-- poolings and its first convolution, forward, gradInput and weight gradient, at several batch sizes, with the
-- loops on and off (parallel.enabled), alternating call by call in this process (a pooling's
-- gradInput includes the check of its indices).
--   luabridge th bench/loop_threads.lua [REPS] [BATCH...]
-- Prints per layer, pass and batch the best time (us) over REPS rounds, loops off / on, at 2
-- threads (blas.watchLoad off: take the bench lock, run at nice -20), and on / off.
require 'nn'
local blas = require 'torch.backend.cpu.blas'
local parallel = require 'torch.backend.cpu.parallel'
blas.watchLoad = false
torch.setnumthreads(2)

local args = { ... }
if #args == 0 and rawget(_G, "arg") then args = arg end
local reps = tonumber(args[1] or 40)
local batches = {}
for i = 2, #args do batches[#batches + 1] = tonumber(args[i]) end
if #batches == 0 then batches = { 4, 8, 16, 32, 64, 128 } end

local layers = {
  { 'pool1 20x24x24', function() return nn.SpatialMaxPooling(2, 2, 2, 2):float() end, { 20, 24, 24 } },
  { 'pool2 50x8x8', function() return nn.SpatialMaxPooling(2, 2, 2, 2):float() end, { 50, 8, 8 } },
  { 'conv1 1->20 5x5', function() return nn.SpatialConvolution(1, 20, 5, 5):float() end, { 1, 28, 28 } },
}
local function best(f)
  local t = math.huge
  local timer = torch.Timer()
  for _ = 1, 3 do
    timer:reset()
    f()
    t = math.min(t, timer:time().real)
  end
  return t
end
print(('%-18s %-10s %6s %10s %10s %6s'):format('layer', 'pass', 'batch', 'off us', 'on us', 'on/off'))
for _, l in ipairs(layers) do
  for _, B in ipairs(batches) do
    local m = l[2]()
    local x = torch.FloatTensor(B, unpack(l[3])):normal()
    local y = m:forward(x)
    local go = y:clone():normal()
    local passes = {
      { 'forward', function() m:forward(x) end },
      { 'gradInput', function() m:updateGradInput(x, go) end },
      { 'accGrad', function() m:accGradParameters(x, go) end },
    }
    for _, p in ipairs(passes) do
      if not (p[1] == 'accGrad' and not m.weight) then
      local t = { [true] = math.huge, [false] = math.huge }
      for _ = 1, reps do
        for _, on in ipairs { false, true } do
          parallel.enabled = on
          t[on] = math.min(t[on], best(p[2]))
        end
      end
      print(('%-18s %-10s %6d %10.1f %10.1f %6.2f'):format(l[1], p[1], B, t[false] * 1e6, t[true] * 1e6, t[true] / t[false]))
      end
    end
  end
end
parallel.enabled = true
