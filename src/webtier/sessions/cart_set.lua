-- Set the count of one item in a session's cart (count <= 0 removes it).
--
-- KEYS[1] = the session (hash; cart lines are the fields k<item> -> count)
-- ARGV[1] = item, ARGV[2] = count, ARGV[3] = most lines per cart
-- Returns {1} when done, {0} when there is no session, {-1, lines} when the
-- item would be a line beyond the limit (nothing written).
--
-- Cart lines live in the session's own hash: they expire and are deleted
-- with it, so a cart can never outlive its session.

local key, field, count = KEYS[1], 'k' .. ARGV[1], tonumber(ARGV[2])
if redis.call('EXISTS', key) == 0 then return {0} end
if count <= 0 then
  redis.call('HDEL', key, field)
  return {1}
end
if redis.call('HEXISTS', key, field) == 0 then
  local lines = 0
  for _, name in ipairs(redis.call('HKEYS', key)) do
    if #name > 1 and string.byte(name) == 107 then lines = lines + 1 end -- 'k'
  end
  if lines >= tonumber(ARGV[3]) then return {-1, lines} end
end
redis.call('HSET', key, field, count)
return {1}
