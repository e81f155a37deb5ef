//go:build unix

package pgtmp

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// defaultRunAsUsers are tried in order when running as root and
// Config.User is empty.
var defaultRunAsUsers = []string{"postgres", "nobody"}

// account is the unprivileged user the server runs as when pgtmp runs as root.
type account struct {
	name     string
	uid, gid uint32
}

// credential drops root: the account's uid and primary gid, and no
// supplementary groups.
func (a *account) credential() *syscall.Credential {
	return &syscall.Credential{Uid: a.uid, Gid: a.gid, Groups: []uint32{}}
}

// serverAccount returns the account to run the server as, or nil when the
// process is not root and the server can simply run as the current user.
func serverAccount(name string) (*account, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	names := defaultRunAsUsers
	if name != "" {
		names = []string{name}
	}
	var tried []string
	for _, n := range names {
		u, err := user.Lookup(n)
		if err != nil {
			tried = append(tried, n+" (no such user)")
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			tried = append(tried, n+" (non-numeric uid/gid)")
			continue
		}
		if uid == 0 {
			tried = append(tried, n+" (uid 0)")
			continue
		}
		return &account{name: n, uid: uint32(uid), gid: uint32(gid)}, nil
	}
	return nil, fmt.Errorf("running as root and no unprivileged user to run PostgreSQL as (tried %s); create one, e.g. `useradd --system pgtmp`, and set Config.User",
		strings.Join(tried, ", "))
}

// checkSearchable reports the first directory from dir up to the root that
// the account cannot search (enter), which would stop the server reaching
// its data directory.
func checkSearchable(dir string, a *account) error {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil // cannot tell; let the server report it
		}
		perm := fi.Mode().Perm()
		var can bool
		switch {
		case st.Uid == a.uid:
			can = perm&0o100 != 0
		case st.Gid == a.gid:
			can = perm&0o010 != 0
		default:
			can = perm&0o001 != 0
		}
		if !can {
			return fmt.Errorf("directory %s is not searchable by user %s (uid %d), which runs the server because this process is root; set Config.Dir to a directory it can reach (e.g. /tmp)",
				d, a.name, a.uid)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// chownAll hands paths to the account.
func chownAll(a *account, paths ...string) error {
	for _, p := range paths {
		if err := os.Chown(p, int(a.uid), int(a.gid)); err != nil {
			return err
		}
	}
	return nil
}
