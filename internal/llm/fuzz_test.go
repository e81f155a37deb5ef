package llm_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/harbormaster-dev/harbormaster/internal/llm"
)

// FuzzParseAnswer checks that ParseAnswer never panics and returns a verdict
// only for input that is exactly the verdict object: with JSON whitespace
// removed it must be one of the two canonical member orders, and what was
// removed must have been JSON whitespace and nothing else.
func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{
		`{"verdict":"CONFORMS","nonce":"` + testNonce + `"}`,
		`{"nonce":"` + testNonce + `","verdict":"REFER"}`,
		" {\n \"verdict\" : \"REFER\" ,\n \"nonce\" : \"" + testNonce + "\" } \n",
		`{"verdict":"CONFORMS","nonce":"` + testNonce + `","x":1}`,
		`{"verdict":"CONFORMS","verdict":"CONFORMS"}`,
		`{"verdict":"CONF\u004fRMS","nonce":"` + testNonce + `"}`,
		"```json\n{\"verdict\":\"CONFORMS\",\"nonce\":\"" + testNonce + "\"}\n```",
		`[{"verdict":"CONFORMS","nonce":"` + testNonce + `"}]`,
		`CONFORMS`,
		``,
	} {
		f.Add(s, testNonce)
	}
	f.Add(`{"verdict":"CONFORMS","nonce":"abcdefgh"}`, "abcdefgh")
	f.Fuzz(func(t *testing.T, text, nonce string) {
		v, failure := llm.ParseAnswer(text, nonce)
		if v == "" {
			if failure == "" {
				t.Fatal("no verdict and no failure")
			}
			return
		}
		if failure != "" {
			t.Fatalf("verdict %q with failure %q", v, failure)
		}
		if v != llm.Conforms && v != llm.Refer {
			t.Fatalf("verdict %q is neither value", v)
		}
		if len(nonce) < 8 || strings.Trim(nonce, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "" {
			t.Fatalf("verdict for an invalid nonce %q", nonce)
		}
		if !utf8.ValidString(text) || len(text) > llm.MaxAnswerBytes {
			t.Fatalf("verdict for invalid or overlong text %q", text)
		}
		squeezed := strings.Map(func(r rune) rune {
			if r == ' ' || r == '\t' || r == '\r' || r == '\n' {
				return -1
			}
			return r
		}, text)
		a := `{"verdict":"` + string(v) + `","nonce":"` + nonce + `"}`
		b := `{"nonce":"` + nonce + `","verdict":"` + string(v) + `"}`
		if squeezed != a && squeezed != b {
			t.Fatalf("verdict %q for %q, which is not exactly the verdict object", v, text)
		}
	})
}
