-- Agent task: "Bucket the users by age decade and report the largest bucket."
-- args: --input {"users": [{"name": "a", "age": 23}, {"name": "b", "age": 37}, {"name": "c", "age": 29}, {"name": "d", "age": 41}, {"name": "e", "age": 20}, {"name": "f", "age": 35}, {"name": "g", "age": 68}, {"name": "h", "age": 31}]}
-- expect-value: {"buckets":{"20s":3,"30s":3,"40s":1,"60s":1},"chart":"20s  ###\n30s  ###\n40s  #\n60s  #","largest":"20s"}
local buckets = {}
for _, u in ipairs(users) do
  local key = (u.age // 10 * 10) .. "s"
  buckets[key] = (buckets[key] or 0) + 1
end
local keys = {}
for k in pairs(buckets) do keys[#keys + 1] = k end
table.sort(keys)
local largest, bars = nil, {}
for _, k in ipairs(keys) do
  if not largest or buckets[k] > buckets[largest] then largest = k end
  bars[#bars + 1] = string.format("%-4s %s", k, string.rep("#", buckets[k]))
end
return {buckets = buckets, largest = largest, chart = table.concat(bars, "\n")}
