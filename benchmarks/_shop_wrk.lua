-- wrk replaying webtier loadgen's visits (benchmarks/_wrk.py writes them).
--
-- Each wrk thread has one connection and a file of its own, so a response
-- always answers the thread's last request: the thread is one browser at a
-- time, going through the file's lines in order. Lines, tab-separated:
--   N                       a new visitor: no cookies
--   R <id>                  a returning visitor: the cookies kept under <id>
--   K <id>                  the visit is over and its visitor keeps its cookies under <id>
--   G <path> <route>        GET <path>
--   P <path> <form> <from>  POST <form> to <path> with the last page's CSRF token
--                           (none seen: GET <from> first, as a browser on that page)
--   F                       after a 303, GET its Location (else nothing)
-- Arguments: the files' prefix (thread n reads <prefix>.<n>), and the
-- responses after which each thread stops (0: none, wrk's -d decides) and
-- writes <prefix>.stopped.<n>.
-- wrk does no modelling: the choices were made in Python from the model.

local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
  table.insert(threads, thread)
end

local lines, at = nil, 0
local cookies, jars = {}, {}
local location, last_status = nil, 0
local page = nil  -- the body of the last response that had one
local retried = false  -- the POST of this line already fetched its form's page
local route = "GET /"
counts = {}
visitors = 0
returning = 0
checkouts = 0

local function split(line)
  local fields, start = {}, 1
  while true do
    local tab = string.find(line, "\t", start, true)
    if tab == nil then
      table.insert(fields, string.sub(line, start))
      return fields
    end
    table.insert(fields, string.sub(line, start, tab - 1))
    start = tab + 1
  end
end

local limit = 0  -- responses before the thread stops (0: none, wrk's -d decides)
local answered = 0
local stopped_file = nil

function init(args)
  limit = tonumber(args[2] or "0")
  stopped_file = args[1] .. ".stopped." .. id
  lines = {}
  for line in io.lines(args[1] .. "." .. id) do table.insert(lines, split(line)) end
end

local TOKEN_INPUT = 'name="csrftoken" value="'

local function token_of(html)
  local at = string.find(html, TOKEN_INPUT, 1, true)
  if at == nil then return nil end
  return string.match(html, '^[^"]*', at + #TOKEN_INPUT)
end

local function cookie_header()
  local parts = {}
  for name, value in pairs(cookies) do table.insert(parts, name .. "=" .. value) end
  return table.concat(parts, "; ")
end

local function route_of(path)
  if string.sub(path, 1, 8) == "/orders/" then return "GET /orders/{order_id}" end
  if string.sub(path, 1, 6) == "/item/" then return "GET /item/{item_id}" end
  local bare = string.match(path, "^[^?]*")
  return "GET " .. bare
end

local function send(method, path, body, name)
  route = name
  local headers = {}
  local jar = cookie_header()
  if jar ~= "" then headers["Cookie"] = jar end
  if body ~= nil then headers["Content-Type"] = "application/x-www-form-urlencoded" end
  return wrk.format(method, path, headers, body)
end

local function urlencode(text)
  return (string.gsub(text, "[^%w%-_%.~]", function(c)
    return string.format("%%%02X", string.byte(c))
  end))
end

function request()
  if lines == nil then return wrk.format("GET", "/") end  -- wrk's check in its main state
  while true do
    at = at + 1
    if at > #lines then  -- the file again from its start, every visitor new
      at, jars = 1, {}
    end
    local line = lines[at]
    local kind = line[1]
    if kind == "N" then
      cookies, page, last_status = {}, nil, 0
      visitors = visitors + 1
    elseif kind == "R" then
      local kept = jars[line[2]]
      cookies, page, last_status = {}, nil, 0
      if kept ~= nil then
        for name, value in pairs(kept) do cookies[name] = value end
        returning = returning + 1
      end
      visitors = visitors + 1
    elseif kind == "K" then
      jars[line[2]] = cookies
    elseif kind == "G" then
      return send("GET", line[2], nil, line[3])
    elseif kind == "P" then
      local token = page and token_of(page)
      if token == nil and not retried then
        retried = true  -- no form on this page: the POST again once its form's page is read
        at = at - 1
        return send("GET", line[4], nil, route_of(line[4]))
      end
      retried = false
      local form = line[3]
      if token ~= nil then
        form = (form ~= "" and form .. "&" or "") .. "csrftoken=" .. urlencode(token)
      end
      return send("POST", line[2], form, "POST " .. line[2])
    elseif kind == "F" then
      if last_status == 303 and location ~= nil then
        local path = string.match(location, "^https?://[^/]+(/.*)$") or location
        return send("GET", path, nil, route_of(path))
      end
    end
  end
end

local function absorb(value)
  local name, rest = string.match(value, "^%s*([^=;%s]+)=([^;]*)")
  if name == nil then return end
  local lower = string.lower(value)
  if string.find(lower, "max-age=0", 1, true) or string.find(lower, "max-age=-", 1, true)
      or string.find(lower, "expires=thu, 01 jan 1970", 1, true) then
    cookies[name] = nil
  else
    cookies[name] = rest
  end
end

function response(status, headers, body)
  -- Flat keys: wrk copies a thread's table to done() one level deep.
  local key = route .. "|" .. tostring(math.floor(status / 100)) .. "xx"
  counts[key] = (counts[key] or 0) + 1
  last_status, location = status, nil
  for name, value in pairs(headers) do
    local lower = string.lower(name)
    if lower == "set-cookie" then absorb(value)
    elseif lower == "location" then location = value end
  end
  if route == "POST /checkout" and status == 303 then checkouts = checkouts + 1 end
  -- The page stays as it came (a string is not copied): its token is read
  -- only when a form is posted (most pages are not followed by one).
  if body ~= nil and #body > 0 then page = body end
  answered = answered + 1
  if answered == limit then
    -- wrk waits out its -d whatever its threads do: the bench, seeing
    -- every thread's file, interrupts it (and so gets its figures).
    io.open(stopped_file, "w"):close()
    wrk.thread:stop()
  end
end

function done(summary, latency, requests)
  local parts = {}
  local all = {}
  local totals = {visitors = 0, returning = 0, checkouts = 0}
  for _, thread in ipairs(threads) do
    for key, n in pairs(thread:get("counts")) do
      local name, kind = string.match(key, "^(.*)|(%dxx)$")
      local into = all[name] or {}
      all[name] = into
      into[kind] = (into[kind] or 0) + n
    end
    for key, _ in pairs(totals) do totals[key] = totals[key] + thread:get(key) end
  end
  for name, per in pairs(all) do
    local kinds = {}
    for kind, n in pairs(per) do table.insert(kinds, string.format('"%s": %d', kind, n)) end
    table.insert(parts, string.format('"%s": {%s}', name, table.concat(kinds, ", ")))
  end
  local errors = summary.errors
  io.write(string.format(
    'WEBTIER-WRK {"duration_us": %d, "requests": %d, "errors": %d, "timeouts": %d, "bad_status": %d, ' ..
    '"p50_us": %d, "p99_us": %d, "visitors": %d, "returning": %d, "checkouts": %d, ' ..
    '"routes": {%s}}\n',
    summary.duration, summary.requests,
    errors.connect + errors.read + errors.write, errors.timeout, errors.status,
    latency:percentile(50), latency:percentile(99), totals.visitors, totals.returning,
    totals.checkouts, table.concat(parts, ", ")))
end
