"""The client matrix's Python clients (TestClientMatrix, clients_test.go).

Usage: python3 matrix.py CLIENT, with HM_PG_HOST, HM_PG_PORT,
HM_PG_DATABASE, HM_PG_USER, HM_PG_PASSWORD (the wire front and an agent's
token), HM_CLIENT and HM_BASE_ID (the first of the ids this client writes)
in the environment. Prints one JSON line with the client's version, then
one per step: {"client", "step", "ok", "error"}. A step that fails says
why (the SQLSTATE first) and the next steps still run.
"""

import asyncio
import json
import os
import sys
import traceback

ENV = os.environ
CLIENT = ENV["HM_CLIENT"]
BASE = int(ENV["HM_BASE_ID"])
SEED = [(1, "seed", "first"), (2, "seed", "second")]
READ = "SELECT id, client, body FROM notes WHERE client = 'seed' ORDER BY id"
# No rule of the delegation lets the agent delete: referred (HM001).
OUTSIDE = "DELETE FROM notes WHERE id = 1"


def emit(**kv):
    print(json.dumps({"client": CLIENT, **kv}), flush=True)


def sqlstate(e):
    """The SQLSTATE of a driver's error, through SQLAlchemy's wrapping."""
    for attr in ("pgcode", "sqlstate"):
        code = getattr(e, attr, None)
        if code:
            return code
    diag = getattr(e, "diag", None)
    if diag is not None and getattr(diag, "sqlstate", None):
        return diag.sqlstate
    orig = getattr(e, "orig", None)
    if orig is not None and orig is not e:
        return sqlstate(orig)
    return ""


def describe(e):
    code = sqlstate(e)
    msg = " ".join(str(e).split())[:400]
    if not msg:  # an assert in the driver: say where
        tb = traceback.extract_tb(e.__traceback__)[-1]
        msg = f"{repr(e)} at {os.path.basename(tb.filename)}:{tb.lineno} {tb.line}"
    return f"{code}: {msg}" if code else f"{type(e).__name__}: {msg}"


class Failed(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failed(msg)


def want_referral(e):
    """A statement outside the bound must fail with an HM-class error."""
    code = sqlstate(e)
    check(code.startswith("HM"), f"want an HM-class referral error, got {describe(e)}")


class Steps:
    """Runs the steps; after a step fails, recover() (if set) gives the
    next step a usable session: a driver left mid-transaction or
    mid-protocol by a failure is reconnected rather than reused."""

    def __init__(self, version):
        emit(version=version)
        self.connected = False
        self.recover = None

    def run(self, name, fn):
        if name != "connect" and not self.connected:
            emit(step=name, ok=False, error="not run: connect failed")
            return
        try:
            fn()
        except Exception as e:  # every failure is a result, not a crash
            emit(step=name, ok=False, error=describe(e))
            if self.recover and name != "close":
                try:
                    self.recover()
                except Exception as e2:
                    print(f"{CLIENT}: recovering after {name}: {describe(e2)}", file=sys.stderr)
            return
        if name == "connect":
            self.connected = True
        emit(step=name, ok=True)


def conn_kwargs():
    return dict(host=ENV["HM_PG_HOST"], port=int(ENV["HM_PG_PORT"]), dbname=ENV["HM_PG_DATABASE"],
                user=ENV["HM_PG_USER"], password=ENV["HM_PG_PASSWORD"], sslmode="disable")


def run_psycopg2():
    import psycopg2

    s = Steps(psycopg2.__version__.split()[0])
    c = {}

    def rows(sql, params=None):
        cur = c["conn"].cursor()
        cur.execute(sql, params)
        return cur.fetchall()

    def rollback():
        c["conn"].rollback()

    def connect():
        c["conn"] = psycopg2.connect(**conn_kwargs())  # default: implicit BEGIN

    def read():
        check(rows(READ) == SEED, "seed rows")
        c["conn"].commit()

    def read_param():
        check(rows("SELECT body FROM notes WHERE id = %s", (2,)) == [("second",)], "row 2")
        c["conn"].commit()

    def tx_commit():
        cur = c["conn"].cursor()
        cur.execute("INSERT INTO notes (id, client, body) VALUES (%s, %s, %s)", (BASE + 1, CLIENT, "committed"))
        cur.execute("UPDATE notes SET body = %s WHERE id = %s", ("committed, updated", BASE + 1))
        c["conn"].commit()
        check(rows("SELECT body FROM notes WHERE id = %s", (BASE + 1,)) == [("committed, updated",)], "committed row read back")
        c["conn"].commit()

    def tx_rollback():
        c["conn"].cursor().execute("INSERT INTO notes (id, client, body) VALUES (%s, %s, %s)", (BASE + 2, CLIENT, "rolled back"))
        c["conn"].rollback()
        check(rows("SELECT id FROM notes WHERE id = %s", (BASE + 2,)) == [], "rolled-back row is there")
        c["conn"].commit()

    def tx_referral():
        cur = c["conn"].cursor()
        cur.execute("INSERT INTO notes (id, client, body) VALUES (%s, %s, %s)", (BASE + 3, CLIENT, "aborted"))
        try:
            cur.execute(OUTSIDE)
            raise Failed("the statement outside the bound ran")
        except psycopg2.Error as e:
            want_referral(e)
        c["conn"].rollback()
        check(rows("SELECT id FROM notes WHERE id = %s OR id = 1 ORDER BY id", (BASE + 3,)) == [(1,)], "nothing changed")
        c["conn"].commit()

    def close():
        c["conn"].reset()  # ROLLBACK if in a transaction, then RESET ALL
        c["conn"].close()

    s.recover = rollback
    s.run("connect", connect)
    s.run("read", read)
    s.run("read_param", read_param)
    s.run("tx_commit", tx_commit)
    s.run("tx_rollback", tx_rollback)
    s.run("tx_referral", tx_referral)
    s.run("close", close)


def run_psycopg3():
    import psycopg

    s = Steps(psycopg.__version__)
    c = {}
    s.recover = lambda: reconnect()

    def q(sql, params=None):
        return c["conn"].execute(sql, params).fetchall()

    def connect():
        c["conn"] = psycopg.connect(autocommit=True, **conn_kwargs())

    def reconnect():
        # psycopg 3.1 can count a transaction() whose BEGIN or COMMIT
        # failed as still open, and assert on the next one.
        c["conn"].close()
        connect()

    def read():
        check(q(READ) == SEED, "seed rows")

    def read_param():
        check(q("SELECT body FROM notes WHERE id = %s", (2,)) == [("second",)], "row 2")

    def tx_commit():
        with c["conn"].transaction():
            c["conn"].execute("INSERT INTO notes (id, client, body) VALUES (%s, %s, %s)", (BASE + 1, CLIENT, "committed"))
            c["conn"].execute("UPDATE notes SET body = %s WHERE id = %s", ("committed, updated", BASE + 1))
        check(q("SELECT body FROM notes WHERE id = %s", (BASE + 1,)) == [("committed, updated",)], "committed row read back")

    def tx_rollback():
        with c["conn"].transaction():
            c["conn"].execute("INSERT INTO notes (id, client, body) VALUES (%s, %s, %s)", (BASE + 2, CLIENT, "rolled back"))
            raise psycopg.Rollback()
        check(q("SELECT id FROM notes WHERE id = %s", (BASE + 2,)) == [], "rolled-back row is there")

    def tx_referral():
        try:
            with c["conn"].transaction():
                c["conn"].execute("INSERT INTO notes (id, client, body) VALUES (%s, %s, %s)", (BASE + 3, CLIENT, "aborted"))
                c["conn"].execute(OUTSIDE)
            raise Failed("the statement outside the bound ran")
        except psycopg.Error as e:
            want_referral(e)
        check(q("SELECT id FROM notes WHERE id = %s OR id = 1 ORDER BY id", (BASE + 3,)) == [(1,)], "nothing changed")

    def close():
        c["conn"].close()

    s.run("connect", connect)
    s.run("read", read)
    s.run("read_param", read_param)
    s.run("tx_commit", tx_commit)
    s.run("tx_rollback", tx_rollback)
    s.run("tx_referral", tx_referral)
    s.run("close", close)


def run_asyncpg():
    import asyncpg

    s = Steps(asyncpg.__version__)
    loop = asyncio.new_event_loop()
    c = {}

    def aw(coro):
        # A step that takes longer will not end: asyncpg 0.27, told a
        # parameter's type is unspecified (0), prepares its pg_type
        # introspection again and again while the front refuses it.
        return loop.run_until_complete(asyncio.wait_for(coro, 10))

    def q(sql, *args):
        return [tuple(r) for r in aw(c["conn"].fetch(sql, *args))]

    def connect():
        c["conn"] = aw(asyncpg.connect(host=ENV["HM_PG_HOST"], port=int(ENV["HM_PG_PORT"]), database=ENV["HM_PG_DATABASE"],
                                       user=ENV["HM_PG_USER"], password=ENV["HM_PG_PASSWORD"], ssl=False))

    def reconnect():
        c["conn"].terminate()
        connect()

    s.recover = reconnect

    def read():
        check(q(READ) == SEED, "seed rows")

    def read_param():
        check(q("SELECT body FROM notes WHERE id = $1", 2) == [("second",)], "row 2")

    # The transaction steps send their statements without arguments, which
    # asyncpg sends as simple queries, and check by command tags: they test
    # transactions, apart from the Describe every prepared fetch needs.
    def n(sql):
        return aw(c["conn"].execute(sql))

    def tx_commit():
        async def body():
            async with c["conn"].transaction():
                await c["conn"].execute(f"INSERT INTO notes (id, client, body) VALUES ({BASE + 1}, '{CLIENT}', 'committed')")
                await c["conn"].execute(f"UPDATE notes SET body = 'committed, updated' WHERE id = {BASE + 1}")
        aw(body())
        got = n(f"SELECT id FROM notes WHERE id = {BASE + 1} AND body = 'committed, updated'")
        check(got == "SELECT 1", f"committed row read back: {got}")

    def tx_rollback():
        async def body():
            tr = c["conn"].transaction()
            await tr.start()
            try:
                await c["conn"].execute(f"INSERT INTO notes (id, client, body) VALUES ({BASE + 2}, '{CLIENT}', 'rolled back')")
            finally:
                await tr.rollback()
        aw(body())
        got = n(f"SELECT id FROM notes WHERE id = {BASE + 2}")
        check(got == "SELECT 0", f"rolled-back row is there: {got}")

    def tx_referral():
        async def body():
            async with c["conn"].transaction():
                await c["conn"].execute(f"INSERT INTO notes (id, client, body) VALUES ({BASE + 3}, '{CLIENT}', 'aborted')")
                await c["conn"].execute(OUTSIDE)
        try:
            aw(body())
            raise Failed("the statement outside the bound ran")
        except asyncpg.PostgresError as e:
            want_referral(e)
        got = n(f"SELECT id FROM notes WHERE id = {BASE + 3} OR id = 1")
        check(got == "SELECT 1", f"nothing changed: {got}")

    def close():
        aw(c["conn"].reset())  # what a pool sends on release
        aw(c["conn"].close())

    s.run("connect", connect)
    s.run("read", read)
    s.run("read_param", read_param)
    s.run("tx_commit", tx_commit)
    s.run("tx_rollback", tx_rollback)
    s.run("tx_referral", tx_referral)
    s.run("close", close)
    if not c.get("conn") or c["conn"].is_closed():
        return
    try:
        aw(c["conn"].close(timeout=5))
    except Exception:
        c["conn"].terminate()


def engine(**kw):
    from sqlalchemy import create_engine
    from sqlalchemy.engine import URL

    url = URL.create("postgresql+psycopg2", username=ENV["HM_PG_USER"], password=ENV["HM_PG_PASSWORD"],
                     host=ENV["HM_PG_HOST"], port=int(ENV["HM_PG_PORT"]), database=ENV["HM_PG_DATABASE"])
    return create_engine(url, connect_args={"sslmode": "disable", "connect_timeout": 10}, **kw)


# What a SQLAlchemy engine over psycopg2 needs today: no hstore OID
# lookup in the catalog on each connection.
WORKAROUND = dict(use_native_hstore=False)


def run_sqlalchemy(workaround=False):
    import sqlalchemy
    from sqlalchemy import Column, BigInteger, Text, inspect, text
    from sqlalchemy.orm import Session, declarative_base

    s = Steps(sqlalchemy.__version__)
    Base = declarative_base()

    class Note(Base):
        __tablename__ = "notes"
        id = Column(BigInteger, primary_key=True, autoincrement=False)
        client = Column(Text, nullable=False)
        body = Column(Text, nullable=False)

    c = {}

    def q(sql, **params):
        with c["engine"].connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql), params)]

    def connect():
        # SQLAlchemy's default looks up hstore's OIDs in pg_type on
        # each new connection.
        c["engine"] = engine(**WORKAROUND) if workaround else engine()
        with c["engine"].connect() as conn:  # the dialect's first-connect queries
            conn.execute(text("SELECT 1"))

    def introspect():
        ins = inspect(c["engine"])
        check("notes" in ins.get_table_names(), "notes among the tables")
        check([col["name"] for col in ins.get_columns("notes")] == ["id", "client", "body"], "notes' columns")

    def read():
        check(q(READ) == SEED, "seed rows")

    def read_param():
        check(q("SELECT body FROM notes WHERE id = :id", id=2) == [("second",)], "row 2")

    def tx_commit():
        with Session(c["engine"]) as session:  # the ORM's unit of work
            note = Note(id=BASE + 1, client=CLIENT, body="committed")
            session.add(note)
            session.flush()
            note.body = "committed, updated"
            session.commit()
        check(q("SELECT body FROM notes WHERE id = :id", id=BASE + 1) == [("committed, updated",)], "committed row read back")

    def tx_rollback():
        with c["engine"].connect() as conn:
            tx = conn.begin()
            conn.execute(text("INSERT INTO notes (id, client, body) VALUES (:id, :c, 'rolled back')"), {"id": BASE + 2, "c": CLIENT})
            tx.rollback()
        check(q("SELECT id FROM notes WHERE id = :id", id=BASE + 2) == [], "rolled-back row is there")

    def tx_referral():
        try:
            with c["engine"].begin() as conn:
                conn.execute(text("INSERT INTO notes (id, client, body) VALUES (:id, :c, 'aborted')"), {"id": BASE + 3, "c": CLIENT})
                conn.execute(text(OUTSIDE))
            raise Failed("the statement outside the bound ran")
        except sqlalchemy.exc.DBAPIError as e:
            want_referral(e)
        check(q("SELECT id FROM notes WHERE id = :id OR id = 1 ORDER BY id", id=BASE + 3) == [(1,)], "nothing changed")

    def close():
        c["engine"].dispose()

    s.run("connect", connect)
    s.run("introspect", introspect)
    s.run("read", read)
    s.run("read_param", read_param)
    s.run("tx_commit", tx_commit)
    s.run("tx_rollback", tx_rollback)
    s.run("tx_referral", tx_referral)
    s.run("close", close)


def run_pandas():
    import pandas as pd
    from sqlalchemy import text

    s = Steps(pd.__version__)
    c = {}

    def connect():
        # Over the workaround's engine, so that read_sql is seen apart from
        # what the sqlalchemy line shows of the default engine.
        c["engine"] = engine(**WORKAROUND)
        with c["engine"].connect() as conn:
            conn.execute(text("SELECT 1"))

    def introspect():
        df = pd.read_sql_table("notes", c["engine"])  # reflects the table first
        check(list(df.columns) == ["id", "client", "body"], "notes' columns")

    def read():
        df = pd.read_sql(READ, c["engine"])
        check([tuple(r) for r in df.itertuples(index=False)] == SEED, "seed rows")

    def read_param():
        df = pd.read_sql(text("SELECT body FROM notes WHERE id = :id"), c["engine"], params={"id": 2})
        check(list(df["body"]) == ["second"], "row 2")

    def close():
        c["engine"].dispose()

    s.run("connect", connect)
    s.run("introspect", introspect)
    s.run("read", read)
    s.run("read_param", read_param)
    s.run("close", close)


CLIENTS = {"psycopg2": run_psycopg2, "psycopg3": run_psycopg3, "asyncpg": run_asyncpg,
           "sqlalchemy": run_sqlalchemy, "sqlalchemy-nohstore": lambda: run_sqlalchemy(workaround=True),
           "pandas": run_pandas}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CLIENTS or sys.argv[1] != CLIENT:
        sys.exit(f"usage: HM_CLIENT=NAME matrix.py NAME, NAME one of {sorted(CLIENTS)}")
    CLIENTS[CLIENT]()
