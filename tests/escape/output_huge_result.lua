-- expect: output_limit
-- limits: memory=64M output=1M time=10s
-- error-contains: output limit exceeded
-- Attack: return a value whose JSON is far larger than the output limit (issue 9, C.3). The
-- result used to be encoded after the run, outside every limit: a 30 MiB string came back
-- whole despite a 1 MiB output limit. Its encoding is output now: past the limit the run ends
-- with output_limit and no value, and the buffer never grows past the limit.
return string.rep("x", 30 * 1024 * 1024)
