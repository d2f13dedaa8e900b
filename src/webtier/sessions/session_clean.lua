-- Remove the oldest sessions of one shard, up to a last-seen score read
-- earlier: the choice and the delete are one atomic step.
--
-- KEYS[1] = the shard's recency index (zset token -> last seen, server µs)
-- KEYS[2] = the shard's session key prefix, '<prefix>:{s:<shard>}:t:': a
--           session's key is it and its token. The sessions are found here
--           by their index entries, so their keys are built from it; the
--           prefix holds the shard's hash tag, so every one is in this slot.
-- ARGV[1] = the highest last-seen score to remove
-- ARGV[2] = the most sessions to remove
-- Returns how many sessions it removed.
--
-- Race-free: a touch (or a new session, or a login) gives its session a
-- score above every score of the shard (session_touch.lua). A session
-- touched after the cleaner read ARGV[1] therefore scores above it and is
-- not removed; one not touched since is removed whole, with its viewed
-- items and cart (fields of the same hash). Several cleaners may run at
-- once: what one removed, another does not find. The users' indexes are
-- hints, pruned when read: a removal does not need to reach them.

local tokens = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local keys = {}
for i, token in ipairs(tokens) do keys[i] = KEYS[2] .. token end
-- In chunks: unpack() is bounded by Lua's stack.
for from = 1, #keys, 1000 do
  redis.call('DEL', unpack(keys, from, math.min(from + 999, #keys)))
end
-- They are the lowest ranks of the index (nothing ran in between): one
-- range removal instead of a lookup per token.
if #tokens > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, #tokens - 1) end
return #tokens
