package lookalike

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
	"golang.org/x/text/unicode/runenames"
)

// Class is what makes a character a look-alike.
type Class uint8

// The classes, from the one that hides most.
const (
	// Bidi reorders the text around it.
	Bidi Class = iota + 1
	// Invisible is drawn as nothing, or is a control character.
	Invisible
	// Blank is drawn as blank space without being U+0020.
	Blank
	// Confusable looks like an ASCII character (Like).
	Confusable
	// MixedScript is a letter of another script than the rest of its word.
	MixedScript
	// Invalid is a byte that is not UTF-8.
	Invalid
)

var classNames = [...]string{Bidi: "bidi control", Invisible: "invisible", Blank: "blank",
	Confusable: "confusable", MixedScript: "mixed script", Invalid: "not UTF-8"}

func (c Class) String() string {
	if int(c) < len(classNames) && classNames[c] != "" {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", c)
}

// Finding is one look-alike character of a text.
type Finding struct {
	// Offset is the character's byte offset in the text, Size its length
	// in bytes (1 for an Invalid byte).
	Offset, Size int
	// Rune is the character; for Invalid, utf8.RuneError and Byte holds
	// the byte.
	Rune rune
	Byte byte
	// Class says why it is a look-alike.
	Class Class
	// Like is the ASCII text a Confusable looks like ("a", "-", "II").
	Like string
	// Script is the script of a Confusable or MixedScript letter
	// ("Cyrillic"); "" for a character common to scripts (punctuation).
	Script string
	// Word is, for MixedScript, the script of the rest of its word.
	Word string
}

// Code names the character: "U+0430 CYRILLIC SMALL LETTER A", "U+001B"
// for a control character (which has no name), "byte 0xFF" for a byte
// that is not UTF-8.
func (f Finding) Code() string {
	if f.Class == Invalid {
		return fmt.Sprintf("byte 0x%02X", f.Byte)
	}
	return code(f.Rune)
}

func code(r rune) string {
	if n := runenames.Name(r); n != "" && !strings.HasPrefix(n, "<") {
		return fmt.Sprintf("U+%04X %s", r, n)
	}
	return fmt.Sprintf("U+%04X", r)
}

// Why says in words why the character is marked.
func (f Finding) Why() string {
	switch f.Class {
	case Bidi:
		return f.Code() + " reorders the text around it"
	case Invisible:
		if unicode.Is(unicode.Cc, f.Rune) {
			return f.Code() + ", a control character, is drawn as nothing or acts on the display"
		}
		return f.Code() + " is drawn as nothing"
	case Blank:
		if unicode.Is(unicode.Zs, f.Rune) {
			return f.Code() + " looks like a space"
		}
		return f.Code() + " is drawn as blank space"
	case Confusable:
		like := fmt.Sprintf("%q", f.Like)
		if isASCIILetter(f.Like) {
			like = "Latin " + like
		}
		return fmt.Sprintf("%s%q (%s) looks like %s", scriptPrefix(f.Script), string(f.Rune), f.Code(), like)
	case MixedScript:
		return fmt.Sprintf("%s%q (%s) in a word otherwise %s", scriptPrefix(f.Script), string(f.Rune), f.Code(), f.Word)
	case Invalid:
		return f.Code() + " is not UTF-8"
	}
	return f.Code()
}

func scriptPrefix(s string) string {
	if s == "" {
		return ""
	}
	return s + " "
}

func isASCIILetter(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return s != ""
}

// Find returns the look-alike characters of s, in order of offset, at
// most one finding per character.
func Find(s string) []Finding {
	if plainASCII(s) {
		return nil
	}
	var out []Finding
	// A word is a run of characters that are letters, digits, marks, '_'
	// or confusables; its confusables and letters are judged together.
	wordStart := -1
	for i := 0; i <= len(s); {
		r, n := rune(-1), 0
		if i < len(s) {
			r, n = utf8.DecodeRuneInString(s[i:])
		}
		cls := Class(0)
		switch {
		case i == len(s):
		case r == utf8.RuneError && n == 1:
			cls = Invalid
		default:
			cls = charClass(r)
		}
		inWord := i < len(s) && cls == 0 && wordRune(r)
		if inWord && wordStart < 0 {
			wordStart = i
		}
		if !inWord && wordStart >= 0 {
			out = word(out, s, wordStart, i)
			wordStart = -1
		}
		if cls != 0 {
			f := Finding{Offset: i, Size: n, Rune: r, Class: cls}
			if cls == Invalid {
				f.Byte = s[i]
			}
			out = append(out, f)
		}
		if i == len(s) {
			break
		}
		i += n
	}
	return out
}

// charClass is the class a character has whatever its neighbours: Bidi,
// Invisible or Blank; 0 for any other.
func charClass(r rune) Class {
	switch r {
	case '\t', '\n', '\r', ' ':
		return 0
	case '\u202a', '\u202b', '\u202c', '\u202d', '\u202e', '\u2066', '\u2067', '\u2068', '\u2069', '\u200e', '\u200f', '\u061c':
		return Bidi
	case '\u2800', '\u115f', '\u1160', '\u3164', '\uffa0':
		return Blank
	case '\u034f', '\u180e':
		return Invisible
	}
	if r < 0x80 && r >= 0x20 && r != 0x7f {
		return 0
	}
	switch {
	case unicode.Is(unicode.Zs, r):
		return Blank
	case unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Variation_Selector):
		return Invisible
	}
	return 0
}

func wordRune(r rune) bool {
	if r < 0x80 {
		return r == '_' || r|0x20 >= 'a' && r|0x20 <= 'z' || r >= '0' && r <= '9'
	}
	return unicode.In(r, unicode.L, unicode.N, unicode.M) || confusable(r) != ""
}

// scriptCount is how many letters of a word are of one script.
type scriptCount struct {
	script string
	n      int
}

// word appends the findings of the word s[from:to]: its confusables when
// it reads wholly as ASCII, or holds an ASCII letter or digit, or they
// are of a minority script of the word; and its other letters of a
// minority script when its scripts are mixed. In "пpивет" the Latin p is
// marked, the Cyrillic е (a look-alike of e) is not.
func word(out []Finding, s string, from, to int) []Finding {
	w := s[from:to]
	if !hasNonASCII(w) {
		return out // one script, nothing that looks like ASCII but is not
	}
	hasASCII, allASCIILike := false, true
	var buf [4]scriptCount
	counts := buf[:0] // in order of first appearance
	for _, r := range w {
		switch {
		case r < 0x80:
			if r != '_' {
				hasASCII = true
			}
		case confusable(r) != "":
		case unicode.Is(unicode.M, r):
		default:
			allASCIILike = false
		}
		if sc := scriptOf(r); sc != "" {
			i := 0
			for i < len(counts) && counts[i].script != sc {
				i++
			}
			if i == len(counts) {
				counts = append(counts, scriptCount{script: sc})
			}
			counts[i].n++
		}
	}
	main := ""
	mixed := len(counts) > 1 && !writtenMix(counts)
	if mixed {
		// The script most of the word is in; Latin on a tie, since the
		// look-alikes this package knows imitate it.
		best := scriptCount{}
		for _, c := range counts {
			if c.n > best.n || c.n == best.n && c.script == "Latin" {
				best = c
			}
		}
		main = best.script
	}
	for i, r := range w {
		like := confusable(r)
		sc := scriptOf(r)
		switch {
		case like != "" && (allASCIILike || !mixed && hasASCII || mixed && sc != main):
			out = append(out, Finding{Offset: from + i, Size: utf8.RuneLen(r), Rune: r, Class: Confusable, Like: like, Script: sc})
		case mixed && sc != "" && sc != main && unicode.IsLetter(r):
			out = append(out, Finding{Offset: from + i, Size: utf8.RuneLen(r), Rune: r, Class: MixedScript, Script: sc, Word: main})
		}
	}
	return out
}

// writtenMix reports whether the scripts are a mix that writing uses:
// Japanese (Han, Hiragana, Katakana), Korean (Han, Hangul) and Chinese
// with Bopomofo, each also with Latin (UTS #39's highly restrictive
// level).
func writtenMix(scripts []scriptCount) bool {
	for _, allowed := range [][]string{{"Latin", "Han", "Hiragana", "Katakana"}, {"Latin", "Han", "Hangul"}, {"Latin", "Han", "Bopomofo"}} {
		ok := true
		for _, sc := range scripts {
			ok = ok && slices.Contains(allowed, sc.script)
		}
		if ok {
			return true
		}
	}
	return false
}

// plainASCII reports whether s is printable ASCII, tab, newline and
// carriage return only: the text of most statements, with nothing to find.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 || c >= 0x7f) && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

func hasNonASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return true
		}
	}
	return false
}

// frequentScripts are tried first, in this order, before every other.
var frequentScripts = []string{"Latin", "Cyrillic", "Greek", "Armenian", "Han", "Hiragana", "Katakana", "Hangul",
	"Arabic", "Hebrew", "Cherokee", "Devanagari", "Thai", "Georgian", "Bopomofo", "Lisu"}

var frequentTables = func() []*unicode.RangeTable {
	t := make([]*unicode.RangeTable, len(frequentScripts))
	for i, name := range frequentScripts {
		t[i] = unicode.Scripts[name]
	}
	return t
}()

// scriptOf is the script of a letter or digit, "" for a character common
// to scripts (ASCII digits, punctuation) or inherited from its base (marks).
func scriptOf(r rune) string {
	if r < 0x80 {
		if r|0x20 >= 'a' && r|0x20 <= 'z' {
			return "Latin"
		}
		return ""
	}
	for i, t := range frequentTables {
		if unicode.Is(t, r) {
			return frequentScripts[i]
		}
	}
	if unicode.In(r, unicode.Common, unicode.Inherited) {
		return ""
	}
	for name, t := range unicode.Scripts {
		if unicode.Is(t, r) {
			return name
		}
	}
	return ""
}

// confusable returns the ASCII text r looks like, "" if none.
func confusable(r rune) string {
	if r < 0x80 {
		return ""
	}
	if like, ok := confusables[r]; ok {
		return like
	}
	switch {
	case r >= 0xff01 && r <= 0xff5e: // fullwidth ASCII
		return string(r - 0xfee0)
	case r >= 0x2100 && r <= 0x214f, // letterlike symbols: ℎ, ℓ, K (Kelvin)
		r >= 0x2160 && r <= 0x217f,   // Roman numerals
		r >= 0x1d400 && r <= 0x1d7ff: // mathematical alphanumerics
		k := norm.NFKC.String(string(r))
		for i := 0; i < len(k); i++ {
			if c := k[i]; !(c|0x20 >= 'a' && c|0x20 <= 'z' || c >= '0' && c <= '9') {
				return ""
			}
		}
		return k
	}
	return ""
}

// confusables are the common look-alikes of ASCII among letters of other
// scripts and punctuation (after Unicode's confusables.txt, UTS #39),
// kept to those drawn the same in common fonts.
var confusables = map[rune]string{
	// Cyrillic
	'а': "a", 'е': "e", 'о': "o", 'р': "p", 'с': "c", 'у': "y", 'х': "x", 'ѕ': "s", 'і': "i", 'ј': "j",
	'ԛ': "q", 'ԝ': "w", 'һ': "h", 'ӏ': "l", 'ԁ': "d", 'ѡ': "w", 'ѵ': "v", 'ү': "y",
	'А': "A", 'В': "B", 'Е': "E", 'К': "K", 'М': "M", 'Н': "H", 'О': "O", 'Р': "P", 'С': "C", 'Т': "T",
	'Х': "X", 'Ѕ': "S", 'І': "I", 'Ј': "J", 'Ү': "Y", 'Ԛ': "Q", 'Ԝ': "W", 'Ӏ': "I", 'З': "3",
	// Greek
	'ο': "o", 'α': "a", 'ν': "v", 'ρ': "p", 'υ': "u", 'ι': "i", 'χ': "x", 'γ': "y", 'κ': "k", 'ϲ': "c", 'ϳ': "j",
	'Α': "A", 'Β': "B", 'Ε': "E", 'Ζ': "Z", 'Η': "H", 'Ι': "I", 'Κ': "K", 'Μ': "M", 'Ν': "N", 'Ο': "O",
	'Ρ': "P", 'Τ': "T", 'Υ': "Y", 'Χ': "X", 'Ϲ': "C", 'Ϳ': "J", '\u037e': ";",
	// Armenian
	'օ': "o", 'ս': "u", 'ց': "g", 'հ': "h", 'ո': "n", 'զ': "q", 'Օ': "O", 'Ս': "U", 'Լ': "L", 'Տ': "S",
	'\u0589': ":",
	// Cherokee
	'Ꭺ': "A", 'Ᏼ': "B", 'Ꮯ': "C", 'Ꭰ': "D", 'Ꭼ': "E", 'Ꮐ': "G", 'Ꮋ': "H", 'Ꭵ': "i", 'Ꭻ': "J", 'Ꮶ': "K",
	'Ꮮ': "L", 'Ꮇ': "M", 'Ꮲ': "P", 'Ꮪ': "S", 'Ꭲ': "T", 'Ꮩ': "V", 'Ꮃ': "W", 'Ꮓ': "Z",
	// Latin beyond ASCII
	'ɑ': "a", 'ɡ': "g", 'ɩ': "i", 'ȷ': "j", 'ǀ': "l", 'ǃ': "!",
	// Punctuation
	'ʼ': "'", 'ʹ': "'", 'ˈ': "'", '′': "'", '׳': "'", '″': "\"", '״': "\"", '‚': ",",
	'‐': "-", '‑': "-", '‒': "-", '−': "-", '˗': "-", '⁃': "-",
	'ꓸ': ".", '․': ".", '∶': ":", '꞉': ":", '⁄': "/", '∕': "/", '⧸': "/", '∖': "\\", '∣': "|",
}

// Mark returns s for a plain-text reader: each look-alike written as
// ⟦U+0430 CYRILLIC SMALL LETTER A⟧, each byte that is not UTF-8 as
// ⟦0xFF⟧, and each ⟦ or ⟧ of s as its code point so, so that every ⟦ of
// the result opens a mark. The result holds no bidi control and nothing
// drawn as nothing, and reads back to s exactly.
func Mark(s string) string {
	fs := Find(s)
	if len(fs) == 0 && !strings.ContainsAny(s, "⟦⟧") {
		return s
	}
	var b strings.Builder
	k, start := 0, 0
	for i := 0; i < len(s); {
		if k < len(fs) && fs[k].Offset == i {
			f := fs[k]
			k++
			b.WriteString(s[start:i])
			if f.Class == Invalid {
				fmt.Fprintf(&b, "⟦0x%02X⟧", f.Byte)
			} else {
				b.WriteString("⟦" + code(f.Rune) + "⟧")
			}
			i += f.Size
			start = i
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == '⟦' || r == '⟧' {
			b.WriteString(s[start:i])
			b.WriteString("⟦" + code(r) + "⟧")
			start = i + n
		}
		i += n
	}
	b.WriteString(s[start:])
	return b.String()
}

// Summary lists, once each and in order of first appearance, why the
// look-alikes of texts are marked: at most n lines, the last saying how
// many more there are.
func Summary(n int, texts ...string) []string {
	var out []string
	seen := map[string]bool{}
	more := 0
	for _, t := range texts {
		for _, f := range Find(t) {
			w := f.Why()
			if seen[w] {
				continue
			}
			seen[w] = true
			if len(out) < n {
				out = append(out, w)
			} else {
				more++
			}
		}
	}
	if more > 0 {
		out = append(out, fmt.Sprintf("and %d more", more))
	}
	return out
}
