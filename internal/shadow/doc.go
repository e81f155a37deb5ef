// Package shadow answers catalog queries over a catalog drawn from an
// agent's bound (DESIGN.md invariant 10, docs/pgwire.md).
//
// A shadow is a private, schema-only PostgreSQL server that the node
// controls, never the target. For each Spec (a principal, a target, and
// what that principal's delegations in force name on it) a server is
// started on first use from the local server binaries (internal/pgtmp,
// which drops root), listening on a Unix socket alone in a directory
// only its user may enter. It holds one database, named as the target
// (what current_database() answers; template0, template1 and postgres
// are dropped, so pg_database lists the target alone), with exactly
// what the bound names: its schemas, its tables, the listed columns with
// their types (a type PostgreSQL does not have built in becomes text, as
// the wire front describes such columns), NOT NULL where the target has
// it, and the primary keys, unique constraints and unique indexes whose
// columns are all listed and whose definition is plain columns. No row
// is ever written. The principal is a role with the bound's privileges
// on those columns (SELECT, INSERT, UPDATE by column; DELETE), so
// information_schema and has_*_privilege answer from the bound.
//
// Why a server per Spec, not a database per Spec in one server: the
// agent must see its target's name as current_database(), and a server
// has one database of a name; pg_database is shared by every database of
// a server and would list other agents' bounds. A server takes about
// 40 MB of disk; MaxServers and IdleStop bound how many run.
//
// # Template
//
// initdb is most of a fresh server's start, so a Manager runs it once, on
// first use, into a template cluster (pgtmp.NewTemplate), and each server
// starts from a copy of its data directory (owned by the server's user,
// modes kept) instead. The template holds what no bound changes: the
// blocked functions' execution and the public schema's CREATE revoked
// from PUBLIC, the postgres database closed to PUBLIC and without
// initdb's comment, template0 dropped. Each server then renames postgres
// to the target, fills it, and drops template1. The template is made
// before any Spec is seen and is never started again, so every server
// starts from the same bytes and nothing of one bound reaches another
// through it (TestNoBoundInTemplate); it is removed by Close. Measured
// with BenchmarkStart on a 2-core VM shared with other work: a server
// from the template, to its first answer, 0.45 to 0.50 s (from initdb,
// before the template, 1.3 to 1.7 s on the same machine and hour); a
// Manager's first server, template included (BenchmarkStartCold), 1.8 to
// 2.1 s.
//
// # Invariants
//
//   - A Spec is computed from the signed bounds and the target catalog,
//     keeping only what the bounds list, so two targets that differ only
//     outside the bound give equal Specs, and equal Specs give
//     byte-identical answers (TestTwins). A change of the delegations in
//     force that changes what they name changes Spec.Key, and with it
//     the server: nothing of an earlier bound survives in a later one.
//   - A catalog statement is one SELECT over catalog relations only
//     (Check), run as the unprivileged role in a READ ONLY transaction
//     under a statement timeout, with its answer capped in rows and
//     bytes. Functions that reach outside the catalog (files, other
//     servers, large objects, text run as SQL, sleeps, settings) are
//     refused by Check and their execution revoked from PUBLIC in the
//     shadow. Nothing is read of the target.
package shadow
