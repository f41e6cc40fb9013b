-- Agent task: "Compute summary statistics and some integer/float edge cases."
-- args: --input {"samples": [12, 7, 3, 21, 8, 13, 5, 8]}
-- expect-value: {"abs":true,"div":[3.5,4.0,"inf",1024.0,"-inf"],"floor":[-4,3,-3,4],"fmod":[1,-1,2,-3,3.0],"huge":true,"max":21,"mean":9.625,"median":8.0,"min":3,"pi":"3.14159","stddev":5.29,"types":["integer","float","nil",3,"nil"],"ult":true,"wrap":true}
local n, sum, sq = #samples, 0, 0
for _, v in ipairs(samples) do sum = sum + v sq = sq + v * v end
local mean = sum / n
local sorted = {table.unpack(samples)}
table.sort(sorted)
local median = (sorted[n // 2] + sorted[n // 2 + 1]) / 2
local var = sq / n - mean * mean
return {
  min = math.min(table.unpack(samples)), max = math.max(table.unpack(samples)),
  mean = mean, median = median, stddev = tonumber(string.format("%.4f", math.sqrt(var))),
  floor = {math.floor(-3.5), math.floor(3.7), math.ceil(-3.5), math.ceil(3.2)},
  fmod = {math.fmod(7, 3), math.fmod(-7, 3), -7 % 3, -7 // 3, 7.5 // 2},
  types = {math.type(1), math.type(1.0), tostring(math.type("1")), math.tointeger(3.0), tostring(math.tointeger(3.5))},
  wrap = math.maxinteger + 1 == math.mininteger,
  abs = math.abs(-2^63) == 2^63,
  div = {7 / 2, 8 / 2, tostring(3 // 0.0), 2^10, tostring(-1 // 0.0)},
  pi = string.format("%.5f", math.pi),
  ult = math.ult(1, -1),
  huge = math.huge > math.maxinteger,
}
