-- Agent task: "From the inventory file, list what to reorder and the stock value per warehouse."
-- args: --input-file 51_inventory.json
-- expect-stdout: REORDER GEAR-3   lyon       have   2, want >= 10\nREORDER BOLT-10  berlin     have  40, want >= 100\nREORDER PUMP-1   oslo       have   1, want >= 2\n
-- expect-value: {"generated":"2024-04-02T08:00:00Z","reorder_count":3,"value":"berlin=29.80 lyon=125.00 oslo=323.75"}
local reorder, value = {}, {}
for _, item in ipairs(inventory) do
  local wh = item.warehouse
  value[wh] = (value[wh] or 0) + item.qty * item.unit_cost
  if item.qty < item.reorder_at then
    reorder[#reorder + 1] = item
  end
end
table.sort(reorder, function(a, b) return a.qty / a.reorder_at < b.qty / b.reorder_at end)
for _, item in ipairs(reorder) do
  print(string.format("REORDER %-8s %-10s have %3d, want >= %d", item.sku, item.warehouse, item.qty, item.reorder_at))
end
local names = {}
for wh in pairs(value) do names[#names + 1] = wh end
table.sort(names)
local summary = {}
for _, wh in ipairs(names) do summary[#summary + 1] = string.format("%s=%.2f", wh, value[wh]) end
return {reorder_count = #reorder, value = table.concat(summary, " "), generated = generated_at}
