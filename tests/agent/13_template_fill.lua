-- Agent task: "Fill the message template for each customer; leave unknown placeholders alone."
-- args: --input {"customers": [{"name": "Ada", "amount": 12.5, "due": "2024-06-01"}, {"name": "Linus", "amount": 3, "due": "2024-06-15"}]}
-- expect-value: {"dots":3,"messages":["Dear Ada, you owe $12.50 by 2024-06-01. Ref: {ref}","Dear Linus, you owe $3.00 by 2024-06-15. Ref: {ref}"],"shouted":"HELLO world","swapped":"value=key, b=a"}
local template = "Dear {name}, you owe ${amount} by {due}. Ref: {ref}"
local out = {}
for i, c in ipairs(customers) do
  local msg, n = template:gsub("{(%w+)}", function(key)
    local v = c[key]
    if key == "amount" then return string.format("%.2f", v) end
    if v ~= nil then return tostring(v) end
  end)
  out[i] = msg
end
local shouted = ("hello world"):gsub("%w+", {hello = "HELLO", world = false})
local swapped = ("key=value, a=b"):gsub("(%w+)=(%w+)", "%2=%1")
local counted = select(2, ("a.b.c.d"):gsub("%.", "/"))
return {messages = out, shouted = shouted, swapped = swapped, dots = counted}
