package logbook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCanonicalJSON(t *testing.T) {
	t.Parallel()
	type inner struct {
		B int    `json:"b"`
		A string `json:"a"`
	}
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"nil", nil, `null`},
		{"nil raw", json.RawMessage(nil), `null`},
		{"struct fields sorted", inner{B: 1, A: "x"}, `{"a":"x","b":1}`},
		{"raw whitespace and order", json.RawMessage(" { \"b\" : [ 1 , 2 ] ,\n\"a\" : { } } "), `{"a":{},"b":[1,2]}`},
		{"nested maps", map[string]any{"z": map[string]any{"y": 1, "x": []any{}}, "a": nil}, `{"a":null,"z":{"x":[],"y":1}}`},
		{"no HTML escaping", "<a href='x'>&</a>", `"<a href='x'>&</a>"`},
		{"control characters", "\x00\b\t\n\f\r\x1f\"\\/", `"\u0000\b\t\n\f\r\u001f\"\\/"`},
		{"non-ASCII kept", "é€😀\u2028", "\"é€😀\u2028\""},
		{"raw escapes decoded", json.RawMessage(`"\u00e9\ud83d\ude00\/\u0041"`), `"é😀/A"`},
		{"lone surrogate", json.RawMessage(`"\ud800x"`), "\"\uFFFDx\""},
		{"invalid UTF-8", string([]byte{'a', 0xff, 'b'}), "\"a\uFFFDb\""},
		{"int64 exact", int64(math.MaxInt64), `9223372036854775807`},
		{"uint64 exact", uint64(math.MaxUint64), `18446744073709551615`},
		{"big integer literal kept", json.RawMessage(`123456789012345678901234567890`), `123456789012345678901234567890`},
		{"negative zero", json.RawMessage(`-0`), `0`},
		{"negative zero float", json.RawMessage(`-0.0`), `0`},
		{"float integral", json.RawMessage(`1.0`), `1`},
		{"float exponent", json.RawMessage(`1E3`), `1000`},
		{"float small", json.RawMessage(`0.0000001`), `1e-7`},
		{"float large", json.RawMessage(`1e21`), `1e+21`},
		{"float just below 1e21", json.RawMessage(`1e20`), `100000000000000000000`},
		{"float shortest", func() float64 { a := 0.1; return a + 0.2 }(), `0.30000000000000004`},
		{"float64 value", 3.5, `3.5`},
		{"string map", map[string]string{"b": "2", "a": "1"}, `{"a":"1","b":"2"}`},
		{"utf16 key order", map[string]int{"\U0001F600": 1, "\uFB01": 2, "a": 3}, "{\"a\":3,\"\U0001F600\":1,\"\uFB01\":2}"},
		{"bools", []bool{true, false}, `[true,false]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := CanonicalJSON(tt.in)
			if err != nil {
				t.Fatalf("CanonicalJSON: %v", err)
			}
			if string(got) != tt.want {
				t.Fatalf("CanonicalJSON = %s, want %s", got, tt.want)
			}
			again, err := CanonicalJSON(json.RawMessage(got))
			if err != nil || !bytes.Equal(again, got) {
				t.Fatalf("not idempotent: %s then %s (%v)", got, again, err)
			}
		})
	}
}

func TestCanonicalJSONRejects(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", maxJSONDepth+2) + strings.Repeat("]", maxJSONDepth+2)
	for _, in := range []string{
		`{"a":1,"a":2}`,
		`{"a":1,"\u0061":2}`,
		"{\"\xff\":1,\"\xfe\":2}", // both print as U+FFFD
		`1e400`,
		`[1,]`,
		`{"a"}`,
		`"unterminated`,
		"\"raw\x01control\"",
		`01`,
		`1.`,
		`-`,
		`tru`,
		`"\x"`,
		`"\u12"`,
		`{} {}`,
		deep,
	} {
		_, err := CanonicalJSON(json.RawMessage(in))
		if err == nil {
			t.Errorf("CanonicalJSON(%.40q) succeeded", in)
		}
		if _, err2 := canonicalize([]byte(in)); err2 == nil || !errors.Is(err2, ErrCanonicalJSON) {
			t.Errorf("canonicalize(%.40q) = %v, want ErrCanonicalJSON", in, err2)
		}
	}
	// A Go map with two invalid-UTF-8 keys that print alike.
	if _, err := CanonicalJSON(map[string]string{"\xff": "1", "\xfe": "2"}); err == nil {
		t.Error("map with colliding invalid keys accepted")
	}
}

// The same value, written with any key order and whitespace, canonicalizes
// to the same bytes.
func TestCanonicalJSONDeterministic(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		v := randomValue(rng, 0)
		want, err := CanonicalJSON(v)
		if err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
		for range 5 {
			var b strings.Builder
			writeShuffled(&b, rng, v)
			got, err := CanonicalJSON(json.RawMessage(b.String()))
			if err != nil {
				t.Fatalf("value %d rewritten as %s: %v", i, b.String(), err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("value %d: %s and its rewrite %s canonicalize differently:\n%s\n%s", i, want, b.String(), want, got)
			}
		}
		// Canonical output decodes to the same value.
		var back any
		if err := json.Unmarshal(want, &back); err != nil || !reflect.DeepEqual(normalize(v), back) {
			t.Fatalf("value %d: %s does not decode back (%v)", i, want, err)
		}
	}
}

func randomValue(rng *rand.Rand, depth int) any {
	k := rng.IntN(8)
	if depth > 3 {
		k = rng.IntN(5)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return rng.IntN(2) == 0
	case 2:
		return rng.Int64N(1<<53) - 1<<52
	case 3:
		return math.Float64frombits(rng.Uint64()>>2) * []float64{1, -1}[rng.IntN(2)]
	case 4:
		return randomString(rng)
	case 5, 6:
		m := map[string]any{}
		for range rng.IntN(5) {
			m[randomString(rng)] = randomValue(rng, depth+1)
		}
		return m
	default:
		a := []any{}
		for range rng.IntN(4) {
			a = append(a, randomValue(rng, depth+1))
		}
		return a
	}
}

func randomString(rng *rand.Rand) string {
	runes := []rune("aZ09 \"\\/\n\t\u00e9\u20ac\U0001F600\uFB01<>&\u2028\x00")
	var b strings.Builder
	for range rng.IntN(6) {
		b.WriteRune(runes[rng.IntN(len(runes))])
	}
	return b.String()
}

// writeShuffled writes v as JSON with random key order, whitespace, escapes
// and number spellings.
func writeShuffled(b *strings.Builder, rng *rand.Rand, v any) {
	ws := func() { b.WriteString([]string{"", " ", "\n", "\t ", "\r\n"}[rng.IntN(5)]) }
	ws()
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeShuffled(b, rng, k)
			ws()
			b.WriteByte(':')
			writeShuffled(b, rng, v[k])
		}
		ws()
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeShuffled(b, rng, e)
		}
		ws()
		b.WriteByte(']')
	case string:
		if rng.IntN(2) == 0 {
			// Escape everything as \u.
			b.WriteByte('"')
			for _, r := range v {
				if r >= 0x10000 {
					r1, r2 := utf16Pair(r)
					fmt.Fprintf(b, `\u%04x\u%04X`, r1, r2)
				} else {
					fmt.Fprintf(b, `\u%04x`, r)
				}
			}
			b.WriteByte('"')
		} else {
			enc, _ := json.Marshal(v)
			b.Write(enc)
		}
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case float64:
		b.WriteString(strconv.FormatFloat(v, []byte{'e', 'E', 'g', 'f'}[rng.IntN(4)], -1, 64))
	default:
		enc, _ := json.Marshal(v)
		b.Write(enc)
	}
	ws()
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xD800 + r>>10, 0xDC00 + r&0x3FF
}

// normalize maps a generated value to what encoding/json decodes into any.
func normalize(v any) any {
	switch v := v.(type) {
	case int64:
		return float64(v)
	case map[string]any:
		m := map[string]any{}
		for k, e := range v {
			m[k] = normalize(e)
		}
		return m
	case []any:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = normalize(e)
		}
		return a
	}
	return v
}

func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[true,null,"x"]}`, `1.5e-7`, `"\ud83d\ude00"`, `[{"a":{}},-0]`,
		`123456789012345678901234567890`, `{"\u00e9":1,"é":2}`, "\"\xff\"", `"\ud800\u0041"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := canonicalize(in)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("canonical form of %q is not valid JSON: %q", in, out)
		}
		again, err := canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", in, out, again, err)
		}
		if !json.Valid(in) {
			t.Fatalf("accepted invalid JSON %q", in)
		}
		// Same meaning as encoding/json gives the input (where it can hold it).
		var a, b any
		if json.Unmarshal(in, &a) == nil {
			if err := json.Unmarshal(out, &b); err != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("meaning changed: %q -> %q", in, out)
			}
		}
	})
}

// viaEncodingJSON is CanonicalJSON the long way: encoding/json for the
// whole value, then canonicalize.
func viaEncodingJSON(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return canonicalize(raw)
}

// The direct encoder writes exactly what encoding/json plus canonicalize
// write, for the types it handles itself and for those it hands over.
func TestCanonicalJSONDirectMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	type named string
	type row struct {
		ID   int      `json:"id"`
		Tags []string `json:"tags,omitempty"`
		Note named    `json:"note"`
	}
	seven := -7
	edge := []any{
		map[string]any{"a": []string(nil), "b": []any(nil), "c": map[string]any(nil), "d": map[string]string(nil), "e": []map[string]any(nil)},
		map[string]any{"s": []string{"<&>", "\u2028\u2029", "\xff\xfe", ""}, "n": named("x<y"), "r": row{ID: 1, Note: "é"}},
		map[string]any{"ints": []any{int(-1), int64(math.MinInt64), int32(7), uint64(math.MaxUint64), uint8(3), int8(-3), uint(9)}},
		map[string]any{"floats": []any{0.1, float32(0.1), -0.0, 1e21, 1e20, 5e-324, math.MaxFloat64, 1.0}},
		map[string]any{"raw": json.RawMessage(` {"z": 1, "a" : [ 1.50 ] } `), "nilraw": json.RawMessage(nil)},
		map[string]any{"evaluated": []map[string]any{{"rule": 1, "decision": "conforms"}}, "rows": []row{{ID: 2, Tags: []string{"b", "a"}}}},
		map[string]any{"rule": (*int)(nil), "rules": []any{&seven, (*int)(nil)}},
		map[string]any{"\U0001F600": 1, "\uFB01": 2, "a": map[string]string{"y": "1", "x": "2"}},
		[]any{nil, true, false, "x", map[string]any{}},
		[]string{},
		time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		edge = append(edge, randomValue(rng, 0))
	}
	for i, v := range edge {
		want, werr := viaEncodingJSON(v)
		got, gerr := CanonicalJSON(v)
		if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("value %d (%#v):\ndirect   %s (%v)\nencoding %s (%v)", i, v, got, gerr, want, werr)
		}
	}
	// What encoding/json refuses, the direct encoder refuses too.
	for _, v := range []any{map[string]any{"f": math.NaN()}, []any{math.Inf(1)}, map[string]any{"c": make(chan int)}} {
		if _, err := CanonicalJSON(v); err == nil {
			t.Errorf("CanonicalJSON(%#v) accepted", v)
		}
	}
	deep := any("x")
	for range maxJSONDepth + 2 {
		deep = []any{deep}
	}
	if _, err := CanonicalJSON(deep); !errors.Is(err, ErrCanonicalJSON) {
		t.Errorf("nesting deeper than %d: %v", maxJSONDepth, err)
	}
}
