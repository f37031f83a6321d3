-- xlua.OptionParser: the command-line parser of xlua's early demos (Python's optparse style):
-- op:option{'-l', '--learningRate', action = 'store', dest = 'learningRate', help = ..., default = ...}
-- then options, args = op:parse(). Values of 'store' options stay strings, as there; '--x=v' is
-- '--x v'; -h/--help prints the usage and exits.
local OptionParser = {}
OptionParser.__index = OptionParser

function xlua.OptionParser(usage)
  local self = setmetatable({ usage = usage or '%prog [options]', option_descriptions = {}, option_of = {} },
                            OptionParser)
  self:option { '-h', '--help', action = 'store_true', dest = 'help', help = 'show this help message and exit' }
  return self
end

function OptionParser:fail(message)
  io.stderr:write(message .. '\n')
  self:help()
  os.exit(1)
end

function OptionParser:option(description)
  if type(description) ~= 'table' or type(description.dest) ~= 'string' then
    error('xlua.OptionParser:option: expected {flag, ..., dest = name[, action, help, default, req]}', 2)
  end
  self.option_descriptions[#self.option_descriptions + 1] = description
  for _, flag in ipairs(description) do self.option_of[flag] = description end
end

function OptionParser:parse(options)
  options = options or {}
  local args = {}
  for _, d in ipairs(self.option_descriptions) do
    if d.default ~= nil and options[d.dest] == nil then options[d.dest] = d.default end
  end
  local given = rawget(_G, 'arg')
  options.__main__ = given ~= nil
  self.options = options
  if not given then return options, args end
  local words = {}
  for _, word in ipairs(given) do
    local flag, value = tostring(word):match('^(%-%-%w+)=(.*)')
    if flag then
      words[#words + 1], words[#words + 2] = flag, value
    else
      words[#words + 1] = word
    end
  end
  local i = 1
  while i <= #words do
    local word = words[i]
    local d = self.option_of[word]
    if d then
      local value
      if d.action == nil or d.action == 'store' then
        i = i + 1
        value = words[i] or d.default
        if value == nil then self:fail('option requires an argument ' .. word) end
      else
        value = d.action == 'store_true'
      end
      options[d.dest] = value
    elseif tostring(word):match('^%-') then
      self:fail('invalid option ' .. word)
    else
      args[#args + 1] = word
    end
    i = i + 1
  end
  for _, d in ipairs(self.option_descriptions) do
    if d.req and options[d.dest] == nil then self:fail('option ' .. d[1] .. ' requires an argument ') end
  end
  if options.help then
    self:help()
    os.exit()
  end
  return options, args
end

-- '-l LEARNINGRATE, --learningRate=LEARNINGRATE' for an option taking a value
function OptionParser:flags(d)
  local shown = {}
  local takes = d.action == nil or d.action == 'store'
  local metavar = d.metavar or d.dest:upper()
  for _, flag in ipairs(d) do
    shown[#shown + 1] = flag .. (takes and ((#flag == 2 and ' ' or '=') .. metavar) or '')
  end
  return table.concat(shown, ', ')
end

function OptionParser:help()
  local given = rawget(_G, 'arg') or {}
  local program = given[-1] and (given[-1] .. ' ' .. given[0]) or given[0] or 'THISPROG'
  io.stdout:write('Usage: ' .. self.usage:gsub('%%prog', program) .. '\n\nOptions:\n')
  local width = 0
  for _, d in ipairs(self.option_descriptions) do width = math.max(width, #self:flags(d)) end
  for _, d in ipairs(self.option_descriptions) do
    local note = d.req and ' [REQUIRED]' or (d.default and (' [default = ' .. tostring(d.default) .. ']') or '')
    local flags = self:flags(d)
    io.stdout:write('  ' .. flags .. (' '):rep(width - #flags) .. '  ' .. (d.help or '') .. note .. '\n')
  end
end

-- the options as '<script> configuration:' lines, or as 'flag=value,...' (a file-name tag) of
-- the options whose first flag is in params (all of them when params is empty)
function OptionParser:tostring(asTag, params)
  if not asTag then
    local given = rawget(_G, 'arg')
    local lines = { '<' .. ((given and given[0]) or 'interpreted.lua'):gsub('%.lua', '') .. '> configuration:' }
    for k, v in pairs(self.options or {}) do lines[#lines + 1] = ' + ' .. tostring(k) .. ' = ' .. tostring(v) end
    return table.concat(lines, '\n') .. '\n'
  end
  local parts = {}
  for _, d in ipairs(self.option_descriptions) do
    local wanted = #(params or {}) == 0
    for _, p in ipairs(params or {}) do wanted = wanted or p == d[1] end
    local value = (self.options or {})[d.dest]
    if value and wanted then parts[#parts + 1] = d[1] .. '=' .. tostring(value) end
  end
  return (table.concat(parts, ','):gsub('/', '|'):gsub(' ', '_'))
end

function OptionParser:summarize(asTag)
  io.write(self:tostring(asTag))
end
