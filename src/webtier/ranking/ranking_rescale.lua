-- Rescale the item view ranking once per period: keep the `keep` most viewed
-- items and multiply every count by `factor` (the book halves), so that new
-- favourites can climb past old ones.
--
-- KEYS[1] = the ranking: zset item -> views
-- KEYS[2] = the fence: the start of the last period rescaled in, seconds of
--           the server's clock (string)
-- ARGV[1] = period length, seconds
-- ARGV[2] = keep, the number of most viewed items kept
-- ARGV[3] = factor, in (0, 1]
-- ARGV[4] = ms the ranking lives once views stop (its upkeep's expiry, which
--           the rewrite below would otherwise drop)
-- Returns {done, period start, removed, left, ms to the next period}: done is
-- 1 if this call rescaled, 0 if the period was rescaled already (nothing
-- written).
--
-- Any number of workers may run this at once, at any time: the period is
-- read from the server's clock and compared with the fence inside the
-- script, so exactly one call per period rescales, whatever the workers'
-- clocks say, and a call repeated after a lost reply changes nothing. The
-- fence holds a start time rather than a period number so that a changed
-- interval neither rescales twice nor stops rescaling.

local interval = tonumber(ARGV[1])
local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local start = tonumber(time[1]) - tonumber(time[1]) % interval
local next_ms = (start + interval) * 1000 - now_ms

local last = tonumber(redis.call('GET', KEYS[2]))
if last and last >= start then return {0, start, 0, 0, next_ms} end

-- Ranks count from the least viewed: removing ranks 0 .. -(keep + 1) leaves
-- the `keep` highest counts. (The book's listing stores negative counts and
-- removes the same ranks, so it drops the most viewed instead.)
local removed = redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(tonumber(ARGV[2]) + 1))
if ARGV[3] ~= '1' then
  -- The one set intersected with itself, weighted: every score times factor
  -- (ZINTERSTORE builds the result directly; ZUNIONSTORE goes through a dict).
  redis.call('ZINTERSTORE', KEYS[1], 1, KEYS[1], 'WEIGHTS', ARGV[3])
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
-- The fence is needed until its period is over: two periods bound it.
redis.call('SET', KEYS[2], string.format('%d', start), 'PX', string.format('%d', 2 * interval * 1000))
return {1, start, removed, redis.call('ZCARD', KEYS[1]), next_ms}
