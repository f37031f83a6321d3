-- torch.CmdLine: the option parser of Torch7 training scripts. Options are '-name value' pairs
-- (booleans are flags that flip their default), arguments are positional; help, errors, the
-- experiment-name string and the logging print behave as torch7's, so scripts print and exit
-- the same way.
local torch = require 'torch.env'

local CmdLine = torch.class('torch.CmdLine')

-- '-lr' and '--lr' are stored as 'lr' in the parsed table
local function bare(key)
  return key:match('^%-*(.*)$')
end

local function padded(s, width)
  return s .. (' '):rep(width - #s)
end

local function sortedKeys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end

function CmdLine:__init(argseparator, keyseparator)
  self.argseparator = argseparator or ','
  self.keyseparator = keyseparator or '='
  self.options = {}      -- '-key' -> {key, default, help, type}
  self.arguments = {}    -- in order: {key, help, type}
  self.helplines = {}    -- options, arguments and text lines, in declaration order
  self.dateformat = nil
  self.silentio = false
end

-- torch7 reports a bad command line on stderr, shows the help and ends the program.
function CmdLine:error(msg)
  print('')
  io.stderr:write(msg)
  print('')
  self:help()
  os.exit(1)
end

function CmdLine:silent()
  self.silentio = true
end

-- Prefixes each logged line (the log file only) with os.date(format) and '[name]: '.
function CmdLine:addTime(name, format)
  format = format or '%Y-%m-%d %H:%M:%S'
  if type(format) ~= 'string' then error('Argument has to be string') end
  self.dateformat = format .. (name ~= nil and ('[' .. name .. ']: ') or '')
end

function CmdLine:argument(key, help, kind)
  local entry = { key = key, help = help, type = kind }
  self.arguments[#self.arguments + 1] = entry
  self.helplines[#self.helplines + 1] = entry
end

function CmdLine:option(key, default, help, kind)
  if default == nil then error('option ' .. key .. ' has no default value') end
  kind = kind or type(default)
  if type(default) ~= kind then error('option ' .. key .. ' has wrong default type value') end
  local entry = { key = key, default = default, help = help, type = kind }
  self.options[key] = entry
  self.helplines[#self.helplines + 1] = entry
end

function CmdLine:text(txt)
  txt = txt or ''
  assert(type(txt) == 'string')
  self.helplines[#self.helplines + 1] = txt
end

-- The parsed table before any argument: every option at its default.
function CmdLine:default()
  local params = {}
  for key, option in pairs(self.options) do params[bare(key)] = option.default end
  return params
end

-- Reads the option at arg[i] into params; returns how many words it used.
function CmdLine:__readOption__(params, arg, i)
  local key = arg[i]
  local option = self.options[key]
  if not option then self:error('unknown option ' .. key) end
  if option.type == 'boolean' then
    params[bare(key)] = not option.default
    return 1
  end
  local value = arg[i + 1]
  if not value then self:error('missing argument for option ' .. key) end
  if option.type == 'number' then
    value = tonumber(value)
  elseif option.type ~= nil and option.type ~= 'string' then
    self:error('unknown required option type ' .. option.type)
  end
  if not value then self:error('invalid type for option ' .. key .. ' (should be ' .. option.type .. ')') end
  params[bare(key)] = value
  return 2
end

-- Reads positional argument number n (the word arg[i]) into params.
function CmdLine:__readArgument__(params, arg, i, n)
  local value = arg[i]
  local argument = self.arguments[n]
  if argument == nil then self:error('invalid argument: ' .. tostring(value)) end
  -- as torch7: words are strings, so only 'string' (or no type) ever matches
  if argument.type and type(value) ~= argument.type then
    self:error('invalid argument type for argument ' .. argument.key .. ' (should be ' .. argument.type .. ')')
  end
  params[bare(argument.key)] = value
  return 1
end

-- Parses a list of words (the script's `arg`): known options by name, every other word is the
-- next positional argument; '-h', '-help' and '--help' print the help and exit.
function CmdLine:parse(arg)
  arg = arg or {}
  local params = self:default()
  local i, n = 1, 0
  while i <= #arg do
    local word = arg[i]
    if word == '-h' or word == '-help' or word == '--help' then
      self:help(arg)
      os.exit(0)
    end
    if self.options[word] then
      i = i + self:__readOption__(params, arg, i)
    else
      n = n + 1
      i = i + self:__readArgument__(params, arg, i, n)
    end
  end
  if n ~= #self.arguments then self:error('not enough arguments') end
  return params
end

-- A name for the run: prefix, then 'arg=value' of each argument in order, then sorted
-- 'option=value' for each option that differs from its default (or that ignore[k] == false
-- forces in); options with ignore[k] true are left out. Parts joined by argseparator.
function CmdLine:string(prefix, params, ignore)
  prefix = prefix or ''
  ignore = ignore or {}
  local arguments, options = {}, {}
  for _, k in ipairs(sortedKeys(params)) do
    local v = params[k]
    local option = self.options['-' .. k]
    if ignore[k] then
      print('-- ignore option ' .. k)
    elseif option then
      if v ~= option.default or ignore[k] == false then
        if type(v) == 'boolean' then v = v and 't' or 'f' end
        options[#options + 1] = k .. self.keyseparator .. tostring(v)
        print(k, v, option.default)   -- torch7 prints every option it names
      end
    else
      local position
      for i, argument in ipairs(self.arguments) do
        if bare(argument.key) == k then position = i end
      end
      if position then
        arguments[position] = k .. self.keyseparator .. tostring(v)
      else
        print('WARNING: unknown option/argument: ' .. k .. ' IGNORING for DIRECTORY NAME')
      end
    end
  end
  table.sort(options)
  local parts = {}
  for i = 1, #self.arguments do parts[#parts + 1] = arguments[i] end
  for _, o in ipairs(options) do parts[#parts + 1] = o end
  if #parts == 0 then return prefix end
  return prefix .. self.argseparator .. table.concat(parts, self.argseparator)
end

-- The print in force before the first log(): what a logging print still shows on the screen.
local screenPrint

-- From now on print also writes to file (a name or an open file): each line is the values
-- joined by spaces, after the addTime prefix. Then prints the header and params.
function CmdLine:log(file, params)
  local f = io.type(file) == 'file' and file or assert(io.open(file, 'w'))
  screenPrint = screenPrint or print
  local cmd = self
  rawset(_G, 'print', function(...)
    if not cmd.silentio then screenPrint(...) end
    local words = {}
    if cmd.dateformat then words[1] = os.date(cmd.dateformat) end
    for i = 1, select('#', ...) do words[#words + 1] = tostring((select(i, ...))) end
    words[#words + 1] = '\n'
    f:write(table.concat(words, ' '))
    f:flush()
  end)
  print('[program started on ' .. os.date() .. ']')
  print('[command line arguments]')
  if params then
    for _, k in ipairs(sortedKeys(params)) do print(k, params[k]) end
  end
  print('[----------------------]')
end

-- 'Usage: [script ][options] <arg>...' then one line per declaration: names padded to the
-- longest, the help text, and an option's default in brackets.
function CmdLine:help(arg)
  io.write('Usage: ')
  if arg and arg[0] then io.write(tostring(arg[0]) .. ' ') end
  io.write('[options]')
  for _, argument in ipairs(self.arguments) do io.write(' <' .. bare(argument.key) .. '>') end
  io.write('\n')
  local width = 0
  for _, line in ipairs(self.helplines) do
    if type(line) == 'table' then
      local shown = line.default ~= nil and #line.key or #bare(line.key) + 2
      width = math.max(width, shown)
    end
  end
  for _, line in ipairs(self.helplines) do
    if type(line) == 'table' then
      io.write('  ')
      if line.default ~= nil then
        io.write(padded(line.key, width))
        if line.help then io.write(' ' .. line.help) end
        io.write(' [' .. tostring(line.default) .. ']')
      else
        io.write(padded('<' .. bare(line.key) .. '>', width))
        if line.help then io.write(' ' .. line.help) end
      end
    else
      io.write(line)
    end
    io.write('\n')
  end
end

return CmdLine
