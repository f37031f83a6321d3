-- Differential evolution (DE/best/1/bin), as torch7's optim.de: gradient-free, only the first
-- value opfunc returns is used; x gives only the dimension (the population is drawn uniformly in
-- [minRegion, maxRegion] from a generator of its own seeded with 1, so runs repeat exactly).
--   config: maxFEs (the number of evaluations; required), scaleFactor (F, usually 0.4 to 1) and
--           crossoverRate (CR, usually 0.1 to 0.9) (both required), popsize (10 * dimension),
--           minRegion (-30), maxRegion (30)
-- Each generation makes one child per member i: best + F (pop[r1] - pop[r2]) in the coordinates
-- chosen with probability CR (and one always), pop[i]'s elsewhere; a child at least as good
-- replaces its parent. Evaluations stop at maxFEs (torch7 indexes past its history there).
-- Returns the best point (a flat tensor) and the tensor of every value evaluated, in order.
local function required(config, name)
  local v = tonumber(config[name])
  if not v then error('optim.de: config.' .. name .. ' must be a number, got ' .. tostring(config[name]), 3) end
  return v
end

function optim.de(opfunc, x, config)
  config = config or {}
  local maxFEs = required(config, 'maxFEs')
  local scaleFactor = required(config, 'scaleFactor')
  local crossoverRate = required(config, 'crossoverRate')
  local D = x:nElement()
  local popsize = config.popsize or 10 * D
  local minRegion, maxRegion = config.minRegion or -30, config.maxRegion or 30
  if popsize > maxFEs then
    error(string.format('optim.de: config.maxFEs (%d) must cover the first population (popsize %d)', maxFEs, popsize), 2)
  end

  local fx = x.new(maxFEs)
  local pop, children = x.new(popsize, D), x.new(popsize, D)
  local fitness, childFitness = x.new(popsize), x.new(popsize)
  local best = x.new(D)
  local fes = 0
  local function evaluate(point)
    local v = (opfunc(point))
    fes = fes + 1
    fx[fes] = v
    return v
  end

  local gen = torch.Generator()
  torch.manualSeed(gen, 1)
  pop:uniform(gen, minRegion, maxRegion)
  for i = 1, popsize do fitness[i] = evaluate(pop[i]) end
  -- torch7 starts the best from the population's largest value (its fitness:max), so its runs
  -- are followed exactly
  local bestFitness, index = fitness:max(1)
  bestFitness = bestFitness[1]
  best:copy(pop[index[1]])

  while fes + 1 < maxFEs do
    local made = 0
    for i = 1, popsize do
      if fes >= maxFEs then break end
      local r1, r2
      repeat r1 = torch.random(gen, 1, popsize) until r1 ~= i
      repeat r2 = torch.random(gen, 1, popsize) until r2 ~= r1 and r2 ~= i
      local jrand = torch.random(gen, 1, D)
      local child, parent, a, b = children[i], pop[i], pop[r1], pop[r2]
      for j = 1, D do
        if torch.uniform(gen, 0, 1) < crossoverRate or i == jrand then
          child[j] = best[j] + scaleFactor * (a[j] - b[j])
        else
          child[j] = parent[j]
        end
      end
      childFitness[i] = evaluate(child)
      made = i
    end
    for i = 1, made do
      if childFitness[i] <= fitness[i] then
        pop[i]:copy(children[i])
        fitness[i] = childFitness[i]
        if fitness[i] < bestFitness then
          bestFitness = fitness[i]
          best:copy(children[i])
        end
      end
    end
  end
  return best, fx
end
