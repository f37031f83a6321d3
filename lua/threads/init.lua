-- threads: torch/threads (a pool of worker threads, each with a Lua runtime of its own; Mutex,
-- Condition, Thread, safe, serialize and sharedserialize). local threads = require 'threads';
-- threads.Threads(4, init):addjob(job, done, args...); older code calls the module itself.
local threads = {}
threads.Threads = require 'threads.Threads'
threads.Mutex = require 'threads.Mutex'
threads.Condition = require 'threads.Condition'
threads.Thread = require 'threads.Thread'
threads.safe = require 'threads.safe'
threads.serialization = threads.Threads.serialization

-- the constructor's own metatable (getmetatable gives the class metatable, as luaT's)
return setmetatable(threads, debug.getmetatable(threads.Threads))
