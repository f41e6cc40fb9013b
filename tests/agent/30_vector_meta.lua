-- Agent task: "A 2D vector type with operators, comparison by length and a readable form."
-- expect-value: {"diff":"(-2, 3)","dot":1,"eq":true,"le":true,"len":2,"lt":true,"ne":true,"neg":"(-3, 1)","same_object":false,"scaled":"(2, 4)","sorted":["(1, 1)","(0, 2)","(-2, 1)","(3, 4)"],"sum":"(4, 1)"}
local V = {}
V.__index = V
local function new(x, y) return setmetatable({x = x, y = y}, V) end
V.__add = function(a, b) return new(a.x + b.x, a.y + b.y) end
V.__sub = function(a, b) return new(a.x - b.x, a.y - b.y) end
V.__mul = function(a, b)
  if type(a) == "number" then return new(a * b.x, a * b.y) end
  if type(b) == "number" then return new(a.x * b, a.y * b) end
  return a.x * b.x + a.y * b.y
end
V.__unm = function(a) return new(-a.x, -a.y) end
V.__eq = function(a, b) return a.x == b.x and a.y == b.y end
V.__lt = function(a, b) return a:len2() < b:len2() end
V.__le = function(a, b) return a:len2() <= b:len2() end
V.__len = function(a) return 2 end
V.__tostring = function(a) return "(" .. a.x .. ", " .. a.y .. ")" end
function V:len2() return self.x * self.x + self.y * self.y end

local a, b = new(1, 2), new(3, -1)
local vs = {new(3, 4), new(1, 1), new(0, 2), new(-2, 1)}
table.sort(vs)
local sorted = {}
for i, v in ipairs(vs) do sorted[i] = tostring(v) end
return {
  sum = tostring(a + b), diff = tostring(a - b), scaled = tostring(2 * a), dot = a * b,
  neg = tostring(-b), eq = new(1, 2) == a, ne = a ~= b, lt = a < b, le = new(2, 1) <= a,
  len = #a, sorted = sorted, same_object = rawequal(a, new(1, 2)),
}
