DELETE FROM job_locks WHERE name = $1;
