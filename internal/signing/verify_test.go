package signing

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestVerifyRefusals(t *testing.T) {
	t.Parallel()
	alice := newEd25519(t, "alice")
	stranger := newEd25519(t, "mallory")
	msg := []byte(`{"target":"shop","rule":"update orders"}`)
	good := sign(t, alice, NamespaceDelegation, msg)
	a := signers(t,
		line(t, alice, `namespaces="harbormaster-delegation,harbormaster-approval"`, "alice@shop"),
	)
	if _, err := a.Verify(msg, good, NamespaceDelegation, "shop", testNow); err != nil {
		t.Fatalf("control: %v", err)
	}

	flipped := bytes.Clone(msg)
	flipped[5] ^= 1
	sigFlipped := bytes.Clone(good)
	sigFlipped[100] ^= 1 // inside the base64 body

	cases := []struct {
		name      string
		msg       []byte
		sig       []byte
		namespace string
		target    string
		want      error
		detail    string
	}{
		{"approval replayed as delegation", msg, sign(t, alice, NamespaceApproval, msg), NamespaceDelegation, "shop", ErrBadSignature, "namespace"},
		{"delegation replayed as denial", msg, good, NamespaceDenial, "shop", ErrBadSignature, "namespace"},
		{"namespace not allowed for key", msg, sign(t, alice, NamespaceRevocation, msg), NamespaceRevocation, "shop", ErrUnknownSigner, "namespace harbormaster-revocation not allowed"},
		{"foreign namespace", msg, good, "git", "shop", ErrBadSignature, "not a harbormaster namespace"},
		{"wrong target", msg, good, NamespaceDelegation, "bank", ErrUnknownSigner, "no principal for target bank"},
		{"target prefix", msg, good, NamespaceDelegation, "shop-eu", ErrUnknownSigner, "no principal"},
		{"target is a glob", msg, good, NamespaceDelegation, "*", ErrUnknownSigner, "target"},
		{"empty target", msg, good, NamespaceDelegation, "", ErrUnknownSigner, "target"},
		{"flipped message byte", flipped, good, NamespaceDelegation, "shop", ErrBadSignature, "does not verify"},
		{"appended message byte", append(bytes.Clone(msg), ' '), good, NamespaceDelegation, "shop", ErrBadSignature, "does not verify"},
		{"truncated message", msg[:len(msg)-1], good, NamespaceDelegation, "shop", ErrBadSignature, "does not verify"},
		{"empty message", nil, good, NamespaceDelegation, "shop", ErrBadSignature, "does not verify"},
		{"flipped signature byte", msg, sigFlipped, NamespaceDelegation, "shop", ErrBadSignature, ""},
		{"key not listed", msg, sign(t, stranger, NamespaceDelegation, msg), NamespaceDelegation, "shop", ErrUnknownSigner, "not in the allowed signers"},
		{"empty signature", msg, nil, NamespaceDelegation, "shop", ErrBadSignature, "missing"},
		{"garbage signature", msg, []byte("hello"), NamespaceDelegation, "shop", ErrBadSignature, "missing"},
		{"oversized signature", msg, append(bytes.Clone(good), bytes.Repeat([]byte("\n"), MaxSignatureSize)...), NamespaceDelegation, "shop", ErrTooLarge, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := a.Verify(tc.msg, tc.sig, tc.namespace, tc.target, testNow)
			if err == nil {
				t.Fatalf("accepted as %+v", s)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if s != (Signer{}) {
				t.Fatalf("refusal returned a signer %+v", s)
			}
			if !strings.Contains(err.Error(), tc.detail) {
				t.Fatalf("err = %q, want it to mention %q", err, tc.detail)
			}
		})
	}
}

func TestVerifyTargets(t *testing.T) {
	t.Parallel()
	alice, bob, carol, dave := newEd25519(t, ""), newEd25519(t, ""), newEd25519(t, ""), newEd25519(t, "")
	a := signers(t,
		line(t, alice, "", "alice@shop"),
		line(t, bob, "", "bob@*"),
		line(t, carol, "", "carol@shop-*", "carol@bank?"),
		line(t, dave, "", "dave@*", "!dave@bank", "!dave@prod-*"),
	)
	cases := []struct {
		key       testKey
		target    string
		name      string // "" means refused
		principal string
	}{
		{alice, "shop", "alice", "alice@shop"},
		{alice, "bank", "", ""},
		{alice, "shop2", "", ""},
		{alice, "Shop", "", ""},
		{bob, "shop", "bob", "bob@*"},
		{bob, "bank", "bob", "bob@*"},
		{carol, "shop-eu", "carol", "carol@shop-*"},
		{carol, "shop-", "carol", "carol@shop-*"},
		{carol, "shop", "", ""},
		{carol, "bank1", "carol", "carol@bank?"},
		{carol, "bank", "", ""},
		{carol, "bank12", "", ""},
		{dave, "shop", "dave", "dave@*"},
		{dave, "bank", "", ""},
		{dave, "prod-eu", "", ""},
		{dave, "bank2", "dave", "dave@*"},
	}
	for _, tc := range cases {
		sig := sign(t, tc.key, NamespaceApproval, []byte("m"))
		s, err := a.Verify([]byte("m"), sig, NamespaceApproval, tc.target, testNow)
		if tc.name == "" {
			if !errors.Is(err, ErrUnknownSigner) {
				t.Errorf("target %s: got %+v, %v; want ErrUnknownSigner", tc.target, s, err)
			}
			continue
		}
		if err != nil || s.Name != tc.name || s.Principal != tc.principal {
			t.Errorf("target %s: got %+v, %v; want %s via %s", tc.target, s, err, tc.name, tc.principal)
		}
	}
}

func TestVerifyValidity(t *testing.T) {
	t.Parallel()
	k := newEd25519(t, "")
	a := signers(t, line(t, k, `valid-after="20260101Z",valid-before="20261231235959Z"`, "alice@shop"))
	sig := sign(t, k, NamespaceDelegation, []byte("m"))
	after := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	before := time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)
	cases := []struct {
		now  time.Time
		ok   bool
		why  string
		name string
	}{
		{after.Add(-time.Second), false, "not valid until 2026-01-01T00:00:00Z", "second before valid-after"},
		{after, true, "", "at valid-after"},
		{testNow, true, "", "inside"},
		{before, true, "", "at valid-before"},
		{before.Add(999 * time.Millisecond), true, "", "same second as valid-before"},
		{before.Add(time.Second), false, "expired at 2026-12-31T23:59:59Z", "second after valid-before"},
		{after.In(time.FixedZone("UTC+5", 5*3600)).Add(-time.Second), false, "not valid", "other zone, same instant"},
	}
	for _, tc := range cases {
		s, err := a.Verify([]byte("m"), sig, NamespaceDelegation, "shop", tc.now)
		if tc.ok {
			if err != nil || s.Name != "alice" {
				t.Errorf("%s: got %+v, %v", tc.name, s, err)
			}
			continue
		}
		if !errors.Is(err, ErrUnknownSigner) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s: err = %v, want ErrUnknownSigner mentioning %q", tc.name, err, tc.why)
		}
	}
}

func TestVerifyKeyOnSeveralLines(t *testing.T) {
	t.Parallel()
	k := newEd25519(t, "")
	sig := sign(t, k, NamespaceApproval, []byte("m"))

	t.Run("first matching line wins", func(t *testing.T) {
		t.Parallel()
		a := signers(t,
			line(t, k, `namespaces="harbormaster-delegation"`, "alice@*"),
			line(t, k, `valid-before="20200101Z"`, "alice@*"),
			line(t, k, "", "alice@bank"),
			line(t, k, "", "alice@shop"),
			line(t, k, "", "alice@*"),
		)
		s, err := a.Verify([]byte("m"), sig, NamespaceApproval, "shop", testNow)
		if err != nil || s.Name != "alice" || s.Line != 4 || s.Principal != "alice@shop" {
			t.Fatalf("got %+v, %v; want alice on line 4", s, err)
		}
	})
	t.Run("every reason reported", func(t *testing.T) {
		t.Parallel()
		a := signers(t,
			line(t, k, `namespaces="harbormaster-delegation"`, "alice@*"),
			line(t, k, `valid-before="20200101Z"`, "alice@*"),
			line(t, k, "", "alice@bank"),
		)
		_, err := a.Verify([]byte("m"), sig, NamespaceApproval, "shop", testNow)
		if !errors.Is(err, ErrUnknownSigner) {
			t.Fatalf("err = %v", err)
		}
		for _, want := range []string{"line 1: namespace", "line 2: expired", "line 3: no principal"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("err = %q, want it to mention %q", err, want)
			}
		}
	})
	t.Run("two names for one key is ambiguous", func(t *testing.T) {
		t.Parallel()
		a := signers(t,
			line(t, k, "", "alice@shop"),
			line(t, k, "", "bob@*"),
		)
		if _, err := a.Verify([]byte("m"), sig, NamespaceApproval, "shop", testNow); !errors.Is(err, ErrUnknownSigner) || !strings.Contains(err.Error(), "more than one name") {
			t.Fatalf("err = %v, want ambiguity", err)
		}
		// For bank only bob's line applies, so there is no ambiguity.
		if s, err := a.Verify([]byte("m"), sig, NamespaceApproval, "bank", testNow); err != nil || s.Name != "bob" {
			t.Fatalf("bank: got %+v, %v", s, err)
		}
		// Two names on one line are just as ambiguous.
		a = signers(t, line(t, k, "", "alice@shop", "bob@shop-*", "bob@sh*"))
		if _, err := a.Verify([]byte("m"), sig, NamespaceApproval, "shop", testNow); !errors.Is(err, ErrUnknownSigner) || !strings.Contains(err.Error(), "more than one name") {
			t.Fatalf("one line, two names: err = %v, want ambiguity", err)
		}
		if s, err := a.Verify([]byte("m"), sig, NamespaceApproval, "shop-eu", testNow); err != nil || s.Name != "bob" || s.Principal != "bob@shop-*" {
			t.Fatalf("one line, one name twice: got %+v, %v; want bob via bob@shop-*", s, err)
		}
	})
}

func TestVerifyNilAndEmptySigners(t *testing.T) {
	t.Parallel()
	k := newEd25519(t, "")
	sig := sign(t, k, NamespaceDelegation, []byte("m"))
	var nilSigners *AllowedSigners
	if _, err := nilSigners.Verify([]byte("m"), sig, NamespaceDelegation, "shop", testNow); !errors.Is(err, ErrUnknownSigner) {
		t.Fatalf("nil signers: err = %v", err)
	}
	empty := signers(t, "# nobody yet")
	if empty.Len() != 0 {
		t.Fatalf("Len = %d", empty.Len())
	}
	if _, err := empty.Verify([]byte("m"), sig, NamespaceDelegation, "shop", testNow); !errors.Is(err, ErrUnknownSigner) {
		t.Fatalf("empty signers: err = %v", err)
	}
}

func TestArmor(t *testing.T) {
	t.Parallel()
	k := newEd25519(t, "")
	a := signers(t, line(t, k, "", "alice@shop"))
	msg := []byte("m")
	sig := sign(t, k, NamespaceDelegation, msg)
	body := strings.TrimSuffix(strings.TrimPrefix(string(sig), armorBegin+"\n"), armorEnd+"\n")
	oneLine := strings.ReplaceAll(body, "\n", "")

	cases := []struct {
		name string
		sig  string
		ok   bool
	}{
		{"as signed", string(sig), true},
		{"surrounding whitespace", "\n  " + string(sig) + "\n\n", true},
		{"CRLF", strings.ReplaceAll(string(sig), "\n", "\r\n"), true},
		{"no final newline", strings.TrimSuffix(string(sig), "\n"), true},
		{"64 columns", armorBegin + "\n" + wrap(oneLine, 64) + armorEnd + "\n", true},
		{"one line body", armorBegin + "\n" + oneLine + "\n" + armorEnd, true},
		{"leading junk", "junk\n" + string(sig), false},
		{"trailing junk", string(sig) + "junk\n", false},
		{"PEM header", armorBegin + "\nComment: x\n\n" + body + armorEnd, false},
		{"wrong type", strings.ReplaceAll(string(sig), "SSH SIGNATURE", "SSH SIGNATUR"), false},
		{"two signatures", string(sig) + string(sig), false},
		{"missing padding", armorBegin + "\n" + strings.TrimRight(oneLine, "=") + "\n" + armorEnd, false},
		{"space in body", armorBegin + "\n" + oneLine[:10] + " " + oneLine[10:] + "\n" + armorEnd, false},
		{"begin and end run together", armorBegin + oneLine + "\n" + armorEnd, false},
	}
	for _, tc := range cases {
		_, err := a.Verify(msg, []byte(tc.sig), NamespaceDelegation, "shop", testNow)
		if tc.ok && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !tc.ok && !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: err = %v, want ErrBadSignature", tc.name, err)
		}
	}
}

func wrap(s string, n int) string {
	var b strings.Builder
	for len(s) > n {
		b.WriteString(s[:n] + "\n")
		s = s[n:]
	}
	return b.String() + s + "\n"
}

func TestSignatureSizeLimit(t *testing.T) {
	t.Parallel()
	k := newEd25519(t, "")
	a := signers(t, line(t, k, "", "alice@shop"))
	sig := sign(t, k, NamespaceDelegation, []byte("m"))
	pad := func(n int) []byte { return append(bytes.Repeat([]byte(" "), n-len(sig)), sig...) }

	if _, err := a.Verify([]byte("m"), pad(MaxSignatureSize), NamespaceDelegation, "shop", testNow); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	_, err := a.Verify([]byte("m"), pad(MaxSignatureSize+1), NamespaceDelegation, "shop", testNow)
	if !errors.Is(err, ErrBadSignature) || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: err = %v", err)
	}
	if _, err := ParseSignature(pad(MaxSignatureSize + 1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ParseSignature over the limit: err = %v", err)
	}
}

func TestMatchPattern(t *testing.T) {
	t.Parallel()
	cases := []struct {
		s, p string
		want bool
	}{
		{"shop", "shop", true},
		{"shop", "sho", false},
		{"shop", "shopp", false},
		{"shop", "*", true},
		{"", "*", true},
		{"", "", true},
		{"a", "", false},
		{"shop-eu", "shop-*", true},
		{"shop-", "shop-*", true},
		{"shop", "shop-*", false},
		{"shop", "s?op", true},
		{"sop", "s?op", false},
		{"alice@shop", "alice@*", true},
		{"alice@shop", "*@shop", true},
		{"abcabc", "*abc", true},
		{"abcabd", "*abc", false},
		{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "*a*a*a*a*a*a*a*a*a*a*c", false},
		{"xay", "**a**", true},
		{"x", "?*", true},
		{"", "?*", false},
	}
	for _, tc := range cases {
		if got := matchPattern(tc.s, tc.p); got != tc.want {
			t.Errorf("matchPattern(%q, %q) = %v", tc.s, tc.p, got)
		}
	}
	lists := []struct {
		s    string
		list []string
		want int
	}{
		{"a@shop", []string{"a@shop"}, 1},
		{"a@shop", []string{"a@bank"}, 0},
		{"a@shop", []string{"a@*", "!a@shop"}, -1},
		{"a@shop", []string{"!a@shop", "a@*"}, -1},
		{"a@bank", []string{"a@*", "!a@shop"}, 1},
		{"a@bank", []string{"!a@shop"}, 0},
	}
	for _, tc := range lists {
		if got := matchPatternList(tc.s, tc.list); got != tc.want {
			t.Errorf("matchPatternList(%q, %q) = %d, want %d", tc.s, tc.list, got, tc.want)
		}
	}
}

func BenchmarkVerifyEd25519(b *testing.B) {
	k := newEd25519(b, "")
	var lines []string
	for i := 0; i < 200; i++ {
		lines = append(lines, line(b, newEd25519(b, ""), "", "someone@*"))
	}
	lines = append(lines, line(b, k, `namespaces="harbormaster-delegation"`, "alice@shop-*"))
	a := signers(b, lines...)
	msg := bytes.Repeat([]byte("x"), 4096)
	sig := sign(b, k, NamespaceDelegation, msg)
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if _, err := a.Verify(msg, sig, NamespaceDelegation, "shop-eu", testNow); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseAllowedSigners(b *testing.B) {
	var lines []string
	for i := 0; i < 1000; i++ {
		lines = append(lines, line(b, newEd25519(b, ""), `namespaces="harbormaster-approval"`, "someone@*"))
	}
	data := []byte(strings.Join(lines, "\n"))
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ParseAllowedSigners(data); err != nil {
			b.Fatal(err)
		}
	}
}
