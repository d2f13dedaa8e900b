-- Merge a batch of values of one (context, type), summed in process, into
-- the record of the current period, atomically, in one slot. After
-- stats_prelude.lua (server_period, created).
--
-- KEYS[1] = the record of (context, type) for the period starting at ARGV[2]: hash
--           count, sum, m2 (sum of squared deviations), min, max, errors,
--           and one field per histogram bucket (as stats_record.lua)
-- KEYS[2] = (ranked types only) the shard's contexts of that type and period: set
-- ARGV[1] = period length, seconds
-- ARGV[2] = the start of the period the caller expects (from its own clock)
-- ARGV[3] = complete periods kept besides the current one
-- ARGV[4] = the batch's count of values (>= 1)
-- ARGV[5] = the batch's sum, as a decimal that reads back as the same double
-- ARGV[6] = the batch's m2, likewise
-- ARGV[7] = the batch's smallest value, likewise
-- ARGV[8] = the batch's largest value, likewise
-- ARGV[9] = how many of the batch's values come from failures (errors)
-- ARGV[10] = (ranked) the context, listed in KEYS[2]; else ''
-- ARGV[11] = (ranked) the most contexts KEYS[2] lists; else ''
-- ARGV[12..] = histogram bucket, count of the batch's values in it, ...
--              (none without histograms)
-- Returns {1, count, sum, m2} once merged, or {0, start} without writing
-- anything when the server's clock puts now in the period starting at
-- `start`: the caller sends again with that period's keys.
--
-- The period is decided as in stats_record.lua: by the server's clock, when
-- the batch arrives. The batch's mean and m2 join the record's with the
-- parallel formula of Chan, Golub and LeVeque, m2 = m2a + m2b + d^2 na nb /
-- (na + nb) where d is the difference of the two means: as exact as adding
-- the values one by one (Welford), with no sum of squares to cancel.

local period = tonumber(ARGV[1])
local start = server_period(period)
if start ~= tonumber(ARGV[2]) then return {0, start} end

local key = KEYS[1]
local nb, sb, m2b = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local na, sa, m2a, low, high = unpack(redis.call('HMGET', key, 'count', 'sum', 'm2', 'min', 'max'))
local n, sum, m2
if na then
  na, sa = tonumber(na), tonumber(sa)
  n, sum = na + nb, sa + sb
  local d = sb / nb - sa / na
  m2 = tonumber(m2a) + m2b + d * d * na * nb / n
  if tonumber(ARGV[7]) < tonumber(low) then redis.call('HSET', key, 'min', ARGV[7]) end
  if tonumber(ARGV[8]) > tonumber(high) then redis.call('HSET', key, 'max', ARGV[8]) end
else
  n, sum, m2 = nb, sb, m2b
  -- The summary fields first, as stats_record.lua writes them: finding them
  -- in a listpack of many buckets stays cheap.
  redis.call('HSET', key, 'count', 0, 'sum', 0, 'm2', 0, 'min', ARGV[7], 'max', ARGV[8])
end
-- 17 significant digits read back as the same double (tostring keeps 14).
sum, m2 = string.format('%.17g', sum), string.format('%.17g', m2)
redis.call('HSET', key, 'count', string.format('%d', n), 'sum', sum, 'm2', m2)
for i = 12, #ARGV, 2 do
  redis.call('HINCRBY', key, ARGV[i], ARGV[i + 1])
end
if ARGV[9] ~= '0' then redis.call('HINCRBY', key, 'errors', ARGV[9]) end

if not na then
  created(key, start, period, tonumber(ARGV[3]), KEYS[2], ARGV[10], tonumber(ARGV[11]))
end
return {1, n, sum, m2}
