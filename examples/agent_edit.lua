-- An agent-style task over two mounts: read a CSV from the read-only /data, write a report to
-- the memory /tmp, and update a file of the /project overlay (the host's copy is never
-- touched: moonbox shows the edit with --diff, and --export-changes hands it over for review).
-- Run: moonbox run --mount examples/data:/data --mount examples/project:/project:overlay \
--          --changes --diff examples/agent_edit.lua
local totals, regions = {}, {}
for line in io.lines("/data/orders.csv") do
  local region, total = line:match("^%d+,[^,]*,([^,]*),([%d.]+)$")
  if region then
    if not totals[region] then totals[region] = 0; regions[#regions + 1] = region end
    totals[region] = totals[region] + tonumber(total)
  end
end
table.sort(regions)

local report = assert(io.open("/tmp/report.txt", "w"))
for _, r in ipairs(regions) do report:write(string.format("%s\t%.2f\n", r, totals[r])) end
report:close()

-- Rewrite the table of /project/regions.md; keep every other line as it is.
local out, in_table = {}, false
for line in io.lines("/project/regions.md") do
  if line:match("^| region") then
    in_table = true
    out[#out + 1] = line
  elseif in_table and line:match("^|") then
    if line:match("^|%-") then out[#out + 1] = line end
  else
    if in_table then
      for _, r in ipairs(regions) do out[#out + 1] = string.format("| %s | %.2f |", r, totals[r]) end
      in_table = false
    end
    out[#out + 1] = line:match("^Last updated") and "Last updated: by the agent." or line
  end
end
local f = assert(io.open("/project/regions.md", "w"))
f:write(table.concat(out, "\n"), "\n")
f:close()
print(string.format("%d regions; report in /tmp/report.txt, /project/regions.md updated", #regions))
