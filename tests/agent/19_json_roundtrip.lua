-- Agent task: "Decode the API response, add a computed field to each item, re-encode it."
-- expect-value: "{\"currency\":\"EUR\",\"grand_total\":24.98,\"has_next\":false,\"items\":[{\"line_total\":19.98,\"qty\":2,\"sku\":\"A-1\",\"unit\":9.99},{\"line_total\":5.0,\"qty\":10,\"sku\":\"B-7\",\"unit\":0.5}],\"page\":{\"next\":null,\"size\":2}}"
local json = require("json")
local body = '{"items": [{"sku": "A-1", "qty": 2, "unit": 9.99}, {"sku": "B-7", "qty": 10, "unit": 0.5}],' ..
  ' "currency": "EUR", "page": {"next": null, "size": 2}}'
local doc = json.decode(body)
local grand = 0
for _, item in ipairs(doc.items) do
  item.line_total = math.floor(item.qty * item.unit * 100 + 0.5) / 100
  grand = grand + item.line_total
end
doc.grand_total = grand
doc.has_next = doc.page.next ~= json.null
return json.encode(doc)
