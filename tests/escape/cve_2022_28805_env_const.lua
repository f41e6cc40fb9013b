-- expect: runtime_error
-- Attack: CVE-2022-28805: a constant _ENV made the parser read past a buffer (1f3c6f45, THREATS 5).
local _ENV <const> = 11
X = "hi"
print("ESCAPED: assignment through a numeric _ENV")
