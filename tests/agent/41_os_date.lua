-- Agent task: "Stamp the report with today's date in several formats."
-- args: --time 1700000000
-- expect-value: {"clock":"10:13 PM","day_of_year":"318","epoch":"1970-01-01 00:00:00","fields":[2023,11,14,22,13,20,3,318],"human":"Tuesday, November 14 2023","isdst":false,"iso":"2023-11-14T22:13:20Z","now":1700000000,"percent":"100%","roundtrip":true,"same":true,"short":"Tue Nov 14 22:13"}
local now = os.time()
local t = os.date("*t")
local u = os.date("!*t", now)
return {
  now = now,
  iso = os.date("%Y-%m-%dT%H:%M:%SZ"),
  human = os.date("%A, %B %d %Y"),
  short = os.date("!%a %b %e %H:%M", now),
  day_of_year = os.date("%j"),
  clock = os.date("%I:%M %p"),
  fields = {t.year, t.month, t.day, t.hour, t.min, t.sec, t.wday, t.yday},
  isdst = t.isdst,
  same = u.hour == t.hour,
  roundtrip = os.time(t) == now,
  epoch = os.date("!%Y-%m-%d %H:%M:%S", 0),
  percent = os.date("100%%"),
}
