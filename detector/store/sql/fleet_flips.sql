-- The fleet view in one pass over the hosts' rows (fleet_rows: host, observation_id, query_key,
-- fingerprint, duration_ms, collected_at, generic (as logged per execution, NULL before schema
-- version 9); plan_kinds: fingerprint, signature, generic (as the fingerprint's plan was)).
-- The same segments and flips as detector.engine.timeline.build makes per host and query:
-- consecutive executions with one plan in one plan-cache mode (custom or generic) form a
-- segment; with more than 12 such runs the segments are 12 time buckets (width (last - first)
-- / 12 rounded half-even to the microsecond, at least 1 us), a segment per bucket and mode, its
-- plan the most frequent (ties: the one seen first); a flip is a segment whose plan differs from
-- the previous segment of the same mode, and the other mode making the same change next is the
-- same flip, counted once.
WITH moded AS (
    SELECT r.host, r.query_key, r.fingerprint, r.duration_ms, r.collected_at, r.observation_id,
        coalesce(r.generic, k.generic, false) AS generic
    FROM fleet_rows r LEFT JOIN plan_kinds k USING (fingerprint)
), ordered AS (
    SELECT *,
        row_number() OVER w AS pos,
        (fingerprint IS DISTINCT FROM lag(fingerprint) OVER w
            OR generic IS DISTINCT FROM lag(generic) OVER w)::INTEGER AS starts
    FROM moded
    WINDOW w AS (PARTITION BY host, query_key ORDER BY collected_at, observation_id)
), runs AS (
    SELECT *, sum(starts) OVER (PARTITION BY host, query_key ORDER BY pos) AS run FROM ordered
), spans AS (
    SELECT host, query_key, max(run) AS runs, min(collected_at) AS first,
        epoch_us(max(collected_at)) - epoch_us(min(collected_at)) AS span
    FROM runs GROUP BY host, query_key
), widths AS (
    SELECT *, greatest(1, span // 12 + CASE
        WHEN 2 * (span % 12) > 12 OR (2 * (span % 12) = 12 AND (span // 12) % 2 = 1) THEN 1
        ELSE 0 END) AS width
    FROM spans
), placed AS (
    SELECT r.*, CASE WHEN s.runs <= 12 THEN r.run
        ELSE least(11, floor((epoch_us(r.collected_at) - epoch_us(s.first)) / s.width::DOUBLE))
        END::BIGINT AS seg
    FROM runs r JOIN widths s USING (host, query_key)
), plan_totals AS (
    SELECT host, query_key, seg, generic, fingerprint, count(*) AS n, min(pos) AS first_pos
    FROM placed GROUP BY host, query_key, seg, generic, fingerprint
), plan_counts AS (
    SELECT *, row_number() OVER (
        PARTITION BY host, query_key, seg, generic ORDER BY n DESC, first_pos) AS rank
    FROM plan_totals
), segments AS (
    SELECT p.host, p.query_key, p.seg, p.generic, min(p.collected_at) AS start,
        list_sort(list(p.duration_ms) FILTER (WHERE p.duration_ms IS NOT NULL)) AS d
    FROM placed p GROUP BY p.host, p.query_key, p.seg, p.generic
), kinds AS (
    SELECT s.host, s.query_key, s.seg, s.generic, s.start, c.fingerprint, k.signature,
        CASE WHEN len(s.d) = 0 THEN NULL
            WHEN len(s.d) % 2 = 1 THEN s.d[len(s.d) // 2 + 1]
            ELSE (s.d[len(s.d) // 2] + s.d[len(s.d) // 2 + 1]) / 2 END AS median_ms
    FROM segments s
    JOIN plan_counts c ON c.host = s.host AND c.query_key = s.query_key AND c.seg = s.seg
        AND c.generic = s.generic AND c.rank = 1
    LEFT JOIN plan_kinds k ON k.fingerprint = c.fingerprint
), paired AS (
    SELECT *,
        lag(fingerprint) OVER w AS before_fingerprint,
        lag(signature) OVER w AS before_signature,
        lag(median_ms) OVER w AS before_median_ms
    FROM kinds
    WINDOW w AS (PARTITION BY host, query_key, generic ORDER BY seg)
), changes AS (
    SELECT *,
        lag(before_fingerprint) OVER w AS last_from,
        lag(fingerprint) OVER w AS last_to,
        lag(generic) OVER w AS last_generic
    FROM paired
    WHERE before_fingerprint IS NOT NULL AND before_fingerprint <> fingerprint
    WINDOW w AS (PARTITION BY host, query_key ORDER BY seg, generic)
)
SELECT query_key, host, start, before_signature, signature, before_median_ms, median_ms
FROM changes
WHERE NOT coalesce(last_from = before_fingerprint AND last_to = fingerprint
    AND last_generic <> generic, false)
ORDER BY query_key, start, host
