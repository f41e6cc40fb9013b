-- Who spent the most? The kind of snippet an agent writes over data its host passes in.
local by_customer, big = {}, 0
for _, o in ipairs(orders) do
  local c = by_customer[o.customer] or {customer = o.customer, total = 0, orders = 0}
  c.total = c.total + o.total
  c.orders = c.orders + 1
  by_customer[o.customer] = c
  if o.total >= threshold then big = big + 1 end
end

local ranking = {}
for _, c in pairs(by_customer) do table.insert(ranking, c) end
table.sort(ranking, function(a, b) return a.total > b.total end)

print(string.format("%d orders, %d at or above %.2f", #orders, big, threshold))
for i, c in ipairs(ranking) do
  print(string.format("%d. %-6s %8.2f  (%d orders)", i, c.customer:upper(), c.total, c.orders))
end
local names = {}
for _, c in ipairs(ranking) do names[#names + 1] = c.customer:gsub("^%l", string.upper) end
return {top = ranking[1].customer, customers = #ranking, big_orders = big,
        summary = table.concat(names, " > ")}
