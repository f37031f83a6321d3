-- torch.Tester: torch7's unit-test runner. Tests are added as functions or TestSuites, run
-- with a one-line status each, then a summary and the failure messages with the line of the
-- failing assertion; run() raises when anything failed so that scripts (and pytest) see it.
--
-- Differences from torch7: tests run in the order they were added (TestSuites keep definition
-- order, plain tables go by name); each run() starts with fresh error and warning lists;
-- equal infinities compare equal. A runner can set torch.Tester._collector to a function:
-- run() then hands it (tester, testNames) instead of running (tests/test_lua_suites.py uses
-- this to run each test as its own pytest case).
local torch = require 'torch.env'

local Tester = torch.class('torch.Tester')
local here = debug.getinfo(1, 'S').source
local NCOLS = 80
local compare = {}   -- the equality checks, defined below

-- The stack level (as error() counts from its caller) of the first function outside this file.
local function userLevel()
  local level = 3
  while true do
    local info = debug.getinfo(level, 'S')
    if not info then return 1 end
    if info.source ~= here then return level - 1 end
    level = level + 1
  end
end

-- Raises msg at the user's line (a misused assertion, or a failure with setRethrowErrors).
local function raise(msg) error(msg, userLevel()) end

function Tester:__init()
  self.errors, self.warnings, self._addWarnings = {}, {}, {}
  self.tests, self._order = {}, {}
  self.disabledTests = {}
  self._warningCount = {}
  self._currentTestName = ''
  -- as torch7: assertTensorEq compares contents only ({{1}} equals {1}), with a warning
  self._assertTensorEqIgnoresDims = true
end

function Tester:setEarlyAbort(earlyAbort) self.earlyAbort = earlyAbort end
function Tester:setRethrowErrors(rethrow) self.rethrow = rethrow end
function Tester:setSummaryOnly(summaryOnly) self.summaryOnly = summaryOnly end

------------------------------------------------------------------------------------------------
-- recording results

-- "stack traceback:" with the test's own frames: those between the Tester's entry points.
local function userFrames()
  local lines, level, started = { 'stack traceback:' }, 3, false
  while true do
    local info = debug.getinfo(level, 'Sln')
    if not info then break end
    local mine = info.source == here
    if started and (mine or info.what == 'C') then break end
    if not mine then
      started = true
      lines[#lines + 1] = ('\t%s:%d: in %s'):format(info.short_src, info.currentline,
        info.name and ("function '" .. info.name .. "'") or ('function <%s:%d>'):format(info.short_src, info.linedefined))
    end
    level = level + 1
  end
  return table.concat(lines, '\n')
end

function Tester:_withContext(message)
  local name = self._currentTestName
  return (name ~= '' and name .. '\n' or '') .. message .. '\n' .. userFrames()
end

function Tester:_success()
  local name = self._currentTestName
  if self.assertionPass then self.assertionPass[name] = (self.assertionPass[name] or 0) + 1 end
  return true
end

function Tester:_failure(message)
  if self.rethrow then raise(message) end
  local name = self._currentTestName
  if self.assertionFail then self.assertionFail[name] = (self.assertionFail[name] or 0) + 1 end
  self.errors[#self.errors + 1] = self:_withContext(message)
  return false
end

function Tester:_warning(message)
  local name = self._currentTestName
  self._warningCount[name] = (self._warningCount[name] or 0) + 1
  local text = self:_withContext(message)
  self.warnings[#self.warnings + 1] = text
  if name == '' then self._addWarnings[#self._addWarnings + 1] = text end
end

function Tester:_assert_sub(condition, message)
  if condition then return self:_success() end
  return self:_failure(message)
end

------------------------------------------------------------------------------------------------
-- assertions

-- The optional message argument ('' or 'message\n').
local function messageArg(message, extra)
  if extra ~= nil then raise('Unexpected arguments passed to test function') end
  if message == nil or message == '' then return '' end
  if type(message) ~= 'string' then raise('the message must be a string, got ' .. type(message)) end
  return message .. '\n'
end

-- The optional tolerance and message, accepted in either order.
local function toleranceAndMessage(defaultTolerance, ...)
  local tolerance, message
  for i = 1, select('#', ...) do
    local a = select(i, ...)
    if type(a) == 'string' then
      if message then raise('Unexpected string argument; already have a message') end
      message = a .. '\n'
    elseif type(a) == 'number' then
      if tolerance then raise('Unexpected number argument; already have a tolerance') end
      if a < 0 then raise('tolerance cannot be negative') end
      tolerance = a
    elseif a ~= nil then
      raise('Unrecognized argument; should be a tolerance or a message, got ' .. type(a))
    end
  end
  return tolerance or defaultTolerance, message or ''
end

function Tester:assert(condition, ...)
  local message = messageArg(...)
  if type(condition) ~= 'boolean' then
    self:_warning(' :assert should only be used for boolean conditions. To check for non-nil '
                  .. 'variables, do this explicitly: Tester:assert(var ~= nil).')
  end
  return self:_assert_sub(condition, ('%sBOOL violation condition=%s'):format(message, tostring(condition)))
end

-- The number comparisons: name, test, and the relation shown when it fails.
for _, c in ipairs({
  { 'assertlt', function(a, b) return a < b end, 'LT failed: %s >= %s' },
  { 'assertgt', function(a, b) return a > b end, 'GT failed: %s <= %s' },
  { 'assertle', function(a, b) return a <= b end, 'LE failed: %s > %s' },
  { 'assertge', function(a, b) return a >= b end, 'GE failed: %s < %s' },
  { 'asserteq', function(a, b) return a == b end, 'EQ failed: %s ~= %s' },
  { 'assertne', function(a, b) return a ~= b end, 'NE failed: %s == %s' },
}) do
  local name, holds, failure = c[1], c[2], c[3]
  Tester[name] = function(self, a, b, ...)
    local message = messageArg(...)
    if name == 'assertne' and type(a) == type(b) and (type(a) == 'table' or type(a) == 'userdata') then
      self:_warning(' :assertne should only be used to compare basic lua objects (numbers, booleans, '
                    .. 'etc). Consider using either :assertGeneralNe or :assert(a ~= b).')
    end
    return self:_assert_sub(holds(a, b), message .. failure:format(tostring(a), tostring(b)))
  end
end

function Tester:assertalmosteq(a, b, ...)
  local tolerance, message = toleranceAndMessage(1e-16, ...)
  return self:_assert_sub(a == b or math.abs(a - b) <= tolerance,
    ('%sALMOST_EQ failed: %s ~= %s with tolerance=%s'):format(message, tostring(a), tostring(b), tostring(tolerance)))
end

function Tester:_eqOrNeq(got, expected, negate, ...)
  local tolerance, message = toleranceAndMessage(0, ...)
  local ok, why = compare.values(got, expected, tolerance, negate)
  return self:_assert_sub(ok, message .. (why or ''))
end

function Tester:assertGeneralEq(got, expected, ...) return self:_eqOrNeq(got, expected, false, ...) end
function Tester:assertGeneralNe(got, unexpected, ...) return self:_eqOrNeq(got, unexpected, true, ...) end
Tester.eq = Tester.assertGeneralEq
Tester.ne = Tester.assertGeneralNe

function Tester:_tensorEqOrNeq(ta, tb, negate, ...)
  if not torch.isTensor(ta) then raise('First argument should be a Tensor') end
  if not torch.isTensor(tb) then raise('Second argument should be a Tensor') end
  local tolerance, message = toleranceAndMessage(0, ...)
  local loose = self._assertTensorEqIgnoresDims
  local ok, why = compare.tensors(ta, tb, tolerance, negate, loose)
  if loose and ok and not negate and not ta:isSameSizeAs(tb) then
    self:_warning('Tensors have the same content but different dimensions. For backwards compatibility, '
                  .. 'they are considered equal, but this may change in the future. Consider using :eq '
                  .. 'to check for equality instead.')
  end
  return self:_assert_sub(ok, message .. (why or ''))
end

function Tester:assertTensorEq(ta, tb, ...) return self:_tensorEqOrNeq(ta, tb, false, ...) end
function Tester:assertTensorNe(ta, tb, ...) return self:_tensorEqOrNeq(ta, tb, true, ...) end

function Tester:_tableEqOrNeq(ta, tb, negate, ...)
  if type(ta) ~= 'table' then raise('First argument should be a Table') end
  if type(tb) ~= 'table' then raise('Second argument should be a Table') end
  return self:_eqOrNeq(ta, tb, negate, ...)
end

function Tester:assertTableEq(ta, tb, ...) return self:_tableEqOrNeq(ta, tb, false, ...) end
function Tester:assertTableNe(ta, tb, ...) return self:_tableEqOrNeq(ta, tb, true, ...) end

-- assertErrorObj(f, errcomp[, message]): f() raises an error err with errcomp(err) true.
function Tester:assertErrorObj(f, errcomp, ...)
  local message = messageArg(...)
  local ok, err = pcall(f)
  return self:_assert_sub(not ok and errcomp(err) and true or false,
    ('%sERROR violation: err=%s'):format(message, tostring(err)))
end

function Tester:assertError(f, ...)
  return self:assertErrorObj(f, function() return true end, ...)
end

function Tester:assertErrorMsg(f, errmsg, ...)
  return self:assertErrorObj(f, function(err) return err == errmsg end, ...)
end

function Tester:assertErrorPattern(f, pattern, ...)
  return self:assertErrorObj(f, function(err) return type(err) == 'string' and err:find(pattern) ~= nil end, ...)
end

function Tester:assertNoError(f, ...)
  local message = messageArg(...)
  local ok, err = pcall(f)
  return self:_assert_sub(ok, ('%sERROR violation: err=%s'):format(message, tostring(err)))
end

------------------------------------------------------------------------------------------------
-- adding and running tests

-- add(f, name) / add(testSuite) / add(table of functions); _setUp and _tearDown names are
-- called before / after every test with its name.
function Tester:add(f, name)
  if type(f) == 'table' then
    if name ~= nil then error('add: a name is not allowed with a table of tests', 2) end
    local tests, order = f, nil
    if rawget(f, '__isTestSuite') then
      tests, order = rawget(f, '__tests'), rawget(f, '__order')
    else
      self:_warning('Should use TestSuite rather than plain lua table')
      order = {}
      for k in pairs(f) do order[#order + 1] = k end
      table.sort(order, function(a, b) return tostring(a) < tostring(b) end)
    end
    for _, k in ipairs(order) do
      if type(tests[k]) == 'table' then error('Nested sets of tests are not supported', 2) end
      self:add(tests[k], k)
    end
    return self
  end
  if type(f) ~= 'function' then error('add: only functions and tables of functions are supported', 2) end
  if name == '_setUp' or name == '_tearDown' then
    if self[name] then error('Only one ' .. name .. ' function allowed', 2) end
    self[name] = f
    return self
  end
  name = name or 'unknown'
  if self.tests[name] ~= nil then error('Test with name ' .. name .. ' already exists!', 2) end
  self.tests[name] = f
  self._order[#self._order + 1] = name
  return self
end

function Tester:disable(testNames)
  if type(testNames) == 'string' then testNames = { testNames } end
  if type(testNames) ~= 'table' then error('disable: expected a name or a list of names', 2) end
  for _, name in ipairs(testNames) do
    if not self.tests[name] then error("disable: unrecognized test '" .. tostring(name) .. "'", 2) end
    self.disabledTests[name] = true
  end
  return self
end

-- The names of the tests to run, in order: all, or those matching the patterns given.
function Tester:_getTests(testNames)
  if testNames == nil then return self._order end
  if type(testNames) == 'string' then testNames = { testNames } end
  if type(testNames) ~= 'table' then raise('run: expected a test name, a list of names or nil') end
  local chosen = {}
  for _, pattern in ipairs(testNames) do
    local any = false
    for _, name in ipairs(self._order) do
      if name:match(pattern) then chosen[name], any = true, true end
    end
    if not any then raise("Couldn't find test '" .. tostring(pattern) .. "'") end
  end
  local names = {}
  for _, name in ipairs(self._order) do if chosen[name] then names[#names + 1] = name end end
  return names
end

-- Runs fn; returns whether it finished without error and whether it recorded no new failure.
function Tester:_pcall(fn)
  local before = #self.errors
  local ok, err = xpcall(fn, function(e)
    if __luabridge_interrupt(e) then return e end   -- Ctrl-C stops the run, rethrown below
    local tb = debug.traceback(tostring(e), 2)
    return (tb:gsub('\n[^\n]*in function .xpcall.*$', ''))
  end)
  if not ok and __luabridge_interrupt(err) then error(err, 0) end
  if not ok then
    self.errors[#self.errors + 1] = self._currentTestName .. '\n Function call failed\n' .. err .. '\n'
  end
  return ok, ok and before == #self.errors
end

local function plural(n, word) return n .. ' ' .. word .. (n == 1 and '' or 's') end

function Tester:_run(names)
  local total = #names
  local width = #tostring(total)
  io.write('Running ' .. plural(total, 'test') .. '\n')
  for i, name in ipairs(names) do
    self._currentTestName = name
    local head = ('%' .. width .. 'd/%d %s '):format(i, total, name)
    io.write(head .. string.rep('.', NCOLS - 7 - #head) .. ' ')
    io.flush()
    local status, finished, passed
    if self.disabledTests[name] then
      status = 'SKIP'
    else
      if self._setUp then self._setUp(name) end
      if self.rethrow then
        local before = #self.errors
        self.tests[name]()
        finished, passed = true, before == #self.errors
      else
        finished, passed = self:_pcall(self.tests[name])
      end
      if self._tearDown then self._tearDown(name) end
      if not finished then self.testError[name] = 1 end
      status = not finished and 'ERROR' or not passed and 'FAIL' or 'PASS'
    end
    io.write('[' .. status .. ']\n')
    if status == 'PASS' and (self._warningCount[name] or 0) > 0 then
      io.write(string.rep(' ', NCOLS - 10) .. '[+warning]\n')
    end
    io.flush()
    if self.earlyAbort and i < total and (status == 'ERROR' or status == 'FAIL') then
      io.write('Aborting on first error, not all tests have been executed\n')
      break
    end
  end
  self._currentTestName = ''
end

function Tester:_report(names)
  local failures, errors, warned, skipped = 0, 0, 0, 0
  self.countasserts = 0
  for _, name in ipairs(names) do
    self.countasserts = self.countasserts + self.assertionPass[name] + self.assertionFail[name]
    if self.assertionFail[name] > 0 then failures = failures + 1 end
    if self.testError[name] > 0 then errors = errors + 1 end
    if (self._warningCount[name] or 0) > 0 then warned = warned + 1 end
    if self.disabledTests[name] then skipped = skipped + 1 end
  end
  warned = warned + (self._warningCount[''] or 0)
  local line = ('Completed %s in %s with %s and %s'):format(plural(self.countasserts, 'assert'),
    plural(#names, 'test'), plural(failures, 'failure'), plural(errors, 'error'))
  if warned > 0 then line = line .. ' and ' .. plural(warned, 'warning') end
  if skipped > 0 then line = line .. ' and ' .. skipped .. ' disabled' end
  io.write(line .. '\n')
  if not self.summaryOnly then
    local rule = string.rep('-', NCOLS) .. '\n'
    local sections = {}
    for _, e in ipairs(self.errors) do sections[#sections + 1] = e end
    for _, w in ipairs(self.warnings) do sections[#sections + 1] = w end
    if #sections > 0 then io.write(rule) end
    for _, s in ipairs(sections) do io.write(s .. '\n' .. rule) end
  end
  io.flush()
  return failures + errors
end

-- run([names]): runs all tests, or those whose names match the given pattern(s); prints the
-- report; raises 'An error was found while running tests!' on any failure or error, else
-- returns 0.
function Tester:run(testNames)
  local collector = rawget(Tester, '_collector')
  if collector then return collector(self, testNames) end
  local names = self:_getTests(testNames)
  self.errors, self.warnings = {}, { unpack(self._addWarnings) }
  self.assertionPass, self.assertionFail, self.testError = {}, {}, {}
  self._warningCount = { [''] = #self._addWarnings > 0 and #self._addWarnings or nil }
  for _, name in ipairs(names) do
    self.assertionPass[name], self.assertionFail[name], self.testError[name] = 0, 0, 0
  end
  self:_run(names)
  if self:_report(names) > 0 then error('An error was found while running tests!', 2) end
  return 0
end

------------------------------------------------------------------------------------------------
-- equality of numbers, tensors, storages and tables (ok, failure message)

-- Largest |a - b| over the elements (exactly equal elements count 0, so equal infinities
-- match; a NaN makes it NaN). Works for every tensor type, without tensor math.
local function maxDiff(a, b)
  local n = a:nElement()
  if n == 0 then return 0 end
  local x, y = a:double():contiguous(), b:double():contiguous()
  local p, q = x._st._ptr + x._off, y._st._ptr + y._off
  local worst = 0
  for i = 0, n - 1 do
    local u, v = p[i], q[i]
    if u ~= v then
      local d = math.abs(u - v)
      if not (d <= worst) then worst = d end
      if d ~= d then return d end
    end
  end
  return worst
end

local function sameFormatEq(ta, tb, tolerance, negate, what)
  local err = maxDiff(ta, tb)
  local ok = err <= tolerance
  if negate then ok = not ok end
  if ok then return true end
  return false, ('%s%s violation: max diff=%s, tolerance=%s'):format(what, negate and 'NE(==)' or 'EQ(==)',
    tostring(err), tostring(tolerance))
end

function compare.tensors(ta, tb, tolerance, negate, ignoreDims)
  if not ignoreDims and ta:dim() ~= tb:dim() then return negate, 'The tensors have different dimensions' end
  if ta:type() ~= tb:type() then return negate, 'The tensors have different types' end
  if ta:dim() == 0 and tb:dim() == 0 then return not negate, 'Both tensors are empty' end
  local same = ignoreDims and ta:nElement() == tb:nElement() or (not ignoreDims and ta:isSameSizeAs(tb))
  if not same then return negate, 'The tensors have different sizes' end
  return sameFormatEq(ta, tb, tolerance, negate, 'Tensor')
end

function compare.storages(sa, sb, tolerance, negate)
  if sa:size() ~= sb:size() then return negate, 'The storages have different sizes' end
  if torch.type(sa) ~= torch.type(sb) then return negate, 'The storages have different types' end
  if sa:size() == 0 then return not negate end
  local tensorType = torch[torch.type(sa):match('^torch%.(%a+)Storage$') .. 'Tensor']
  return sameFormatEq(tensorType(sa), tensorType(sb), tolerance, negate, 'Storage')
end

local function valueString(x) return ('%s (%s)'):format(tostring(x), type(x)) end

function compare.values(got, expected, tolerance, negate)
  if type(got) ~= type(expected) then
    if negate then return true end
    return false, ('EQ failed: values have different types (first: %s, second: %s)'):format(type(got), type(expected))
  end
  if type(got) == 'number' then
    local ok = got == expected or math.abs(got - expected) <= tolerance
    if negate then ok = not ok end
    if ok then return true end
    local why = (negate and 'NE failed: %s == %s' or 'EQ failed: %s ~= %s'):format(tostring(got), tostring(expected))
    if tolerance > 0 then why = why .. ' with tolerance=' .. tostring(tolerance) end
    return false, why
  end
  local tensors = torch.isTensor(got) or torch.isTensor(expected)
  local storages = torch.isStorage(got) or torch.isStorage(expected)
  if tensors or storages then
    if torch.type(got) ~= torch.type(expected) then
      return negate, ('EQ failed: values have different types (first: %s, second: %s)'):format(torch.type(got), torch.type(expected))
    end
    return (tensors and compare.tensors or compare.storages)(got, expected, tolerance, negate)
  end
  if type(got) == 'table' then return compare.tables(got, expected, tolerance, negate) end
  local ok = got == expected
  if negate then ok = not ok end
  if ok then return true end
  return false, (negate and 'NE failed: %s == %s' or 'EQ failed: %s ~= %s'):format(valueString(got), valueString(expected))
end

-- Tables compared key by key, breadth first (a difference is reported at the shallowest depth).
function compare.tables(t1, t2, tolerance, negate)
  local queue, head = { { t1, t2, nil } }, 1
  while queue[head] do
    local a, b, where = unpack(queue[head], 1, 3)
    head = head + 1
    local function at(key) return where and where .. '.' .. tostring(key) or tostring(key) end
    for key, va in pairs(a) do
      local vb = b[key]
      if vb == nil then
        return negate, ('Entry %s missing in second table (is %s in first)'):format(at(key), tostring(va))
      end
      local plain = not (torch.isTensor(va) or torch.isStorage(va) or torch.isTensor(vb) or torch.isStorage(vb))
      if type(va) == 'table' and type(vb) == 'table' and plain then
        queue[#queue + 1] = { va, vb, at(key) }
      else
        local ok, why = compare.values(va, vb, tolerance, false)
        if not ok then return negate, 'At table location ' .. at(key) .. ': ' .. why end
      end
    end
    for key, vb in pairs(b) do
      if a[key] == nil then
        return negate, ('Entry %s missing in first table (is %s in second)'):format(at(key), tostring(vb))
      end
    end
  end
  return not negate, 'The tables are equal'
end

return Tester
