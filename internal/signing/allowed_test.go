package signing

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func TestParseAllowedSignersErrors(t *testing.T) {
	t.Parallel()
	k := newEd25519(t, "")
	f := strings.Fields(string(k.pubLine))
	key := f[0] + " " + f[1]
	rsa1024 := strings.Join(strings.Fields(string(newRSA(t, 1024).pubLine))[:2], " ")

	// A certificate, to show certificates are refused.
	_, caPriv, _ := ed25519.GenerateKey(rand.Reader)
	caSigner, err := ssh.NewSignerFromKey(caPriv)
	if err != nil {
		t.Fatal(err)
	}
	pk, _ := ParsePrivateKey(k.priv)
	cert := &ssh.Certificate{Key: pk.PublicKey(), CertType: ssh.UserCert, ValidPrincipals: []string{"alice"}, ValidBefore: ssh.CertTimeInfinity}
	if err := cert.SignCert(rand.Reader, caSigner); err != nil {
		t.Fatal(err)
	}
	certLine := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(cert)))

	good := "alice@shop " + key
	cases := []struct {
		name string
		file string
		line int
		want string
	}{
		{"principals only", "alice@shop", 1, "missing public key"},
		{"no key after options", `alice@shop namespaces="x"`, 1, "missing public key after options"},
		{"no base64", "alice@shop ssh-ed25519", 1, "missing base64 key"},
		{"bad base64", "alice@shop ssh-ed25519 !!!!", 1, "bad base64"},
		{"key type mismatch", "alice@shop ecdsa-sha2-nistp256 " + f[1], 1, "does not match"},
		{"unknown key type", "alice@shop ssh-foo " + f[1], 1, "unsupported key type"},
		{"DSA key type", "alice@shop ssh-dss " + f[1], 1, "unsupported key type"},
		{"security key type", "alice@shop sk-ssh-ed25519@openssh.com " + f[1], 1, "unsupported key type"},
		{"truncated key", "alice@shop ssh-ed25519 " + f[1][:40], 1, "key"},
		{"small RSA", "alice@shop " + rsa1024, 1, "1024 bits"},
		{"certificate", "alice@shop " + certLine, 1, "certificates are not supported"},
		{"no NAME@TARGET", "alice " + key, 1, "want NAME@TARGET"},
		{"email-ish two ats", "alice@shop@x " + key, 1, "target pattern may hold only"},
		{"glob name", "*@shop " + key, 1, "names are literal"},
		{"glob in name", "al*ce@shop " + key, 1, "names are literal"},
		{"empty name", "@shop " + key, 1, "empty name"},
		{"empty target", "alice@ " + key, 1, "empty target"},
		{"empty principal", "alice@shop,," + key, 1, "want NAME@TARGET"},
		{"only negated", "!alice@shop " + key, 1, "only negated"},
		{"long name", strings.Repeat("a", 65) + "@shop " + key, 1, "longer than 64"},
		{"unknown flag option", `alice@shop no-touch-required ` + key, 1, `"no-touch-required" is neither a key type nor a supported option`},
		{"unknown option with value", `alice@shop foo="bar" ` + key, 1, `unknown option "foo"`},
		{"cert-authority", `alice@shop cert-authority ` + key, 1, "cert-authority is not supported"},
		{"cert-authority later", `alice@shop namespaces="x",cert-authority ` + key, 1, "cert-authority is not supported"},
		{"unquoted value", `alice@shop namespaces=x ` + key, 1, "double quotes"},
		{"unterminated quote", `alice@shop namespaces="x ` + key, 1, "missing end quote"},
		{"unterminated principals quote", `"alice@shop ` + key, 1, "missing end quote"},
		{"text after principals quote", `"alice@shop"x ` + key, 1, "text after end quote"},
		{"no comma between options", `alice@shop namespaces="x"valid-after="20260101Z" ` + key, 1, "want a comma"},
		{"duplicate namespaces", `alice@shop namespaces="x",namespaces="y" ` + key, 1, "more than one namespaces"},
		{"duplicate valid-after", `alice@shop valid-after="20260101Z",valid-after="20260102Z" ` + key, 1, "more than one valid-after"},
		{"escaped quote in namespace", `alice@shop namespaces="harbormaster-approval,x\" y" ` + key, 1, `namespaces: bad entry "x\" y"`},
		{"empty namespace entry", `alice@shop namespaces="a,,b" ` + key, 1, "namespaces: bad entry"},
		{"local time", `alice@shop valid-after="20260101" ` + key, 1, "must end in Z"},
		{"bad time length", `alice@shop valid-after="2026010Z" ` + key, 1, "want YYYYMMDD"},
		{"bad month", `alice@shop valid-after="20261301Z" ` + key, 1, "month out of range"},
		{"non-digit time", `alice@shop valid-before="2026O101Z" ` + key, 1, "not all digits"},
		{"epoch time", `alice@shop valid-before="19700101Z" ` + key, 1, "after 1970"},
		{"before not after after", `alice@shop valid-after="20260101Z",valid-before="20260101Z" ` + key, 1, "valid-before is not after valid-after"},
		{"NUL byte", "alice@shop\x00 " + key, 1, "NUL"},
		{"error on line 4", "# signers\n\n" + good + "\nbob " + key + "\n" + good, 4, "want NAME@TARGET"},
		{"error after CRLF lines", "# c\r\n" + good + "\r\n\r\nbob@shop\r\n", 4, "missing public key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, err := ParseAllowedSigners([]byte(tc.file))
			if err == nil {
				t.Fatalf("accepted, %d entries", a.Len())
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a *ParseError", err)
			}
			if pe.Line != tc.line {
				t.Fatalf("line = %d, want %d (%v)", pe.Line, tc.line, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %q, want it to mention %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "signing: parse allowed signers: line ") {
				t.Fatalf("err = %q, want the operation and line first", err)
			}
		})
	}
}

func TestParseAllowedSignersAccepts(t *testing.T) {
	t.Parallel()
	k := newEd25519(t, "")
	f := strings.Fields(string(k.pubLine))
	key := f[0] + " " + f[1]
	sig := sign(t, k, NamespaceApproval, []byte("m"))
	cases := []struct {
		name   string
		line   string
		target string
		want   string // principal that matches; "" means the line parses but does not allow
	}{
		{"plain", "alice@shop " + key, "shop", "alice@shop"},
		{"comment after key", "alice@shop " + key + " alice's laptop, 2026", "shop", "alice@shop"},
		{"leading whitespace and tabs", " \t alice@shop\t\t" + key, "shop", "alice@shop"},
		{"CRLF", "alice@shop " + key + "\r", "shop", "alice@shop"},
		{"quoted principals", `"alice@shop,alice@bank" ` + key, "bank", "alice@bank"},
		{"option names case-insensitive", `alice@shop NameSpaces="harbormaster-approval",VALID-AFTER="20260101Z" ` + key, "shop", "alice@shop"},
		{"namespace glob", `alice@shop namespaces="harbormaster-*" ` + key, "shop", "alice@shop"},
		{"namespace negation", `alice@shop namespaces="harbormaster-*,!harbormaster-approval" ` + key, "shop", ""},
		{"namespace not listed", `alice@shop namespaces="harbormaster-delegation" ` + key, "shop", ""},
		{"UTC suffix", `alice@shop valid-before="20300101000000UTC" ` + key, "shop", "alice@shop"},
		{"lowercase z", `alice@shop valid-before="203001010000z" ` + key, "shop", "alice@shop"},
		{"trailing comma in options", `alice@shop namespaces="harbormaster-approval", ` + key, "shop", "alice@shop"},
		{"names with dots and dashes", "a.l-i_ce2@shop-eu.1 " + key, "shop-eu.1", "a.l-i_ce2@shop-eu.1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, err := ParseAllowedSigners([]byte("# header\n\n" + tc.line + "\n# trailer\n"))
			if err != nil {
				t.Fatal(err)
			}
			if a.Len() != 1 {
				t.Fatalf("Len = %d, want 1", a.Len())
			}
			s, err := a.Verify([]byte("m"), sig, NamespaceApproval, tc.target, testNow)
			if tc.want == "" {
				if !errors.Is(err, ErrUnknownSigner) {
					t.Fatalf("got %+v, %v; want ErrUnknownSigner", s, err)
				}
				return
			}
			if err != nil || s.Principal != tc.want || s.Line != 3 {
				t.Fatalf("got %+v, %v; want %s on line 3", s, err, tc.want)
			}
		})
	}
}

func TestAllowedSignersSizeLimit(t *testing.T) {
	t.Parallel()
	k := newEd25519(t, "")
	entry := line(t, k, "", "alice@shop") + "\n"
	fill := func(n int) []byte {
		b := []byte(entry + "#")
		b = append(b, bytes.Repeat([]byte("x"), n-len(b)-1)...)
		return append(b, '\n')
	}
	at := fill(MaxAllowedSignersSize)
	if len(at) != MaxAllowedSignersSize {
		t.Fatalf("fixture is %d bytes", len(at))
	}
	if a, err := ParseAllowedSigners(at); err != nil || a.Len() != 1 {
		t.Fatalf("at the limit: %v", err)
	}
	if _, err := ParseAllowedSigners(fill(MaxAllowedSignersSize + 1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: err = %v", err)
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(path, fill(MaxAllowedSignersSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadAllowedSigners(path); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Load over the limit: err = %v", err)
	}
}

func TestLoadAllowedSigners(t *testing.T) {
	t.Parallel()
	k := newEd25519(t, "")
	dir := t.TempDir()
	path := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(path, []byte(line(t, k, "", "alice@shop")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := LoadAllowedSigners(path)
	if err != nil || a.Len() != 1 {
		t.Fatalf("Load: %v", err)
	}
	sig := sign(t, k, NamespaceDelegation, []byte("m"))
	if s, err := a.Verify([]byte("m"), sig, NamespaceDelegation, "shop", testNow); err != nil || s.Name != "alice" {
		t.Fatalf("Verify: %+v, %v", s, err)
	}

	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("# ok\nalice\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadAllowedSigners(bad)
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Path != bad || pe.Line != 2 || !strings.Contains(err.Error(), bad+":2: ") {
		t.Fatalf("err = %v, want %s:2", err, bad)
	}
	if _, err := LoadAllowedSigners(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing: err = %v", err)
	}
}

func TestAllowedSignersLine(t *testing.T) {
	t.Parallel()
	k := newEd25519(t, "alice laptop")
	f := strings.Fields(string(k.pubLine))

	got, err := AllowedSignersLine([]string{"alice@shop", "alice@shop-*"}, []string{NamespaceDelegation, NamespaceApproval}, k.pubLine)
	if err != nil {
		t.Fatal(err)
	}
	want := `alice@shop,alice@shop-* namespaces="harbormaster-delegation,harbormaster-approval" ` + f[0] + " " + f[1] + " alice laptop"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	a := signers(t, got)
	sig := sign(t, k, NamespaceApproval, []byte("m"))
	if s, err := a.Verify([]byte("m"), sig, NamespaceApproval, "shop-eu", testNow); err != nil || s.Principal != "alice@shop-*" {
		t.Fatalf("Verify: %+v, %v", s, err)
	}

	noNS, err := AllowedSignersLine([]string{"bob@*"}, nil, []byte(f[0]+" "+f[1]))
	if err != nil || noNS != "bob@* "+f[0]+" "+f[1] {
		t.Fatalf("no namespaces: %q, %v", noNS, err)
	}

	refused := []struct {
		name       string
		principals []string
		namespaces []string
		pub        string
	}{
		{"no principals", nil, nil, string(k.pubLine)},
		{"principal with space", []string{"alice@shop x"}, nil, string(k.pubLine)},
		{"principal with newline", []string{"alice@shop\nmallory@*"}, nil, string(k.pubLine)},
		{"glob name", []string{"*@shop"}, nil, string(k.pubLine)},
		{"two principals in one", []string{"alice@shop,mallory@*"}, nil, string(k.pubLine)},
		{"two namespaces in one", []string{"alice@shop"}, []string{NamespaceApproval + "," + NamespaceDelegation}, string(k.pubLine)},
		{"namespace with quote", []string{"alice@shop"}, []string{`x" cert-authority`}, string(k.pubLine)},
		{"empty namespace", []string{"alice@shop"}, []string{""}, string(k.pubLine)},
		{"two lines", []string{"alice@shop"}, nil, string(k.pubLine) + string(k.pubLine)},
		{"comment with CR", []string{"alice@shop"}, nil, f[0] + " " + f[1] + " a\rmallory@* " + f[0] + " " + f[1]},
		{"not a key", []string{"alice@shop"}, nil, "ssh-ed25519 AAAA"},
		{"options prefix", []string{"alice@shop"}, nil, `namespaces="x" ` + string(k.pubLine)},
		{"empty", []string{"alice@shop"}, nil, ""},
	}
	for _, tc := range refused {
		if l, err := AllowedSignersLine(tc.principals, tc.namespaces, []byte(tc.pub)); err == nil {
			t.Errorf("%s: accepted as %q", tc.name, l)
		}
	}
}

// Authorize answers for a key what Verify answers for its signatures, and
// SignerKey gives back the key inside a signature.
func TestAuthorizeAndSignerKey(t *testing.T) {
	t.Parallel()
	priv, pub, err := GenerateEd25519("alice@test")
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParsePrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	line, err := AllowedSignersLine([]string{"alice@shop"}, []string{NamespaceSession, NamespaceSwitch}, pub)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ParseAllowedSigners([]byte(line + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, tc := range []struct {
		ns, target string
		ok         bool
	}{
		{NamespaceSession, "shop", true},
		{NamespaceSwitch, "shop", true},
		{NamespaceApproval, "shop", false},
		{NamespaceSession, "other", false},
		{"git", "shop", false},
	} {
		s, err := a.Authorize(k.PublicKey(), tc.ns, tc.target, now)
		if tc.ok != (err == nil) || (tc.ok && s.Name != "alice") {
			t.Errorf("Authorize(%s, %s) = %+v, %v; want ok %v", tc.ns, tc.target, s, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrUnknownSigner) {
			t.Errorf("Authorize(%s, %s): %v does not wrap ErrUnknownSigner", tc.ns, tc.target, err)
		}
	}
	sig, err := k.Sign("harbormaster-x", []byte("m"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := SignerKey(sig)
	if err != nil || !bytes.Equal(got.Marshal(), k.PublicKey().Marshal()) {
		t.Errorf("SignerKey: %v", err)
	}
	if _, err := SignerKey([]byte("not a signature")); !errors.Is(err, ErrBadSignature) {
		t.Errorf("SignerKey of garbage: %v", err)
	}
}
