-- torch.DiskFile(path[, mode[, quiet]]): a torch.File on a C stdio stream (LuaJIT FFI). Bulk
-- element reads and writes go straight between the stream and storage memory.
local ffi = require 'ffi'
local torch = require 'torch.env'
local check = require 'torch.core.check'
require 'torch.File'

-- Private names (asm labels), so other cdefs of these functions cannot clash.
ffi.cdef [[
typedef struct luabridge_FILE luabridge_FILE;
luabridge_FILE *luabridge_fopen(const char *path, const char *mode) __asm__("fopen");
int luabridge_fclose(luabridge_FILE *f) __asm__("fclose");
size_t luabridge_fread(void *p, size_t size, size_t n, luabridge_FILE *f) __asm__("fread");
size_t luabridge_fwrite(const void *p, size_t size, size_t n, luabridge_FILE *f) __asm__("fwrite");
int luabridge_fseeko(luabridge_FILE *f, int64_t offset, int whence) __asm__("fseeko");
int64_t luabridge_ftello(luabridge_FILE *f) __asm__("ftello");
int luabridge_fflush(luabridge_FILE *f) __asm__("fflush");
int luabridge_fgetc(luabridge_FILE *f) __asm__("fgetc");
int luabridge_ungetc(int c, luabridge_FILE *f) __asm__("ungetc");
char *luabridge_file_strerror(int errnum) __asm__("strerror");
]]
local C = ffi.C
local SEEK_SET, SEEK_END = 0, 2

local DiskFile = torch.class('torch.DiskFile', 'torch.File')

local modes = { r = { 'rb', true, false }, w = { 'wb', false, true }, rw = { 'r+b', true, true } }

function DiskFile:__init(path, mode, quiet)
  if type(path) ~= 'string' then check.error('torch.DiskFile: file name (string) expected') end
  mode = mode or 'r'
  local m = modes[mode]
  if not m then check.error(("torch.DiskFile: bad mode %s ('r', 'w' or 'rw')"):format(tostring(mode))) end
  local handle = C.luabridge_fopen(path, m[1])
  if handle == nil and mode == 'rw' then handle = C.luabridge_fopen(path, 'w+b') end
  if handle == nil then
    local why = ffi.string(C.luabridge_file_strerror(ffi.errno()))
    DiskFile._openError = why   -- for callers of the quiet form
    if quiet then self._failed = true; return end
    check.error(('cannot open <%s> in mode %s (%s)'):format(path, mode, why))
  end
  self._f = ffi.gc(handle, C.luabridge_fclose)
  self._name = path
  self:_initFile(m[2], m[3])
  if quiet then self:quiet() end
  -- a read-only file's size is fixed: the bytes left are known without seeking
  if mode == 'r' then self._size = self:_fileSize() end
end

-- torch.DiskFile(path, mode, true) returns nil when the file cannot be opened, as torch7.
local mt = torch.getmetatable('torch.DiskFile')
local construct = debug.getmetatable(mt.__constructor).__call
debug.getmetatable(mt.__constructor).__call = function(...)
  local f = construct(...)
  if f._failed then return nil end
  return f
end

function DiskFile:_fileSize()
  local f = self._f
  local here = C.luabridge_ftello(f)
  C.luabridge_fseeko(f, 0, SEEK_END)
  local size = C.luabridge_ftello(f)
  C.luabridge_fseeko(f, here, SEEK_SET)
  return tonumber(size)
end

function DiskFile:_read(p, n)
  if n <= 0 then return 0 end
  return tonumber(C.luabridge_fread(p, 1, n, self._f))
end

function DiskFile:_write(p, n)
  if n <= 0 then return 0 end
  local wrote = tonumber(C.luabridge_fwrite(p, 1, n, self._f))
  if wrote ~= n then
    self._hasError = true
    if not self._quiet then check.error(('write error: wrote %d bytes instead of %d'):format(wrote, n)) end
  end
  return wrote
end

function DiskFile:_getc() return C.luabridge_fgetc(self._f) end
function DiskFile:_ungetc(c) C.luabridge_ungetc(c, self._f) end

function DiskFile:_left()
  local size = self._size or self:_fileSize()
  return math.max(0, size - tonumber(C.luabridge_ftello(self._f)))
end

local function opened(self)
  if not self._f then check.error('attempt to use a closed file') end
  return self._f
end

function DiskFile:isOpened() return self._f ~= nil end
function DiskFile:name() return self._name end

-- seek(pos): 1-based byte position, as torch7.
function DiskFile:seek(pos)
  local f = opened(self)
  if type(pos) ~= 'number' or pos < 1 then check.error('seek: position has to be greater than 0!') end
  if C.luabridge_fseeko(f, pos - 1, SEEK_SET) < 0 then
    self._hasError = true
    if not self._quiet then check.error(('unable to seek to position %d'):format(pos)) end
  end
  return self
end

function DiskFile:seekEnd()
  C.luabridge_fseeko(opened(self), 0, SEEK_END)
  return self
end

function DiskFile:position() return tonumber(C.luabridge_ftello(opened(self))) + 1 end

function DiskFile:synchronize()
  C.luabridge_fflush(opened(self))
  return self
end

function DiskFile:close()
  local f = opened(self)
  self._f = nil
  C.luabridge_fclose(ffi.gc(f, nil))
  return self
end

-- Byte order: only the native (little-endian) encoding is supported.
function DiskFile:nativeEndianEncoding() return self end
function DiskFile:littleEndianEncoding()
  if not ffi.abi('le') then check.error('littleEndianEncoding: only the native byte order is supported') end
  return self
end
function DiskFile:isLittleEndianCPU() return ffi.abi('le') end
function DiskFile:isBigEndianCPU() return not ffi.abi('le') end
function DiskFile:noBuffer() return self end

return DiskFile
