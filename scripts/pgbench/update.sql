-- make bench: the single-row UPDATE of the benchmark (internal/bench,
-- StatementForm), a new literal in every statement, rows inside the
-- benchmark delegation's fence (the demo's orders 51 to 240).
\set id random(51, 240)
\set lit random(1000000000000, 9000000000000000000)
UPDATE orders SET updated_at = now() WHERE id = :id AND total_cents <> :lit;
