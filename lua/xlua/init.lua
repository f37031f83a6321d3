-- torch7's xlua: progress bars, safe require, error formatting and string/table helpers.
require 'torch'
require 'sys'

xlua = rawget(_G, 'xlua') or {}

-- '1h2m', '3s450ms', ...: the two largest non-zero units of a duration in seconds.
function xlua.formatTime(seconds)
  local units = { { 86400, 'D' }, { 3600, 'h' }, { 60, 'm' }, { 1, 's' }, { 0.001, 'ms' } }
  local parts, rest = {}, seconds
  for _, u in ipairs(units) do
    local n = math.floor(rest / u[1])
    rest = rest - n * u[1]
    if n > 0 and #parts < 2 then parts[#parts + 1] = n .. u[2] end
  end
  return #parts > 0 and table.concat(parts) or '0ms'
end

-- A progress bar redrawn in place on stdout: ' [=====>....] 5/10 ETA: 1s | Step: 200ms'.
-- A new bar starts when current goes back; the bar ends with a newline at current == goal.
local bar = { done = true, previous = -1, width = 86 }
function xlua.progress(current, goal)
  local length = bar.width - 34
  local filled = math.floor(current * length / goal)
  if bar.done and (bar.previous == -1 or filled < bar.previous) then
    bar.done, bar.timer = false, torch.Timer()
    bar.first = current
  else
    io.write('\r')
  end
  if bar.done then return end
  bar.previous = filled
  local cells = {}
  for i = 1, length do cells[i] = i < filled and '=' or (i == filled and '>' or '.') end
  local elapsed = bar.timer:time().real
  local step = current == bar.first and 0 or elapsed / (current - bar.first)
  local tm = filled < length and (' ETA: ' .. xlua.formatTime(math.max(0, (goal - current) * step)))
                              or (' Tot: ' .. xlua.formatTime(elapsed))
  io.write(' [', table.concat(cells), '] ', current, '/', goal, tm, ' | Step: ', xlua.formatTime(step))
  if filled == length then
    bar.done = true
    io.write('\n')
  end
  io.flush()
end

-- Raises message, prefixed with '<domain> ' and followed by usage when given.
function xlua.error(message, domain, usage)
  if domain then message = '<' .. domain .. '> ' .. tostring(message) end
  if usage then message = tostring(message) .. '\n' .. usage end
  error(message, 2)
end

-- require that returns false (with a warning) instead of raising when the package is missing.
function xlua.require(name)
  local ok, result = pcall(require, name)
  if __luabridge_interrupt(result) then error(result, 0) end   -- Ctrl-C is no missing package
  if not ok then
    print(result)
    print('warning: <' .. name .. '> could not be loaded (is it installed?)')
    return false
  end
  return result
end
rawset(_G, 'xrequire', xlua.require)

function xlua.trycatch(try, catch)
  local ok, err = pcall(try)
  if not ok then catch(err) end
end

-- True (and the file) when package.path or package.cpath finds the package.
function xlua.installed(name)
  local module = name:gsub('%.', '/')
  for template in (package.path .. ';' .. package.cpath):gmatch('[^;]+') do
    local file = template:gsub('%?', module)
    if paths.filep(file) then return true, file end
  end
  return false
end

-- Splits str at each match of pat (see sys.split).
string.split = sys.split

-- 'a.b.c' -> the value of that expression.
function string.tosymbol(str)
  local f = loadstring('return ' .. str)
  local ok, result = pcall(f)
  if not ok then error(result, 2) end
  if not result then error('symbol "' .. str .. '" does not exist', 2) end
  return result
end

-- The elements of tbl outside [start, start + length) and those inside.
function table.splice(tbl, start, length)
  start, length = start or 1, length or 1
  local kept, removed = {}, {}
  for i, v in ipairs(tbl) do
    local t = (i < start or i >= start + length) and kept or removed
    t[#t + 1] = v
  end
  return kept, removed
end

-- Reads the named environment variables over the defaults, as numbers/booleans like the defaults.
function xlua.envparams(defaults)
  local params = {}
  for k, v in pairs(defaults) do
    local env = os.getenv(k)
    if env == nil then params[k] = v
    elseif type(v) == 'number' then params[k] = assert(tonumber(env), k .. ': expected a number')
    elseif type(v) == 'boolean' then params[k] = env == 'true' or env == 'True'
    else params[k] = env end
  end
  return params
end

require 'xlua.unpack'
require 'xlua.OptionParser'
require 'xlua.Profiler'

return xlua
