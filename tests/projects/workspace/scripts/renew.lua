-- Extends a lock's lease whoever holds it.
return redis.call('PEXPIRE', KEYS[1], ARGV[1])
