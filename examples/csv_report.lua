-- An agent-style snippet over a mounted directory: read a CSV from the read-only /data
-- mount, total it by region, write a report to the sandbox's memory /tmp and read it back.
-- Run: moonbox run --mount examples/data:/data examples/csv_report.lua
local totals, order, rows = {}, {}, 0
for line in io.lines("/data/orders.csv") do
  local id, customer, region, total = line:match("^(%d+),([^,]*),([^,]*),([%d.]+)$")
  if id then
    rows = rows + 1
    if not totals[region] then totals[region] = 0; order[#order + 1] = region end
    totals[region] = totals[region] + tonumber(total)
  end
end
table.sort(order)
local report = assert(io.open("/tmp/report.txt", "w"))
for _, region in ipairs(order) do report:write(string.format("%-6s %8.2f\n", region, totals[region])) end
report:close()
io.write(io.open("/tmp/report.txt"):read("a"))
-- The mount is read-only and nothing outside the view exists:
print(select(2, io.open("/data/orders.csv", "w")))
print(select(2, io.open("/etc/passwd")))
return {rows = rows, regions = #order}
