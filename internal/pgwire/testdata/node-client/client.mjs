// node-postgres against the wire front. Arguments: the agent's URL (SCRAM,
// no TLS), the same with a wrong token, another agent's URL for TLS only,
// and the certificate to verify it with. Prints one JSON line per step;
// after "referred" it waits for the Go test to approve the request.
import fs from "node:fs";
import pg from "pg";

const [url, badURL, tlsURL, caFile] = process.argv.slice(2);
const out = (step, v) => console.log(JSON.stringify({ step, ...v }));
const err = (e) => ({ code: e.code, message: e.message, where: e.where, detail: e.detail, hint: e.hint });

const c = new pg.Client({ connectionString: url });
await c.connect();

let r = await c.query("SELECT id, status FROM orders WHERE id = $1", [5]);
out("read", { rows: r.rows, types: r.fields.map((f) => f.dataTypeID), command: r.command, rowCount: r.rowCount });

r = await c.query("SELECT i8, num, at, ints, tags, doc, raw, flag FROM kinds WHERE id = $1", [1]);
const k = r.rows[0];
out("types", {
  i8: k.i8, num: k.num, at: k.at.toISOString(), ints: k.ints, tags: k.tags, doc: k.doc,
  raw: k.raw.toString("hex"), flag: k.flag, types: r.fields.map((f) => f.dataTypeID),
});

r = await c.query("UPDATE orders SET status = $1, updated_at = now() WHERE id = $2", ["retrying", 6]);
out("write", { command: r.command, rowCount: r.rowCount });

r = await c.query("INSERT INTO kinds (id, txt, ints, doc, at) VALUES ($1, $2, $3, $4, $5)",
  [10, "from node", [1, 2], { a: 1 }, new Date("2025-01-02T03:04:05.678Z")]);
out("insert", { command: r.command, rowCount: r.rowCount });
r = await c.query("SELECT txt, ints, doc, at FROM kinds WHERE id = 10");
out("inserted", { row: { ...r.rows[0], at: r.rows[0].at.toISOString() } });

try {
  // A transaction: its write is seen inside, and ROLLBACK undoes it.
  await c.query("BEGIN");
  await c.query("UPDATE orders SET status = $1 WHERE id = $2", ["retrying", 5]);
  const inside = await c.query("SELECT status FROM orders WHERE id = 5");
  await c.query("ROLLBACK");
  const after = await c.query("SELECT status FROM orders WHERE id = 5");
  out("begin", { error: null, inside: inside.rows[0].status, after: after.rows[0].status });
} catch (e) {
  out("begin", { error: err(e) });
  await c.query("ROLLBACK");
}

let id = "";
try {
  await c.query("UPDATE orders SET status = $1 WHERE id = $2", ["failed", 47]);
  out("referred", { error: null });
} catch (e) {
  id = e.where;
  out("referred", { error: err(e) });
}
// The Go test approves the request once it reads the line above.
r = await c.query({ text: "SELECT harbormaster_wait($1, 30)", values: [id], rowMode: "array" });
out("approved", { row: r.rows[0], fields: r.fields.map((f) => f.name) });
await c.end();

const bad = new pg.Client({ connectionString: badURL });
try {
  await bad.connect();
  out("bad_token", { error: null });
} catch (e) {
  out("bad_token", { error: err(e) });
}

const t = new pg.Client({ connectionString: tlsURL.replace(/[?&]sslmode=disable/, ""), ssl: { ca: fs.readFileSync(caFile, "utf8") } });
await t.connect();
r = await t.query("SHOW client_encoding");
out("tls", { encrypted: t.connection.stream.encrypted === true, rows: r.rows });
await t.end();
