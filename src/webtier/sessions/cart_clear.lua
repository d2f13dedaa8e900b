-- Empty a session's cart, atomically (a line set meanwhile is not half-kept).
--
-- KEYS[1] = the session (hash; cart lines are the fields k<item>)
-- Returns the number of lines removed.

local removed = 0
for _, name in ipairs(redis.call('HKEYS', KEYS[1])) do
  if #name > 1 and string.byte(name) == 107 then -- 'k'
    removed = removed + redis.call('HDEL', KEYS[1], name)
  end
end
return removed
