-- Write versions and escape marks (lua/torch/core/versions.lua), checked from Lua: every writer
-- of the torch surface bumps the version of the buffer it writes (the root storage's, for views),
-- readers do not, and what hands memory out marks it escaped. tests/test_write_versions.py
-- checks what the plans make of them.
local V = require 'torch.core.versions'
V.watch()   -- versions move once a plan keeps something; these tests watch from the start
local tester = torch.Tester()
local tests = torch.TestSuite()

local function version(x) return (V.state(x)) end
local function escaped(x) return select(2, V.state(x)) end

-- whether write(t) bumps t's buffer (t a fresh 2 x 3 FloatTensor of ones)
local function bumps(write)
  local t = torch.FloatTensor(2, 3):fill(1)
  local v = version(t)
  write(t)
  return version(t) > v
end

function tests.tensorWritersBump()
  local writers = {
    fill = function(t) t:fill(2) end,
    zero = function(t) t:zero() end,
    copy = function(t) t:copy(torch.DoubleTensor(2, 3):fill(3)) end,
    add = function(t) t:add(1) end,
    cmul = function(t) t:cmul(t) end,
    uniform = function(t) t:uniform() end,
    bernoulli = function(t) t:bernoulli(0.5) end,
    element = function(t) t[{1, 2}] = 7 end,
    row = function(t) t[2] = 5 end,
    narrowFill = function(t) t:narrow(2, 2, 1):fill(9) end,
    indexFill = function(t) t:indexFill(2, torch.LongTensor{1}, 4) end,
    maskedFill = function(t) t:maskedFill(torch.ByteTensor(2, 3):fill(1), 0) end,
    clamp = function(t) t:clamp(0, 0.5) end,
    sortInto = function(t) torch.sort(t, torch.LongTensor(), torch.FloatTensor(2, 3):uniform()) end,
    addmm = function(t) t:addmm(torch.FloatTensor(2, 4):fill(1), torch.FloatTensor(4, 3):fill(1)) end,
    apply = function(t) t:apply(function(x) return x + 1 end) end,
    storageElement = function(t) t:storage()[1] = 3 end,
    storageFill = function(t) t:storage():fill(3) end,
    storageCopy = function(t) t:storage():copy(torch.FloatStorage(6):fill(2)) end,
    storageResize = function(t) t:storage():resize(12) end,
    viewStorage = function(t) torch.FloatStorage(t:storage(), 2, 3):fill(5) end,
    fileRead = function(t)
      local f = torch.MemoryFile()
      f:writeFloat(torch.FloatStorage(6):fill(8))
      f:seek(1)
      f:readFloat(t:storage())
    end,
  }
  for name, write in pairs(writers) do tester:assert(bumps(write), name .. ' bumps the version') end
end

function tests.readersKeepTheVersion()
  local readers = {
    sum = function(t) return t:sum() end,
    clone = function(t) return t:clone() end,
    copyOut = function(t) return torch.FloatTensor(2, 3):copy(t) end,
    index = function(t) return t:index(1, torch.LongTensor{2}) end,
    norm = function(t) return t:norm() end,
    totable = function(t) return t:totable() end,
    element = function(t) return t[{1, 1}] end,
    serialize = function(t) return torch.serialize(t) end,
    pointer = function(t) return torch.pointer(t:storage()) end,
    addInto = function(t) return torch.add(torch.FloatTensor(), t, t) end,
  }
  for name, read in pairs(readers) do tester:assert(not bumps(read), name .. ' leaves the version') end
end

function tests.escapes()
  local handouts = {
    data = function(t) return t:data() end,
    storageData = function(t) return t:storage():data() end,
    torchData = function(t) return torch.data(t) end,
    cdata = function(t) return t:cdata() end,
    storageCdata = function(t) return t:storage():cdata() end,
    viewData = function(t) return torch.FloatStorage(t:storage(), 2, 2):data() end,
  }
  for name, handout in pairs(handouts) do
    local t = torch.FloatTensor(2, 3)
    tester:assert(not escaped(t), name .. ': fresh')
    handout(t)
    tester:assert(escaped(t), name .. ' escapes the buffer')
  end
  local path = os.tmpname()
  torch.DiskFile(path, 'w'):binary():writeFloat(torch.FloatStorage(4):fill(1))
  tester:assert(escaped(torch.FloatStorage(path, false)), 'a file mapping is escaped')
  os.remove(path)
end

function tests.viewsShareTheirRootsVersion()
  local root = torch.FloatStorage(10)
  local view = torch.FloatStorage(root, 4, 3)
  local t = torch.FloatTensor(view)
  tester:asserteq(V.root(t), root)
  local v = version(root)
  t:fill(1)
  tester:assert(version(root) > v)
  tester:asserteq(version(view), version(root))
end

tester:add(tests):run()
