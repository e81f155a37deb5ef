// The client matrix's Node.js clients (TestClientMatrix, clients_test.go).
//
// Usage: node matrix.mjs CLIENT, with HM_PG_HOST, HM_PG_PORT,
// HM_PG_DATABASE, HM_PG_USER, HM_PG_PASSWORD (the wire front and an
// agent's token), HM_CLIENT and HM_BASE_ID (the first of the ids this
// client writes) in the environment. Prints one JSON line with the
// client's version, then one per step: {client, step, ok, error}. A step
// that fails says why (the SQLSTATE first) and the next steps still run.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'

const env = process.env
const CLIENT = env.HM_CLIENT
const BASE = Number(env.HM_BASE_ID)
const conn = {
  host: env.HM_PG_HOST, port: Number(env.HM_PG_PORT), database: env.HM_PG_DATABASE,
  user: env.HM_PG_USER, password: env.HM_PG_PASSWORD,
}
const SEED = [[1, 'seed', 'first'], [2, 'seed', 'second']]
const READ = "SELECT id, client, body FROM notes WHERE client = 'seed' ORDER BY id"
// No rule of the delegation lets the agent delete: referred (HM001).
const OUTSIDE = 'DELETE FROM notes WHERE id = 1'
// A step that takes longer has lost its connection to a protocol error
// (generous: make test runs every package at once on two cores).
const STEP_TIMEOUT_MS = 20000

const emit = (o) => process.stdout.write(JSON.stringify({ client: CLIENT, ...o }) + '\n')
const version = (pkg) => JSON.parse(readFileSync(new URL(`./node_modules/${pkg}/package.json`, import.meta.url))).version

// The SQLSTATE of an error, through the wrappings of the ORMs.
function sqlstate (e, depth = 0) {
  if (!e || typeof e !== 'object' || depth > 4) return ''
  // Prisma's own codes (P2010, a raw query failed) look like SQLSTATEs;
  // the database's is in meta.driverAdapterError.cause.
  if (/^Prisma/.test(e.name) && e.meta) return sqlstate(e.meta.driverAdapterError, depth + 1)
  if (typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code)) return e.code
  for (const k of ['original', 'parent', 'driverError', 'cause']) {
    const c = sqlstate(e[k], depth + 1)
    if (c) return c
  }
  return ''
}

function describe (e) {
  const code = sqlstate(e)
  const msg = String(e && e.message ? e.message : e).replace(/\s+/g, ' ').slice(0, 400)
  return code ? `${code}: ${msg}` : `${(e && e.name) || 'Error'}: ${msg}`
}

class Failed extends Error {}
const check = (cond, msg) => { if (!cond) throw new Failed(msg) }
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b)
const triples = (rows) => rows.map((r) => [Number(r.id), r.client, r.body])

// A statement outside the bound must fail with an HM-class error.
async function wantReferral (fn) {
  try {
    await fn()
  } catch (e) {
    const code = sqlstate(e)
    check(code.startsWith('HM'), `want an HM-class referral error, got ${describe(e)}`)
    return
  }
  throw new Failed('the statement outside the bound ran')
}

// Steps runs the steps; after a step fails, recover (if set) gives the
// next step a usable session.
class Steps {
  constructor (v) { emit({ version: v }); this.connected = false; this.recover = null }

  async run (name, fn) {
    if (name !== 'connect' && !this.connected) return emit({ step: name, ok: false, error: 'not run: connect failed' })
    let timer
    try {
      await Promise.race([fn(), new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer in ${STEP_TIMEOUT_MS} ms`)), STEP_TIMEOUT_MS)
      })])
    } catch (e) {
      emit({ step: name, ok: false, error: describe(e) })
      if (this.recover && name !== 'close') {
        try { await this.recover() } catch (e2) { process.stderr.write(`${CLIENT}: recovering after ${name}: ${describe(e2)}\n`) }
      }
      return
    } finally {
      clearTimeout(timer)
    }
    if (name === 'connect') this.connected = true
    emit({ step: name, ok: true })
  }
}

// node-postgres: a Client, transactions by BEGIN/COMMIT/ROLLBACK.
async function runPg () {
  const { default: pg } = await import('pg')
  const s = new Steps(version('pg'))
  let c
  const q = async (sql, params) => (await c.query(sql, params)).rows
  const connect = async () => { c = new pg.Client({ ...conn, ssl: false }); c.on('error', () => {}); await c.connect() }
  s.recover = async () => { await c.end().catch(() => {}); await connect() }
  await s.run('connect', connect)
  await s.run('read', async () => check(same(triples(await q(READ)), SEED), 'seed rows'))
  await s.run('read_param', async () => check(same(await q('SELECT body FROM notes WHERE id = $1', [2]), [{ body: 'second' }]), 'row 2'))
  await s.run('tx_commit', async () => {
    await q('BEGIN')
    await q('INSERT INTO notes (id, client, body) VALUES ($1, $2, $3)', [BASE + 1, CLIENT, 'committed'])
    await q('UPDATE notes SET body = $1 WHERE id = $2', ['committed, updated', BASE + 1])
    await q('COMMIT')
    check(same(await q('SELECT body FROM notes WHERE id = $1', [BASE + 1]), [{ body: 'committed, updated' }]), 'committed row read back')
  })
  await s.run('tx_rollback', async () => {
    await q('BEGIN')
    await q('INSERT INTO notes (id, client, body) VALUES ($1, $2, $3)', [BASE + 2, CLIENT, 'rolled back'])
    await q('ROLLBACK')
    check(same(await q('SELECT id FROM notes WHERE id = $1', [BASE + 2]), []), 'rolled-back row is there')
  })
  await s.run('tx_referral', async () => {
    await wantReferral(async () => {
      await q('BEGIN')
      await q('INSERT INTO notes (id, client, body) VALUES ($1, $2, $3)', [BASE + 3, CLIENT, 'aborted'])
      await q(OUTSIDE)
    })
    await q('ROLLBACK')
    check(same(await q('SELECT id FROM notes WHERE id = $1 OR id = 1 ORDER BY id', [BASE + 3]), [{ id: '1' }]), 'nothing changed')
  })
  await s.run('close', () => c.end())
}

// postgres.js: tagged templates (prepared, their parameters typed and
// their columns named by the statement's Describe), sql.begin for
// transactions. Its checks after a transaction read with sql.unsafe (the
// ids written in, no parameters), so that the transaction steps test
// transactions and read_param alone tests the Describe.
async function runPostgresJS () {
  const { default: postgres } = await import('postgres')
  const s = new Steps(version('postgres'))
  let sql
  const connect = async () => {
    sql = postgres({ ...conn, username: conn.user, ssl: false, max: 1, onnotice: () => {}, connect_timeout: 5 })
    await sql`SELECT 1 AS one`
  }
  s.recover = async () => { await sql.end({ timeout: 1 }).catch(() => {}); await connect() }
  await s.run('connect', connect)
  await s.run('read', async () => check(same(triples(await sql.unsafe(READ)), SEED), 'seed rows'))
  await s.run('read_param', async () => {
    const rows = await sql`SELECT body FROM notes WHERE id = ${2}`
    check(same([...rows], [{ body: 'second' }]), `row 2: got ${JSON.stringify([...rows])} with columns ${JSON.stringify(rows.columns?.map((c) => c.name))}`)
  })
  await s.run('tx_commit', async () => {
    await sql.begin(async (sql) => {
      await sql`INSERT INTO notes (id, client, body) VALUES (${BASE + 1}, ${CLIENT}, 'committed')`
      await sql`UPDATE notes SET body = 'committed, updated' WHERE id = ${BASE + 1}`
    })
    check(same([...await sql.unsafe(`SELECT body FROM notes WHERE id = ${BASE + 1}`)], [{ body: 'committed, updated' }]), 'committed row read back')
  })
  await s.run('tx_rollback', async () => {
    await sql.begin(async (sql) => {
      await sql`INSERT INTO notes (id, client, body) VALUES (${BASE + 2}, ${CLIENT}, 'rolled back')`
      await sql.rollback()
    })
    check(same([...await sql.unsafe(`SELECT id FROM notes WHERE id = ${BASE + 2}`)], []), 'rolled-back row is there')
  })
  await s.run('tx_referral', async () => {
    await wantReferral(() => sql.begin(async (sql) => {
      await sql`INSERT INTO notes (id, client, body) VALUES (${BASE + 3}, ${CLIENT}, 'aborted')`
      await sql.unsafe(OUTSIDE)
    }))
    check(same(triples(await sql.unsafe(`SELECT id, client, body FROM notes WHERE id = ${BASE + 3} OR id = 1`)), [SEED[0]]), 'nothing changed')
  })
  await s.run('close', () => sql.end({ timeout: 5 }))
}

// knex: its query builder over pg, columnInfo for reflection.
async function runKnex () {
  const { default: knex } = await import('knex')
  const s = new Steps(version('knex'))
  let db
  const connect = async () => {
    db = knex({ client: 'pg', connection: { ...conn, ssl: false }, pool: { min: 0, max: 1 }, acquireConnectionTimeout: 5000 })
    await db.raw('SELECT 1')
  }
  s.recover = async () => { await db.destroy().catch(() => {}); await connect() }
  await s.run('connect', connect)
  await s.run('introspect', async () => {
    check(await db.schema.hasTable('notes'), 'notes is a table')
    check(same(Object.keys(await db('notes').columnInfo()), ['id', 'client', 'body']), "notes' columns")
  })
  await s.run('read', async () => check(same(triples(await db('notes').select('id', 'client', 'body').where('client', 'seed').orderBy('id')), SEED), 'seed rows'))
  await s.run('read_param', async () => check(same(await db('notes').select('body').where('id', 2), [{ body: 'second' }]), 'row 2'))
  await s.run('tx_commit', async () => {
    await db.transaction(async (trx) => {
      await trx('notes').insert({ id: BASE + 1, client: CLIENT, body: 'committed' })
      await trx('notes').where('id', BASE + 1).update({ body: 'committed, updated' })
    })
    check(same(await db('notes').select('body').where('id', BASE + 1), [{ body: 'committed, updated' }]), 'committed row read back')
  })
  await s.run('tx_rollback', async () => {
    const trx = await db.transaction()
    await trx('notes').insert({ id: BASE + 2, client: CLIENT, body: 'rolled back' })
    await trx.rollback()
    check(same(await db('notes').select('id').where('id', BASE + 2), []), 'rolled-back row is there')
  })
  await s.run('tx_referral', async () => {
    await wantReferral(() => db.transaction(async (trx) => {
      await trx('notes').insert({ id: BASE + 3, client: CLIENT, body: 'aborted' })
      await trx.raw(OUTSIDE)
    }))
    check(same(triples(await db('notes').select('id', 'client', 'body').whereIn('id', [1, BASE + 3])), [SEED[0]]), 'nothing changed')
  })
  await s.run('close', () => db.destroy())
}

// Sequelize: a model, describeTable for reflection, managed transactions.
async function runSequelize () {
  const { Sequelize, DataTypes, QueryTypes } = await import('sequelize')
  const s = new Steps(version('sequelize'))
  let seq, Note
  const connect = async () => {
    seq = new Sequelize(conn.database, conn.user, conn.password, {
      host: conn.host, port: conn.port, dialect: 'postgres', logging: false, pool: { max: 1, acquire: 5000 },
    })
    Note = seq.define('Note', {
      id: { type: DataTypes.BIGINT, primaryKey: true },
      client: { type: DataTypes.TEXT, allowNull: false },
      body: { type: DataTypes.TEXT, allowNull: false },
    }, { tableName: 'notes', timestamps: false })
    await seq.authenticate()
  }
  s.recover = async () => { await seq.close().catch(() => {}); await connect() }
  await s.run('connect', connect)
  await s.run('introspect', async () => {
    check(same(Object.keys(await seq.getQueryInterface().describeTable('notes')), ['id', 'client', 'body']), "notes' columns")
  })
  await s.run('read', async () => check(same(triples(await Note.findAll({ where: { client: 'seed' }, order: [['id', 'ASC']], raw: true })), SEED), 'seed rows'))
  await s.run('read_param', async () => {
    const rows = await seq.query('SELECT body FROM notes WHERE id = $1', { bind: [2], type: QueryTypes.SELECT })
    check(same(rows, [{ body: 'second' }]), 'row 2')
  })
  await s.run('tx_commit', async () => {
    await seq.transaction(async (transaction) => {
      await Note.create({ id: BASE + 1, client: CLIENT, body: 'committed' }, { transaction })
      await Note.update({ body: 'committed, updated' }, { where: { id: BASE + 1 }, transaction })
    })
    check(same(await Note.findAll({ attributes: ['body'], where: { id: BASE + 1 }, raw: true }), [{ body: 'committed, updated' }]), 'committed row read back')
  })
  await s.run('tx_rollback', async () => {
    const transaction = await seq.transaction()
    await Note.create({ id: BASE + 2, client: CLIENT, body: 'rolled back' }, { transaction })
    await transaction.rollback()
    check(same(await Note.findAll({ where: { id: BASE + 2 }, raw: true }), []), 'rolled-back row is there')
  })
  await s.run('tx_referral', async () => {
    await wantReferral(() => seq.transaction(async (transaction) => {
      await Note.create({ id: BASE + 3, client: CLIENT, body: 'aborted' }, { transaction })
      await seq.query(OUTSIDE, { transaction })
    }))
    check(same(triples(await Note.findAll({ where: { id: [1, BASE + 3] }, raw: true })), [SEED[0]]), 'nothing changed')
  })
  await s.run('close', () => seq.close())
}

// TypeORM's DataSource, an EntitySchema (no decorators), shared by the
// typeorm and langchain clients.
async function typeormDataSource () {
  await import('reflect-metadata')
  const { DataSource, EntitySchema } = await import('typeorm')
  const Note = new EntitySchema({
    name: 'Note',
    tableName: 'notes',
    columns: { id: { type: 'bigint', primary: true }, client: { type: 'text' }, body: { type: 'text' } },
  })
  const ds = new DataSource({
    type: 'postgres', host: conn.host, port: conn.port, username: conn.user, password: conn.password,
    database: conn.database, ssl: false, entities: [Note], synchronize: false, logging: false, poolSize: 1,
    connectTimeoutMS: 5000,
  })
  return { ds, Note }
}

async function runTypeORM () {
  const s = new Steps(version('typeorm'))
  let ds, Note
  const connect = async () => { ({ ds, Note } = await typeormDataSource()); await ds.initialize() }
  s.recover = async () => { if (ds.isInitialized) await ds.destroy().catch(() => {}); await connect() }
  const notes = () => ds.getRepository(Note)
  await s.run('connect', connect)
  await s.run('introspect', async () => {
    const qr = ds.createQueryRunner()
    try {
      const table = await qr.getTable('notes')
      check(table && same(table.columns.map((c) => c.name), ['id', 'client', 'body']), "notes' columns")
    } finally {
      await qr.release()
    }
  })
  await s.run('read', async () => check(same(triples(await ds.query(READ)), SEED), 'seed rows'))
  await s.run('read_param', async () => check(same(triples(await notes().find({ where: { id: 2 } })), [SEED[1]]), 'row 2'))
  await s.run('tx_commit', async () => {
    await ds.transaction(async (m) => {
      await m.insert(Note, { id: BASE + 1, client: CLIENT, body: 'committed' })
      await m.update(Note, { id: BASE + 1 }, { body: 'committed, updated' })
    })
    check(same(await ds.query('SELECT body FROM notes WHERE id = $1', [BASE + 1]), [{ body: 'committed, updated' }]), 'committed row read back')
  })
  await s.run('tx_rollback', async () => {
    const qr = ds.createQueryRunner()
    await qr.connect()
    try {
      await qr.startTransaction()
      await qr.manager.insert(Note, { id: BASE + 2, client: CLIENT, body: 'rolled back' })
      await qr.rollbackTransaction()
    } finally {
      await qr.release()
    }
    check(same(await ds.query('SELECT id FROM notes WHERE id = $1', [BASE + 2]), []), 'rolled-back row is there')
  })
  await s.run('tx_referral', async () => {
    await wantReferral(() => ds.transaction(async (m) => {
      await m.insert(Note, { id: BASE + 3, client: CLIENT, body: 'aborted' })
      await m.query(OUTSIDE)
    }))
    check(same(triples(await ds.query('SELECT id, client, body FROM notes WHERE id = $1 OR id = 1', [BASE + 3])), [SEED[0]]), 'nothing changed')
  })
  await s.run('close', () => ds.destroy())
}

// LangChain's SqlDatabase (@langchain/classic) over a TypeORM DataSource:
// it reflects the tables when made, describes them for a model, runs SQL.
async function runLangChain () {
  const { SqlDatabase } = await import('@langchain/classic/sql_db')
  const s = new Steps(version('@langchain/classic'))
  let ds, db
  await s.run('connect', async () => { ({ ds } = await typeormDataSource()); await ds.initialize() })
  await s.run('introspect', async () => {
    db = await SqlDatabase.fromDataSourceParams({ appDataSource: ds, includesTables: ['notes'], sampleRowsInTableInfo: 0 })
    const info = await db.getTableInfo(['notes'])
    check(/CREATE TABLE ("?public"?\.)?"?notes"?/.test(info) && ['id', 'client', 'body'].every((c) => info.includes(c)), `table info: ${info}`)
  })
  await s.run('read', async () => {
    // Made without reflection when introspect failed: run needs none.
    db ??= new SqlDatabase({ appDataSource: ds })
    const out = await db.run(READ)
    check(same(triples(JSON.parse(out)), SEED), `seed rows: ${out}`)
  })
  await s.run('close', () => ds.destroy())
}

// Prisma 7: a client generated from prisma/schema.prisma at each run, its
// queries compiled by the query compiler (WebAssembly, in the npm package)
// and run by the pg driver adapter; interactive $transaction for the
// transaction steps. prisma generate runs no engine; its CLI would still
// fetch the schema engine (a binary) first unless PRISMA_SCHEMA_ENGINE_BINARY
// names one, so it names /bin/false, which nothing runs.
async function runPrisma () {
  const s = new Steps(version('prisma'))
  const dir = new URL('.', import.meta.url).pathname
  execFileSync(process.execPath, ['node_modules/prisma/build/index.js', 'generate', '--schema', 'prisma/schema.prisma'], {
    cwd: dir, stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...env, CHECKPOINT_DISABLE: '1', PRISMA_HIDE_UPDATE_MESSAGE: '1', PRISMA_SCHEMA_ENGINE_BINARY: '/bin/false' },
  })
  // The generated client is CommonJS, in node_modules/.prisma/client.
  const { PrismaClient } = createRequire(import.meta.url)('@prisma/client')
  const { PrismaPg } = await import('@prisma/adapter-pg')
  let db
  const connect = async () => {
    db = new PrismaClient({ adapter: new PrismaPg({ ...conn, ssl: false, max: 1, connectionTimeoutMillis: 5000 }) })
    await db.$connect()
    await db.$queryRaw`SELECT 1 AS one`
  }
  s.recover = async () => { await db.$disconnect().catch(() => {}); await connect() }
  await s.run('connect', connect)
  await s.run('read', async () => check(same(triples(await db.notes.findMany({ where: { client: 'seed' }, orderBy: { id: 'asc' } })), SEED), 'seed rows'))
  await s.run('read_param', async () => {
    check(same(await db.notes.findUnique({ where: { id: 2n }, select: { body: true } }), { body: 'second' }), 'row 2 (findUnique)')
    check(same(await db.$queryRaw`SELECT body FROM notes WHERE id = ${2}`, [{ body: 'second' }]), 'row 2 ($queryRaw)')
  })
  await s.run('tx_commit', async () => {
    await db.$transaction(async (tx) => {
      await tx.notes.create({ data: { id: BigInt(BASE + 1), client: CLIENT, body: 'committed' } })
      await tx.notes.update({ where: { id: BigInt(BASE + 1) }, data: { body: 'committed, updated' } })
    })
    check(same(await db.notes.findMany({ where: { id: BigInt(BASE + 1) }, select: { body: true } }), [{ body: 'committed, updated' }]), 'committed row read back')
  })
  class Undo extends Error {}
  await s.run('tx_rollback', async () => {
    try {
      await db.$transaction(async (tx) => {
        await tx.notes.create({ data: { id: BigInt(BASE + 2), client: CLIENT, body: 'rolled back' } })
        throw new Undo()
      })
    } catch (e) {
      if (!(e instanceof Undo)) throw e
    }
    check(same(await db.notes.findMany({ where: { id: BigInt(BASE + 2) } }), []), 'rolled-back row is there')
  })
  await s.run('tx_referral', async () => {
    await wantReferral(() => db.$transaction(async (tx) => {
      await tx.notes.create({ data: { id: BigInt(BASE + 3), client: CLIENT, body: 'aborted' } })
      await tx.$executeRawUnsafe(OUTSIDE)
    }))
    check(same(triples(await db.notes.findMany({ where: { id: { in: [1n, BigInt(BASE + 3)] } }, orderBy: { id: 'asc' } })), [SEED[0]]), 'nothing changed')
  })
  await s.run('close', () => db.$disconnect())
}

const clients = { pg: runPg, 'postgres.js': runPostgresJS, knex: runKnex, sequelize: runSequelize, typeorm: runTypeORM, langchain: runLangChain, prisma: runPrisma }
if (process.argv.length !== 3 || !clients[process.argv[2]] || process.argv[2] !== CLIENT) {
  process.stderr.write(`usage: HM_CLIENT=NAME node matrix.mjs NAME, NAME one of ${Object.keys(clients).join(', ')}\n`)
  process.exit(2)
}
await clients[CLIENT]()
// A driver whose connection a failure left open must not keep the process.
process.exit(0)
