-- Releases the lock by deleting it.
return redis.call('DEL', KEYS[1])
