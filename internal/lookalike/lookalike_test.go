package lookalike_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/harbormaster-dev/harbormaster/internal/lookalike"
)

type found struct {
	at    int
	class lookalike.Class
}

func TestFind(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		in   string
		want []found
	}{
		{"ASCII", "UPDATE orders SET email = 'ann@example.com' WHERE id = 1", nil},
		{"Cyrillic a in a Latin word", "'exаmple.com'", []found{{3, lookalike.Confusable}}},
		{"Greek omicron in an identifier", "g\u03bfogle_id", []found{{1, lookalike.Confusable}}},
		{"a whole word of look-alikes", "'сор'", []found{{1, lookalike.Confusable}, {3, lookalike.Confusable}, {5, lookalike.Confusable}}},
		{"a Russian word is not marked", "'привет мир, о'", []found{{len("'привет мир, "), lookalike.Confusable}}},
		{"Russian text is not marked", "'привет мир'", nil},
		{"a letter of another script", "'paypalж'", []found{{7, lookalike.MixedScript}}},
		{"Latin in a Cyrillic word", "'пpивет'", []found{{3, lookalike.MixedScript}}},
		{"look-alikes of a minority script", "'раураl'", []found{{1, lookalike.Confusable}, {3, lookalike.Confusable}, {5, lookalike.Confusable},
			{7, lookalike.Confusable}, {9, lookalike.Confusable}, {11, lookalike.MixedScript}}},
		{"Japanese mixes scripts", "'東京タワーとLatin'", nil},
		{"Greek with Latin", "'λx'", []found{{1, lookalike.MixedScript}}},
		{"fullwidth", "'ｅｘａｍｐｌｅ'", []found{{1, lookalike.Confusable}, {4, lookalike.Confusable}, {7, lookalike.Confusable},
			{10, lookalike.Confusable}, {13, lookalike.Confusable}, {16, lookalike.Confusable}, {19, lookalike.Confusable}}},
		{"fullwidth among Han", "'（株）'", nil},
		{"mathematical bold", "'\U0001d41a'", []found{{1, lookalike.Confusable}}},
		{"Greek question mark", "a \u037e b", []found{{2, lookalike.Confusable}}},
		{"minus sign", "1\u22122", []found{{1, lookalike.Confusable}}},
		{"no-break space", "'a\u00a0b'", []found{{2, lookalike.Blank}}},
		{"Braille blank", "'\u2800'", []found{{1, lookalike.Blank}}},
		{"ideographic space", "'a\u3000'", []found{{2, lookalike.Blank}}},
		{"en quad to hair space", "\u2000\u200a", []found{{0, lookalike.Blank}, {3, lookalike.Blank}}},
		{"Hangul filler", "x\u3164y", []found{{1, lookalike.Blank}}},
		{"zero-width space and joiner", "a\u200bb\u200dc", []found{{1, lookalike.Invisible}, {5, lookalike.Invisible}}},
		{"byte order mark and Mongolian vowel separator", "\ufeff\u180e", []found{{0, lookalike.Invisible}, {3, lookalike.Invisible}}},
		{"bidi override", "'x\u202e'", []found{{2, lookalike.Bidi}}},
		{"isolates and marks", "\u2066\u2069\u200e\u200f\u061c", []found{{0, lookalike.Bidi}, {3, lookalike.Bidi}, {6, lookalike.Bidi}, {9, lookalike.Bidi}, {12, lookalike.Bidi}}},
		{"controls", "a\x1b[2J\u009b", []found{{1, lookalike.Invisible}, {5, lookalike.Invisible}}},
		{"tab, newline and carriage return", "a\tb\r\nc", nil},
		{"not UTF-8", "a\xffb", []found{{1, lookalike.Invalid}}},
		{"accented Latin", "'café', 'Ærø'", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var got []found
			for _, f := range lookalike.Find(c.in) {
				got = append(got, found{f.Offset, f.Class})
			}
			if !equal(got, c.want) {
				t.Errorf("Find(%q) = %v, want %v", c.in, got, c.want)
			}
		})
	}
}

func equal(a, b []found) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestWhy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"exаmple", `Cyrillic "а" (U+0430 CYRILLIC SMALL LETTER A) looks like Latin "a"`},
		{"paypalж", `Cyrillic "ж" (U+0436 CYRILLIC SMALL LETTER ZHE) in a word otherwise Latin`},
		{"1\u22122", `"−" (U+2212 MINUS SIGN) looks like "-"`},
		{"a\u00a0b", "U+00A0 NO-BREAK SPACE looks like a space"},
		{"\u3000", "U+3000 IDEOGRAPHIC SPACE looks like a space"},
		{"\u2800", "U+2800 BRAILLE PATTERN BLANK is drawn as blank space"},
		{"\u200b", "U+200B ZERO WIDTH SPACE is drawn as nothing"},
		{"\u202e", "U+202E RIGHT-TO-LEFT OVERRIDE reorders the text around it"},
		{"\x1b", "U+001B, a control character, is drawn as nothing or acts on the display"},
		{"\xfe", "byte 0xFE is not UTF-8"},
	} {
		fs := lookalike.Find(c.in)
		if len(fs) != 1 || fs[0].Why() != c.want {
			var whys []string
			for _, f := range fs {
				whys = append(whys, f.Why())
			}
			t.Errorf("Find(%q) says %q, want one finding saying %q", c.in, whys, c.want)
		}
	}
}

func TestMark(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"SELECT 1", "SELECT 1"},
		{"'exаmple.com'", "'ex⟦U+0430 CYRILLIC SMALL LETTER A⟧mple.com'"},
		{"'x\u202e y'", "'x⟦U+202E RIGHT-TO-LEFT OVERRIDE⟧ y'"},
		{"'a\u00a0\u2800\u3000'", "'a⟦U+00A0 NO-BREAK SPACE⟧⟦U+2800 BRAILLE PATTERN BLANK⟧⟦U+3000 IDEOGRAPHIC SPACE⟧'"},
		{"'⟦U+0430⟧'", "'⟦U+27E6 MATHEMATICAL LEFT WHITE SQUARE BRACKET⟧U+0430⟦U+27E7 MATHEMATICAL RIGHT WHITE SQUARE BRACKET⟧'"},
		{"a\xffb\x1b", "a⟦0xFF⟧b⟦U+001B⟧"},
	} {
		if got := lookalike.Mark(c.in); got != c.want {
			t.Errorf("Mark(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := unmark(t, lookalike.Mark(c.in)); got != c.in {
			t.Errorf("Mark(%q) reads back as %q", c.in, got)
		}
	}
}

func TestSummary(t *testing.T) {
	t.Parallel()
	got := lookalike.Summary(2, "'exаmple.com'", "'exаmple\u00a0\u2800\u3000'")
	want := []string{`Cyrillic "а" (U+0430 CYRILLIC SMALL LETTER A) looks like Latin "a"`, "U+00A0 NO-BREAK SPACE looks like a space", "and 2 more"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Summary = %q, want %q", got, want)
	}
	if got := lookalike.Summary(5, "SELECT 1"); got != nil {
		t.Errorf("Summary of plain ASCII = %q, want nothing", got)
	}
}

var markRE = regexp.MustCompile(`⟦(?:U\+([0-9A-F]{4,6})[^⟦⟧]*|0x([0-9A-F]{2}))⟧`)

// unmark reads a Mark rendering back to the text it marks.
func unmark(t testing.TB, m string) string {
	t.Helper()
	return markRE.ReplaceAllStringFunc(m, func(s string) string {
		sub := markRE.FindStringSubmatch(s)
		if sub[2] != "" {
			b, _ := strconv.ParseUint(sub[2], 16, 8)
			return string([]byte{byte(b)})
		}
		r, err := strconv.ParseUint(sub[1], 16, 32)
		if err != nil {
			t.Fatalf("mark %q: %v", s, err)
		}
		return string(rune(r))
	})
}

// FuzzLookalike: Find never panics, reports characters inside the text in
// order, each once, each of the class its bytes decode to; Mark is UTF-8,
// holds no bidi control nor anything drawn as nothing, opens a mark at
// every ⟦, and reads back to the text.
func FuzzLookalike(f *testing.F) {
	for _, s := range []string{"", "SELECT 1", "'exаmple.com'", "'сор'", "'paypalж'", "'a\u00a0\u2800\u3000'",
		"'x\u202e \u2066AND id = 5\u2069'", "a\xffb", "⟦U+0430⟧", "'ｅｘａｍｐｌｅ'", "1\u22122", "東京タワーとLatin",
		"\u115f\u1160\u3164\uffa0\u200d\ufeff\u180e\U000e0041", "'\U0001d41a'", "a\u0301\u0301\u0301"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		end := 0
		for _, fd := range lookalike.Find(s) {
			if fd.Offset < end || fd.Size < 1 || fd.Offset+fd.Size > len(s) {
				t.Fatalf("Find(%q): finding at %d+%d past the last's end %d or the text's %d", s, fd.Offset, fd.Size, end, len(s))
			}
			end = fd.Offset + fd.Size
			r, n := utf8.DecodeRuneInString(s[fd.Offset:])
			switch {
			case fd.Class == lookalike.Invalid:
				if r != utf8.RuneError || n != 1 || fd.Size != 1 || fd.Byte != s[fd.Offset] {
					t.Fatalf("Find(%q): invalid byte at %d is %q", s, fd.Offset, s[fd.Offset:end])
				}
			case r != fd.Rune || n != fd.Size:
				t.Fatalf("Find(%q): at %d reports %U, the text holds %U", s, fd.Offset, fd.Rune, r)
			}
			if fd.Why() == "" {
				t.Fatalf("Find(%q): no reason for %U", s, fd.Rune)
			}
		}
		m := lookalike.Mark(s)
		if !utf8.ValidString(m) {
			t.Fatalf("Mark(%q) = %q is not UTF-8", s, m)
		}
		for _, fd := range lookalike.Find(m) {
			if fd.Class == lookalike.Bidi || fd.Class == lookalike.Invisible || fd.Class == lookalike.Blank {
				t.Fatalf("Mark(%q) = %q holds %s", s, m, fd.Why())
			}
		}
		if got := unmark(t, m); got != s {
			t.Fatalf("Mark(%q) = %q reads back as %q", s, m, got)
		}
		if strings.Count(m, "⟦") != len(markRE.FindAllString(m, -1)) {
			t.Fatalf("Mark(%q) = %q has a ⟦ that opens no mark", s, m)
		}
	})
}

// BenchmarkFind measures the detector on a statement of ASCII, of
// Cyrillic text, and with look-alikes, as the console runs it on every
// value it shows.
func BenchmarkFind(b *testing.B) {
	for _, c := range []struct{ name, s string }{
		{"ascii", "UPDATE orders SET status = 'shipped', note = '" + strings.Repeat("left at the door ", 50) + "' WHERE id = 45"},
		{"cyrillic", "UPDATE orders SET note = '" + strings.Repeat("оставлено у двери ", 50) + "' WHERE id = 45"},
		{"lookalikes", "UPDATE customers SET email = '" + strings.Repeat("ann@exаmple.com\u2800\u3000\u00a0 ", 30) + "' WHERE id = 21"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.s)))
			for b.Loop() {
				lookalike.Find(c.s)
			}
		})
	}
}
