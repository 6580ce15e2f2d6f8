-- Floor of lua/token_bucket.lua: its Redis commands on a cost-1 allow (TIME,
-- HMGET of the bucket, HSET of the new state, PEXPIREAT when the window
-- starts) and the contract's reply, with no option checks and no arithmetic.
local time = redis.call('TIME')
local state = redis.call('HMGET', KEYS[1], 'b', 'r', 't', 'e')
redis.call('HSET', KEYS[1], 'b', ARGV[3], 'r', ARGV[1], 't', time[1], 'e', time[1])
if not state[1] then
  redis.call('PEXPIREAT', KEYS[1], time[1] * 1000 + ARGV[2] * 1000)
end
return {'allow', {ARGV[1], ARGV[2], ARGV[1]}}
