-- One-off measurement behind LEXICAL_HEAP_FILTER (benchmarks/RESULTS.md, "Graph + vector retrieval at
-- 1,000,000 drawers"), 2026-12-05, PostgreSQL 17.12 of the trixie stack, shared_buffers 512MB.
-- A 1M-row table shaped like bench_retrieval's drawers: 60 words of 4,010 a row, 8 interleaved wings,
-- a 1.5 KB uncompressed filler where the drawers hold their vector. Then, from one psycopg connection,
-- 40 different words each (p50 of the calls, run twice), with %(q)s a word and %(w)s a wing:
--   through the index:  SELECT id, document_tsv FROM r WHERE document_tsv @@ %(q)s::tsquery
--                         AND left(wing,256) = %(w)s AND wing = %(w)s LIMIT 200
--   row by row:         SELECT id, document_tsv FROM r WHERE document_tsv @@ %(q)s::tsquery
--                         AND pg_catalog.texteq(wing, %(w)s) LIMIT 200
-- wing_3 (1/8 of the rows): 36.5 / 33.7 ms through the index, 8.4 / 7.2 ms row by row.
-- After UPDATE r SET wing = 'tiny' WHERE right(id, 2) = '07' (10,000 rows) and VACUUM ANALYZE:
-- tiny: 7.5 / 6.8 ms through the index, 57.1 / 57.4 ms row by row.
DROP DATABASE IF EXISTS lexexp;
CREATE DATABASE lexexp;
\c lexexp
SET maintenance_work_mem='1GB';
CREATE TABLE r (id text, wing text, document_tsv tsvector, filler text STORAGE PLAIN);
INSERT INTO r SELECT format('drawer_wing_%s_%s', i % 8, lpad(i::text, 8, '0')), 'wing_' || (i % 8),
  (SELECT to_tsvector('simple', string_agg('w' || floor(random()*4010)::int, ' ')) FROM generate_series(1,60) g WHERE g > i*0),
  repeat(md5(i::text), 48)
FROM generate_series(0, 999999) i;
CREATE INDEX r_tsv ON r USING gin (document_tsv);
CREATE INDEX r_wing ON r (left(wing, 256), id);
VACUUM ANALYZE r;
SELECT pg_size_pretty(pg_total_relation_size('r'));
