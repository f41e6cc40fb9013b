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
for _, c in pairs(by_customer) do
  -- insertion by total, highest first
  local i = #ranking + 1
  while i > 1 and ranking[i - 1].total < c.total do
    ranking[i] = ranking[i - 1]
    i = i - 1
  end
  ranking[i] = c
end

print(string.format("%d orders, %d at or above %.2f", #orders, big, threshold))
for i, c in ipairs(ranking) do
  print(string.format("%d. %-6s %8.2f  (%d orders)", i, c.customer:upper(), c.total, c.orders))
end
return {top = ranking[1].customer, customers = #ranking, big_orders = big}
