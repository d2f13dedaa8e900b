-- Record one value of one (context, type) in the current period, atomically,
-- in one slot.
--
-- KEYS[1] = the record of (context, type) for the period starting at ARGV[2]: hash
--           count, sum, m2 (sum of squared deviations), min, max, errors,
--           and one field per histogram bucket
-- KEYS[2] = (ranked types only) the shard's contexts of that type and period: set
-- ARGV[1] = period length, seconds
-- ARGV[2] = the start of the period the caller expects (from its own clock)
-- ARGV[3] = complete periods kept besides the current one
-- ARGV[4] = the value, as a decimal that reads back as the same double
-- ARGV[5] = the value's histogram bucket, or '' without histograms
-- ARGV[6] = '1' if the sample comes from a failure (counted in errors), else '0'
-- ARGV[7] = (ranked) the context, listed in KEYS[2]
-- ARGV[8] = (ranked) the most contexts KEYS[2] lists
-- Returns {1, count, sum, m2} once recorded, or {0, start} without writing
-- anything when the server's clock puts now in the period starting at
-- `start`: the caller sends again with that period's keys.
--
-- The server's clock alone decides the period, so app servers whose clocks
-- disagree cannot split or flip a period. The first write of a period
-- creates its keys, which expire by themselves once `keep` newer periods
-- have passed. Mean and variance are kept as sum and m2 (Welford), which
-- stay exact where the book's sum of squares loses every digit to
-- cancellation (large values, small spread). A steady write is three calls:
-- TIME, HMGET, HSET; rankings are computed when read, from the records.

local period = tonumber(ARGV[1])
local now = tonumber(redis.call('TIME')[1])
local start = now - now % period
if start ~= tonumber(ARGV[2]) then return {0, start} end

-- 17 significant digits read back as the same double (tostring keeps 14).
local function decimal(x) return string.format('%.17g', x) end

local key, x, bucket = KEYS[1], tonumber(ARGV[4]), ARGV[5]
local failed = ARGV[6] == '1'
local fields = {'count', 'sum', 'm2', 'min', 'max'}
if bucket ~= '' then fields[#fields + 1] = bucket end
if failed then fields[#fields + 1] = 'errors' end
local old = redis.call('HMGET', key, unpack(fields))

local n, sum, m2, low, high = old[1], old[2], old[3], old[4], old[5]
local new = not n
if new then
  n, sum, m2, low, high = 1, x, 0, ARGV[4], ARGV[4]
else
  n, sum, m2 = tonumber(n), tonumber(sum), tonumber(m2)
  local mean = sum / n
  n, sum = n + 1, sum + x
  m2 = m2 + (x - mean) * (x - sum / n)
  if x < tonumber(low) then low = ARGV[4] end
  if x > tonumber(high) then high = ARGV[4] end
end
local update = {'count', decimal(n), 'sum', decimal(sum), 'm2', decimal(m2), 'min', low, 'max', high}
for i = 6, #fields do
  update[#update + 1] = fields[i]
  update[#update + 1] = decimal((tonumber(old[i]) or 0) + 1)
end
redis.call('HSET', key, unpack(update))

if new then
  local expire_at = (start + (tonumber(ARGV[3]) + 1) * period) * 1000
  redis.call('PEXPIREAT', key, expire_at)
  -- List the context once per period, up to the cap: the listing is what
  -- rankings read, and the cap bounds it whatever names callers invent.
  if #KEYS == 2 and redis.call('SCARD', KEYS[2]) < tonumber(ARGV[8]) then
    redis.call('SADD', KEYS[2], ARGV[7])
    redis.call('PEXPIREAT', KEYS[2], expire_at)
  end
end
return {1, n, decimal(sum), decimal(m2)}
