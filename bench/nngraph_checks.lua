-- The cost of an nngraph plan's per-call check (lua/nngraph/plan.lua's valid) in char-rnn's LSTM
-- step (bench/real_models.lua's lstm and lstmLoop: 2 layers of 128, 50 clones, batch 32, float32,
-- 1 thread): the fields plan.kinds derives (B) against session 13's hand-written list (A: every
-- chain module's output, gradInput, inplace, train, updateOutput, updateGradInput, plus
-- constant_scalar, a SplitTable's dimension and nInputDims, a OneHot's outputSize, a Reshape's
-- sizes), swapped into the same plans in one process and timed alternating.
--
--   luabridge th bench/nngraph_checks.lua [rounds]     (LSTM_EVAL=1: the forward in evaluation)
local rounds = tonumber(arg[1]) or 20
require 'nn'
require 'nngraph'
local ffi = require 'ffi'
local models = dofile('bench/real_models.lua')
local plan = require 'nngraph.plan'
local utils = require 'nngraph.utils'
require('torch.backend.cpu.blas').watchLoad = false
torch.setnumthreads(1)

pcall(ffi.cdef, 'typedef struct { long s; long ns; } nnchecks_ts; int nnchecks_gettime(int, nnchecks_ts *) __asm__("clock_gettime");')
local ts = ffi.new('nnchecks_ts')
local function now() ffi.C.nnchecks_gettime(1, ts); return tonumber(ts.s) + tonumber(ts.ns) * 1e-9 end

local vocab, hidden, layers, T, batch = 65, 128, 2, 50, 32
torch.manualSeed(1)
local proto = models.lstm(vocab, hidden, layers):float()
local x = torch.LongTensor(T, batch):random(1, vocab)
local y = torch.LongTensor(T, batch):random(1, vocab)
local gms = {}
local after = plan.afterForward
plan.afterForward = function(gm, ...) gms[gm] = true; return after(gm, ...) end
local loop = models.lstmLoop(proto, layers, hidden, x, y, 0.01, os.getenv('LSTM_EVAL') == nil)
loop(3)
plan.afterForward = after

-- session 13's list, built over the same chains
local moduleKeys = { 'output', 'gradInput', 'inplace', 'train', 'updateOutput', 'updateGradInput' }
local typeKeys = {
  ['nn.MulConstant'] = { 'constant_scalar' }, ['nn.AddConstant'] = { 'constant_scalar' },
  ['nn.SplitTable'] = { 'dimension', 'nInputDims' }, ['nn.OneHot'] = { 'outputSize' },
  ['nn.Reshape'] = { 'size', 'nelement', 'batchsize', 'batchMode' },
}
local function oldList(P)
  local tbls, keys, vals, n = {}, {}, {}, 0
  local function add(t, k) n = n + 1; tbls[n], keys[n], vals[n] = t, k, rawget(t, k) end
  for _, chain in ipairs(P.fchains) do
    for _, d in ipairs(chain.members) do
      add(d, 'module')
      local m = d.module
      if m then
        for _, k in ipairs(moduleKeys) do add(m, k) end
        for _, k in ipairs(typeKeys[torch.type(m)] or {}) do add(m, k) end
        for _, k in ipairs { 'output', 'gradInput' } do
          local v = rawget(m, k)
          if utils.istable(v) then for k2 in pairs(v) do add(v, k2) end end
        end
      end
    end
  end
  return { tbls = tbls, keys = keys, vals = vals, n = n }
end
local lists, count = {}, { 0, 0 }
for gm in pairs(gms) do
  local P = plan.of(gm)
  if P and P.fields then
    lists[P] = { oldList(P), P.fields }
    count[1], count[2] = count[1] + lists[P][1].n, count[2] + P.fields.n
  end
end
local function use(which) for P, l in pairs(lists) do P.fields = l[which] end end
local times = { {}, {} }
for _ = 1, rounds do
  for which = 1, 2 do
    use(which)
    local t0 = now()
    loop(3)
    table.insert(times[which], (now() - t0) / 3 * 1e3)
  end
end
use(2)
for which, name in ipairs { "A (session 13's list)", 'B (plan.kinds)' } do
  local t = times[which]
  table.sort(t)
  print(('%s: %d fields over the clones; best %.2f ms, median %.2f ms (%d rounds of 3 steps)'):format(
    name, count[which], t[1], t[math.ceil(#t / 2)], #t))
end
