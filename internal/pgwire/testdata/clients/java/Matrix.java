// The client matrix's Java client (TestClientMatrix, clients_test.go):
// the PostgreSQL JDBC driver, compiled by the test with javac.
//
// Usage: java -cp CLASSES:postgresql.jar Matrix, with HM_PG_HOST,
// HM_PG_PORT, HM_PG_DATABASE, HM_PG_USER, HM_PG_PASSWORD (the wire front
// and an agent's token), HM_CLIENT and HM_BASE_ID (the first of the ids
// this client writes) in the environment. Prints one JSON line with the
// driver's version, then one per step: {client, step, ok, error}. A step
// that fails says why (the SQLSTATE first) and the next steps still run.

import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

public class Matrix {
    static final String CLIENT = System.getenv("HM_CLIENT");
    static final long BASE = Long.parseLong(System.getenv("HM_BASE_ID"));
    static final String READ = "SELECT id, client, body FROM notes WHERE client = 'seed' ORDER BY id";
    // No rule of the delegation lets the agent delete: referred (HM001).
    static final String OUTSIDE = "DELETE FROM notes WHERE id = 1";
    static final String SEED = "[1/seed/first, 2/seed/second]";

    static Connection conn;
    static boolean connected;

    interface Step {
        void run() throws Exception;
    }

    static class Failed extends Exception {
        Failed(String msg) {
            super(msg);
        }
    }

    static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                default:
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
            }
        }
        return b.append('"').toString();
    }

    static void emit(String step, boolean ok, String error) {
        StringBuilder b = new StringBuilder("{\"client\":").append(json(CLIENT));
        b.append(",\"step\":").append(json(step)).append(",\"ok\":").append(ok);
        if (error != null) {
            b.append(",\"error\":").append(json(error));
        }
        System.out.println(b.append('}'));
        System.out.flush();
    }

    static String sqlstate(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof SQLException && ((SQLException) t).getSQLState() != null) {
                return ((SQLException) t).getSQLState();
            }
        }
        return "";
    }

    static String describe(Throwable e) {
        String code = sqlstate(e);
        String msg = String.valueOf(e.getMessage()).replaceAll("\\s+", " ");
        if (msg.length() > 400) {
            msg = msg.substring(0, 400);
        }
        return code.isEmpty() ? e.getClass().getSimpleName() + ": " + msg : code + ": " + msg;
    }

    static void check(boolean cond, String msg) throws Failed {
        if (!cond) {
            throw new Failed(msg);
        }
    }

    // After a failed step the driver may be mid-transaction: roll back,
    // or reconnect when that fails too.
    static void recover() {
        try {
            if (!conn.getAutoCommit()) {
                conn.rollback();
            }
            conn.setAutoCommit(true);
        } catch (SQLException e) {
            try {
                conn.close();
                connect();
            } catch (Exception e2) {
                System.err.println(CLIENT + ": reconnecting: " + describe(e2));
            }
        }
    }

    static void run(String name, Step step) {
        if (!name.equals("connect") && !connected) {
            emit(name, false, "not run: connect failed");
            return;
        }
        try {
            step.run();
        } catch (Exception e) {
            emit(name, false, describe(e));
            if (connected && !name.equals("close")) {
                recover();
            }
            return;
        }
        if (name.equals("connect")) {
            connected = true;
        }
        emit(name, true, null);
    }

    static void connect() throws SQLException {
        String url = "jdbc:postgresql://" + System.getenv("HM_PG_HOST") + ":" + System.getenv("HM_PG_PORT") + "/"
                + System.getenv("HM_PG_DATABASE");
        Properties p = new Properties();
        p.setProperty("user", System.getenv("HM_PG_USER"));
        p.setProperty("password", System.getenv("HM_PG_PASSWORD"));
        p.setProperty("sslmode", "disable");
        p.setProperty("connectTimeout", "10");
        p.setProperty("socketTimeout", "30");
        conn = DriverManager.getConnection(url, p);
    }

    // rows renders a result as [id/client/body, ...] or [col, ...].
    static String rows(ResultSet rs) throws SQLException {
        List<String> out = new ArrayList<>();
        int n = rs.getMetaData().getColumnCount();
        while (rs.next()) {
            StringBuilder b = new StringBuilder();
            for (int i = 1; i <= n; i++) {
                b.append(i > 1 ? "/" : "").append(rs.getString(i));
            }
            out.add(b.toString());
        }
        return out.toString();
    }

    static String query(String sql, Object... params) throws SQLException {
        try (PreparedStatement ps = conn.prepareStatement(sql)) {
            for (int i = 0; i < params.length; i++) {
                ps.setObject(i + 1, params[i]);
            }
            try (ResultSet rs = ps.executeQuery()) {
                return rows(rs);
            }
        }
    }

    static void update(String sql, Object... params) throws SQLException {
        try (PreparedStatement ps = conn.prepareStatement(sql)) {
            for (int i = 0; i < params.length; i++) {
                ps.setObject(i + 1, params[i]);
            }
            ps.executeUpdate();
        }
    }

    static final String INSERT = "INSERT INTO notes (id, client, body) VALUES (?, ?, ?)";

    public static void main(String[] args) {
        System.out.println("{\"client\":" + json(CLIENT) + ",\"version\":"
                + json(org.postgresql.util.DriverInfo.DRIVER_VERSION) + "}");
        run("connect", Matrix::connect);
        run("introspect", () -> {
            DatabaseMetaData md = conn.getMetaData();
            List<String> cols = new ArrayList<>();
            try (ResultSet rs = md.getColumns(null, "public", "notes", null)) {
                while (rs.next()) {
                    cols.add(rs.getString("COLUMN_NAME"));
                }
            }
            check(cols.toString().equals("[id, client, body]"), "notes' columns: " + cols);
        });
        run("read", () -> {
            try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery(READ)) {
                String got = rows(rs);
                check(got.equals(SEED), "seed rows: " + got);
            }
        });
        run("read_param", () -> {
            // Six times: from the fifth execution on (prepareThreshold) the
            // driver uses a named server-side prepared statement.
            try (PreparedStatement ps = conn.prepareStatement("SELECT body FROM notes WHERE id = ?")) {
                for (int i = 0; i < 6; i++) {
                    ps.setLong(1, 2L);
                    try (ResultSet rs = ps.executeQuery()) {
                        String got = rows(rs);
                        check(got.equals("[second]"), "row 2, execution " + (i + 1) + ": " + got);
                    }
                }
            }
        });
        run("tx_commit", () -> {
            conn.setAutoCommit(false);
            update(INSERT, BASE + 1, CLIENT, "committed");
            update("UPDATE notes SET body = ? WHERE id = ?", "committed, updated", BASE + 1);
            conn.commit();
            conn.setAutoCommit(true);
            String got = query("SELECT body FROM notes WHERE id = ?", BASE + 1);
            check(got.equals("[committed, updated]"), "committed row read back: " + got);
        });
        run("tx_rollback", () -> {
            conn.setAutoCommit(false);
            update(INSERT, BASE + 2, CLIENT, "rolled back");
            conn.rollback();
            conn.setAutoCommit(true);
            String got = query("SELECT id FROM notes WHERE id = ?", BASE + 2);
            check(got.equals("[]"), "rolled-back row is there: " + got);
        });
        run("tx_referral", () -> {
            conn.setAutoCommit(false);
            try {
                update(INSERT, BASE + 3, CLIENT, "aborted");
                update(OUTSIDE);
                throw new Failed("the statement outside the bound ran");
            } catch (SQLException e) {
                check(sqlstate(e).startsWith("HM"), "want an HM-class referral error, got " + describe(e));
            }
            conn.rollback();
            conn.setAutoCommit(true);
            String got = query("SELECT id FROM notes WHERE id = ? OR id = 1 ORDER BY id", BASE + 3);
            check(got.equals("[1]"), "nothing changed: " + got);
        });
        run("close", () -> conn.close());
    }
}
