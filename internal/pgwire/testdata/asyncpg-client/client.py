# asyncpg against the wire front. asyncpg prepares every statement
# (Parse, Describe of the statement) and encodes its parameters and
# decodes its rows by that description. Argument: the agent's URL.
# Prints one JSON line per step.
import asyncio
import json
import sys

import asyncpg


def out(step, **v):
    print(json.dumps({"step": step, **v}), flush=True)


async def main(url):
    c = await asyncpg.connect(url)
    r = await c.fetch("SELECT id, status FROM orders WHERE customer_id = $1 AND id < $2 ORDER BY id", 3, 40)
    out("read", rows=[dict(x) for x in r])
    st = await c.prepare("SELECT id, status, created_at FROM orders WHERE id = $1")
    out("prepared", params=[t.name for t in st.get_parameters()],
        columns=[[a.name, a.type.name] for a in st.get_attributes()])
    r = await st.fetchrow(5)
    out("prepared_row", id=r["id"], status=r["status"], aware=r["created_at"].tzinfo is not None)
    # An enum column is described, and sent, as text.
    r = await c.fetch("SELECT id, m FROM moods WHERE m = $1", "calm")
    out("enum", rows=[dict(x) for x in r])
    tag = await c.execute("UPDATE orders SET status = $1, updated_at = now() WHERE id = $2", "retrying", 6)
    out("write", tag=tag)
    try:
        await c.fetch("SELECT code FROM secrets WHERE id = $1", 1)
        out("outside", error=None)
    except asyncpg.PostgresError as e:
        out("outside", error=e.sqlstate)
    await c.close()


asyncio.run(main(sys.argv[1]))
