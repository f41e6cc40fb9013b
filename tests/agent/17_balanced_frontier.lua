-- Agent task: "Extract the function-call arguments and find whole-word matches."
-- expect-value: {"calls":["sum(price(a, b), tax(rate(x)))","max(1, 2)","sum(ignored)"],"cat_words":2,"code":"total = sum(price(a, b), tax(rate(x))) + max(1, 2) ","positions":[3,5],"quick":[6,10]}
local src = "total = sum(price(a, b), tax(rate(x))) + max(1, 2) -- sum(ignored)"
local calls = {}
for name, args in src:gmatch("(%a+)(%b())") do
  calls[#calls + 1] = name .. args
end
local code = src:gsub("%-%-.*$", "")
local words = {}
for w in ("the cat scattered the cats; cat!"):gmatch("%f[%a]cat%f[%A]") do
  words[#words + 1] = w
end
local s, e = ("THE (quick) fox"):find("%f[%a]%a+%f[%A]", 5)
local positions = {("hello"):match("()ll()")}
return {calls = calls, code = code, cat_words = #words, quick = {s, e}, positions = positions}
