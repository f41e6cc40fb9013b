-- Agent task: "Who are the top 3 customers by spend? Break ties by name."
-- args: --input {"purchases": [{"customer": "ada", "amount": 30}, {"customer": "bob", "amount": 20}, {"customer": "cy", "amount": 50}, {"customer": "ada", "amount": 25}, {"customer": "dee", "amount": 55}, {"customer": "bob", "amount": 35}, {"customer": "eve", "amount": 5}]}
-- expect-value: {"customers":5,"top":["ada=55","bob=55","dee=55"]}
local totals = {}
for _, p in ipairs(purchases) do
  totals[p.customer] = (totals[p.customer] or 0) + p.amount
end
local ranked = {}
for name, total in pairs(totals) do
  table.insert(ranked, {name = name, total = total})
end
table.sort(ranked, function(a, b)
  if a.total ~= b.total then return a.total > b.total end
  return a.name < b.name
end)
local top = {}
for i = 1, math.min(3, #ranked) do
  top[i] = ranked[i].name .. "=" .. ranked[i].total
end
return {top = top, customers = #ranked}
