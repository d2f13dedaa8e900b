-- Record one value of one (context, type) in the current period, and rank
-- the context among its shard's, atomically, in one slot.
--
-- KEYS[1] = the record of (context, type) for the period starting at ARGV[2]: hash
--           count, sum, m2 (sum of squared deviations), min, max, errors,
--           and one field per histogram bucket
-- KEYS[2] = (ranked types only) the shard's ranking of that type and period: zset
-- ARGV[1] = period length, seconds
-- ARGV[2] = the start of the period the caller expects (from its own clock)
-- ARGV[3] = complete periods kept besides the current one
-- ARGV[4] = the value, as a decimal that reads back as the same double
-- ARGV[5] = the value's histogram bucket, or '' without histograms
-- ARGV[6] = '1' if the sample comes from a failure (counted in errors), else '0'
-- ARGV[7] = (ranked) the context, the ranking's member
-- ARGV[8] = (ranked) how many contexts the ranking keeps
-- ARGV[9] = (ranked) '0' to rank by mean, else a percentile and the buckets per
--           power of two, '<percent>:<M>'
-- Returns {1, count, sum, m2} once recorded, or {0, start} without writing
-- anything when the server's clock puts now in the period starting at
-- `start`: the caller sends again with that period's keys.
--
-- The server's clock alone decides the period, so app servers whose clocks
-- disagree cannot split or flip a period. The first write of a period
-- creates its keys, which expire by themselves once `keep` newer periods
-- have passed. Mean and variance are kept as sum and m2 (Welford), which
-- stay exact where the book's sum of squares loses every digit to
-- cancellation (large values, small spread).

local period = tonumber(ARGV[1])
local now = tonumber(redis.call('TIME')[1])
local start = now - now % period
if start ~= tonumber(ARGV[2]) then return {0, start} end

-- 17 significant digits read back as the same double (tostring keeps 14).
local function decimal(x) return string.format('%.17g', x) end

local key, x = KEYS[1], tonumber(ARGV[4])
local n, sum, m2, low, high = unpack(redis.call('HMGET', key, 'count', 'sum', 'm2', 'min', 'max'))
local expire_at
if n then
  n, sum, m2 = tonumber(n), tonumber(sum), tonumber(m2)
  local mean = sum / n
  n, sum = n + 1, sum + x
  m2 = m2 + (x - mean) * (x - sum / n)
  if x < tonumber(low) then low = ARGV[4] end
  if x > tonumber(high) then high = ARGV[4] end
else
  n, sum, m2, low, high = 1, x, 0, ARGV[4], ARGV[4]
  expire_at = (start + (tonumber(ARGV[3]) + 1) * period) * 1000
end
redis.call('HSET', key, 'count', n, 'sum', decimal(sum), 'm2', decimal(m2), 'min', low, 'max', high)
if ARGV[5] ~= '' then redis.call('HINCRBY', key, ARGV[5], 1) end
if ARGV[6] == '1' then redis.call('HINCRBY', key, 'errors', 1) end
if expire_at then redis.call('PEXPIREAT', key, expire_at) end

if #KEYS == 2 then
  local score = sum / n
  local percent, M = string.match(ARGV[9], '^(.+):(%d+)$')
  if percent then
    -- The percentile of the histogram, as webtier.histogram computes it.
    percent, M = tonumber(percent), tonumber(M)
    local buckets, total = {}, 0
    local flat = redis.call('HGETALL', key)
    for i = 1, #flat, 2 do
      local name, kind = flat[i], string.sub(flat[i], 1, 1)
      if name == 'z' or ((kind == 'p' or kind == 'n') and tonumber(string.sub(name, 2))) then
        local index = name == 'z' and 0 or tonumber(string.sub(name, 2))
        local order = name == 'z' and 0 or (kind == 'p' and index or -index)
        local side = name == 'z' and 0 or (kind == 'p' and 1 or -1)
        buckets[#buckets + 1] = {side, order, index, tonumber(flat[i + 1])}
        total = total + tonumber(flat[i + 1])
      end
    end
    table.sort(buckets, function(a, b)
      if a[1] ~= b[1] then return a[1] < b[1] end
      return a[2] < b[2]
    end)
    local wanted = math.max(1, math.ceil(percent * total / 100 - 1e-9))
    local seen = 0
    for _, b in ipairs(buckets) do
      seen = seen + b[4]
      if seen >= wanted then
        if b[1] == 0 then
          score = 0
        else
          local exponent = math.floor(b[3] / M)
          local sub = b[3] - exponent * M
          local lo, hi = 1 + sub / M, 1 + (sub + 1) / M
          score = b[1] * math.ldexp(2 * lo * hi / (lo + hi), exponent - 1)
        end
        break
      end
    end
    score = math.min(math.max(score, tonumber(low)), tonumber(high))
  end
  if redis.call('ZADD', KEYS[2], decimal(score), ARGV[7]) == 1 then
    -- A new member: the only time the ranking can outgrow its size.
    redis.call('PEXPIREAT', KEYS[2], (start + (tonumber(ARGV[3]) + 1) * period) * 1000)
    local extra = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[8])
    if extra > 0 then redis.call('ZREMRANGEBYRANK', KEYS[2], 0, extra - 1) end
  end
end
return {1, n, decimal(sum), decimal(m2)}
