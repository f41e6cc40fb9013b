-- Agent task: "Pivot the metric rows into one record per day, filling gaps with 0."
-- args: --input {"rows": [{"day": "2024-05-01", "metric": "visits", "value": 120}, {"day": "2024-05-01", "metric": "signups", "value": 7}, {"day": "2024-05-02", "metric": "visits", "value": 98}, {"day": "2024-05-03", "metric": "signups", "value": 3}, {"day": "2024-05-03", "metric": "visits", "value": 143}]}
-- expect-value: [{"day":"2024-05-01","signups":7,"visits":120},{"day":"2024-05-02","signups":0,"visits":98},{"day":"2024-05-03","signups":3,"visits":143}]
local metrics, by_day, days = {}, {}, {}
for _, r in ipairs(rows) do
  metrics[r.metric] = true
  if not by_day[r.day] then
    by_day[r.day] = {}
    days[#days + 1] = r.day
  end
  by_day[r.day][r.metric] = r.value
end
table.sort(days)
local out = {}
for _, day in ipairs(days) do
  local rec = {day = day}
  for m in pairs(metrics) do rec[m] = by_day[day][m] or 0 end
  out[#out + 1] = rec
end
return out
