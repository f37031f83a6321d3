-- threads.Threads(N[, f1, f2, ...]): torch/threads' pool API, with every job run in order on
-- the calling thread. addjob queues a job; dojob runs the oldest one (its callback, as the
-- pool's thread __threadid, then its endcallback); synchronize runs them all. Jobs share the
-- caller's Lua state: callbacks and their arguments are not copied, and the globals a job sets
-- are the caller's. A pool of N "threads" runs its init functions once per thread id 1..N.
local Threads = {}
Threads.__index = Threads
Threads.__serialize = 'threads.serialize'

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

-- Runs fn(...) as thread id: __threadid is id meanwhile, as in each torch7 thread's state.
local function runAs(id, fn, ...)
  local saved = rawget(_G, '__threadid')
  rawset(_G, '__threadid', id)
  local results = { n = 0 }
  local function collect(ok, ...)
    results.n = select('#', ...)
    for i = 1, results.n do results[i] = select(i, ...) end
    return ok
  end
  local args = { n = select('#', ...), ... }
  local ok = collect(xpcall(function() return fn(unpack(args, 1, args.n)) end, debug.traceback))
  rawset(_G, '__threadid', saved)
  return ok, results
end

function Threads.new(N, ...)
  if type(N) ~= 'number' or N < 1 or N % 1 ~= 0 then
    error(('threads.Threads: the number of threads must be a positive integer, got %s'):format(tostring(N)), 2)
  end
  require(Threads.__serialize)   -- as torch7: an unknown serialization fails here
  local self = setmetatable({ N = N, __specific = true, __running = true, errors = false,
                              jobs = {}, first = 1, last = 0, nextThread = 0 }, Threads)
  local inits = { ... }
  if #inits == 0 then inits = { function() end } end
  local initResults = {}
  for j, init in ipairs(inits) do
    for i = 1, N do
      local keep = j == #inits and function(...) initResults[#initResults + 1] = { ... } end or nil
      self:addjob(i, init, keep, i)
    end
  end
  self:specific(false)
  return self, initResults
end

function Threads:isrunning() return self.__running end

-- specific(flag): jobs then name their thread (addjob(id, callback, ...)); switching runs the
-- queued jobs first. specific() says which mode the pool is in.
function Threads:specific(flag)
  checkRunning(self)
  if flag == nil then return self.__specific end
  if type(flag) ~= 'boolean' then error('threads.Threads:specific: boolean expected', 2) end
  self:synchronize()
  self.__specific = flag
end

local function queued(self, id)
  if id == nil then return self.last - self.first + 1 end
  local n = 0
  for k = self.first, self.last do if self.jobs[k].id == id then n = n + 1 end end
  return n
end

-- acceptsjob([id]): whether a job may be queued without running one first (each queue holds
-- N jobs, as torch7's).
function Threads:acceptsjob(id)
  checkRunning(self)
  if self.__specific then checkThreadId(self, id) else id = nil end
  return queued(self, id) < self.N
end

function Threads:addjob(...)
  checkRunning(self)
  local id, callback, endcallback, first
  if self.__specific then
    id, callback, endcallback = ...
    checkThreadId(self, id)
    first = 4
  else
    callback, endcallback = ...
    self.nextThread = self.nextThread % self.N + 1
    id, first = self.nextThread, 3
  end
  if type(callback) ~= 'function' then error('threads.Threads:addjob: function callback expected', 2) end
  if endcallback ~= nil and type(endcallback) ~= 'function' then
    error('threads.Threads:addjob: function (or nil) endcallback expected', 2)
  end
  while not self:acceptsjob(self.__specific and id or nil) do self:dojob() end
  local n = select('#', ...)
  local job = { id = id, callback = callback, endcallback = endcallback, n = math.max(n - first + 1, 0) }
  for k = first, n do job[k - first + 1] = select(k, ...) end
  self.last = self.last + 1
  self.jobs[self.last] = job
end

-- dojob(): runs the oldest queued job, then its endcallback with what the job returned.
function Threads:dojob()
  checkRunning(self)
  if self.first > self.last then
    error('threads.Threads:dojob: no job queued (torch7 would wait forever)', 2)
  end
  local job = self.jobs[self.first]
  self.jobs[self.first] = nil
  self.first = self.first + 1
  self.errors = false
  local ok, results = runAs(job.id, job.callback, unpack(job, 1, job.n))
  if not ok then
    self.errors = true
    error(('[thread %d callback] %s'):format(job.id, tostring(results[1])), 0)
  end
  if job.endcallback then
    local endOk, err = xpcall(function() return job.endcallback(unpack(results, 1, results.n)) end, debug.traceback)
    if not endOk then
      self.errors = true
      error(('[thread %d endcallback] %s'):format(job.id, tostring(err)), 0)
    end
  end
end

function Threads:hasjob()
  checkRunning(self)
  return self.first <= self.last
end

-- Errors propagate from dojob at once, as torch7's (deprecated there too).
function Threads:haserror() return false end

function Threads:synchronize()
  if not self.__running then return end
  while self:hasjob() do self:dojob() end
end

function Threads:terminate()
  if not self.__running then return end
  local ok, err = pcall(self.synchronize, self)
  self.__running = false
  if not ok then error(err, 0) end
end

-- The constructor table: threads.Threads(N, ...) and, for older code, Threads(N, ...).
return setmetatable({}, {
  __index = Threads, __newindex = Threads,
  __call = function(_, ...) return Threads.new(...) end,
})
