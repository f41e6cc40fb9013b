-- expect: runtime_error
-- accept: memory_limit
-- limits: memory=8M time=500ms
-- error-contains: resulting string too large
-- Attack: string.pack pads a 'c' item byte by byte and grows its buffer by doubling, all in
-- C: one call would allocate a gigabyte past the ceiling (THREATS D10, 8.6).
local r = string.pack("c1000000000", "")
print("ESCAPED: string.pack returned", #r)
