-- expect: ok
-- Attack: collectgarbage options that change the collector (stop it, switch modes, tune it)
-- must be refused; "count" must still work (THREATS D8, 8.11, a1f77a23).
local refused = {
  {"stop"}, {"restart"}, {"generational"}, {"incremental"},
  {"setpause", 1000}, {"setstepmul", 1}, {"generational", 1, 1},
}
for _, args in ipairs(refused) do
  local ok, r = pcall(collectgarbage, args[1], args[2], args[3])
  if ok and r ~= nil and r ~= false then
    print("ESCAPED: collectgarbage(\"" .. args[1] .. "\") was accepted and returned " .. tostring(r))
  end
end
local kb = collectgarbage("count")
if type(kb) ~= "number" or kb <= 0 then
  error("collectgarbage(\"count\") does not work: " .. tostring(kb))
end
-- Allocation still gets collected: churn well past the default 64 MiB limit.
for i = 1, 20 do
  local s = "z"
  for j = 1, 22 do s = s .. s end -- 4 MiB of garbage each round
end
