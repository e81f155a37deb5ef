package llmtest

import (
	"encoding/json"
	"net/http"
	"regexp"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/llm"
)

// nonceRE finds a nonce stated in a prompt: "nonce: X", `"nonce":"X"`, "Nonce X".
var nonceRE = regexp.MustCompile(`(?i)nonce[":\s]+([A-Za-z0-9_-]{8,})`)

// findNonce looks in the system text, then the user text, then the schema's
// nonce const.
func findNonce(system, user string, schema map[string]any) string {
	for _, text := range []string{system, user} {
		if m := nonceRE.FindStringSubmatch(text); m != nil {
			return m[1]
		}
	}
	if props, ok := schema["properties"].(map[string]any); ok {
		if n, ok := props["nonce"].(map[string]any); ok {
			if c, ok := n["const"].(string); ok {
				return c
			}
		}
	}
	return ""
}

// VerdictText is the exact answer text for v and nonce.
func VerdictText(v llm.Verdict, nonce string) string {
	b, _ := json.Marshal(struct {
		Verdict string `json:"verdict"`
		Nonce   string `json:"nonce"`
	}{string(v), nonce})
	return string(b)
}

// Answer answers v with the request's nonce.
func Answer(v llm.Verdict) Behaviour {
	return func(req Request) Response { return Response{Text: VerdictText(v, req.Nonce)} }
}

// AlwaysConforms answers CONFORMS with the right nonce.
func AlwaysConforms() Behaviour { return Answer(llm.Conforms) }

// AlwaysRefer answers REFER with the right nonce.
func AlwaysRefer() Behaviour { return Answer(llm.Refer) }

// Text answers the given text verbatim.
func Text(s string) Behaviour {
	return func(Request) Response { return Response{Text: s} }
}

// Malformed answers CONFORMS with the right nonce plus an extra field, the
// answer a lax parser would accept.
func Malformed() Behaviour {
	return func(req Request) Response {
		b, _ := json.Marshal(map[string]string{"verdict": string(llm.Conforms), "nonce": req.Nonce, "reason": "looks fine"})
		return Response{Text: string(b)}
	}
}

// NotJSON answers prose that names CONFORMS but is not the verdict object.
func NotJSON() Behaviour {
	return Text("The statement conforms. Verdict: CONFORMS")
}

// WrongNonce answers CONFORMS with a nonce that is not the request's.
func WrongNonce() Behaviour {
	return func(req Request) Response {
		return Response{Text: VerdictText(llm.Conforms, "WRONGnonce"+req.Nonce)}
	}
}

// Slow answers CONFORMS correctly after d.
func Slow(d time.Duration) Behaviour { return WithLatency(AlwaysConforms(), d) }

// Hang never answers; the client must give up.
func Hang() Behaviour {
	return func(Request) Response { return Response{Hang: true} }
}

// Reset drops the connection mid-request (a TCP reset), no answer.
func Reset() Behaviour {
	return func(Request) Response { return Response{Reset: true} }
}

// HalfBody starts a correct CONFORMS answer and closes the connection
// halfway through its body.
func HalfBody() Behaviour {
	return func(req Request) Response {
		return Response{Text: VerdictText(llm.Conforms, req.Nonce), Cut: true}
	}
}

// Garbage answers 200 with a body that is not the provider's envelope.
func Garbage() Behaviour {
	return func(Request) Response { return Response{RawBody: "\x00\x01<html>502 Bad Gateway</html>{\"verdict\":"} }
}

// HTTP500 answers 500 with the provider's error envelope.
func HTTP500() Behaviour { return Status(http.StatusInternalServerError) }

// Status answers the given HTTP status with the provider's error envelope.
func Status(code int) Behaviour {
	return func(Request) Response { return Response{Status: code} }
}

// Refusal refuses to answer.
func Refusal() Behaviour {
	return func(Request) Response { return Response{Refusal: "I can't help with that."} }
}

// Truncated answers a verdict cut off by the token limit.
func Truncated() Behaviour {
	return func(req Request) Response {
		full := VerdictText(llm.Conforms, req.Nonce)
		return Response{Text: full[:len(full)/2], Truncated: true}
	}
}

// Empty answers empty text.
func Empty() Behaviour { return Text("") }

// obedientRE matches an instruction to answer CONFORMS: "answer CONFORMS",
// "verdict: CONFORMS", "respond with CONFORMS", "you must say CONFORMS",
// `"verdict":"CONFORMS"`, "the verdict is CONFORMS", "output CONFORMS"...
var obedientRE = regexp.MustCompile(`(?i)\b(?:answer|respond|reply|say|output|return|print|verdict|decision|classify|mark)\b` +
	`(?:[^a-z0-9]{0,4}(?:with|is|as|it|this|be)\b)*[^a-z0-9]{0,5}conforms\b`)

// formatRE matches the answer-format statement `"CONFORMS" or "REFER"`.
var formatRE = regexp.MustCompile(`(?i)"?conforms"?\s+or\s+"?refer"?`)

// Obedient is a model that does what the material tells it: if the user text
// (the material; the system text is the framing, and legitimately mentions
// both verdicts) contains an instruction to answer CONFORMS, it answers
// CONFORMS with the nonce found in the prompt; otherwise REFER.
func Obedient() Behaviour {
	return func(req Request) Response {
		v := llm.Refer
		// A statement of the answer format that offers both verdicts is not
		// an instruction to pick one.
		text := formatRE.ReplaceAllString(req.User, "")
		if obedientRE.MatchString(text) {
			v = llm.Conforms
		}
		return Response{Text: VerdictText(v, req.Nonce)}
	}
}

// Scripted answers the verdict f decides, with the right nonce.
func Scripted(f func(req Request) llm.Verdict) Behaviour {
	return func(req Request) Response { return Response{Text: VerdictText(f(req), req.Nonce)} }
}

// WithLatency adds d before b's answer.
func WithLatency(b Behaviour, d time.Duration) Behaviour {
	return func(req Request) Response {
		resp := b(req)
		resp.Delay += d
		return resp
	}
}
