-- Agent task: "Break the URLs into parts and decode the query parameters."
-- expect-value: [{"host":"api.example.com","params":{"page":"2","q":"lua sandbox","tags":"a,b"},"path":"/v1/search","port":8443,"scheme":"https"},{"host":"localhost","params":{},"path":"/health","port":80,"scheme":"http"},{"host":"files.example.org","params":{"mirror":"eu"},"path":"/pub/file.tar.gz","port":80,"scheme":"ftp"}]
local urls = {
  "https://api.example.com:8443/v1/search?q=lua%20sandbox&page=2&tags=a%2Cb",
  "http://localhost/health",
  "ftp://files.example.org/pub/file.tar.gz?mirror=eu",
}
local function decode(s)
  return (s:gsub("+", " "):gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end
local out = {}
for _, url in ipairs(urls) do
  local scheme, rest = url:match("^(%a[%w+.-]*)://(.*)$")
  local authority, path = rest:match("^([^/]*)(.*)$")
  local host, port = authority:match("^(.-):(%d+)$")
  host = host or authority
  local query
  path, query = path:match("^([^?]*)%??(.*)$")
  local params = {}
  for k, v in query:gmatch("([^&=]+)=([^&]*)") do params[decode(k)] = decode(v) end
  out[#out + 1] = {scheme = scheme, host = host, port = tonumber(port) or (scheme == "https" and 443 or 80),
    path = path, params = params}
end
return out
