-- Agent task: "Given the orders, how many are paid and what is the paid revenue?"
-- args: --input {"orders": [{"id": 1, "status": "paid", "total": 120}, {"id": 2, "status": "refunded", "total": 40}, {"id": 3, "status": "paid", "total": 75.5}, {"id": 4, "status": "pending", "total": 10}, {"id": 5, "status": "paid", "total": 4}]}
-- expect-value: {"ids":[1,3,5],"paid":3,"revenue":199.5,"share":0.6}
local paid, revenue, ids = 0, 0, {}
for _, order in ipairs(orders) do
  if order.status == "paid" then
    paid = paid + 1
    revenue = revenue + order.total
    ids[#ids + 1] = order.id
  end
end
return {paid = paid, revenue = revenue, ids = ids, share = paid / #orders}
