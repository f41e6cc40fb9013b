-- Agent task: "Truncate the titles to 6 characters with an ellipsis, without breaking UTF-8."
-- args: --input {"titles": ["Crème brûlée recipe", "短い", "Straße und Weg", "naïve", "Привет мир"]}
-- expect-value: {"chars":5,"reversed":"x€ña","short":["Crème …","短い","Straße…","naïve","Привет…"],"upper":"STRAßE UND WEG"}
local function truncate(s, n)
  if utf8.len(s) <= n then return s end
  local cut = utf8.offset(s, n + 1)
  return s:sub(1, cut - 1) .. "…"
end
local function reverse(s)
  local chars = {}
  for _, cp in utf8.codes(s) do table.insert(chars, 1, utf8.char(cp)) end
  return table.concat(chars)
end
local short, upper_ascii = {}, {}
for i, t in ipairs(titles) do
  short[i] = truncate(t, 6)
  upper_ascii[i] = t:upper()
end
local count = 0
for _ in ("Grüße"):gmatch(utf8.charpattern) do count = count + 1 end
return {short = short, reversed = reverse("añ€x"), chars = count, upper = upper_ascii[3]}
