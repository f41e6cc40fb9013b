-- Agent task: "How many days between each pair of dates, and which weekday was each?"
-- expect-value: [{"days":60,"span":"2024-01-01..2024-03-01","weekday":"Monday"},{"days":366,"span":"2023-12-25..2024-12-25","weekday":"Monday"},{"days":2,"span":"2024-02-28..2024-03-01","weekday":"Wednesday"}]
local pairs_in = {"2024-01-01..2024-03-01", "2023-12-25..2024-12-25", "2024-02-28..2024-03-01"}
local function parse(d)
  local y, m, day = d:match("^(%d%d%d%d)-(%d%d)-(%d%d)$")
  return os.time({year = tonumber(y), month = tonumber(m), day = tonumber(day), hour = 12})
end
local result = {}
for _, span in ipairs(pairs_in) do
  local a, b = span:match("^(.-)%.%.(.-)$")
  local days = math.floor(os.difftime(parse(b), parse(a)) / 86400 + 0.5)
  result[#result + 1] = {span = span, days = days, weekday = os.date("!%A", parse(a))}
end
return result
