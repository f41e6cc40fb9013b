-- Agent task: "Parse these log lines: count per level, list the components that errored."
-- expect-value: {"counts":{"ERROR":3,"INFO":2,"WARN":1},"first_error":{"auth":"12:00:07","db":"12:00:02"},"latencies":[12,8],"skipped":1}
local log = [[
2024-01-05 12:00:01 [INFO] api: request served in 12ms
2024-01-05 12:00:02 [ERROR] db: timeout after 30s
2024-01-05 12:00:02 [WARN] cache: miss ratio 0.42
garbage line without structure
2024-01-05 12:00:07 [ERROR] auth: invalid token for user=42
2024-01-05 12:01:00 [INFO] api: request served in 8ms
2024-01-05 12:01:30 [ERROR] db: timeout after 30s
]]
local counts, errored, skipped, latencies = {}, {}, 0, {}
for line in log:gmatch("[^\n]+") do
  local date, time, level, component, msg = line:match("^(%d+%-%d+%-%d+) (%d+:%d+:%d+) %[(%u+)%] (%w+): (.*)$")
  if not level then
    skipped = skipped + 1
  else
    counts[level] = (counts[level] or 0) + 1
    if level == "ERROR" and not errored[component] then
      errored[component] = time
    end
    local ms = msg:match("served in (%d+)ms")
    if ms then latencies[#latencies + 1] = tonumber(ms) end
  end
end
return {counts = counts, first_error = errored, skipped = skipped, latencies = latencies}
