// postgres.js (npm postgres) against the wire front. postgres.js describes
// every parameterized statement (Parse, Describe S) and trusts that
// description to read its rows and to encode its parameters. Argument:
// the agent's URL. Prints one JSON line per step.
import postgres from "postgres";

const [url] = process.argv.slice(2);
const out = (step, v) => console.log(JSON.stringify({ step, ...v }));
const err = (e) => ({ code: e.code, message: e.message, detail: e.detail, hint: e.hint });
const cols = (r) => r.columns.map((c) => [c.name, c.type]);

// fetch_types reads pg_catalog, which the front does not answer.
const sql = postgres(url, { max: 1, fetch_types: false, onnotice: () => {} });

let r = await sql`SELECT id, status FROM orders WHERE id = ${5}`;
out("read", { rows: r, columns: cols(r), command: r.command, count: r.count });

// The same statement again: postgres.js runs its prepared statement.
r = await sql`SELECT id, status FROM orders WHERE id = ${6}`;
out("again", { rows: r });

r = await sql`SELECT id, status FROM orders WHERE customer_id = ${3} AND id < ${40} ORDER BY id`;
out("two_params", { ids: r.map((x) => x.id), columns: cols(r) });

r = await sql`SELECT i4, txt, flag, doc, ints FROM kinds WHERE id = ${1}`;
out("types", { rows: r, columns: cols(r) });

// An enum column is described, and sent, as text.
r = await sql`SELECT id, m FROM moods WHERE m = ${"calm"}`;
out("enum", { rows: r, columns: cols(r) });

r = await sql`UPDATE orders SET status = ${"retrying"}, updated_at = now() WHERE id = ${6}`;
out("write", { command: r.command, count: r.count, rows: r.length });

// Outside the bound: not described, with why.
try {
  await sql`SELECT code FROM secrets WHERE id = ${1}`;
  out("outside", { error: null });
} catch (e) {
  out("outside", { error: err(e) });
}
// A write outside the bound is described (no rows) and referred when run.
try {
  await sql`UPDATE orders SET status = ${"failed"} WHERE id = ${47}`;
  out("referred", { error: null });
} catch (e) {
  out("referred", { error: { code: e.code, where: e.where } });
}
await sql.end();
