-- Agent task: "Summarise sales per region: count, total and average."
-- args: --input {"sales": [{"region": "north", "amount": 100}, {"region": "south", "amount": 250}, {"region": "north", "amount": 50}, {"region": "east", "amount": 75}, {"region": "south", "amount": 25}, {"region": "north", "amount": 30}]}
-- expect-value: {"east":{"average":75.0,"count":1,"total":75},"north":{"average":60.0,"count":3,"total":180},"south":{"average":137.5,"count":2,"total":275}}
local groups = {}
for _, sale in ipairs(sales) do
  local g = groups[sale.region]
  if not g then
    g = {count = 0, total = 0}
    groups[sale.region] = g
  end
  g.count = g.count + 1
  g.total = g.total + sale.amount
end
for _, g in pairs(groups) do
  g.average = math.floor(g.total / g.count * 100 + 0.5) / 100
end
return groups
