-- expect: ok
-- Attack: collectgarbage options that change the collector (stop it, switch modes, tune it)
-- must give stock's answers without handing the guest unmetered work: "generational" is a
-- no-op (a1f77a23, a wrong pause after a mode switch, is unpatched in 5.4.4), the tuning
-- parameters are clamped (THREATS D8, 8.11).
local function expect(got, want, what)
  if got ~= want then error(what .. ": got " .. tostring(got) .. ", expected " .. tostring(want)) end
end
expect(collectgarbage("generational"), "generational", "first mode")
expect(collectgarbage("incremental", 1, 1e9, 60), "generational", "switch back")
expect(collectgarbage("setstepmul", 100), 400, "a huge step multiplier is clamped")
expect(collectgarbage("setpause", 200), 48, "a tiny pause is clamped")
expect(collectgarbage("stop"), 0, "stop")
expect(collectgarbage("isrunning"), false, "stopped")
expect(collectgarbage("restart"), 0, "restart")
expect(collectgarbage("isrunning"), true, "running")
local kb = collectgarbage("count")
if type(kb) ~= "number" or kb <= 0 then
  error("collectgarbage(\"count\") does not work: " .. tostring(kb))
end
-- Allocation still gets collected: churn well past the default 64 MiB limit.
for i = 1, 20 do
  local s = "z"
  for j = 1, 22 do s = s .. s end -- 4 MiB of garbage each round
end
