-- expect: memory_limit
-- limits: memory=8M
-- Attack: a big table constructor (one NEWTABLE with a large size hint) executed over and over,
-- each result kept alive (THREATS D10).
local keep, n = {}, 0
while true do
  n = n + 1
  keep[n] = {
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
    25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46,
    47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64,
    a = 1, b = 2, c = 3, d = 4, e = 5, f = 6, g = 7, h = 8, i = 9, j = 10, k = 11, l = 12,
  }
end
