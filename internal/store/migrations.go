package store

// Migration is one forward-only change to the control store's schema.
type Migration struct {
	// Version orders migrations. Versions start at 1 and are consecutive.
	Version int
	// Name says what the migration is for, e.g. "logbook".
	Name string
	// SQL is run as one script in one transaction. It may hold several
	// statements separated by semicolons.
	SQL string
}

// Migrations is the control store's schema, oldest first.
//
// To change the schema, append a Migration with the next Version. Never edit,
// remove or reorder a migration once it has been applied anywhere: Open
// records a checksum of each applied migration and refuses a database whose
// history does not match this list.
//
// The SQL here is SQLite's dialect. Keep it close to portable SQL (the
// PostgreSQL store will carry its own list with the same versions): TEXT,
// INTEGER, explicit PRIMARY KEYs; avoid SQLite-only column affinities.
var Migrations = []Migration{
	{
		Version: 1,
		Name:    "logbook",
		SQL: `
CREATE TABLE logbook_entries (
	seq       INTEGER PRIMARY KEY,   -- 1-based, gapless
	time_ns   INTEGER NOT NULL,      -- Unix nanoseconds, UTC
	kind      TEXT    NOT NULL,
	subjects  TEXT    NOT NULL,      -- canonical JSON object, string to string
	payload   TEXT    NOT NULL,      -- canonical JSON
	prev_hash BLOB    NOT NULL,      -- SHA-256, 32 bytes
	hash      BLOB    NOT NULL       -- SHA-256, 32 bytes
);

-- Derived index for "every entry about request X". Not covered by the hash
-- chain; it can be rebuilt from logbook_entries.subjects.
CREATE TABLE logbook_subjects (
	key   TEXT    NOT NULL,
	value TEXT    NOT NULL,
	seq   INTEGER NOT NULL, -- logbook_entries.seq; no FOREIGN KEY: a lookup per row on the hot path, and only the writer inserts here
	PRIMARY KEY (key, value, seq)
) WITHOUT ROWID; -- SQLite: one b-tree instead of a table plus its key index

CREATE TABLE logbook_checkpoints (
	size    INTEGER PRIMARY KEY,     -- entries covered: seq 1..size
	hash    TEXT    NOT NULL,        -- hex chain head hash at size
	time_ns INTEGER NOT NULL,
	note    TEXT    NOT NULL         -- C2SP signed note
);

-- Append-only against mistakes in our own code. An attacker with the file
-- drops these; the hash chain and exported checkpoints are what catch that.
CREATE TRIGGER logbook_entries_no_update BEFORE UPDATE ON logbook_entries
BEGIN SELECT RAISE(ABORT, 'logbook entries are append-only'); END;
CREATE TRIGGER logbook_entries_no_delete BEFORE DELETE ON logbook_entries
BEGIN SELECT RAISE(ABORT, 'logbook entries are append-only'); END;
CREATE TRIGGER logbook_subjects_no_update BEFORE UPDATE ON logbook_subjects
BEGIN SELECT RAISE(ABORT, 'logbook subjects are append-only'); END;
CREATE TRIGGER logbook_subjects_no_delete BEFORE DELETE ON logbook_subjects
BEGIN SELECT RAISE(ABORT, 'logbook subjects are append-only'); END;
CREATE TRIGGER logbook_checkpoints_no_update BEFORE UPDATE ON logbook_checkpoints
BEGIN SELECT RAISE(ABORT, 'logbook checkpoints are append-only'); END;
CREATE TRIGGER logbook_checkpoints_no_delete BEFORE DELETE ON logbook_checkpoints
BEGIN SELECT RAISE(ABORT, 'logbook checkpoints are append-only'); END;
`,
	},
	{
		Version: 2,
		Name:    "gateway",
		SQL: `
CREATE TABLE delegations (
	id         TEXT    PRIMARY KEY,  -- derived from the signed canonical bytes
	target     TEXT    NOT NULL,
	grantee    TEXT    NOT NULL,
	signer     TEXT    NOT NULL,
	canonical  TEXT    NOT NULL,     -- the signed bytes
	signature  TEXT    NOT NULL,     -- armored sshsig
	source     TEXT    NOT NULL,
	created_ns INTEGER NOT NULL,
	revoked_ns INTEGER,
	revoked_by TEXT,
	revocation TEXT                  -- the signed revocation, armored
);
CREATE INDEX delegations_grantee ON delegations (grantee, target);

CREATE TABLE requests (
	id            TEXT    PRIMARY KEY,
	principal     TEXT    NOT NULL,
	target        TEXT    NOT NULL,
	sql           TEXT    NOT NULL,  -- as submitted: untrusted
	canonical     TEXT    NOT NULL,
	outcome       TEXT    NOT NULL,
	status        TEXT    NOT NULL,
	path          TEXT    NOT NULL DEFAULT '',
	delegation_id TEXT    NOT NULL DEFAULT '',
	rule          INTEGER,
	reasons       TEXT    NOT NULL,  -- JSON array of strings
	marque_id     TEXT    NOT NULL DEFAULT '',
	txid          TEXT    NOT NULL DEFAULT '',
	rows_affected INTEGER NOT NULL DEFAULT 0,
	created_ns    INTEGER NOT NULL,
	updated_ns    INTEGER NOT NULL
);
CREATE INDEX requests_status ON requests (status, created_ns);
CREATE INDEX requests_principal ON requests (principal, created_ns);
`,
	},
	{
		Version: 3,
		Name:    "switches, queue and revocation",
		SQL: `
CREATE TABLE switches (
	name       TEXT    NOT NULL,
	scope      TEXT    NOT NULL,    -- "deployment" or "target:NAME"
	value      INTEGER NOT NULL,    -- 1 on, 0 off; no row is off
	updated_ns INTEGER NOT NULL,
	updated_by TEXT    NOT NULL,
	PRIMARY KEY (name, scope)
);

-- The rehearsal report of a referred statement, and the human act that
-- closed it (a signed approval or denial).
ALTER TABLE requests ADD COLUMN rehearsal TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN rehearsal_sha256 TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN decided_by TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN act TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN act_signature TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN expires_ns INTEGER NOT NULL DEFAULT 0;
`,
	},
	{
		Version: 4,
		Name:    "surveyor and audit",
		SQL: `
-- Tier B per residual rule: marked auditable by a reviewer, then enabled
-- for a Surveyor identity by a signed human act.
CREATE TABLE surveyor_rules (
	delegation_id  TEXT    NOT NULL,
	rule           INTEGER NOT NULL,
	auditable_by   TEXT    NOT NULL DEFAULT '',
	auditable_act  TEXT    NOT NULL DEFAULT '',
	auditable_ns   INTEGER NOT NULL DEFAULT 0,
	enabled        INTEGER NOT NULL DEFAULT 0,
	enabled_by     TEXT    NOT NULL DEFAULT '',
	enabled_act    TEXT    NOT NULL DEFAULT '',
	surveyor       TEXT    NOT NULL DEFAULT '',
	bundle         TEXT    NOT NULL DEFAULT '',
	enabled_ns     INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (delegation_id, rule)
);

-- A delegation's fast path suspended by audit findings, until a grantor
-- reinstates it.
CREATE TABLE suspensions (
	delegation_id TEXT    PRIMARY KEY,
	suspended_ns  INTEGER NOT NULL,
	reason        TEXT    NOT NULL,
	lifted_ns     INTEGER,
	lifted_by     TEXT
);

CREATE TABLE judgments (
	id            TEXT    PRIMARY KEY,
	request_id    TEXT    NOT NULL,
	delegation_id TEXT    NOT NULL,
	rule          INTEGER NOT NULL,
	outcome       TEXT    NOT NULL,
	correlated    INTEGER NOT NULL,
	record        TEXT    NOT NULL,  -- the judgment JSON
	created_ns    INTEGER NOT NULL
);
CREATE INDEX judgments_delegation ON judgments (delegation_id, created_ns);

CREATE TABLE audits (
	id            TEXT    PRIMARY KEY,
	judgment_id   TEXT    NOT NULL UNIQUE,
	request_id    TEXT    NOT NULL,
	delegation_id TEXT    NOT NULL,
	why           TEXT    NOT NULL,  -- sampled, daily minimum, correlated
	evidence      TEXT    NOT NULL,  -- the evidence set, JSON
	status        TEXT    NOT NULL,  -- pending, reviewed
	verdict       TEXT    NOT NULL DEFAULT '',  -- right, wrong
	reviewer      TEXT    NOT NULL DEFAULT '',
	note          TEXT    NOT NULL DEFAULT '',
	review_act    TEXT    NOT NULL DEFAULT '',
	created_ns    INTEGER NOT NULL,
	reviewed_ns   INTEGER
);
CREATE INDEX audits_status ON audits (status, created_ns);
CREATE INDEX audits_delegation ON audits (delegation_id, created_ns);
`,
	},
	{
		Version: 5,
		Name:    "request details for humans",
		SQL: `
-- What a refusal's class does not tell the agent: the target's own error
-- text and SQLSTATE, counts. Shown to humans only (DESIGN.md invariant 10).
ALTER TABLE requests ADD COLUMN detail TEXT NOT NULL DEFAULT '';
`,
	},
	{
		Version: 6,
		Name:    "logbook subject index watermark",
		SQL: `
-- The logbook writer fills logbook_subjects after the entries' own commit,
-- in batches; indexed_through is the last seq whose subject rows are in
-- (committed with them). Readers take entries past it from
-- logbook_entries.subjects, so a lookup by subject sees every committed
-- entry. Before this migration the index was written with the entries.
CREATE TABLE logbook_index (
	id              INTEGER PRIMARY KEY CHECK (id = 1),
	indexed_through INTEGER NOT NULL
);
INSERT INTO logbook_index (id, indexed_through) SELECT 1, COALESCE(MAX(seq), 0) FROM logbook_entries;
`,
	},
	{
		Version: 7,
		Name:    "shared quota buckets and delegation expiry claims",
		SQL: `
CREATE TABLE quota_buckets (
	key     TEXT    PRIMARY KEY,
	tokens  REAL    NOT NULL,
	last_ns INTEGER NOT NULL,
	count   INTEGER NOT NULL,
	per_ns  INTEGER NOT NULL
);
ALTER TABLE delegations ADD COLUMN expiry_logged_ns INTEGER;
`,
	},
	{
		Version: 8,
		Name:    "signed requests seen by any node",
		SQL: `
CREATE TABLE seen_requests (
	digest     TEXT   PRIMARY KEY,
	expires_ns INTEGER NOT NULL
);
CREATE INDEX seen_requests_expiry ON seen_requests (expires_ns);
`,
	},
	{
		Version: 9,
		Name:    "leadsman notes",
		SQL: `
-- The Leadsman's advisory notes on referred requests, apart from
-- everything else: nothing that approves, denies, executes or audits reads
-- this table (internal/layers). A row is claimed (writing) by one node
-- before its model call, then written or failed. note is model output:
-- untrusted text.
CREATE TABLE leadsman_notes (
	request_id TEXT    PRIMARY KEY,
	status     TEXT    NOT NULL,            -- writing, written, failed
	leadsman   TEXT    NOT NULL,            -- the Leadsman's principal
	provider   TEXT    NOT NULL DEFAULT '',
	model      TEXT    NOT NULL DEFAULT '',
	note       TEXT    NOT NULL DEFAULT '',
	failure    TEXT    NOT NULL DEFAULT '',
	claimed_ns INTEGER NOT NULL,
	written_ns INTEGER NOT NULL DEFAULT 0
);
`,
	},
	{
		Version: 10,
		Name:    "idempotency keys",
		SQL: `
CREATE TABLE idempotency_keys (
	scope       TEXT    NOT NULL,
	key         TEXT    NOT NULL,
	fingerprint TEXT    NOT NULL,
	state       TEXT    NOT NULL,
	status      INTEGER NOT NULL DEFAULT 0,
	body        TEXT    NOT NULL DEFAULT '',
	created_ns  INTEGER NOT NULL,
	expires_ns  INTEGER NOT NULL,
	PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_ns);
`,
	},
	{
		Version: 11,
		Name:    "previews",
		SQL: `
-- A referred statement's preview (pilot.Preview), computed when a human
-- asks for it, and its digest, which an approval signs (DESIGN.md
-- invariant 10). It replaces the rehearsal of version 3, which ran the
-- statement on referral: those reports are dropped, and an approval of a
-- request that had one needs a preview first.
ALTER TABLE requests ADD COLUMN preview TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN preview_sha256 TEXT NOT NULL DEFAULT '';
UPDATE requests SET rehearsal = '', rehearsal_sha256 = '' WHERE rehearsal_sha256 <> '';
`,
	},
	{
		Version: 12,
		Name:    "logbook retention",
		SQL: `
-- Retention (logbook.Prune): the entries through a signed checkpoint may be
-- removed once a chained logbook.pruned entry records the checkpoint's size
-- and head. through and head are that mark; Verify starts the chain there.
-- The triggers let DELETE reach only entries and subject rows at or below
-- the mark, and the mark only moves forward.
CREATE TABLE logbook_pruned (
	id      INTEGER PRIMARY KEY CHECK (id = 1),
	through INTEGER NOT NULL,   -- entries 1..through were removed
	head    BLOB    NOT NULL,   -- hash of entry through (32 zero bytes at 0)
	time_ns INTEGER NOT NULL
);
INSERT INTO logbook_pruned (id, through, head, time_ns) VALUES (1, 0, zeroblob(32), 0);
-- A prune deletes subject rows by seq, and finds the requests it removes by it.
CREATE INDEX logbook_subjects_seq ON logbook_subjects (seq);
CREATE TRIGGER logbook_pruned_forward BEFORE UPDATE ON logbook_pruned
WHEN new.through < old.through
BEGIN SELECT RAISE(ABORT, 'the logbook prune mark only moves forward'); END;
CREATE TRIGGER logbook_pruned_no_delete BEFORE DELETE ON logbook_pruned
BEGIN SELECT RAISE(ABORT, 'the logbook prune mark is not deleted'); END;
DROP TRIGGER logbook_entries_no_delete;
CREATE TRIGGER logbook_entries_no_delete BEFORE DELETE ON logbook_entries
WHEN old.seq > (SELECT through FROM logbook_pruned WHERE id = 1)
BEGIN SELECT RAISE(ABORT, 'logbook entries are append-only'); END;
DROP TRIGGER logbook_subjects_no_delete;
CREATE TRIGGER logbook_subjects_no_delete BEFORE DELETE ON logbook_subjects
WHEN old.seq > (SELECT through FROM logbook_pruned WHERE id = 1)
BEGIN SELECT RAISE(ABORT, 'logbook subjects are append-only'); END;
`,
	},
}
