package signing

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// sshKeygen returns the path of ssh-keygen. Under CI (CI=true) a missing
// binary fails the test; elsewhere it skips.
func sshKeygen(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("ssh-keygen")
	if err != nil {
		if _, serr := os.Stat("/usr/bin/ssh-keygen"); serr == nil {
			return "/usr/bin/ssh-keygen"
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("ssh-keygen not found: %v", err)
		}
		t.Skipf("ssh-keygen not found: %v", err)
	}
	return path
}

// runKeygen runs ssh-keygen in UTC with stdin and returns its combined
// output and whether it exited 0.
func runKeygen(t *testing.T, bin string, stdin []byte, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"TZ=UTC", "PATH=/usr/bin:/bin"}
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("ssh-keygen %v: %v", args, err)
		}
		return string(out), false
	}
	return string(out), true
}

// keygenKey makes a key pair with ssh-keygen and returns the private key
// path and public key line.
func keygenKey(t *testing.T, bin, dir, name string, args ...string) (string, []byte) {
	t.Helper()
	path := filepath.Join(dir, name)
	args = append([]string{"-q", "-N", "", "-C", name, "-f", path}, args...)
	if out, ok := runKeygen(t, bin, nil, args...); !ok {
		t.Fatalf("ssh-keygen %v: %s", args, out)
	}
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return path, pub
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

var keygenKeyTypes = []struct {
	name string
	args []string
	// deterministic is true where two signatures of one message are equal,
	// so ours must equal ssh-keygen's byte for byte.
	deterministic bool
}{
	{"ed25519", []string{"-t", "ed25519"}, true},
	{"ecdsa-p256", []string{"-t", "ecdsa", "-b", "256"}, false},
	{"ecdsa-p521", []string{"-t", "ecdsa", "-b", "521"}, false},
	{"rsa-2048", []string{"-t", "rsa", "-b", "2048"}, true},
}

// TestInteropKeygenSignsWeVerify: ssh-keygen -Y sign, then our Verify.
func TestInteropKeygenSignsWeVerify(t *testing.T) {
	t.Parallel()
	bin := sshKeygen(t)
	for _, kt := range keygenKeyTypes {
		t.Run(kt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			keyPath, pub := keygenKey(t, bin, dir, "alice", kt.args...)
			msg := []byte(`{"target":"shop","sentence":"unstick orders pending more than a day"}` + "\n")
			msgPath := filepath.Join(dir, "delegation.json")
			writeFile(t, msgPath, msg)
			if out, ok := runKeygen(t, bin, nil, "-Y", "sign", "-f", keyPath, "-n", NamespaceDelegation, msgPath); !ok {
				t.Fatalf("ssh-keygen -Y sign: %s", out)
			}
			theirs, err := os.ReadFile(msgPath + ".sig")
			if err != nil {
				t.Fatal(err)
			}

			l, err := AllowedSignersLine([]string{"alice@shop"}, []string{NamespaceDelegation}, pub)
			if err != nil {
				t.Fatal(err)
			}
			a := signers(t, l)
			s, err := a.Verify(msg, theirs, NamespaceDelegation, "shop", testNow)
			if err != nil || s.Name != "alice" {
				t.Fatalf("Verify(ssh-keygen's signature) = %+v, %v", s, err)
			}
			if _, err := a.Verify(msg, theirs, NamespaceApproval, "shop", testNow); !errors.Is(err, ErrBadSignature) {
				t.Fatalf("other namespace: err = %v", err)
			}
			if _, err := a.Verify(msg, theirs, NamespaceDelegation, "bank", testNow); !errors.Is(err, ErrUnknownSigner) {
				t.Fatalf("other target: err = %v", err)
			}
			if _, err := a.Verify(append(bytes.Clone(msg), 'x'), theirs, NamespaceDelegation, "shop", testNow); !errors.Is(err, ErrBadSignature) {
				t.Fatalf("tampered message: err = %v", err)
			}

			// Our signer reads ssh-keygen's key file, and where signing
			// is deterministic writes exactly what ssh-keygen wrote.
			k, err := LoadPrivateKey(keyPath)
			if err != nil {
				t.Fatal(err)
			}
			ours, err := k.Sign(NamespaceDelegation, msg)
			if err != nil {
				t.Fatal(err)
			}
			if kt.deterministic && !bytes.Equal(ours, theirs) {
				t.Fatalf("our signature differs from ssh-keygen's:\nours:\n%s\ntheirs:\n%s", ours, theirs)
			}
			if fp := strings.Fields(mustKeygen(t, bin, "-l", "-E", "sha256", "-f", keyPath+".pub"))[1]; fp != s.Fingerprint || fp != k.Fingerprint() {
				t.Fatalf("fingerprint %s, ssh-keygen says %s", s.Fingerprint, fp)
			}
		})
	}
}

func mustKeygen(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, ok := runKeygen(t, bin, nil, args...)
	if !ok {
		t.Fatalf("ssh-keygen %v: %s", args, out)
	}
	return out
}

// TestInteropWeSignKeygenVerifies: our GenerateEd25519 and Sign, our
// AllowedSignersLine, then ssh-keygen -Y verify and check-novalidate.
func TestInteropWeSignKeygenVerifies(t *testing.T) {
	t.Parallel()
	bin := sshKeygen(t)
	dir := t.TempDir()
	priv, pub, err := GenerateEd25519("alice")
	if err != nil {
		t.Fatal(err)
	}
	privPath := filepath.Join(dir, "id_ed25519")
	writeFile(t, privPath, priv)

	// ssh-keygen reads our private key file and derives our public key.
	if derived := mustKeygen(t, bin, "-y", "-f", privPath); strings.Join(strings.Fields(derived)[:2], " ") != strings.Join(strings.Fields(string(pub))[:2], " ") {
		t.Fatalf("ssh-keygen -y = %q, GenerateEd25519 gave %q", derived, pub)
	}

	// Keys made by ssh-keygen, signed by us.
	ecPath, ecPub := keygenKey(t, bin, dir, "ec", "-t", "ecdsa", "-b", "384")
	rsaPath, rsaPub := keygenKey(t, bin, dir, "rsa", "-t", "rsa", "-b", "2048")
	keys := []struct {
		name    string
		privPEM []byte
		pub     []byte
	}{
		{"ed25519-ours", priv, pub},
		{"ecdsa-p384-keygen", must(os.ReadFile(ecPath)), ecPub},
		{"rsa-2048-keygen", must(os.ReadFile(rsaPath)), rsaPub},
	}
	for _, k := range keys {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			l, err := AllowedSignersLine([]string{"alice@shop", "alice@shop-*"}, []string{NamespaceDelegation, NamespaceRevocation}, k.pub)
			if err != nil {
				t.Fatal(err)
			}
			signersPath := filepath.Join(dir, "allowed_signers")
			writeFile(t, signersPath, []byte("# harbormaster signers\n"+l+"\n"))
			msg := []byte(`{"target":"shop"}`)
			sig, err := Sign(k.privPEM, NamespaceDelegation, msg)
			if err != nil {
				t.Fatal(err)
			}
			sigPath := filepath.Join(dir, "msg.sig")
			writeFile(t, sigPath, sig)

			verify := func(identity, ns string, m []byte) (string, bool) {
				return runKeygen(t, bin, m, "-Y", "verify", "-f", signersPath, "-I", identity, "-n", ns, "-s", sigPath)
			}
			if out, ok := verify("alice@shop", NamespaceDelegation, msg); !ok || !strings.Contains(out, `Good "harbormaster-delegation" signature for alice@shop`) {
				t.Fatalf("ssh-keygen -Y verify refused our signature: %s", out)
			}
			if out, ok := verify("alice@shop-eu", NamespaceDelegation, msg); !ok {
				t.Fatalf("ssh-keygen -Y verify refused alice@shop-eu: %s", out)
			}
			refusals := []struct {
				name, identity, ns string
				msg                []byte
			}{
				{"other target", "alice@bank", NamespaceDelegation, msg},
				{"other name", "bob@shop", NamespaceDelegation, msg},
				{"other namespace", "alice@shop", NamespaceRevocation, msg},
				{"tampered message", "alice@shop", NamespaceDelegation, append(bytes.Clone(msg), ' ')},
			}
			for _, r := range refusals {
				if out, ok := verify(r.identity, r.ns, r.msg); ok {
					t.Errorf("%s: ssh-keygen accepted: %s", r.name, out)
				}
			}
			if out, ok := runKeygen(t, bin, msg, "-Y", "check-novalidate", "-n", NamespaceDelegation, "-s", sigPath); !ok || !strings.Contains(out, "Good") {
				t.Fatalf("ssh-keygen -Y check-novalidate: %s", out)
			}
			if out, ok := runKeygen(t, bin, msg, "-Y", "check-novalidate", "-n", NamespaceApproval, "-s", sigPath); ok {
				t.Fatalf("check-novalidate in another namespace accepted: %s", out)
			}
			if out := mustKeygen(t, bin, "-Y", "find-principals", "-f", signersPath, "-s", sigPath); strings.Fields(out)[0] != "alice@shop" {
				t.Fatalf("find-principals = %q", out)
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestInteropDecisionsAgree checks, case by case, that our Verify names NAME
// exactly when ssh-keygen -Y verify -I NAME@TARGET accepts, for one file
// with globs, negations, namespace lists and validity windows.
func TestInteropDecisionsAgree(t *testing.T) {
	t.Parallel()
	bin := sshKeygen(t)
	dir := t.TempDir()
	alice, bob, carol := newEd25519(t, ""), newEd25519(t, ""), newEd25519(t, "")
	stranger := newEd25519(t, "")
	file := strings.Join([]string{
		"# humans",
		line(t, alice, `namespaces="harbormaster-delegation,harbormaster-approval"`, "alice@shop", "alice@shop-*"),
		line(t, bob, `valid-after="20260101Z",valid-before="20261231235959Z"`, "bob@*", "!bob@bank"),
		line(t, carol, `namespaces="harbormaster-*,!harbormaster-delegation",valid-before="202701011200Z"`, `carol@b?nk`),
	}, "\n") + "\n"
	signersPath := filepath.Join(dir, "allowed_signers")
	writeFile(t, signersPath, []byte(file))
	a := signers(t, strings.Split(strings.TrimSpace(file), "\n")...)

	type tcase struct {
		signer, ns, target, ts string
		sigPath                string
		ours                   bool
		detail                 string
		theirs                 bool
		err                    error
	}
	keys := map[string]testKey{"alice": alice, "bob": bob, "carol": carol, "stranger": stranger}
	msg := []byte("canonical bound")
	var cases []*tcase
	for signer, k := range keys {
		for _, ns := range []string{NamespaceDelegation, NamespaceApproval} {
			sig := sign(t, k, ns, msg)
			sigPath := filepath.Join(dir, signer+"-"+ns+".sig")
			writeFile(t, sigPath, sig)
			for _, target := range []string{"shop", "shop-eu", "bank", "bonk"} {
				for _, ts := range []string{"20251231235959", "20260101000000", "20261231235959", "20270101120000", "20270101120001"} {
					now, err := time.Parse("20060102150405", ts)
					if err != nil {
						t.Fatal(err)
					}
					got, err := a.Verify(msg, sig, ns, target, now)
					if err != nil && !errors.Is(err, ErrUnknownSigner) {
						t.Errorf("%s %s %s %s: unexpected error %v", signer, ns, target, ts, err)
					}
					cases = append(cases, &tcase{signer: signer, ns: ns, target: target, ts: ts, sigPath: sigPath,
						ours: err == nil && got.Name == signer, detail: fmt.Sprintf("%+v, %v", got, err)})
				}
			}
		}
	}

	// ssh-keygen runs are independent; run several at once.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, c := range cases {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cmd := exec.Command(bin, "-Y", "verify", "-f", signersPath, "-I", c.signer+"@"+c.target,
				"-n", c.ns, "-s", c.sigPath, "-Overify-time="+c.ts)
			cmd.Env = []string{"TZ=UTC"}
			cmd.Stdin = bytes.NewReader(msg)
			err := cmd.Run()
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				c.err = err
			}
			c.theirs = err == nil
		})
	}
	wg.Wait()

	accepted := 0
	for _, c := range cases {
		if c.err != nil {
			t.Fatalf("ssh-keygen: %v", c.err)
		}
		if c.ours != c.theirs {
			t.Errorf("%s signs %s for %s at %s: ours %v (%s), ssh-keygen %v", c.signer, c.ns, c.target, c.ts, c.ours, c.detail, c.theirs)
		}
		if c.ours {
			accepted++
		}
	}
	// Both answers occur, so agreement is not vacuous.
	if accepted == 0 || accepted == len(cases) {
		t.Fatalf("%d of %d cases accepted; the table does not exercise both outcomes", accepted, len(cases))
	}
	t.Logf("%d cases, %d accepted by both", len(cases), accepted)
}
