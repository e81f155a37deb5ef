package llm

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// MaxAnswerBytes bounds the text ParseAnswer accepts. A valid answer,
// pretty-printed, is under 200 bytes.
const MaxAnswerBytes = 1 << 10

// jsonSpace is JSON's insignificant whitespace.
const jsonSpace = " \t\r\n"

// answerForm is the only accepted shape: optional JSON whitespace, an object
// of exactly two members whose keys and values are plain JSON strings (no
// escapes, no control characters), optional JSON whitespace. Which keys and
// values are allowed is checked after the match.
var answerForm = regexp.MustCompile(`^[ \t\r\n]*\{` +
	`[ \t\r\n]*"([^"\\\x00-\x1f]*)"[ \t\r\n]*:[ \t\r\n]*"([^"\\\x00-\x1f]*)"[ \t\r\n]*,` +
	`[ \t\r\n]*"([^"\\\x00-\x1f]*)"[ \t\r\n]*:[ \t\r\n]*"([^"\\\x00-\x1f]*)"[ \t\r\n]*` +
	`\}[ \t\r\n]*$`)

// ParseAnswer parses a model's answer text. It accepts exactly
// {"verdict":"CONFORMS"|"REFER","nonce":"<nonce>"}: a JSON object with
// exactly those two keys (in either order), string values without escapes,
// JSON whitespace between tokens and around the object, and nothing else.
// It returns the verdict and "", or "" and a failure that begins with one of
// the Failure* constants. nonce must be 8 to 128 characters of [A-Za-z0-9_-].
func ParseAnswer(text, nonce string) (Verdict, string) {
	if !validNonce(nonce) {
		return "", FailureInvalidCall + ": nonce must be 8 to 128 characters of [A-Za-z0-9_-]"
	}
	if len(strings.TrimLeft(text, jsonSpace)) == 0 {
		return "", FailureEmpty
	}
	if len(text) > MaxAnswerBytes {
		return "", fmt.Sprintf("%s: answer longer than %d bytes", FailureMalformed, MaxAnswerBytes)
	}
	if !utf8.ValidString(text) {
		return "", FailureMalformed + ": invalid UTF-8"
	}
	m := answerForm.FindStringSubmatch(text)
	if m == nil {
		return "", FailureMalformed + ": " + diagnose(text)
	}
	members := [2][2]string{{m[1], m[2]}, {m[3], m[4]}}
	if members[0][0] == members[1][0] {
		return "", FailureMalformed + ": duplicate key"
	}
	var verdict, got string
	for _, kv := range members {
		switch kv[0] {
		case "verdict":
			verdict = kv[1]
		case "nonce":
			got = kv[1]
		default:
			return "", FailureMalformed + ": unexpected field"
		}
	}
	if verdict != string(Conforms) && verdict != string(Refer) {
		return "", FailureMalformed + ": verdict is neither CONFORMS nor REFER"
	}
	if got != nonce {
		return "", FailureWrongNonce
	}
	return Verdict(verdict), ""
}

// diagnose says, for the record, why text is not the exact answer form. The
// decision has already been made; this only names it.
func diagnose(text string) string {
	dec := json.NewDecoder(strings.NewReader(text))
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil {
		return "not a JSON object"
	}
	if len(strings.TrimLeft(text[dec.InputOffset():], jsonSpace)) > 0 {
		return "text after the JSON object"
	}
	_, hasVerdict := obj["verdict"]
	_, hasNonce := obj["nonce"]
	switch {
	case obj == nil:
		return "not a JSON object"
	case len(obj) > 2 || (len(obj) == 2 && (!hasVerdict || !hasNonce)):
		return "extra fields"
	case !hasVerdict:
		return "missing verdict"
	case !hasNonce:
		return "missing nonce"
	}
	return "not exactly two plain string members (escapes, duplicate keys or non-string values)"
}

// VerdictSchema is the JSON schema of the answer for nonce: an object with
// exactly a "verdict" enum and a "nonce" const.
func VerdictSchema(nonce string) map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"verdict": map[string]any{
				"type": "string",
				"enum": []any{string(Conforms), string(Refer)},
			},
			"nonce": map[string]any{
				"type":  "string",
				"const": nonce,
			},
		},
		"required":             []any{"verdict", "nonce"},
		"additionalProperties": false,
	}
}
