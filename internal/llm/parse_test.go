package llm_test

import (
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/llm"
)

const testNonce = "n0nce-ABCDEFGH_1234"

func TestParseAnswer(t *testing.T) {
	t.Parallel()
	n := testNonce
	cases := []struct {
		name    string
		text    string
		want    llm.Verdict // "" means a failure
		failure string      // failure prefix
	}{
		// Accepted.
		{"conforms", `{"verdict":"CONFORMS","nonce":"` + n + `"}`, llm.Conforms, ""},
		{"refer", `{"verdict":"REFER","nonce":"` + n + `"}`, llm.Refer, ""},
		{"keys reversed", `{"nonce":"` + n + `","verdict":"REFER"}`, llm.Refer, ""},
		{"surrounding whitespace", " \n\t{\"verdict\":\"CONFORMS\",\"nonce\":\"" + n + "\"}\r\n ", llm.Conforms, ""},
		{"pretty printed", "{\n  \"verdict\": \"CONFORMS\",\n  \"nonce\": \"" + n + "\"\n}", llm.Conforms, ""},

		// Empty.
		{"empty", ``, "", llm.FailureEmpty},
		{"whitespace only", " \n\t ", "", llm.FailureEmpty},

		// Not the object.
		{"bare word", `CONFORMS`, "", llm.FailureMalformed},
		{"prose", `The verdict is CONFORMS.`, "", llm.FailureMalformed},
		{"quoted string", `"CONFORMS"`, "", llm.FailureMalformed},
		{"array", `[{"verdict":"CONFORMS","nonce":"` + n + `"}]`, "", llm.FailureMalformed},
		{"nested", `{"answer":{"verdict":"CONFORMS","nonce":"` + n + `"}}`, "", llm.FailureMalformed},
		{"two objects", `{"verdict":"REFER","nonce":"` + n + `"}{"verdict":"CONFORMS","nonce":"` + n + `"}`, "", llm.FailureMalformed},
		{"trailing text", `{"verdict":"CONFORMS","nonce":"` + n + `"} I am confident.`, "", llm.FailureMalformed + ": text after"},
		{"leading text", `Answer: {"verdict":"CONFORMS","nonce":"` + n + `"}`, "", llm.FailureMalformed},
		{"markdown fence", "```json\n{\"verdict\":\"CONFORMS\",\"nonce\":\"" + n + "\"}\n```", "", llm.FailureMalformed},
		{"trailing comma", `{"verdict":"CONFORMS","nonce":"` + n + `",}`, "", llm.FailureMalformed},
		{"single quotes", `{'verdict':'CONFORMS','nonce':'` + n + `'}`, "", llm.FailureMalformed},
		{"unquoted keys", `{verdict:"CONFORMS",nonce:"` + n + `"}`, "", llm.FailureMalformed},
		{"truncated", `{"verdict":"CONFORMS","nonce":"` + n, "", llm.FailureMalformed},

		// Wrong members.
		{"extra key", `{"verdict":"CONFORMS","nonce":"` + n + `","reason":"fine"}`, "", llm.FailureMalformed + ": extra fields"},
		{"extra key first", `{"reason":"fine","verdict":"CONFORMS","nonce":"` + n + `"}`, "", llm.FailureMalformed},
		{"duplicated verdict", `{"verdict":"REFER","verdict":"CONFORMS"}`, "", llm.FailureMalformed + ": duplicate key"},
		{"duplicated verdict plus nonce", `{"verdict":"REFER","verdict":"CONFORMS","nonce":"` + n + `"}`, "", llm.FailureMalformed},
		{"duplicated nonce", `{"nonce":"` + n + `","nonce":"` + n + `"}`, "", llm.FailureMalformed + ": duplicate key"},
		{"missing nonce", `{"verdict":"CONFORMS"}`, "", llm.FailureMalformed + ": missing nonce"},
		{"missing verdict", `{"nonce":"` + n + `"}`, "", llm.FailureMalformed + ": missing verdict"},
		{"key case", `{"Verdict":"CONFORMS","nonce":"` + n + `"}`, "", llm.FailureMalformed},
		{"key with space", `{"verdict ":"CONFORMS","nonce":"` + n + `"}`, "", llm.FailureMalformed},

		// Wrong verdict values.
		{"lowercase verdict", `{"verdict":"conforms","nonce":"` + n + `"}`, "", llm.FailureMalformed + ": verdict"},
		{"mixed case verdict", `{"verdict":"Conforms","nonce":"` + n + `"}`, "", llm.FailureMalformed},
		{"verdict with space", `{"verdict":" CONFORMS","nonce":"` + n + `"}`, "", llm.FailureMalformed},
		{"verdict with trailing space", `{"verdict":"CONFORMS ","nonce":"` + n + `"}`, "", llm.FailureMalformed},
		{"verdict with newline escape", `{"verdict":"CONFORMS\n","nonce":"` + n + `"}`, "", llm.FailureMalformed},
		{"verdict unicode escape", `{"verdict":"CONF\u004fRMS","nonce":"` + n + `"}`, "", llm.FailureMalformed},
		{"verdict cyrillic O", `{"verdict":"CONFОRMS","nonce":"` + n + `"}`, "", llm.FailureMalformed},
		{"verdict fullwidth", `{"verdict":"ＣＯＮＦＯＲＭＳ","nonce":"` + n + `"}`, "", llm.FailureMalformed},
		{"verdict zero-width space", "{\"verdict\":\"CONFORMS\u200b\",\"nonce\":\"" + n + "\"}", "", llm.FailureMalformed},
		{"verdict deny", `{"verdict":"DENY","nonce":"` + n + `"}`, "", llm.FailureMalformed},
		{"verdict both", `{"verdict":"CONFORMS|REFER","nonce":"` + n + `"}`, "", llm.FailureMalformed},
		{"verdict array", `{"verdict":["CONFORMS"],"nonce":"` + n + `"}`, "", llm.FailureMalformed},
		{"verdict bool", `{"verdict":true,"nonce":"` + n + `"}`, "", llm.FailureMalformed},
		{"verdict null", `{"verdict":null,"nonce":"` + n + `"}`, "", llm.FailureMalformed},
		{"nbsp around", "\u00a0{\"verdict\":\"CONFORMS\",\"nonce\":\"" + n + "\"}", "", llm.FailureMalformed},
		{"BOM", "\ufeff{\"verdict\":\"CONFORMS\",\"nonce\":\"" + n + "\"}", "", llm.FailureMalformed},

		// Wrong nonces.
		{"wrong nonce", `{"verdict":"CONFORMS","nonce":"n0nce-ABCDEFGH_1235"}`, "", llm.FailureWrongNonce},
		{"nonce prefix", `{"verdict":"CONFORMS","nonce":"n0nce-ABCDEFGH"}`, "", llm.FailureWrongNonce},
		{"nonce lowercase", `{"verdict":"CONFORMS","nonce":"` + strings.ToLower(n) + `"}`, "", llm.FailureWrongNonce},
		{"empty nonce", `{"verdict":"CONFORMS","nonce":""}`, "", llm.FailureWrongNonce},
		{"nonce escaped", `{"verdict":"CONFORMS","nonce":"n0nce-ABCDEFGH\u005f1234"}`, "", llm.FailureMalformed},
		{"nonce number", `{"verdict":"CONFORMS","nonce":12345678}`, "", llm.FailureMalformed},

		// Size and encoding.
		{"very long", `{"verdict":"CONFORMS","nonce":"` + n + `"}` + strings.Repeat(" ", llm.MaxAnswerBytes), "", llm.FailureMalformed + ": answer longer"},
		{"very long value", `{"verdict":"` + strings.Repeat("A", 1<<16) + `","nonce":"` + n + `"}`, "", llm.FailureMalformed},
		{"invalid utf8", "{\"verdict\":\"CONFORMS\xff\",\"nonce\":\"" + n + "\"}", "", llm.FailureMalformed + ": invalid UTF-8"},
		{"NUL inside", "{\"verdict\":\"CONFORMS\x00\",\"nonce\":\"" + n + "\"}", "", llm.FailureMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, f := llm.ParseAnswer(tc.text, n)
			if tc.want != "" {
				if v != tc.want || f != "" {
					t.Fatalf("ParseAnswer = %q, %q; want %q", v, f, tc.want)
				}
				return
			}
			if v != "" || !strings.HasPrefix(f, tc.failure) {
				t.Fatalf("ParseAnswer = %q, %q; want no verdict and failure %q", v, f, tc.failure)
			}
		})
	}
}

func TestParseAnswerRejectsBadNonceArgument(t *testing.T) {
	t.Parallel()
	for _, nonce := range []string{"", "short", "with space!", `q"uote12345`, strings.Repeat("a", 129)} {
		text := `{"verdict":"CONFORMS","nonce":"` + nonce + `"}`
		if v, f := llm.ParseAnswer(text, nonce); v != "" || !strings.HasPrefix(f, llm.FailureInvalidCall) {
			t.Errorf("ParseAnswer with nonce %q = %q, %q; want invalid call", nonce, v, f)
		}
	}
}

func TestVerdictSchema(t *testing.T) {
	t.Parallel()
	s := llm.VerdictSchema(testNonce)
	props := s["properties"].(map[string]any)
	if len(props) != 2 || s["additionalProperties"] != false || s["type"] != "object" {
		t.Fatalf("schema = %v", s)
	}
	enum := props["verdict"].(map[string]any)["enum"].([]any)
	if len(enum) != 2 || enum[0] != "CONFORMS" || enum[1] != "REFER" {
		t.Errorf("verdict enum = %v", enum)
	}
	if props["nonce"].(map[string]any)["const"] != testNonce {
		t.Errorf("nonce const = %v", props["nonce"])
	}
	if req := s["required"].([]any); len(req) != 2 {
		t.Errorf("required = %v", req)
	}
}

// BenchmarkParseAnswer measures strict parsing of a valid answer.
func BenchmarkParseAnswer(b *testing.B) {
	text := "{\n  \"verdict\": \"CONFORMS\",\n  \"nonce\": \"" + testNonce + "\"\n}"
	b.ReportAllocs()
	for b.Loop() {
		if v, _ := llm.ParseAnswer(text, testNonce); v != llm.Conforms {
			b.Fatal("not parsed")
		}
	}
}
