-- expect: output_limit
-- limits: memory=64M output=1M time=10s
-- error-contains: output limit exceeded
-- Attack: the same through many results that are each under the output limit (issue 9, C.3):
-- the limit bounds the whole result, so the values share it.
local s = string.rep("y", 200 * 1024)
return s, s, s, s, s, s, s, s, s, s
