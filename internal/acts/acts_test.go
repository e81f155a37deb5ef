package acts_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
)

var (
	hashA = strings.Repeat("a1", 32)
	hashB = strings.Repeat("0f", 32)
)

func goodApproval() acts.Approval {
	return acts.Approval{Version: acts.ApprovalVersion, Kind: acts.KindApproval, RequestID: "req_abcdefghijklmnop", Target: "shop",
		StatementSHA256: hashA, PreviewSHA256: hashB, MaxRows: 3, Expires: "2030-01-02T03:04:05Z"}
}

func goodDenial() acts.Denial {
	return acts.Denial{Version: 1, Kind: acts.KindDenial, RequestID: "req_abcdefghijklmnop", Target: "shop",
		StatementSHA256: hashA, Reason: `not <today> & "never" on Fridays`}
}

func goodRevocation() acts.Revocation {
	return acts.Revocation{Version: 1, Kind: acts.KindRevocation, DelegationID: "dlg_abcdefghijkl", Target: "shop",
		Reason: "the incident is over", Time: "2030-01-02T03:04:05Z"}
}

// kinds is every act kind with a valid value and its parser, which returns
// the parsed value as the same type (dereferenced).
var kinds = []struct {
	name  string
	act   any
	parse func([]byte) (any, error)
}{
	{"approval", goodApproval(), func(b []byte) (any, error) { return deref(acts.ParseApproval(b)) }},
	{"denial", goodDenial(), func(b []byte) (any, error) { return deref(acts.ParseDenial(b)) }},
	{"revocation", goodRevocation(), func(b []byte) (any, error) { return deref(acts.ParseRevocation(b)) }},
	{"auditable", acts.Auditable{Time: acts.Stamp(time.Now()), Version: 1, Kind: acts.KindAuditable, DelegationID: "dlg_abcdefghijkl", Rule: 1, Note: "judgeable from the images"},
		func(b []byte) (any, error) { return deref(acts.ParseAuditable(b)) }},
	{"enable", acts.Enable{Time: acts.Stamp(time.Now()), Version: 1, Kind: acts.KindEnable, DelegationID: "dlg_abcdefghijkl", Rule: 1, Surveyor: "panel-v1", Bundle: "bundle-2030", On: true},
		func(b []byte) (any, error) { return deref(acts.ParseEnable(b)) }},
	{"enable off", acts.Enable{Time: acts.Stamp(time.Now()), Version: 1, Kind: acts.KindEnable, DelegationID: "dlg_abcdefghijkl", Rule: 0, Surveyor: "panel-v1", Bundle: "bundle-2030", On: false},
		func(b []byte) (any, error) { return deref(acts.ParseEnable(b)) }},
	{"review", acts.Review{Version: 1, Kind: acts.KindReview, AuditID: "aud_abcdefghijkl", Verdict: "wrong", Note: "a real name change, not a typo"},
		func(b []byte) (any, error) { return deref(acts.ParseReview(b)) }},
	{"reinstate", acts.Reinstate{Time: acts.Stamp(time.Now()), Version: 1, Kind: acts.KindReinstate, DelegationID: "dlg_abcdefghijkl", Note: "reviewed"},
		func(b []byte) (any, error) { return deref(acts.ParseReinstate(b)) }},
}

func deref[T any](p *T, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return *p, nil
}

// TestCanonicalRoundTrip: every act kind renders to canonical bytes that
// parse back to the same value and render again to the same bytes.
func TestCanonicalRoundTrip(t *testing.T) {
	t.Parallel()
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			b, err := acts.Canonical(k.act)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasSuffix(b, []byte("}\n")) || bytes.Count(b, []byte("\n")) != 1 {
				t.Fatalf("canonical bytes are not one JSON line with a final newline: %q", b)
			}
			got, err := k.parse(b)
			if err != nil {
				t.Fatalf("parse(canonical) = %v\n%s", err, b)
			}
			if !reflect.DeepEqual(got, k.act) {
				t.Fatalf("round trip changed the act:\n got %+v\nwant %+v", got, k.act)
			}
			again, err := acts.Canonical(got)
			if err != nil || !bytes.Equal(again, b) {
				t.Fatalf("re-rendered %q, want %q (%v)", again, b, err)
			}
		})
	}
}

// TestCanonicalIsExact pins the byte form: fields in declaration order, no
// HTML escaping, no insignificant whitespace.
func TestCanonicalIsExact(t *testing.T) {
	t.Parallel()
	b, err := acts.Canonical(goodDenial())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"kind":"denial","request_id":"req_abcdefghijklmnop","target":"shop","statement_sha256":"` + hashA +
		`","reason":"not <today> & \"never\" on Fridays"}` + "\n"
	if string(b) != want {
		t.Fatalf("canonical denial\n got %s\nwant %s", b, want)
	}
}

// mutate returns the canonical bytes of act with edit applied to the text.
func mutate(t *testing.T, act any, edit func(string) string) []byte {
	t.Helper()
	b, err := acts.Canonical(act)
	if err != nil {
		t.Fatal(err)
	}
	out := edit(string(b))
	if out == string(b) {
		t.Fatalf("the edit changed nothing in %s", b)
	}
	return []byte(out)
}

func canon(t *testing.T, act any) []byte {
	t.Helper()
	b, err := acts.Canonical(act)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNonCanonicalRefused: bytes that mean the same JSON but are not the
// canonical form, and acts with invalid fields, are refused with
// ErrInvalid, by every parser.
func TestNonCanonicalRefused(t *testing.T) {
	t.Parallel()
	ap := goodApproval()
	with := func(f func(*acts.Approval)) []byte {
		a := goodApproval()
		f(&a)
		return canon(t, a)
	}
	reorder := func(s string) string {
		// Swap the first two members: the same object, another key order.
		return strings.Replace(s, `{"version":2,"kind":"approval",`, `{"kind":"approval","version":2,`, 1)
	}
	pretty, err := json.MarshalIndent(ap, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	approvalCases := []struct {
		name string
		data []byte
	}{
		{"no final newline", bytes.TrimSuffix(canon(t, ap), []byte("\n"))},
		{"two final newlines", append(canon(t, ap), '\n')},
		{"CRLF", mutate(t, ap, func(s string) string { return strings.TrimSuffix(s, "\n") + "\r\n" })},
		{"space after colon", mutate(t, ap, func(s string) string { return strings.Replace(s, `"version":2`, `"version": 2`, 1) })},
		{"leading space", mutate(t, ap, func(s string) string { return " " + s })},
		{"pretty printed", append(pretty, '\n')},
		{"key order", mutate(t, ap, reorder)},
		{"unknown field", mutate(t, ap, func(s string) string { return strings.Replace(s, `}`, `,"approver":"bob"}`, 1) })},
		{"duplicate field", mutate(t, ap, func(s string) string {
			return strings.Replace(s, `"max_rows":3,`, `"max_rows":3,"max_rows":3,`, 1)
		})},
		{"missing field", mutate(t, ap, func(s string) string { return strings.Replace(s, `"max_rows":3,`, ``, 1) })},
		{"escaped unicode", mutate(t, ap, func(s string) string { return strings.Replace(s, `"shop"`, `"sh\u006fp"`, 1) })},
		{"number as float", mutate(t, ap, func(s string) string { return strings.Replace(s, `"max_rows":3`, `"max_rows":3.0`, 1) })},
		{"trailing data", append(canon(t, ap), []byte("{}\n")...)},
		{"two acts", append(canon(t, ap), canon(t, ap)...)},
		{"empty", nil},
		{"not JSON", []byte("approve req_abcdefghijklmnop\n")},
		{"wrong kind", with(func(a *acts.Approval) { a.Kind = acts.KindDenial })},
		{"no kind", with(func(a *acts.Approval) { a.Kind = "" })},
		{"version 1", with(func(a *acts.Approval) { a.Version = 1 })},
		{"version 3", with(func(a *acts.Approval) { a.Version = 3 })},
		{"short statement hash", with(func(a *acts.Approval) { a.StatementSHA256 = hashA[:62] })},
		{"uppercase statement hash", with(func(a *acts.Approval) { a.StatementSHA256 = strings.ToUpper(hashA) })},
		{"non-hex preview hash", with(func(a *acts.Approval) { a.PreviewSHA256 = strings.Repeat("zz", 32) })},
		{"no preview hash", with(func(a *acts.Approval) { a.PreviewSHA256 = "" })},
		{"bad request id", with(func(a *acts.Approval) { a.RequestID = "req_../../etc" })},
		{"no target", with(func(a *acts.Approval) { a.Target = "" })},
		{"negative max_rows", with(func(a *acts.Approval) { a.MaxRows = -1 })},
		{"bad expires", with(func(a *acts.Approval) { a.Expires = "tomorrow" })},
		{"over the size cap", mutate(t, ap, func(s string) string {
			return strings.Replace(s, `"shop"`, `"`+strings.Repeat("s", acts.MaxActBytes)+`"`, 1)
		})},
	}
	for _, c := range approvalCases {
		if got, err := acts.ParseApproval(c.data); !errors.Is(err, acts.ErrInvalid) {
			t.Errorf("approval, %s: ParseApproval = %+v, %v; want ErrInvalid", c.name, got, err)
		}
	}

	// Each act kind is refused by every other kind's parser, and with a
	// kind field naming another kind.
	for _, k := range kinds {
		b := canon(t, k.act)
		for _, other := range kinds {
			if reflect.TypeOf(other.act) == reflect.TypeOf(k.act) {
				continue
			}
			if got, err := other.parse(b); !errors.Is(err, acts.ErrInvalid) {
				t.Errorf("%s bytes parsed as %s: %+v, %v; want ErrInvalid", k.name, other.name, got, err)
			}
		}
		// The kind field names another kind.
		wrong := mutate(t, k.act, func(s string) string {
			i := strings.Index(s, `"kind":"`) + len(`"kind":"`)
			j := i + strings.Index(s[i:], `"`)
			return s[:i] + "approvalx" + s[j:]
		})
		if got, err := k.parse(wrong); !errors.Is(err, acts.ErrInvalid) {
			t.Errorf("%s with a wrong kind: %+v, %v; want ErrInvalid", k.name, got, err)
		}
		// Whitespace and key order, for every kind.
		spaced := mutate(t, k.act, func(s string) string { return strings.Replace(s, `,"kind"`, `, "kind"`, 1) })
		if got, err := k.parse(spaced); !errors.Is(err, acts.ErrInvalid) {
			t.Errorf("%s with whitespace: %+v, %v; want ErrInvalid", k.name, got, err)
		}
		reordered := mutate(t, k.act, func(s string) string {
			i := strings.Index(s, `,"kind"`)
			j := strings.Index(s[i+1:], `,`) + i + 1
			return "{" + s[i+1:j] + "," + s[1:i] + s[j:]
		})
		if got, err := k.parse(reordered); !errors.Is(err, acts.ErrInvalid) {
			t.Errorf("%s with another key order: %+v, %v; want ErrInvalid", k.name, got, err)
		}
		unknown := mutate(t, k.act, func(s string) string { return strings.Replace(s, `{`, `{"extra":true,`, 1) })
		if got, err := k.parse(unknown); !errors.Is(err, acts.ErrInvalid) {
			t.Errorf("%s with an unknown field: %+v, %v; want ErrInvalid", k.name, got, err)
		}
	}

	// Field checks of the other kinds.
	d := goodDenial()
	d.StatementSHA256 = "abc"
	r := goodRevocation()
	r.Time = "2030-01-02"
	r2 := goodRevocation()
	r2.DelegationID = ""
	others := []struct {
		name  string
		data  []byte
		parse func([]byte) (any, error)
	}{
		{"denial with a bad hash", canon(t, d), func(b []byte) (any, error) { return deref(acts.ParseDenial(b)) }},
		{"denial with a bad request id", canon(t, acts.Denial{Version: 1, Kind: acts.KindDenial, RequestID: "x", Target: "shop", StatementSHA256: hashA}),
			func(b []byte) (any, error) { return deref(acts.ParseDenial(b)) }},
		{"revocation with a bad time", canon(t, r), func(b []byte) (any, error) { return deref(acts.ParseRevocation(b)) }},
		{"revocation without a delegation", canon(t, r2), func(b []byte) (any, error) { return deref(acts.ParseRevocation(b)) }},
		{"review with another verdict", canon(t, acts.Review{Version: 1, Kind: acts.KindReview, AuditID: "aud_x", Verdict: "maybe"}),
			func(b []byte) (any, error) { return deref(acts.ParseReview(b)) }},
		{"auditable with a negative rule", canon(t, acts.Auditable{Time: acts.Stamp(time.Now()), Version: 1, Kind: acts.KindAuditable, DelegationID: "dlg_x", Rule: -1}),
			func(b []byte) (any, error) { return deref(acts.ParseAuditable(b)) }},
		{"enable without a bundle", canon(t, acts.Enable{Time: acts.Stamp(time.Now()), Version: 1, Kind: acts.KindEnable, DelegationID: "dlg_x", Surveyor: "s", On: true}),
			func(b []byte) (any, error) { return deref(acts.ParseEnable(b)) }},
		{"reinstate without a delegation", canon(t, acts.Reinstate{Time: acts.Stamp(time.Now()), Version: 1, Kind: acts.KindReinstate}),
			func(b []byte) (any, error) { return deref(acts.ParseReinstate(b)) }},
	}
	for _, c := range others {
		if got, err := c.parse(c.data); !errors.Is(err, acts.ErrInvalid) {
			t.Errorf("%s: %+v, %v; want ErrInvalid", c.name, got, err)
		}
	}
}

func kindOf(t *testing.T, b []byte) string {
	t.Helper()
	var m struct{ Kind string }
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m.Kind
}

func TestApprovalExpiresAt(t *testing.T) {
	t.Parallel()
	a, err := acts.ParseApproval(canon(t, goodApproval()))
	if err != nil {
		t.Fatal(err)
	}
	if got := a.ExpiresAt().UTC().Format("2006-01-02T15:04:05Z"); got != "2030-01-02T03:04:05Z" {
		t.Fatalf("ExpiresAt = %s", got)
	}
}
