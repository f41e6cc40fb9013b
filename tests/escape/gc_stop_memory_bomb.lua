-- expect: memory_limit
-- limits: memory=16M
-- Attack: stop the collector and hold ever more memory: the limit must still end the run
-- (the allocator's accounting does not depend on the collector running).
collectgarbage("stop")
local keep = {}
for i = 1, 1e9 do
  keep[i] = string.rep("m", 64 * 1024) .. i
end
print("ESCAPED: the memory limit never tripped")
