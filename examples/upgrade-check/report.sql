-- a report: tellers whose branch owns a given account (a correlated IN), prepared protocol
\set k random(2, 9)
SELECT count(*) FROM pgbench_tellers t WHERE t.bid IN (SELECT a.bid FROM pgbench_accounts a WHERE a.aid = t.tid * :k);
