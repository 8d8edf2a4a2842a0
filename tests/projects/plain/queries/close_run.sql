-- Closes a run under the job lock.
UPDATE invoice_runs SET status = 'closed' WHERE period = $1;
