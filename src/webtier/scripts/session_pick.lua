-- Read what the cleaner needs of one shard, in one call: the server's time,
-- the number of sessions, and the last-seen scores of the oldest ones.
--
-- KEYS[1] = the shard's recency index (zset token -> last seen, server µs)
-- ARGV[1] = how many of the oldest scores to return
-- Returns {seconds, microseconds, sessions, score 1, score 2, ...}, oldest
-- first: scores only (whole µs, as Redis writes them), no tokens, so a pick
-- moves few bytes. The scores stay text: converting them here would cost
-- the server a parse each, the one busy process of the pair.

local time = redis.call('TIME')
local reply = {tonumber(time[1]), tonumber(time[2]), redis.call('ZCARD', KEYS[1])}
local page = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
for i = 2, #page, 2 do reply[#reply + 1] = page[i] end
return reply
