-- make bench: the single-row SELECT by key (internal/bench, ReadForm), a
-- new literal in every statement.
\set id random(51, 240)
\set lit random(1000000000000, 9000000000000000000)
SELECT id, total_cents FROM orders WHERE id = :id AND total_cents <> :lit;
