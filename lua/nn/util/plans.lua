-- Whole-model plans (issue 25): containers and nngraph's gModules plan their tree on the first
-- forward for the shapes they see, and run the plan while nothing it depends on changes. On by
-- default; LUABRIDGE_NO_PLANS=1 starts a runtime with them off, and `nn.plans.enabled = false`
-- turns them off at run time (every container then runs layer by layer, as torch7's did).
local plans = { enabled = not os.getenv('LUABRIDGE_NO_PLANS') }
return plans
