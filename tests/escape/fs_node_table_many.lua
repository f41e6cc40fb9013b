-- expect: time_limit
-- runs: 2
-- limits: fs-files=100000 time=8s
-- Attack: fill the memory tree with tens of thousands of files (THREATS.md: host time), so
-- that every later lookup would scan them all, once per component of a deep path; then
-- hammer the node table until the deadline. Run 1 must finish inside its deadline: a path
-- lookup costs the same with 30000 nodes as with ten (the view's node index). With a scan
-- per lookup the creations were quadratic and each 500-deep stat below visited 15 million
-- nodes (run 1 took minutes). Run 2 ends on the deadline, not later: a listing of 30000
-- entries is metered (its per-entry stat and its sort charge the budget) and stops.
local deep = "/tmp" .. string.rep("/a", 500)
if not made then
  made = 0
  for i = 1, 30000 do
    local f = assert(io.open("/tmp/f" .. i, "w"))
    f:close()
    made = i
  end
  assert(fs.exists("/tmp/f30000") and not fs.exists("/tmp/f30001"))
  for i = 1, 2000 do
    assert(fs.stat(deep) == nil)
  end
  return made
end
while true do
  assert(fs.stat(deep) == nil)
  assert(fs.exists("/tmp/f12345"))
  local ok, list = pcall(fs.list, "/tmp")
end
