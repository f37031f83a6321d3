-- torch.TestSuite(): a table of test functions that refuses duplicate names (a common slip when
-- test files grow) and remembers the order the tests were defined in.
local torch = require 'torch.env'

local function define(suite, name, fn)
  local tests = rawget(suite, '__tests')
  if tests[name] ~= nil then error('Test ' .. tostring(name) .. ' is already defined.', 2) end
  if type(fn) ~= 'function' then
    if type(fn) == 'table' then error('Nested tables of tests are not supported', 2) end
    error('Only functions are supported as members of a TestSuite', 2)
  end
  tests[name] = fn
  local order = rawget(suite, '__order')
  order[#order + 1] = name
end

local suiteMT = {
  __index = function(suite, name) return rawget(suite, '__tests')[name] end,
  __newindex = define,
}

function torch.TestSuite()
  return setmetatable({ __tests = {}, __order = {}, __isTestSuite = true }, suiteMT)
end

return torch.TestSuite
