-- The recurrent layers of cuDNN (cudnn.RNN and its subclasses) on tensor ops: one layer and
-- direction at a time over a sequence of steps, each step a block of rows (its batch).
-- Gates in cuDNN's order, each H rows of a weight matrix: LSTM input, forget, cell, output
-- (i f g o); GRU reset, update, new (r z n); the plain RNNs one (tanh or ReLU).
--   LSTM  c = f * c' + i * g,  h = o * tanh(c)
--   GRU   n = tanh(W_n x + b_Wn + r * (R_n h' + b_Rn)),  h = (1 - z) * n + z * h'
--   RNN   h = act(W x + R h' + b_W + b_R)
-- (h', c': the previous step's state.) A layer `L` holds its parameters (W, R, bW, bR: views
-- of the flat weight), its state (h, c: batch x H) and the buffers kept for the backward
-- pass, one row per input row: A (the gates after their nonlinearity), HP (h'), CP (c'), C
-- (LSTM), AH (GRU: R h' + b_R). `steps` lists each step's first row (0-based) and row count
-- in visiting order (reversed for the backward direction).
local rnn = {}

rnn.gates = { CUDNN_LSTM = 4, CUDNN_GRU = 3, CUDNN_RNN_TANH = 1, CUDNN_RNN_RELU = 1 }

local function rows(t, off, n) return t:narrow(1, off + 1, n) end

-- d = d * y * (1 - y), and d = d * (1 - y^2): the derivatives of sigmoid and tanh at their
-- outputs y (buf: scratch).
local function sigmoidGrad(d, y, buf)
  buf:resizeAs(y):fill(1):add(-1, y)
  d:cmul(y):cmul(buf)
end

local function tanhGrad(d, y, buf)
  buf:resizeAs(y):cmul(y, y):mul(-1):add(1)
  d:cmul(buf)
end

local function gate(t, k, H) return t:narrow(2, (k - 1) * H + 1, H) end

-- a (rows of A) holds x W^T + b_W; each cell turns it into the gates and writes h (and c).
local cells = {}

cells.CUDNN_LSTM = {
  forward = function(L, a, hp, h, s)
    local H = L.H
    a:addmm(hp, L.R:t()):add(L.bR:view(1, 4 * H):expandAs(a))
    local i, f, g, o = gate(a, 1, H), gate(a, 2, H), gate(a, 3, H), gate(a, 4, H)
    i:sigmoid(); f:sigmoid(); g:tanh(); o:sigmoid()
    local c = rows(L.C, s.off, s.n)
    c:cmul(f, rows(L.CP, s.off, s.n)):addcmul(i, g)
    h:tanh(c):cmul(o)
  end,
  -- dh: the gradient of h; L.dc (rows) that of c on entry, of c' on return; da: the gates'
  -- pre-activations.
  backward = function(L, a, dh, da, s, buf)
    local H = L.H
    local i, f, g, o = gate(a, 1, H), gate(a, 2, H), gate(a, 3, H), gate(a, 4, H)
    local dc, tc = L.dc:narrow(1, 1, s.n), L.tmp:resizeAs(dh)
    tc:tanh(rows(L.C, s.off, s.n))
    local dO = gate(da, 4, H)
    dO:cmul(dh, tc); sigmoidGrad(dO, o, buf)
    dc:addcmul(dh, tc:cmul(tc, tc):mul(-1):add(1):cmul(o))   -- dh * o * (1 - tanh(c)^2)
    local dI, dF, dG = gate(da, 1, H), gate(da, 2, H), gate(da, 3, H)
    dI:cmul(dc, g); sigmoidGrad(dI, i, buf)
    dG:cmul(dc, i); tanhGrad(dG, g, buf)
    dF:cmul(dc, rows(L.CP, s.off, s.n)); sigmoidGrad(dF, f, buf)
    dc:cmul(f)
  end,
}

cells.CUDNN_GRU = {
  forward = function(L, a, hp, h, s)
    local H = L.H
    local ah = rows(L.AH, s.off, s.n)
    ah:copy(L.bR:view(1, 3 * H):expandAs(ah)):addmm(hp, L.R:t())
    local rz = a:narrow(2, 1, 2 * H)
    rz:add(ah:narrow(2, 1, 2 * H)):sigmoid()
    local r, z, n = gate(a, 1, H), gate(a, 2, H), gate(a, 3, H)
    n:addcmul(r, gate(ah, 3, H)):tanh()
    h:add(hp, -1, n):cmul(z):add(n)
  end,
  -- also returns the gradient of R h' + b_R (dah) and leaves dh * z, the part of h' that
  -- skips the matrices, in L.dhp
  backward = function(L, a, dh, da, s, buf, dah)
    local H = L.H
    local r, z, n = gate(a, 1, H), gate(a, 2, H), gate(a, 3, H)
    local hp = rows(L.HP, s.off, s.n)
    local dR, dZ, dN = gate(da, 1, H), gate(da, 2, H), gate(da, 3, H)
    dZ:add(hp, -1, n):cmul(dh); sigmoidGrad(dZ, z, buf)
    dN:fill(1):add(-1, z):cmul(dh); tanhGrad(dN, n, buf)
    dR:cmul(dN, gate(rows(L.AH, s.off, s.n), 3, H)); sigmoidGrad(dR, r, buf)
    dah:copy(da); gate(dah, 3, H):cmul(r)
    L.dhp:resizeAs(dh):cmul(dh, z)
  end,
}

local function plain(activate, derive)
  return {
    forward = function(L, a, hp, h)
      a:addmm(hp, L.R:t()):add(L.bR:view(1, L.H):expandAs(a))
      activate(a)
      h:copy(a)
    end,
    backward = function(L, a, dh, da, _, buf) derive(da:copy(dh), a, buf) end,
  }
end
cells.CUDNN_RNN_TANH = plain(function(a) a:tanh() end, tanhGrad)
cells.CUDNN_RNN_RELU = plain(function(a) a:cmax(0) end,
  function(d, y, buf) d:cmul(buf:resizeAs(y):sign(y)) end)   -- y >= 0: sign is 0 or 1

-- Runs layer L over X (rows x inputs) into its columns of Y (from `col`); L.h (and L.c) hold
-- the initial state on entry, the final one on return.
function rnn.forward(L, X, Y, steps, col)
  local cell, G, H = cells[L.mode], rnn.gates[L.mode], L.H
  local N = X:size(1)
  L.A:resize(N, G * H):mm(X, L.W:t()):add(L.bW:view(1, G * H):expandAs(L.A))
  L.HP:resize(N, H)
  if L.mode == 'CUDNN_LSTM' then L.CP:resize(N, H); L.C:resize(N, H) end
  if L.mode == 'CUDNN_GRU' then L.AH:resize(N, G * H) end
  for _, s in ipairs(steps) do
    local hs = L.h:narrow(1, 1, s.n)
    local hp = rows(L.HP, s.off, s.n):copy(hs)
    if L.mode == 'CUDNN_LSTM' then rows(L.CP, s.off, s.n):copy(L.c:narrow(1, 1, s.n)) end
    local h = rows(Y, s.off, s.n):narrow(2, col, H)
    cell.forward(L, rows(L.A, s.off, s.n), hp, h, s)
    hs:copy(h)
    if L.mode == 'CUDNN_LSTM' then L.c:narrow(1, 1, s.n):copy(rows(L.C, s.off, s.n)) end
  end
end

-- Back through layer L (after rnn.forward) from dY's columns (from `col`), adding the
-- gradient of X into dX. L.dh (and L.dc) hold the gradient of the final state on entry, of
-- the initial one on return. Keeps the gates' gradients (L.dA, L.dAH) for rnn.accGrad.
function rnn.backward(L, dX, dY, steps, col)
  local cell, G, H = cells[L.mode], rnn.gates[L.mode], L.H
  local N = L.A:size(1)
  L.dA:resize(N, G * H)
  local dAH = L.dA
  if L.mode == 'CUDNN_GRU' then dAH = L.dAH:resize(N, G * H) end
  local buf, dh = L.buf, L.dhStep
  for k = #steps, 1, -1 do
    local s = steps[k]
    local dhs = L.dh:narrow(1, 1, s.n)
    dh:resize(s.n, H):add(dhs, rows(dY, s.off, s.n):narrow(2, col, H))
    local dah = rows(dAH, s.off, s.n)
    cell.backward(L, rows(L.A, s.off, s.n), dh, rows(L.dA, s.off, s.n), s, buf, dah)
    if L.mode == 'CUDNN_GRU' then dhs:copy(L.dhp) else dhs:zero() end
    dhs:addmm(dah, L.R)
  end
  dX:addmm(L.dA, L.W)
end

-- Adds scale times the gradients of the parameters into those of L (dW, dR, dbW, dbR) from
-- the last rnn.backward with input X.
function rnn.accGrad(L, X, scale)
  local dAH = L.mode == 'CUDNN_GRU' and L.dAH or L.dA
  L.dW:addmm(scale, L.dA:t(), X)
  L.dR:addmm(scale, dAH:t(), L.HP)
  L.dbW:add(scale, torch.sum(L.sum, L.dA, 1):select(1, 1))
  L.dbR:add(scale, torch.sum(L.sum, dAH, 1):select(1, 1))
end

return rnn
