package cli_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"database/sql"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/cli"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// writeLogbook writes entries to a fresh store through a real logbook
// writer that signs every 10 entries and when it stops, then deletes the
// checkpoints named in drop (dropping the append-only triggers, as someone
// with the file would). It returns the store's path and the verifier key.
func writeLogbook(t *testing.T, entries int, drop string) (string, string) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.db")
	st, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	const name = "verify-test"
	signer, err := logbook.NewCheckpointSigner(name, priv)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := logbook.New(st, signer, time.Now, nil, logbook.Config{Origin: name + "/logbook", CheckpointEvery: 10, CheckpointInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- lb.Run(rctx) }()
	for i := range entries {
		if _, err := lb.Append(ctx, logbook.Record{Kind: "decision", Payload: map[string]any{"i": i}}); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st.Close()
	if drop != "" {
		db, err := sql.Open(store.DriverName, path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, s := range []string{"DROP TRIGGER logbook_checkpoints_no_delete", "DELETE FROM logbook_checkpoints WHERE size IN (" + drop + ")"} {
			if _, err := db.Exec(s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}
	vkey, err := logbook.CheckpointVerifierKey(name, pub)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "control-plane.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, vkey
}

// TestLogbookVerifyKeyWithoutName: verify --key without --name took the
// name "harbormaster", so the right key over a store of another name
// failed as a rewritten log would. It takes the name the store's
// checkpoints carry; a wrong key still fails, and so does a wrong --name.
func TestLogbookVerifyKeyWithoutName(t *testing.T) {
	t.Parallel()
	path, _ := writeLogbook(t, 25, "")
	key := filepath.Join(filepath.Dir(path), "control-plane.pem")
	verify := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := cli.Do(append([]string{"logbook", "verify", "--store", path, "--checkpoint-every", "10"}, args...), strings.NewReader(""), &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, errOut := verify("--key", key); code != 0 || !strings.HasPrefix(out, "ok: 25 entries") ||
		!strings.Contains(errOut, "verifying the checkpoints as verify-test/logbook, the name they carry") {
		t.Fatalf("the right key without --name: exit %d, or the name it took not said\n%s%s", code, out, errOut)
	}
	if code, out, errOut := verify("--key", key, "--name", "verify-test"); code != 0 {
		t.Fatalf("the right key and name: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := verify("--key", key, "--name", "harbormaster"); code == 0 {
		t.Fatalf("a wrong --name verified:\n%s", out)
	}
	other, _ := writeLogbook(t, 1, "")
	if code, out, _ := verify("--key", filepath.Join(filepath.Dir(other), "control-plane.pem")); code == 0 {
		t.Fatalf("another key verified:\n%s", out)
	}
}

// TestLogbookVerifyUnsignedTail: 25 entries signed at 1 (the first batch),
// 10, 20 and 25 (at stop), some of those checkpoints deleted. The chain still links, so only
// its unsigned tail tells: longer than the checkpoint interval, or with no
// checkpoint at all, verify fails unless --allow-unsigned-tail.
func TestLogbookVerifyUnsignedTail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		drop   string
		flags  []string
		code   int
		stdout string
		stderr string
	}{
		{name: "all signed", flags: []string{"--checkpoint-every", "10"},
			stdout: "ok: 25 entries, head 25 "},
		{name: "tail within the interval", drop: "25", flags: []string{"--checkpoint-every", "10"},
			stdout: "; signed through entry 20 of 25; 5 entries unsigned\n"},
		{name: "tail longer than the interval", drop: "20, 25", flags: []string{"--checkpoint-every", "10"}, code: 1,
			stdout: "unsigned tail: 25 entries, head 25 ",
			stderr: "harbormaster: error: 15 entries follow the last checkpoint (entry 10), more than the checkpoint interval (10)"},
		{name: "tail longer than the interval, allowed", drop: "20, 25", flags: []string{"--checkpoint-every", "10", "--allow-unsigned-tail"},
			stdout: "; signed through entry 10 of 25; 15 entries unsigned, more than the checkpoint interval (10)\n"},
		{name: "tail within a larger interval", drop: "20, 25", flags: []string{"--checkpoint-every", "20"},
			stdout: "ok: 25 entries"},
		{name: "tail within the default interval", drop: "20, 25",
			stdout: "; signed through entry 10 of 25; 15 entries unsigned\n"},
		{name: "no checkpoint", drop: "1, 10, 20, 25", code: 1,
			stdout: "unsigned: 25 entries, head 25 ",
			stderr: "harbormaster: error: no checkpoint signs any of the 25 entries"},
		{name: "no checkpoint, allowed", drop: "1, 10, 20, 25", flags: []string{"--allow-unsigned-tail"},
			stdout: "; signed through entry 0 of 25; 25 entries unsigned, and no checkpoint signs any entry\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path, vkey := writeLogbook(t, 25, tt.drop)
			var out, errb bytes.Buffer
			args := append([]string{"logbook", "verify", "--store", path, "--vkey", vkey}, tt.flags...)
			code := cli.Do(args, strings.NewReader(""), &out, &errb)
			if code != tt.code || !strings.Contains(out.String(), tt.stdout) || !strings.HasPrefix(errb.String(), tt.stderr) ||
				(tt.stderr == "") != (errb.Len() == 0) {
				t.Fatalf("%s: exit %d, want %d\nstdout: %s\nstderr: %s\nwant stdout with %q, stderr starting %q",
					strings.Join(tt.flags, " "), code, tt.code, out.String(), errb.String(), tt.stdout, tt.stderr)
			}
			if code != 0 && !strings.Contains(errb.String(), "harbormaster: hint: ") {
				t.Errorf("no hint on failure:\n%s", errb.String())
			}
		})
	}
}

func TestLogbookVerifyCheckpointEveryUsage(t *testing.T) {
	t.Parallel()
	path, vkey := writeLogbook(t, 1, "")
	var out, errb bytes.Buffer
	code := cli.Do([]string{"logbook", "verify", "--store", path, "--vkey", vkey, "--checkpoint-every", "0"}, strings.NewReader(""), &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "--checkpoint-every must be at least 1") {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
}
