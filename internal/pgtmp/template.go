package pgtmp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Template is a stopped cluster that Start copies in place of running
// initdb (Config.Template): copying a data directory and starting on it
// takes a fraction of initdb's time. A Template is never started again
// once NewTemplate returns, so every copy starts from the same bytes:
// nothing one server does reaches another through it.
type Template struct {
	root    string // removed by Remove
	dataDir string
	binDir  string
	acct    *account // owns the data directory; nil: this process's user

	mu      sync.Mutex
	removed bool
}

// NewTemplate runs initdb as Start does (cfg as for Start; cfg.Template
// must be nil), starts the server on it, calls prepare (when not nil)
// with it, and stops it with a fast shutdown, which leaves a clean
// cluster to copy. On error nothing is left behind. ctx bounds the whole
// call; cfg.StartTimeout bounds initdb plus start-up, as for Start.
func NewTemplate(ctx context.Context, cfg Config, prepare func(context.Context, *Server) error) (*Template, error) {
	cfg = cfg.WithDefaults()
	if cfg.Template != nil {
		return nil, errors.New("pgtmp: template: Config.Template must be nil")
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("pgtmp: template: %w", err)
	}
	s, err := start(ctx, cfg)
	if errors.Is(err, ErrNotInstalled) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("pgtmp: template: %w", err)
	}
	if prepare != nil {
		if err := prepare(ctx, s); err != nil {
			_ = s.Stop()
			return nil, fmt.Errorf("pgtmp: template: prepare: %w", err)
		}
	}
	// Stop the postmaster but keep the directory (Stop would remove it).
	s.mu.Lock()
	s.stopped = true
	s.stopErr = ErrStopped
	crashed := s.proc.exited()
	waitErr := s.proc.stop(s.stopTimeout)
	s.mu.Unlock()
	if crashed || waitErr != nil {
		_ = os.RemoveAll(s.root)
		return nil, fmt.Errorf("pgtmp: template: shutdown: %v\n%s", waitErr, s.proc.out.tail())
	}
	if _, err := os.Lstat(filepath.Join(s.dataDir, "postmaster.pid")); !errors.Is(err, fs.ErrNotExist) {
		_ = os.RemoveAll(s.root)
		return nil, fmt.Errorf("pgtmp: template: the server left postmaster.pid behind (%v): not a clean shutdown", err)
	}
	acct, err := serverAccount(cfg.User)
	if err != nil {
		_ = os.RemoveAll(s.root)
		return nil, err
	}
	binDir := cfg.BinDir
	if binDir == "" {
		if binDir, err = FindBinDir(); err != nil {
			_ = os.RemoveAll(s.root)
			return nil, err
		}
	}
	return &Template{root: s.root, dataDir: s.dataDir, binDir: binDir, acct: acct}, nil
}

// Remove deletes the template's directory. Call it once no Start that
// copies it is running; later Starts with it fail.
func (t *Template) Remove() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.removed {
		return nil
	}
	t.removed = true
	if err := os.RemoveAll(t.root); err != nil {
		return fmt.Errorf("pgtmp: template: remove: %w", err)
	}
	return nil
}

// copyTo copies the template's data directory into dataDir, which exists,
// empty, with mode 0700 and owned by acct. Every file and directory keeps
// its mode and is owned by acct (this process's user when nil), the user
// the server runs as.
func (t *Template) copyTo(binDir, dataDir string, acct *account) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.removed:
		return errors.New("template: removed")
	case binDir != t.binDir:
		return fmt.Errorf("template: made with the binaries of %s, not %s", t.binDir, binDir)
	case (acct == nil) != (t.acct == nil) || acct != nil && (acct.uid != t.acct.uid || acct.gid != t.acct.gid):
		return errors.New("template: made for another server user")
	}
	err := filepath.WalkDir(t.dataDir, func(src string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(t.dataDir, src)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		dst := filepath.Join(dataDir, rel)
		info, err := e.Info()
		if err != nil {
			return err
		}
		switch {
		case e.IsDir():
			if err := os.Mkdir(dst, info.Mode().Perm()); err != nil {
				return err
			}
		case e.Type().IsRegular():
			if err := copyFile(src, dst, info.Mode().Perm()); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: not a regular file or a directory", src)
		}
		if acct != nil {
			return os.Lchown(dst, int(acct.uid), int(acct.gid))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("copy template: %w", err)
	}
	return nil
}

// copyFile copies src to a new file dst (io.Copy between two files uses
// copy_file_range on Linux: no bytes pass through this process).
func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
