-- Read what the cleaner needs of one shard, in one call: how many sessions
-- it holds, how many are stale, and the last-seen scores of its oldest.
--
-- KEYS[1] = the shard's recency index (zset token -> last seen, server µs)
-- ARGV[1] = age, µs: a session last seen longer ago than this is stale
-- ARGV[2] = page: how many of the oldest sessions the cleaner considers
-- ARGV[3] = 'all': every score of the page; 'sample': the scores at a few
--           ranks of it (cheaper: the server formats each score it returns,
--           which costs about as much as removing the session)
-- Returns {cutoff, sessions, stale, ...}: the server's time less the age
-- (µs), the number of sessions, how many score below the cutoff; then,
-- oldest first, for 'all' the page's scores, for 'sample' pairs of rank and
-- score at ranks 0-4, then each about half again the last, and the page's
-- last rank. Scores stay text, as Redis writes them (whole µs): converting
-- them here would cost the server a parse each.

local recent, age, page, mode = KEYS[1], ARGV[1] + 0, ARGV[2] + 0, ARGV[3]
local time = redis.call('TIME')
local cutoff = string.format('%d', time[1] * 1000000 + time[2] - age)
local sessions = redis.call('ZCARD', recent)
local reply = {cutoff, sessions, redis.call('ZCOUNT', recent, '-inf', '(' .. cutoff)}
local last = math.min(page, sessions) - 1
if mode == 'all' then
  local scores = redis.call('ZRANGE', recent, 0, last, 'WITHSCORES')
  for i = 2, #scores, 2 do reply[#reply + 1] = scores[i] end
  return reply
end
local dense = redis.call('ZRANGE', recent, 0, math.min(4, last), 'WITHSCORES')
for i = 2, #dense, 2 do
  reply[#reply + 1] = i / 2 - 1
  reply[#reply + 1] = dense[i]
end
local rank = 4
while rank < last do
  rank = math.min(math.floor(rank * 1.5), last)
  reply[#reply + 1] = rank
  reply[#reply + 1] = redis.call('ZRANGE', recent, rank, rank, 'WITHSCORES')[2]
end
return reply
