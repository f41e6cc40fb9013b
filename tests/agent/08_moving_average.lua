-- Agent task: "Compute the 3-day moving average of closing prices and flag big moves."
-- args: --input {"closes": [10.0, 10.5, 11.0, 10.0, 12.5, 13.0, 12.0]}
-- expect-value: {"big_moves":["day 5: +25.0%"],"moving":[10.5,10.5,11.167,11.833,12.5]}
local avgs, moves = {}, {}
for i = 3, #closes do
  local sum = 0
  for j = i - 2, i do sum = sum + closes[j] end
  avgs[#avgs + 1] = tonumber(string.format("%.3f", sum / 3))
end
for i = 2, #closes do
  local change = (closes[i] - closes[i - 1]) / closes[i - 1] * 100
  if math.abs(change) >= 10 then
    moves[#moves + 1] = string.format("day %d: %+.1f%%", i, change)
  end
end
return {moving = avgs, big_moves = moves}
