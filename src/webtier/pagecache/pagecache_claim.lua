-- Take the render of a page that is missing or stale, so that concurrent
-- requests (in any process) wait for one render instead of stampeding.
--
-- KEYS[1] = the page's cached copy
-- KEYS[2] = the page's render lock (holds the holder's token, with a lease)
-- KEYS[3] = the shard's generation: a random value each invalidation sets
--           (with a TTL); '0' when there is none
-- ARGV[1] = 'miss': return the copy if there is one now (stored since the
--           caller looked); 'stale': the caller has a stale copy, take the
--           render regardless
-- ARGV[2] = the caller's token
-- ARGV[3] = lease (ms) of the lock: a holder that dies frees it then
-- Returns {'hit', copy} | {'render', generation} | {'wait', ms left on the lease}.

if ARGV[1] == 'miss' then
  local copy = redis.call('GET', KEYS[1])
  if copy then return {'hit', copy} end
end
-- The lock may be the caller's own: a claim sent again after its reply was
-- lost (it is idempotent) must render, not wait for itself.
if redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[3])
    or redis.call('GET', KEYS[2]) == ARGV[2] then
  return {'render', redis.call('GET', KEYS[3]) or '0'}
end
return {'wait', redis.call('PTTL', KEYS[2])}
