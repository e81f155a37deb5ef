package signing

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"slices"
	"strings"
	"testing"
)

// fuzzKey is a fixed key, so that corpus entries stay meaningful across runs.
func fuzzKey(t testing.TB) testKey {
	t.Helper()
	return keyFromCrypto(t, ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize)))
}

func FuzzParseAllowedSigners(f *testing.F) {
	k := fuzzKey(f)
	key := strings.Join(strings.Fields(string(k.pubLine)), " ")
	for _, s := range []string{
		"",
		"# comment\n\n",
		"alice@shop " + key,
		"alice@shop,bob@*,!bob@bank " + key + " comment here\n",
		`"alice@shop,carol@shop-*" namespaces="harbormaster-*,!harbormaster-denial",valid-after="20260101Z",valid-before="203001010000Z" ` + key,
		`alice@shop NAMESPACES="a\"b" ` + key,
		`alice@shop cert-authority ` + key,
		`alice@shop valid-after="20260101" ` + key,
		"alice@shop ssh-ed25519 AAAA",
		"alice " + key + "\r\nbob@shop " + key,
		`alice@shop namespaces="x`,
		"\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := ParseAllowedSigners(data)
		if err != nil {
			if a != nil {
				t.Fatal("error with a non-nil result")
			}
			var pe *ParseError
			switch {
			case errors.Is(err, ErrTooLarge):
			case errors.As(err, &pe):
				if n := bytes.Count(data, []byte("\n")) + 1; pe.Line < 1 || pe.Line > n {
					t.Fatalf("error on line %d of %d: %v", pe.Line, n, err)
				}
			default:
				t.Fatalf("error is neither ErrTooLarge nor *ParseError: %v", err)
			}
			return
		}
		if a.Len() > bytes.Count(data, []byte("\n"))+1 {
			t.Fatalf("%d entries from %d lines", a.Len(), bytes.Count(data, []byte("\n"))+1)
		}
		// Every entry formats back into a line that parses to the same
		// principals, namespaces and key.
		for _, e := range a.entries {
			l, err := AllowedSignersLine(e.principals, e.namespaces, []byte(e.key.Type()+" "+b64(e.key.Marshal())))
			if err != nil {
				t.Fatalf("line %d does not format: %v", e.line, err)
			}
			e2, ok, err := parseLine(l)
			if err != nil || !ok {
				t.Fatalf("formatted line %q does not parse: %v", l, err)
			}
			if !slices.Equal(e.principals, e2.principals) || !slices.Equal(e.namespaces, e2.namespaces) || !bytes.Equal(e.key.Marshal(), e2.key.Marshal()) {
				t.Fatalf("line %d changed in a round trip: %q", e.line, l)
			}
		}
	})
}

func FuzzVerify(f *testing.F) {
	k := fuzzKey(f)
	msg := []byte(`{"target":"shop"}`)
	a := signers(f, line(f, k, `namespaces="harbormaster-delegation"`, "alice@shop"))
	pk, err := ParsePrivateKey(k.priv)
	if err != nil {
		f.Fatal(err)
	}
	good := sign(f, k, NamespaceDelegation, msg)
	f.Add(good, msg)
	f.Add(sign(f, k, NamespaceApproval, msg), msg)
	f.Add(bytes.ReplaceAll(good, []byte("\n"), []byte("\r\n")), msg)
	f.Add(good[:len(good)/2], msg)
	f.Add([]byte(armorBegin+"\n"+armorEnd), msg)
	f.Add([]byte(armorBegin+"\nU1NIU0lH\n"+armorEnd), msg)
	f.Add(good, append(bytes.Clone(msg), 0))
	f.Add([]byte("garbage"), []byte(nil))
	f.Fuzz(func(t *testing.T, sig, m []byte) {
		s, err := a.Verify(m, sig, NamespaceDelegation, "shop", testNow)
		if err != nil {
			if !errors.Is(err, ErrBadSignature) && !errors.Is(err, ErrUnknownSigner) {
				t.Fatalf("error wraps neither sentinel: %v", err)
			}
			if s != (Signer{}) {
				t.Fatalf("refusal returned %+v", s)
			}
			return
		}
		// Only alice's key signed anything, and only msg.
		if s.Name != "alice" || s.Fingerprint != pk.Fingerprint() {
			t.Fatalf("accepted as %+v", s)
		}
		if !bytes.Equal(m, msg) {
			t.Fatalf("signature accepted over a message nobody signed: %q", m)
		}
		info, err := ParseSignature(sig)
		if err != nil || info.Namespace != NamespaceDelegation || info.Fingerprint != s.Fingerprint {
			t.Fatalf("accepted signature parses as %+v, %v", info, err)
		}
	})
}
