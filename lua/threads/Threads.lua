-- threads.Threads(N[, f1, f2, ...]): torch/threads' pool. N workers, each an OS thread with a
-- Lua runtime of its own (luabridge/threads.py): jobs and their upvalues are serialized into
-- the workers with the pool's serialization module, what they return is serialized back, and
-- endcallbacks run here, in dojob / synchronize. Each init function runs once on every worker
-- (with the worker's id); the last one's results are returned beside the pool.
local transfer = require 'threads.transfer'

local py = rawget(_G, '__luabridge_py')
local Threads = {}
Threads.__index = Threads
Threads.__serialize = 'threads.serialize'
-- bytes each worker's runtime holds that this runtime's collector cannot see (torch and nn
-- loaded): counted like a buffer, so that pools dropped without terminate are collected soon
local WORKER_BYTES = 4 * 1024 * 1024

-- Threads.serialization([name]): sets (or returns) the serialization module new pools use.
function Threads.serialization(name)
  if name == nil then return Threads.__serialize end
  if type(name) ~= 'string' then error('threads.Threads.serialization: a module name expected', 2) end
  Threads.__serialize = name
end

local function checkRunning(self)
  if not self.__running then error('thread system is not running', 3) end
end

local function checkThreadId(self, id)
  if type(id) ~= 'number' or id < 1 or id > self.N or id % 1 ~= 0 then
    error(('threads.Threads: thread index (1..%d) expected, got %s'):format(self.N, tostring(id)), 3)
  end
end

function Threads.new(N, ...)
  if type(N) ~= 'number' or N < 1 or N % 1 ~= 0 then
    error(('threads.Threads: the number of threads must be a positive integer, got %s'):format(tostring(N)), 2)
  end
  local self = setmetatable({ N = N, __specific = true, __running = true, errors = false,
                              endcallbacks = { n = 0 }, lastCallbackId = 0,
                              serializer = require(Threads.__serialize) }, Threads)
  require('torch.core.memory').account(N * WORKER_BYTES)
  self.pool = py.threads_pool(N, Threads.__serialize, package.path)
  local inits = { ... }
  if #inits == 0 then inits = { function() end } end
  local initResults = {}
  local ok, err = pcall(function()
    for j, init in ipairs(inits) do
      local keep = j == #inits and function(...) initResults[#initResults + 1] = { ... } end or nil
      for i = 1, N do self:addjob(i, init, keep, i) end
    end
    self:specific(false)
  end)
  if not ok then   -- no pool to terminate reaches the caller: stop the workers here
    self.__running = false
    py.threads_close(self.pool)
    error(err, 0)
  end
  return self, initResults
end

function Threads:isrunning() return self.__running end

-- specific(flag): jobs then name their worker (addjob(id, callback, ...)); switching runs the
-- queued jobs first. specific() says which mode the pool is in.
function Threads:specific(flag)
  checkRunning(self)
  if flag == nil then return self.__specific end
  if type(flag) ~= 'boolean' then error('threads.Threads:specific: boolean expected', 2) end
  self:synchronize()
  py.threads_specific(self.pool, flag)
  self.__specific = flag
end

-- acceptsjob([id]): whether a job may be queued without running one first (each queue holds
-- N jobs not yet taken, as torch7's).
function Threads:acceptsjob(id)
  checkRunning(self)
  if self.__specific then checkThreadId(self, id) else id = 0 end
  return py.threads_queued(self.pool, id) < self.N
end

-- Endcallbacks run here, so any callable will do (a Python function too); jobs must be Lua
-- functions, which serialize.
local function callable(f)
  if type(f) == 'function' then return true end
  local mt = getmetatable(f)
  return type(mt) == 'table' and mt.__call ~= nil
end

function Threads:addjob(...)
  checkRunning(self)
  self.errors = false
  local id, callback, endcallback, first
  if self.__specific then
    id, callback, endcallback = ...
    checkThreadId(self, id)
    first = 4
  else
    callback, endcallback = ...
    first = 3
  end
  if type(callback) ~= 'function' then error('threads.Threads:addjob: function callback expected', 2) end
  if endcallback ~= nil and not callable(endcallback) then
    error('threads.Threads:addjob: function (or nil) endcallback expected', 2)
  end
  while not self:acceptsjob(id) do self:dojob() end
  local job = { callback = callback, n = math.max(select('#', ...) - first + 1, 0), select(first, ...) }
  local payload, shared = transfer.pack(self.serializer, job)
  local callbackId = self.lastCallbackId + 1
  self.lastCallbackId = callbackId
  self.endcallbacks[callbackId] = endcallback or function() end
  self.endcallbacks.n = self.endcallbacks.n + 1
  py.threads_addjob(self.pool, id or 0, payload, shared, callbackId)
end

local function readResults(self, payload, shared)
  return transfer.unpack(self.serializer, transfer.storages(payload)[1], transfer.storages(shared))
end

local function tracebackUnlessInterrupt(err)
  if __luabridge_interrupt(err) then return err end
  return debug.traceback(err, 2)
end

-- dojob(): waits for the next job to finish, then runs its endcallback with what it returned.
function Threads:dojob()
  checkRunning(self)
  if self.endcallbacks.n == 0 then
    error('threads.Threads:dojob: no job queued (torch7 would wait forever)', 2)
  end
  self.errors = false
  local ok, out, shared, callbackId, threadId = py.threads_dojob(self.pool)
  local endcallback = self.endcallbacks[callbackId]
  self.endcallbacks[callbackId] = nil
  self.endcallbacks.n = self.endcallbacks.n - 1
  if not ok then
    self.errors = true
    error(('[thread %d callback] %s'):format(threadId, out), 0)
  end
  local endOk, msg = xpcall(function()
    local results = readResults(self, out, shared)
    return endcallback(unpack(results, 1, results.n))
  end, tracebackUnlessInterrupt)
  if not endOk then
    if __luabridge_interrupt(msg) then error(msg, 0) end   -- Ctrl-C: itself, not a job error
    self.errors = true
    error(('[thread %d endcallback] %s'):format(threadId, msg), 0)
  end
end

function Threads:hasjob()
  checkRunning(self)
  return self.endcallbacks.n > 0
end

-- Errors propagate from dojob at once, as torch7's (deprecated there too).
function Threads:haserror() return false end

function Threads:synchronize()
  if not self.__running then return end
  self.errors = false
  while self:hasjob() do self:dojob() end
end

-- terminate(): runs the queued jobs (and their endcallbacks), then stops and joins the
-- workers, even when a job failed (the error is raised after). A pool collected without it
-- stops and joins its workers too (luabridge/threads.py's Pool.__del__), endcallbacks unrun.
function Threads:terminate()
  if not self.__running then return end
  local ok, err = pcall(self.synchronize, self)
  self.__running = false
  py.threads_close(self.pool)
  if not ok then error(err, 0) end
end

-- The constructor table: threads.Threads(N, ...) and, for older code, Threads(N, ...).
return setmetatable({}, {
  __index = Threads, __newindex = Threads,
  __call = function(_, ...) return Threads.new(...) end,
})
