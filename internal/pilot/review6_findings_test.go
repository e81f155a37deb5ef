package pilot_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// TestReview6CascadeAddedAfterTheCatalog: the Pilot refers a DELETE or a
// key UPDATE that a foreign key's CASCADE, SET NULL or SET DEFAULT
// answers, but it read those actions with its catalog, once. A foreign
// key added by a migration after that (ON DELETE CASCADE from a new
// table) was unknown to it: DELETE FROM orders WHERE id = 1 ran on the
// compiled path as "1 row affected" and deleted the new table's rows with
// it, in no fence and uncounted (DESIGN.md invariant 5). The guarded
// statement now asks the target's catalog as it runs, on the literal path
// and through a remembered template alike, and such a write refers.
func TestReview6CascadeAddedAfterTheCatalog(t *testing.T) {
	f := newFixture(t)
	f.addBound(t, "orders-w", []byte(`sentence: fix and delete orders
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.orders
    columns: [id, customer_id, status, total_cents, created_at, updated_at]
    max_rows: 500
  - op: update
    table: public.orders
    columns: [id, status]
    max_rows: 5
  - op: delete
    table: public.orders
    max_rows: 5
`))
	// Before the migration: both run, and a template is remembered.
	for _, sql := range []string{
		"DELETE FROM orders WHERE id = 100000",
		"UPDATE orders SET status = status WHERE id = 2",
		"UPDATE orders SET id = id WHERE id = 100000",
	} {
		res, err := f.pilot.Execute(t.Context(), f.request(t, "orders-w", sql))
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != pilot.Executed {
			t.Fatalf("%s: %s %v, want it executed: no foreign key action reaches orders yet", sql, res.Outcome, res.Reasons)
		}
	}
	if _, err := f.pilotConn(t).Exec(t.Context(), `
CREATE TABLE order_notes (id int PRIMARY KEY, order_id bigint REFERENCES orders (id) ON DELETE CASCADE ON UPDATE CASCADE);
INSERT INTO order_notes VALUES (1, 1), (2, 1), (3, 2)`); err != nil {
		t.Fatal(err)
	}
	before := f.pilot.Stats()
	for _, sql := range []string{
		"DELETE FROM orders WHERE id = 1",
		"DELETE FROM orders WHERE id = 2",
		"UPDATE orders SET id = 9001 WHERE id = 3",
	} {
		f.mustRefuse(t, "orders-w", sql, pilot.RefusedCheck, "foreign key", "a foreign key added since the Pilot read its catalog cascades")
	}
	if st := f.pilot.Stats(); st.Templated-before.Templated != 3 {
		t.Errorf("%d of the 3 refused writes ran through their remembered template, want all: the folded statement carries the guard too", st.Templated-before.Templated)
	}
	// The literal path (a rehearsal takes it) carries it as well.
	reh, err := f.pilot.Rehearse(t.Context(), "DELETE FROM orders WHERE id = 1", f.bounds["orders-w"], f.auth("orders-w"), "agent:demo", marque.PathCompiled)
	if err != nil {
		t.Fatal(err)
	}
	if reh.Outcome != pilot.Refused || reh.Code != pilot.RefusedCheck || reh.Reasons[0] != pilot.MessageCascade {
		t.Errorf("a rehearsal of the delete: %s %s %v, want it refused for the foreign key", reh.Outcome, reh.Code, reh.Reasons)
	}
	if n := f.count(t, "SELECT count(*) FROM order_notes"); n != 3 {
		t.Errorf("order_notes holds %d rows, want 3: a cascade the Pilot did not know of ran", n)
	}
	// A write the new key does not answer still runs: a column it does
	// not reference.
	res, err := f.pilot.Execute(t.Context(), f.request(t, "orders-w", "UPDATE orders SET status = 'failed' WHERE id = 3"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Executed || res.RowsAffected != 1 {
		t.Errorf("an update of status: %s %v %d, want it executed", res.Outcome, res.Reasons, res.RowsAffected)
	}
}

// TestReview6ReturningStarBesideFrom: pinning a write target's columns
// (RETURNING * of a table written as itself is the catalog's columns)
// refused RETURNING * beside FROM or USING, which the Pilot ran before:
// UPDATE orders o ... FROM customers c ... RETURNING * is an ordinary
// statement an agent sends. * there is the target's columns, then each
// FROM item's, and each FROM item is already the rule's columns (a
// subquery, or a function's own), so * is now written out as the
// catalog's columns of the target followed by item.* of each FROM item,
// which returns what it returned before; a column added since the
// catalog was read is still not in it. A join with USING or NATURAL
// without an alias (whose * merges columns that item.* would repeat)
// still refuses, saying what to write instead.
func TestReview6ReturningStarBesideFrom(t *testing.T) {
	f := newFixture(t)
	f.addBound(t, "orders-from", []byte(`sentence: fix orders of listed customers
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.customers
    columns: [id, name, email, region, updated_at]
    max_rows: 500
  - op: select
    table: public.orders
    columns: [id, customer_id, status, total_cents, created_at, updated_at]
    max_rows: 500
  - op: update
    table: public.orders
    columns: [status]
    max_rows: 5
  - op: delete
    table: public.orders
    max_rows: 5
`))
	if _, err := f.pilotConn(t).Exec(t.Context(), `ALTER TABLE orders ADD COLUMN secret text DEFAULT 'SECRET'`); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		sql  string
		cols []string
	}{
		{"UPDATE orders o SET status = 'failed' FROM customers c WHERE c.id = o.customer_id AND o.id = 3 RETURNING *",
			[]string{"id", "customer_id", "status", "total_cents", "created_at", "updated_at", "id", "name", "email", "region", "updated_at"}},
		{"UPDATE orders SET status = 'failed' FROM generate_series(1, 1) g, customers WHERE customers.id = orders.customer_id AND orders.id = 3 RETURNING *",
			[]string{"id", "customer_id", "status", "total_cents", "created_at", "updated_at", "g", "id", "name", "email", "region", "updated_at"}},
		{"UPDATE orders o SET status = 'failed' FROM (SELECT id AS cid FROM customers) s WHERE s.cid = o.customer_id AND o.id = 3 RETURNING o.id, *",
			[]string{"id", "id", "customer_id", "status", "total_cents", "created_at", "updated_at", "cid"}},
		{"DELETE FROM orders o USING customers c WHERE c.id = o.customer_id AND o.id = 2 RETURNING *",
			[]string{"id", "customer_id", "status", "total_cents", "created_at", "updated_at", "id", "name", "email", "region", "updated_at"}},
	}
	for _, c := range cases {
		res, err := f.pilot.Execute(t.Context(), f.request(t, "orders-from", c.sql))
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		if res.Outcome != pilot.Executed || res.RowsAffected != 1 || len(res.Rows) != 1 {
			t.Errorf("%s: %s %v affected %d, want it executed", c.sql, res.Outcome, res.Reasons, res.RowsAffected)
			continue
		}
		if len(res.Columns) != len(c.cols) {
			t.Errorf("%s: columns %v, want %d of them (%v)", c.sql, res.Columns, len(c.cols), c.cols)
		}
		for i, col := range res.Columns {
			if i < len(c.cols) && !strings.HasPrefix(col, c.cols[i]) {
				t.Errorf("%s: column %d is %s, want %s", c.sql, i, col, c.cols[i])
			}
		}
		if strings.Contains(fmt.Sprint(res.Columns, res.Rows), "SECRET") || strings.Contains(fmt.Sprint(res.Columns), "secret") {
			t.Errorf("%s: a column no rule lists came back: %v %v", c.sql, res.Columns, res.Rows)
		}
	}
	f.mustRefuse(t, "orders-from", "UPDATE orders o SET status = 'failed' FROM customers c JOIN customers d USING (id) WHERE c.id = o.customer_id AND o.id = 3 RETURNING *",
		"", "name the columns", "RETURNING * beside an unaliased join with USING, saying what to write")
}

// TestCascadeOnAPartitionAddedAfterTheCatalog: the run-time question also
// covers the tables under the target. A partition that gains a foreign key
// of its own with ON DELETE CASCADE after the Pilot read its catalog makes
// an UPDATE that moves a row out of it a delete there, with the cascade;
// the same statement ran before the key was added.
func TestCascadeOnAPartitionAddedAfterTheCatalog(t *testing.T) {
	f := newFixture(t)
	f.withSchema(t, `
CREATE TABLE parts (id int, region text, v text, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE parts_eu PARTITION OF parts FOR VALUES IN ('EU');
CREATE TABLE parts_us PARTITION OF parts FOR VALUES IN ('US');
CREATE TABLE leaf_ref (id int PRIMARY KEY, pid int, preg text);
INSERT INTO parts VALUES (1, 'EU', 'a'), (2, 'EU', 'b');
INSERT INTO leaf_ref VALUES (1, 2, 'EU');`)
	f.addBound(t, "parts", []byte(`sentence: move parts
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.parts
    columns: [id, region, v]
    max_rows: 10
  - op: update
    table: public.parts
    columns: [region, v]
    max_rows: 1
`))
	res, err := f.pilot.Execute(t.Context(), f.request(t, "parts", "UPDATE parts SET region = 'US' WHERE id = 1"))
	if err != nil || res.Outcome != pilot.Executed {
		t.Fatalf("before the key: %+v %v, want it executed", res, err)
	}
	if _, err := f.pilotConn(t).Exec(t.Context(), `ALTER TABLE leaf_ref ADD FOREIGN KEY (pid, preg) REFERENCES parts_eu (id, region) ON DELETE CASCADE`); err != nil {
		t.Fatal(err)
	}
	f.mustRefuse(t, "parts", "UPDATE parts SET region = 'US' WHERE id = 2", pilot.RefusedCheck, "foreign key",
		"moving the row deletes it from a partition whose new foreign key cascades")
	if n := f.count(t, "SELECT count(*) FROM leaf_ref"); n != 1 {
		t.Errorf("the cascade from the partition deleted leaf_ref rows: %d of 1 left", n)
	}
	// Like the catalog's check, the question does not look at which
	// columns the update writes: any UPDATE of the partitioned table
	// refers while such a key exists (docs/security.md, Guards).
	f.mustRefuse(t, "parts", "UPDATE parts SET v = 'c' WHERE id = 2", pilot.RefusedCheck, "foreign key",
		"an update of a partitioned table with a partition whose foreign key cascades refers")
}
