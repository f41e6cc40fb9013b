-- expect: ok
-- accept: time_limit
-- limits: instructions=0 time=50ms
-- Attack: utf8.len scans a 32 MiB string in one C call, then again and again; the scan is
-- charged per byte, so the deadline still holds (THREATS 0.2, 8.6).
local s = "a"
while #s < 32 * 1024 * 1024 do s = s .. s end
for i = 1, 1000 do
  if utf8.len(s) ~= #s then error("utf8.len miscounted") end
end
