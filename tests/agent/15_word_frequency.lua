-- Agent task: "What are the five most frequent words (ignoring case and stop words)?"
-- expect-value: {"distinct":10,"top":["dog:4","fox:4","quick:4","lazy:2","barks:1"],"total_words":32}
local text = [[The quick brown fox jumps over the lazy dog. The dog barks; the fox runs.
A quick fox is a happy fox, and a lazy dog is a sleepy dog. Quick, quick!]]
local stop = {the = true, a = true, is = true, ["and"] = true, over = true}
local freq, total = {}, 0
for word in text:gmatch("%a+") do
  word = word:lower()
  total = total + 1
  if not stop[word] then freq[word] = (freq[word] or 0) + 1 end
end
local words = {}
for w, n in pairs(freq) do words[#words + 1] = {w, n} end
table.sort(words, function(x, y)
  if x[2] ~= y[2] then return x[2] > y[2] end
  return x[1] < y[1]
end)
local top = {}
for i = 1, 5 do top[i] = words[i][1] .. ":" .. words[i][2] end
return {top = top, total_words = total, distinct = #words}
