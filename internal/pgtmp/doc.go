// Package pgtmp starts throwaway PostgreSQL servers for tests and for
// `harbormaster demo`.
//
// Start finds the local server binaries (Config.BinDir, else FindBinDir),
// makes a temporary directory, runs initdb into it (superuser "postgres",
// trust authentication, UTF8, locale C, no fsync of the new cluster) and
// runs postgres listening on 127.0.0.1 on a free TCP port and on a Unix
// socket inside the temporary directory. Start returns once the server
// accepts connections; Stop shuts it down (fast shutdown, SIGINT) and
// removes the directory.
//
// NewTemplate makes a stopped cluster (initdb, then a caller's prepare
// step on the running server, then a fast shutdown) that Start copies in
// place of running initdb when Config.Template names it: a copy and a
// start take a fraction of initdb's time. The template is never started
// again, so every copy starts from the same bytes.
//
// Invariants:
//
//   - initdb and postgres always come from one directory. initdb starts the
//     postgres next to its own (symlink-resolved) location, so FindBinDir
//     resolves symlinks and only accepts a directory that holds both.
//   - The server is reachable only from this machine and trusts every local
//     connection: it is for tests and demos, never for data anyone keeps.
//   - The server never outlives its owner by accident. Stop is idempotent,
//     and the postmaster is started with a parent-death signal (SIGINT) from
//     an OS thread pinned for its lifetime, so a test binary that is killed
//     or times out does not leave a server behind (its directory may remain
//     in the temp dir).
//   - The server runs in its own process group, so a terminal's Ctrl-C
//     reaches the owner, which decides when to stop it.
//
// Running as root. initdb and postgres refuse to run as root. When the
// effective uid is 0, both run as an unprivileged user: Config.User if set,
// else the "postgres" system user if it exists, else "nobody". pgtmp does
// not create users; on a system with neither, create one (for example
// `useradd --system pgtmp`) and set Config.User. The data and socket
// directories are chowned to that user, and every directory above them
// must be searchable by it; Start checks this and names the directory that
// is not.
//
// Missing PostgreSQL is reported as ErrNotInstalled, naming the binaries
// and the places searched; scripts/ensure-postgres.sh installs them on
// Debian. The package builds on Unix only.
package pgtmp
