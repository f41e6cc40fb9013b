-- expect: memory_limit
-- limits: memory=8M
-- Attack: the luaV_finishset use-after-free: a __newindex table held only by a weak-valued
-- table, freed by an emergency GC the attacker times with the memory limit (THREATS 0.1, 983bc433).
local holder = {}
setmetatable(holder, {__mode = "v"})          -- a weak-valued table (not a metatable)
local wmt = getmetatable(holder) or {}
wmt.__mode = "v"                               -- added later: must have no effect
local target = setmetatable({}, {__newindex = setmetatable({}, {})})
holder[1] = getmetatable(target).__newindex
local i = 0
while true do
  i = i + 1
  target[i] = string.format("%d-%d", i, i)  -- goes through __newindex while memory runs out
end
