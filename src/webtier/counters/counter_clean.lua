-- One cleanup step over some counters of one shard: drop slices older than
-- each precision's cutoff, and unlist counters that hold no data at all.
--
-- KEYS[1]                 = the shard's index (zset of counter names)
-- KEYS[1 + (n-1)*P + i]   = hash of precision i of counter n
-- ARGV[1]                 = P, the number of precisions
-- ARGV[1 + i]             = cutoff of precision i: slices starting at or before it go;
--                           '-' when precision i is not due this pass
-- ARGV[1 + P + n]         = name of counter n
-- Returns {slices dropped, counters unlisted}.
--
-- Running as one script makes "unlist only if still empty" atomic: a writer
-- cannot add a slice between the check and the ZREM. Safe to run from any
-- number of cleaners at once: every step is idempotent.

local P = tonumber(ARGV[1])
local dropped, unlisted = 0, 0
for n = 1, #ARGV - 1 - P do
  local empty = true
  for i = 1, P do
    local key = KEYS[1 + (n - 1) * P + i]
    local cutoff = ARGV[1 + i]
    if cutoff ~= '-' then
      cutoff = tonumber(cutoff)
      local stale = {}
      for _, field in ipairs(redis.call('HKEYS', key)) do
        if tonumber(field) <= cutoff then stale[#stale + 1] = field end
      end
      -- HDEL in chunks: unpack() is bounded by Lua's stack.
      for from = 1, #stale, 1000 do
        redis.call('HDEL', key, unpack(stale, from, math.min(from + 999, #stale)))
      end
      dropped = dropped + #stale
    end
    if empty and redis.call('EXISTS', key) == 1 then empty = false end
  end
  if empty then unlisted = unlisted + redis.call('ZREM', KEYS[1], ARGV[1 + P + n]) end
end
return {dropped, unlisted}
