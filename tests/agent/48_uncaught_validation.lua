-- Agent task: the model's script validates its input and raises on the first bad record.
-- args: --input {"rows": [{"sku": "A1", "price": 3}, {"sku": "B2"}, {"sku": "C3", "price": 1}]}
-- expect-status: runtime_error
-- expect-error: invalid row 2 (B2): missing price
-- expect-stdout: checked A1\n
for i, row in ipairs(rows) do
  if row.price == nil then
    error(string.format("invalid row %d (%s): missing price", i, row.sku))
  end
  print("checked " .. row.sku)
end
return "unreachable"
