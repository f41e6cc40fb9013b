-- Agent task: "When is the next Monday, the end of this month and the date 90 days out?"
-- args: --time 1709251200
-- expect-value: {"days_since_new_year":60.0,"leap":true,"month_end":"2024-03-31","next_monday":"2024-03-04","normalized":[5,30],"plus90":"2024-05-30","today":"2024-03-01","weekday":"Friday"}
local today = os.date("*t")
local function ymd(ts) return os.date("%Y-%m-%d", ts) end
local days_to_monday = (9 - today.wday) % 7
if days_to_monday == 0 then days_to_monday = 7 end
local next_monday = os.time({year = today.year, month = today.month, day = today.day + days_to_monday})
local month_end = os.time({year = today.year, month = today.month + 1, day = 0})
local plus90 = {year = today.year, month = today.month, day = today.day + 90}
local plus90_ts = os.time(plus90)
local leap = os.time({year = 2024, month = 2, day = 29}) ~= os.time({year = 2024, month = 3, day = 1})
local elapsed = os.difftime(os.time(), os.time({year = 2024, month = 1, day = 1, hour = 0}))
return {
  today = ymd(os.time()),
  weekday = os.date("%A"),
  next_monday = ymd(next_monday),
  month_end = ymd(month_end),
  plus90 = ymd(plus90_ts),
  normalized = {plus90.month, plus90.day},
  leap = leap,
  days_since_new_year = elapsed / 86400,
}
