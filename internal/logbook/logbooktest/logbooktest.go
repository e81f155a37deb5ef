// Package logbooktest opens a real store and a running logbook for the
// tests of the packages that write one.
package logbooktest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// Running opens the store at location (a fresh SQLite file when it is
// ""), a logbook signed under name with a new key, and runs its writer;
// at cleanup it stops the writer and closes the store, after the
// cleanups registered later (a ledger's drain, say).
func Running(t testing.TB, name, location string, opts ...store.Option) (*store.Store, *logbook.Logbook) {
	t.Helper()
	return RunningWith(t, name, location, time.Now, logbook.Config{}, opts...)
}

// RunningWith is Running with the logbook's clock and configuration (its
// Origin is set from name).
func RunningWith(t testing.TB, name, location string, clock func() time.Time, cfg logbook.Config, opts ...store.Option) (*store.Store, *logbook.Logbook) {
	t.Helper()
	ctx := context.Background()
	if location == "" {
		location = filepath.Join(t.TempDir(), "store.db")
	}
	st, err := store.Open(ctx, location, opts...)
	if err != nil {
		t.Fatal(err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := logbook.NewCheckpointSigner(name, priv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Origin = name + "/logbook"
	lb, err := logbook.New(st, signer, clock, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- lb.Run(rctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("logbook run: %v", err)
		}
		st.Close()
	})
	return st, lb
}
