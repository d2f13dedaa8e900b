-- Release a page's render lock, if the caller still holds it.
--
-- KEYS[1] = the page's render lock
-- ARGV[1] = the token the lock was taken with
-- Returns 1 if released, 0 if the lock was gone or another's.

if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
