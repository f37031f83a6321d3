-- optim.FistaLS(f, g, pl, xinit[, params]) -> x, history: minimises f(x) + g(x), f smooth and g
-- not (Beck & Teboulle's FISTA, 2009), with a backtracking search on L, the inverse step size.
--   f(x[, 'dx']): f's value, and with 'dx' its value and gradient
--   g(x): g's value; pl(x, L): replaces x, in place, by argmin_z g(z) + L/2 |z - x|^2
--   xinit: the solution is also copied into it at the end (it is used as the current iterate)
--   params: L (0.1), Lstep (1.5: L's growth while the quadratic model is below f), maxiter (50),
--           maxline (20: growths per iteration; then the iterate stays where it was),
--           errthres (1e-4: stop when F = f + g changes less), doFistaUpdate (FISTA's momentum;
--           unset means ISTA, as torch7 reads it), verbose (prints, and keeps xk and y per entry)
--   params keeps L (the last used) and the buffers xkm, y, ply between calls.
-- history[k]: nline, L, F, Fply, Gply, Q of iteration k (and xk, y when verbose).
-- The iteration starts from zero, as torch7's does, whatever xinit holds.
function optim.FistaLS(f, g, pl, xinit, params)
  params = params or {}
  local L = params.L or 0.1
  local Lstep = params.Lstep or 1.5
  local maxiter = params.maxiter or 50
  local maxline = params.maxline or 20
  local errthres = params.errthres or 1e-4
  local verbose = params.verbose
  if maxiter < 1 then error('optim.FistaLS: params.maxiter must be at least 1, got ' .. maxiter, 2) end

  params.xkm = params.xkm or xinit.new()
  params.y = params.y or xinit.new()
  params.ply = params.ply or xinit.new()
  local xk = xinit
  local xkm = params.xkm:resizeAs(xk):zero()   -- the previous iterate
  local y = params.y:resizeAs(xk):zero()       -- where the next gradient step starts
  local ply = params.ply:resizeAs(xk):zero()   -- the step's candidate

  local history = {}
  local tk = 1   -- FISTA's momentum sequence
  g(y)           -- torch7 evaluates g once at the start
  for niter = 1, maxiter do
    local fy, gfy = f(y, 'dx')
    local nline, Q, fply = 0, 0, 0
    while true do
      ply:copy(y):add(-1 / L, gfy)
      pl(ply, L)
      xk:copy(ply)
      fply = f(ply)
      ply:add(-1, y)
      local Q2, Q3 = gfy:dot(ply), L / 2 * ply:dot(ply)
      Q = fy + Q2 + Q3   -- the quadratic model of f at the candidate
      if verbose then
        print(string.format('nline=%d L=%g fply=%g Q=%g fy=%g Q2=%g Q3=%g', nline, L, fply, Q, fy, Q2, Q3))
      end
      nline = nline + 1
      if fply <= Q then break end
      if nline > maxline then xk:copy(xkm) break end
      L = L * Lstep
    end

    local tkp = 0
    if params.doFistaUpdate then
      tkp = (1 + math.sqrt(1 + 4 * tk * tk)) / 2
      xkm:add(-1, xk)                          -- x(k-1) - x(k)
      y:copy(xk):add((1 - tk) / tkp, xkm)      -- x(k) + (t(k) - 1) / t(k+1) (x(k) - x(k-1))
      xkm:copy(xk)
    else
      y:copy(xk)
    end
    tk = tkp
    fply = f(y)
    local gply = g(y)
    local F = fply + gply
    if verbose then
      print(string.format('iter=%d eold=%g enew=%g', niter - 1, history[niter - 1] and history[niter - 1].F or math.huge, F))
    end
    history[niter] = { nline = nline, L = L, F = F, Fply = fply, Gply = gply, Q = Q }
    if verbose then history[niter].xk, history[niter].y = xk:clone(), y:clone() end
    params.L = L
    if niter == maxiter or (niter > 1 and math.abs(F - history[niter - 1].F) <= errthres) then break end
  end
  xinit:copy(y)
  return y, history
end
