package marque

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// FuzzVerify: Verify never panics, every rejection wraps exactly one
// sentinel, and nothing is accepted but the one genuine marque in the seed
// corpus (the fuzzer holds no signing key, and a marque has one string form).
func FuzzVerify(f *testing.F) {
	// A fixed jti: fuzz workers are separate processes, and each must mint the
	// same genuine marque the coordinator put in the corpus.
	m := newMinter(f, func(c *MinterConfig) { c.Rand = bytes.NewReader(make([]byte, 16)) })
	v := newVerifier(f, nil)
	good, _ := mint(f, m, baseClaims())
	parts := strings.Split(good, ".")
	for _, seed := range []string{
		good,
		good + "x",
		good + ".",
		parts[0] + "." + parts[1] + ".",
		parts[0] + ".." + parts[2],
		`{"payload":"` + parts[1] + `","signatures":[{"protected":"` + parts[0] + `","signature":"` + parts[2] + `"}]}`,
		"eyJhbGciOiJub25lIn0." + parts[1] + ".",
		"",
		"a.b.c",
		"....",
		strings.Repeat("A", 100),
	} {
		f.Add(seed)
	}
	want := wantExpect()
	f.Fuzz(func(t *testing.T, token string) {
		c, err := v.Verify(token, want)
		if err == nil {
			if token != good {
				t.Fatalf("accepted a token that is not the genuine marque: %q", token)
			}
			return
		}
		n := 0
		for _, s := range sentinels {
			if errors.Is(err, s) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("error %v wraps %d sentinels, want exactly 1", err, n)
		}
		if c.ID != "" || c.Target != "" || !c.IssuedAt.IsZero() {
			t.Fatalf("claims %+v returned with error %v", c, err)
		}
	})
}
