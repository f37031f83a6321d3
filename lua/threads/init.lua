-- threads: torch/threads' API (Threads pool, Mutex, Condition, safe, serialization) with all
-- jobs run in order on the calling thread (see Threads.lua). local threads = require 'threads';
-- threads.Threads(4, init):addjob(job, done, args...); older code calls the module itself.
local threads = {}
threads.Threads = require 'threads.Threads'
threads.Mutex = require 'threads.Mutex'
threads.Condition = require 'threads.Condition'
threads.safe = require 'threads.safe'
threads.serialization = threads.Threads.serialization

return setmetatable(threads, getmetatable(threads.Threads))
