-- expect: ok
-- runs: 4
-- Attack: replace the main chunk's environment upvalue (debug.setupvalue, and upvaluejoin)
-- while moonbox keeps that function for the next run of the same text: the next run would
-- start in the planted environment instead of the sandbox's globals. (The text never names
-- the upvalue itself: moonbox keeps only chunks that do not.)
if rawget == nil then
  print("ESCAPED: a run started in a planted environment")
  return
end
runs = (runs or 0) + 1
if runs == 2 then
  debug.setupvalue(debug.getinfo(1, "f").func, 1, {debug = debug, print = print})
elseif runs == 3 then
  local fake = {debug = debug, print = print}
  local function env() return fake end
  debug.upvaluejoin(debug.getinfo(1, "f").func, 1, env, 1)
end
