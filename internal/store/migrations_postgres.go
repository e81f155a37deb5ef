package store

// PostgresMigrations is the PostgreSQL control store's schema, oldest
// first: the same versions and names as Migrations (SQLite), in
// PostgreSQL's dialect. The same rules hold: append, never edit, remove or
// reorder; Open refuses a database whose applied history is not a prefix of
// this list.
//
// Differences from SQLite's schema: BIGINT for every Unix-nanosecond and
// seq column, BYTEA for hashes, and the append-only guard as a trigger
// function. Booleans stay INTEGER (1 or 0) so that both drivers store and
// scan the same values.
var PostgresMigrations = []Migration{
	{
		Version: 1,
		Name:    "logbook",
		SQL: `
CREATE TABLE logbook_entries (
	seq       BIGINT PRIMARY KEY,   -- 1-based, gapless
	time_ns   BIGINT NOT NULL,      -- Unix nanoseconds, UTC
	kind      TEXT   NOT NULL,
	subjects  TEXT   NOT NULL,      -- canonical JSON object, string to string
	payload   TEXT   NOT NULL,      -- canonical JSON
	prev_hash BYTEA  NOT NULL,      -- SHA-256, 32 bytes
	hash      BYTEA  NOT NULL       -- SHA-256, 32 bytes
);

-- Derived index for "every entry about request X"; see Migrations.
CREATE TABLE logbook_subjects (
	key   TEXT   NOT NULL,
	value TEXT   NOT NULL,
	seq   BIGINT NOT NULL,
	PRIMARY KEY (key, value, seq)
);

CREATE TABLE logbook_checkpoints (
	size    BIGINT PRIMARY KEY,     -- entries covered: seq 1..size
	hash    TEXT   NOT NULL,        -- hex chain head hash at size
	time_ns BIGINT NOT NULL,
	note    TEXT   NOT NULL         -- C2SP signed note
);

-- Append-only against mistakes in our own code (see Migrations).
CREATE FUNCTION harbormaster_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION '% are append-only', TG_ARGV[0];
END $$;
CREATE TRIGGER logbook_entries_append_only BEFORE UPDATE OR DELETE ON logbook_entries
	FOR EACH ROW EXECUTE FUNCTION harbormaster_append_only('logbook entries');
CREATE TRIGGER logbook_subjects_append_only BEFORE UPDATE OR DELETE ON logbook_subjects
	FOR EACH ROW EXECUTE FUNCTION harbormaster_append_only('logbook subjects');
CREATE TRIGGER logbook_checkpoints_append_only BEFORE UPDATE OR DELETE ON logbook_checkpoints
	FOR EACH ROW EXECUTE FUNCTION harbormaster_append_only('logbook checkpoints');
CREATE TRIGGER logbook_entries_no_truncate BEFORE TRUNCATE ON logbook_entries
	FOR EACH STATEMENT EXECUTE FUNCTION harbormaster_append_only('logbook entries');
CREATE TRIGGER logbook_checkpoints_no_truncate BEFORE TRUNCATE ON logbook_checkpoints
	FOR EACH STATEMENT EXECUTE FUNCTION harbormaster_append_only('logbook checkpoints');
`,
	},
	{
		Version: 2,
		Name:    "gateway",
		SQL: `
CREATE TABLE delegations (
	id         TEXT   PRIMARY KEY,
	target     TEXT   NOT NULL,
	grantee    TEXT   NOT NULL,
	signer     TEXT   NOT NULL,
	canonical  TEXT   NOT NULL,
	signature  TEXT   NOT NULL,
	source     TEXT   NOT NULL,
	created_ns BIGINT NOT NULL,
	revoked_ns BIGINT,
	revoked_by TEXT,
	revocation TEXT
);
CREATE INDEX delegations_grantee ON delegations (grantee, target);

CREATE TABLE requests (
	id            TEXT    PRIMARY KEY,
	principal     TEXT    NOT NULL,
	target        TEXT    NOT NULL,
	sql           TEXT    NOT NULL,
	canonical     TEXT    NOT NULL,
	outcome       TEXT    NOT NULL,
	status        TEXT    NOT NULL,
	path          TEXT    NOT NULL DEFAULT '',
	delegation_id TEXT    NOT NULL DEFAULT '',
	rule          INTEGER,
	reasons       TEXT    NOT NULL,
	marque_id     TEXT    NOT NULL DEFAULT '',
	txid          TEXT    NOT NULL DEFAULT '',
	rows_affected BIGINT  NOT NULL DEFAULT 0,
	created_ns    BIGINT  NOT NULL,
	updated_ns    BIGINT  NOT NULL
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
	scope      TEXT    NOT NULL,
	value      INTEGER NOT NULL,
	updated_ns BIGINT  NOT NULL,
	updated_by TEXT    NOT NULL,
	PRIMARY KEY (name, scope)
);

ALTER TABLE requests ADD COLUMN rehearsal TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN rehearsal_sha256 TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN decided_by TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN act TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN act_signature TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN expires_ns BIGINT NOT NULL DEFAULT 0;
`,
	},
	{
		Version: 4,
		Name:    "surveyor and audit",
		SQL: `
CREATE TABLE surveyor_rules (
	delegation_id  TEXT    NOT NULL,
	rule           INTEGER NOT NULL,
	auditable_by   TEXT    NOT NULL DEFAULT '',
	auditable_act  TEXT    NOT NULL DEFAULT '',
	auditable_ns   BIGINT  NOT NULL DEFAULT 0,
	enabled        INTEGER NOT NULL DEFAULT 0,
	enabled_by     TEXT    NOT NULL DEFAULT '',
	enabled_act    TEXT    NOT NULL DEFAULT '',
	surveyor       TEXT    NOT NULL DEFAULT '',
	bundle         TEXT    NOT NULL DEFAULT '',
	enabled_ns     BIGINT  NOT NULL DEFAULT 0,
	PRIMARY KEY (delegation_id, rule)
);

CREATE TABLE suspensions (
	delegation_id TEXT   PRIMARY KEY,
	suspended_ns  BIGINT NOT NULL,
	reason        TEXT   NOT NULL,
	lifted_ns     BIGINT,
	lifted_by     TEXT
);

CREATE TABLE judgments (
	id            TEXT    PRIMARY KEY,
	request_id    TEXT    NOT NULL,
	delegation_id TEXT    NOT NULL,
	rule          INTEGER NOT NULL,
	outcome       TEXT    NOT NULL,
	correlated    INTEGER NOT NULL,
	record        TEXT    NOT NULL,
	created_ns    BIGINT  NOT NULL
);
CREATE INDEX judgments_delegation ON judgments (delegation_id, created_ns);

CREATE TABLE audits (
	id            TEXT   PRIMARY KEY,
	judgment_id   TEXT   NOT NULL UNIQUE,
	request_id    TEXT   NOT NULL,
	delegation_id TEXT   NOT NULL,
	why           TEXT   NOT NULL,
	evidence      TEXT   NOT NULL,
	status        TEXT   NOT NULL,
	verdict       TEXT   NOT NULL DEFAULT '',
	reviewer      TEXT   NOT NULL DEFAULT '',
	note          TEXT   NOT NULL DEFAULT '',
	review_act    TEXT   NOT NULL DEFAULT '',
	created_ns    BIGINT NOT NULL,
	reviewed_ns   BIGINT
);
CREATE INDEX audits_status ON audits (status, created_ns);
CREATE INDEX audits_delegation ON audits (delegation_id, created_ns);
`,
	},
	{
		Version: 5,
		Name:    "request details for humans",
		SQL: `
ALTER TABLE requests ADD COLUMN detail TEXT NOT NULL DEFAULT '';
`,
	},
	{
		Version: 6,
		Name:    "logbook subject index watermark",
		SQL: `
CREATE TABLE logbook_index (
	id              INTEGER PRIMARY KEY CHECK (id = 1),
	indexed_through BIGINT  NOT NULL
);
INSERT INTO logbook_index (id, indexed_through) SELECT 1, COALESCE(MAX(seq), 0) FROM logbook_entries;
`,
	},
	{
		Version: 7,
		Name:    "shared quota buckets and delegation expiry claims",
		SQL: `
CREATE TABLE quota_buckets (
	key     TEXT             PRIMARY KEY,
	tokens  DOUBLE PRECISION NOT NULL,
	last_ns BIGINT           NOT NULL,
	count   BIGINT           NOT NULL,
	per_ns  BIGINT           NOT NULL
);
ALTER TABLE delegations ADD COLUMN expiry_logged_ns BIGINT;
`,
	},
	{
		Version: 8,
		Name:    "signed requests seen by any node",
		SQL: `
CREATE TABLE seen_requests (
	digest     TEXT   PRIMARY KEY,
	expires_ns BIGINT NOT NULL
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
	claimed_ns BIGINT  NOT NULL,
	written_ns BIGINT  NOT NULL DEFAULT 0
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
	status      BIGINT NOT NULL DEFAULT 0,
	body        TEXT    NOT NULL DEFAULT '',
	created_ns  BIGINT NOT NULL,
	expires_ns  BIGINT NOT NULL,
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
CREATE TABLE logbook_pruned (
	id      INTEGER PRIMARY KEY CHECK (id = 1),
	through BIGINT  NOT NULL,
	head    BYTEA   NOT NULL,
	time_ns BIGINT  NOT NULL
);
INSERT INTO logbook_pruned (id, through, head, time_ns) VALUES (1, 0, decode(repeat('00', 32), 'hex'), 0);
-- A prune deletes subject rows by seq, and finds the requests it removes by it.
CREATE INDEX logbook_subjects_seq ON logbook_subjects (seq);
CREATE FUNCTION harbormaster_prune_forward() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'DELETE' OR NEW.through < OLD.through THEN
		RAISE EXCEPTION 'the logbook prune mark only moves forward';
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER logbook_pruned_forward BEFORE UPDATE OR DELETE ON logbook_pruned
	FOR EACH ROW EXECUTE FUNCTION harbormaster_prune_forward();
CREATE TRIGGER logbook_pruned_no_truncate BEFORE TRUNCATE ON logbook_pruned
	FOR EACH STATEMENT EXECUTE FUNCTION harbormaster_append_only('the logbook prune mark');
CREATE FUNCTION harbormaster_prune_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF OLD.seq > (SELECT through FROM logbook_pruned WHERE id = 1) THEN
		RAISE EXCEPTION '% are append-only', TG_ARGV[0];
	END IF;
	RETURN OLD;
END $$;
DROP TRIGGER logbook_entries_append_only ON logbook_entries;
CREATE TRIGGER logbook_entries_no_update BEFORE UPDATE ON logbook_entries
	FOR EACH ROW EXECUTE FUNCTION harbormaster_append_only('logbook entries');
CREATE TRIGGER logbook_entries_prune_only BEFORE DELETE ON logbook_entries
	FOR EACH ROW EXECUTE FUNCTION harbormaster_prune_only('logbook entries');
DROP TRIGGER logbook_subjects_append_only ON logbook_subjects;
CREATE TRIGGER logbook_subjects_no_update BEFORE UPDATE ON logbook_subjects
	FOR EACH ROW EXECUTE FUNCTION harbormaster_append_only('logbook subjects');
CREATE TRIGGER logbook_subjects_prune_only BEFORE DELETE ON logbook_subjects
	FOR EACH ROW EXECUTE FUNCTION harbormaster_prune_only('logbook subjects');
`,
	},
}
