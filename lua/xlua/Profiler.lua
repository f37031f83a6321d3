-- xlua.Profiler: named wall-clock and CPU timers for the old demo loops.
-- p:start('frame', 'fps'); ...; p:lap('frame'); p:printAll()
local Profiler = {}
Profiler.__index = Profiler

function xlua.Profiler(mode, verbose)
  return setmetatable({ events = {}, list = {}, off = mode == 'off', verbose = verbose or false }, Profiler)
end

function Profiler:start(name, fps)
  local e = self.events[name]
  if not e then
    e = { name = name }
    self.events[name] = e
    self.list[#self.list + 1] = e
  end
  e.cpu, e.real = os.clock(), sys.clock()
  if fps == 'fps' then e.fps = true end
  if self.verbose then io.write('<' .. name .. '>') io.flush() end
end

local function event(self, name)
  local e = self.events[name]
  if not e then error('# ERROR: There is no such profiler - ' .. tostring(name) .. ', create it first', 3) end
  return e
end

function Profiler:setColor(name, color)
  event(self, name).color = color
end

function Profiler:cpu(name, divider)
  local e = event(self, name)
  e.cpud = (os.clock() - e.cpu) / (divider or 1)
  return e.cpud
end

function Profiler:real(name, divider)
  local e = event(self, name)
  e.reald = (sys.clock() - e.real) / (divider or 1)
  return e.reald
end

function Profiler:lap(name, divider)
  local real, cpu = self:real(name, divider), self:cpu(name, divider)
  if self.verbose then io.write('\r') self:print(name) end
  return real, cpu
end

local function line(e)
  local text = ('$ real %f | cpu %f <%s>'):format(e.reald or -1, e.cpud or -1, e.name)
  if e.fps then text = text .. (' = %f fps'):format(1 / (e.reald or -1)) end
  return text
end

function Profiler:format(name)
  local e = event(self, name)
  return ('$ real | cpu: %f | %f <%s>'):format(e.reald or -1, e.cpud or -1, name)
end

function Profiler:print(name)
  if not self.off then print(self:format(name)) end
end

function Profiler:formatAll()
  local lines = { '$ profiler report:' }
  for _, e in ipairs(self.list) do lines[#lines + 1] = line(e) end
  return table.concat(lines, '\n')
end

function Profiler:printAll()
  if not self.off then print(self:formatAll()) end
end

-- drawing the report needs a Qt painter (qtlua), which luabridge has no binding for
function Profiler:displayAll()
  error('xlua.Profiler:displayAll draws with a Qt painter (qtlua); use printAll or formatAll', 2)
end
