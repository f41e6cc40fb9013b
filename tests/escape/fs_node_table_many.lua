-- expect: time_limit
-- accept: instruction_limit
-- runs: 2
-- limits: fs-files=100000 time=10s instructions=2e7
-- Attack: fill the memory tree with thousands of files (THREATS.md: host time), so that
-- every later lookup would scan them all, once per component of a deep path; then hammer the
-- node table. Run 1 must finish inside its (generous) deadline: a path lookup costs the same
-- with 15000 nodes as with ten (the view's node index). With a scan per lookup, the 1000
-- lookups of a 500-deep path below visited 15000 nodes per component: 7.5e9 visits, far past
-- the deadline. Run 2 ends on the budget (the deadline or the instruction limit, whichever
-- comes first on the machine): each listing of 15000 entries charges it per entry (a stat
-- each) and per comparison of its sort, so it cannot run on unmetered.
local deep = "/tmp" .. string.rep("/a", 500)
if not made then
  made = 0
  for i = 1, 15000 do
    local f = assert(io.open("/tmp/f" .. i, "w"))
    f:close()
    made = i
  end
  assert(fs.exists("/tmp/f15000") and not fs.exists("/tmp/f15001"))
  for i = 1, 1000 do
    assert(fs.stat(deep) == nil)
  end
  return made
end
while true do
  assert(fs.stat(deep) == nil)
  assert(fs.exists("/tmp/f12345"))
  local ok, list = pcall(fs.list, "/tmp")
end
