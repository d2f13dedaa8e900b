-- Store a rendered page (or a note that it cannot be stored) and release the
-- render lock, unless an invalidation or another render came in between.
--
-- KEYS[1] = the page's cached copy
-- KEYS[2] = the page's render lock
-- KEYS[3] = the shard's generation (see pagecache_claim.lua)
-- KEYS[4] = the shard's page index: zset digest -> expiry (ms)
-- KEYS[5] = the item's page set: zset digest -> expiry (ms); ignored if ARGV[7] is '0'
-- ARGV[1] = the token the lock was taken with
-- ARGV[2] = the generation the claim returned
-- ARGV[3] = the copy to store
-- ARGV[4] = how long the copy lives (ms): fresh time plus grace
-- ARGV[5] = most pages one item may have cached
-- ARGV[6] = the page's digest
-- ARGV[7] = '1' if the page belongs to an item
-- Returns 'stored' | 'fenced' (lock lost or an invalidation came first) | 'full'.

local held = redis.call('GET', KEYS[2]) == ARGV[1]
if held then redis.call('DEL', KEYS[2]) end
if not held or (redis.call('GET', KEYS[3]) or '0') ~= ARGV[2] then return 'fenced' end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local life = tonumber(ARGV[4])
local expires = string.format('%d', now + life)
local digest = ARGV[6]

local function note(index)
  redis.call('ZREMRANGEBYSCORE', index, '-inf', now)
  redis.call('ZADD', index, expires, digest)
  if redis.call('PTTL', index) < life then redis.call('PEXPIRE', index, life) end
end

if ARGV[7] == '1' then
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
  if not redis.call('ZSCORE', KEYS[5], digest)
      and redis.call('ZCARD', KEYS[5]) >= tonumber(ARGV[5]) then
    return 'full'
  end
  note(KEYS[5])
end
note(KEYS[4])
redis.call('SET', KEYS[1], ARGV[3], 'PX', life)
return 'stored'
