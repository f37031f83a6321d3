-- Worker threads of the libraries we drive (OpenBLAS's pool, OpenMP's team under oneDNN) inherit
-- the signal mask of the thread that makes them. Made with SIGINT blocked, they leave Ctrl-C to
-- the main thread; a worker that took it would leave `luabridge th` waiting in readline until
-- the next key. blockCtrlC() blocks SIGINT in the calling thread and returns the function that
-- restores its mask (false where that cannot be done: Linux's sigset_t and SIG_* values here).
local ffi = require 'ffi'

local signals = {}

function signals.blockCtrlC() return false end

if ffi.os == 'Linux' then
  ffi.cdef [[
  typedef struct { unsigned long bits[16]; } luabridge_sigset;
  int pthread_sigmask(int how, const luabridge_sigset *set, luabridge_sigset *old);
  ]]
  local SIG_BLOCK, SIG_SETMASK, SIGINT_BIT = 0, 2, 2   -- bit (SIGINT - 1) of the first word
  local sigint, saved = ffi.new('luabridge_sigset'), ffi.new('luabridge_sigset')
  sigint.bits[0] = SIGINT_BIT
  local function restore() ffi.C.pthread_sigmask(SIG_SETMASK, saved, nil) end
  function signals.blockCtrlC()
    return ffi.C.pthread_sigmask(SIG_BLOCK, sigint, saved) == 0 and restore
  end
end

return signals
