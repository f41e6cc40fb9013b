-- Agent task: "Parse the numeric strings from a form (hex, binary, money, percentages)."
-- expect-value: {"bases":[255,5,1295],"coerce":[11,12,"1020",4.0],"int_of":[8,"3"],"money":[123450,-99,1200,true],"parsed":["integer:42","integer:7","integer:31","float:3.25","float:1000.0","integer:0","nil","nil","nil","float:-0.85"],"percent":0.455,"tostr":["1e+15","9.2233720368548e+18","-0.0","100.0","inf"]}
local inputs = {"42", " 7 ", "0x1F", "3.25", "1e3", "-0", "12abc", "", "0b101", "  -8.5e-1"}
local parsed = {}
for i, s in ipairs(inputs) do
  local n = tonumber(s)
  parsed[i] = n == nil and "nil" or (math.type(n) .. ":" .. tostring(n))
end
local function money(s)
  local sign, whole, frac = s:match("^(%-?)%$?([%d,]+)%.?(%d*)$")
  if not whole then return nil end
  local cents = tonumber((whole:gsub(",", ""))) * 100 + tonumber((frac .. "00"):sub(1, 2))
  return sign == "-" and -cents or cents
end
return {
  parsed = parsed,
  bases = {tonumber("ff", 16), tonumber("101", 2), tonumber("zz", 36), tonumber("8", 8)},
  money = {money("$1,234.5"), money("-$0.99"), money("12"), money("abc") == nil},
  percent = tonumber(("45.5%"):match("^([%d.]+)%%$")) / 100,
  coerce = {"10" + 1, "3" * "4", 10 .. 20, "2" ^ 2},
  tostr = {tostring(1e15), tostring(2^63), tostring(-0.0), tostring(100 // 1.0), tostring(1/0)},
  int_of = {math.tointeger("8"), string.format("%d", 3.0)},
}
