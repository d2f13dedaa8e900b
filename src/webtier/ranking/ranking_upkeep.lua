-- Keep the item view ranking bounded with no worker running: trim it when
-- it holds more than twice its keep limit, and let it expire when views
-- stop. Sent with every 64th view a process counts (and at least every
-- eighth of the expiry), so the ranking never holds much more than twice
-- `keep` items between two rescales, whoever counts the views.
--
-- KEYS[1] = the ranking: zset item -> views
-- ARGV[1] = keep: the most viewed items a trim keeps (RankingSettings.keep)
-- ARGV[2] = ms the ranking lives after the last upkeep (views stopped)
-- Returns the number of items trimmed.
--
-- One script so that the size test and the trim see the same set: two
-- processes trimming at once remove the same low ranks once.

local keep = ARGV[1] + 0
local removed = 0
if redis.call('ZCARD', KEYS[1]) > 2 * keep then
  -- Ranks count from the least viewed: this leaves the `keep` highest counts.
  removed = redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(keep + 1))
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return removed
