-- Agent task: "For each user, how many orders and what total? Include users with no orders."
-- args: --input {"users": [{"id": 1, "name": "Ada"}, {"id": 2, "name": "Grace"}, {"id": 3, "name": "Linus"}], "orders": [{"user_id": 2, "total": 15}, {"user_id": 1, "total": 7}, {"user_id": 2, "total": 30}, {"user_id": 9, "total": 99}]}
-- expect-value: {"orphans":1,"report":["Ada: 1 order(s), $7","Grace: 2 order(s), $45","Linus: 0 order(s), $0"]}
local by_id = {}
for _, u in ipairs(users) do by_id[u.id] = {name = u.name, orders = 0, total = 0} end
local orphans = 0
for _, o in ipairs(orders) do
  local u = by_id[o.user_id]
  if u then
    u.orders = u.orders + 1
    u.total = u.total + o.total
  else
    orphans = orphans + 1
  end
end
local report = {}
for _, u in ipairs(users) do
  local s = by_id[u.id]
  report[#report + 1] = string.format("%s: %d order(s), $%d", s.name, s.orders, s.total)
end
return {report = report, orphans = orphans}
