-- three accounts in one round trip (an application's batch lookup), simple protocol
\set a random(1, 200000)
\set b random(1, 200000)
\set c random(1, 200000)
SELECT aid, abalance FROM pgbench_accounts WHERE aid = :a OR aid = :b OR aid = :c;
