-- Agent task: "Sort tickets by priority but keep arrival order within a priority."
-- expect-value: {"mixed_types":[false,true],"order":"T2 T4 T6 T1 T5 T8 T3 T7"}
local tickets = {
  {id = "T1", prio = 2}, {id = "T2", prio = 1}, {id = "T3", prio = 3}, {id = "T4", prio = 1},
  {id = "T5", prio = 2}, {id = "T6", prio = 1}, {id = "T7", prio = 3}, {id = "T8", prio = 2},
}
-- table.sort is not stable, so decorate with the original index.
for i, t in ipairs(tickets) do t.seq = i end
table.sort(tickets, function(a, b)
  if a.prio ~= b.prio then return a.prio < b.prio end
  return a.seq < b.seq
end)
local order = {}
for i, t in ipairs(tickets) do order[i] = t.id end
local ok, err = pcall(table.sort, {3, "a", 1})
return {order = table.concat(order, " "), mixed_types = {ok, err:match("attempt to compare %a+ with %a+") ~= nil}}
