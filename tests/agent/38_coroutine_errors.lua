-- Agent task: "Run each job as a coroutine, collecting failures without stopping."
-- expect-value: {"main":true,"results":["job1 steps=1 ok: done-a","job2 steps=1 error: disk full","job3 steps=0 error 22: bad input","job4 steps=0 error: attempt to index a nil value (local 't')"],"resume_dead":[false,"cannot resume dead coroutine"],"wrap_error":[false,"boom"],"yieldable":false}
local jobs = {
  function() coroutine.yield("step1") return "done-a" end,
  function() coroutine.yield("step1") error("disk full", 0) end,
  function() error({reason = "bad input", code = 22}) end,
  function() local t = nil return t.field end,
}
local results = {}
for i, job in ipairs(jobs) do
  local co = coroutine.create(job)
  local steps, outcome = 0, nil
  while true do
    local ok, v = coroutine.resume(co)
    if not ok then
      if type(v) == "table" then outcome = "error " .. v.code .. ": " .. v.reason
      else outcome = "error: " .. v:gsub("^.-:%d+: ", "") end
      break
    elseif coroutine.status(co) == "dead" then
      outcome = "ok: " .. v
      break
    end
    steps = steps + 1
  end
  results[i] = string.format("job%d steps=%d %s", i, steps, outcome)
end
local dead = coroutine.create(function() end)
coroutine.resume(dead)
local again = {coroutine.resume(dead)}
local wrapped = coroutine.wrap(function() error("boom", 0) end)
local wok, werr = pcall(wrapped)
local _, main = coroutine.running()
return {results = results, resume_dead = again, wrap_error = {wok, werr}, yieldable = coroutine.isyieldable(), main = main}
