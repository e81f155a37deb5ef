// Package lookalike finds, in text an agent wrote (a statement, a literal,
// an identifier, a row value), the characters a person reading it could
// take for others, so that every place a human reads agent text (the
// console, the CLI, the queue webhook) can mark them.
//
// The threat: an approver signs what they read. An agent that writes
// 'exаmple.com' with a Cyrillic а, a literal padded with U+2800 BRAILLE
// PATTERN BLANK or U+3000 IDEOGRAPHIC SPACE, or a bidi control that
// reorders the statement's text (Trojan Source), shows the approver one
// statement and runs another. Escaping stops markup; it does not stop a
// character that is drawn as another, as blank space, as nothing, or that
// moves the text around it.
//
// Find reports, by byte offset, each character of one of these classes:
//
//   - Bidi: an explicit direction control (U+202A..U+202E,
//     U+2066..U+2069, U+200E, U+200F, U+061C);
//   - Invisible: a character drawn as nothing or as a control: format
//     characters (zero-width space and joiners, U+FEFF, U+180E, tags),
//     control characters other than tab, newline and carriage return, line
//     and paragraph separators, variation selectors, U+034F;
//   - Blank: drawn as blank space without being U+0020: every space
//     separator (U+00A0, U+2000..U+200A, U+202F, U+205F, U+3000, ...),
//     U+2800 and the Hangul fillers (U+115F, U+1160, U+3164, U+FFA0);
//   - Confusable: a character that looks like an ASCII one (a compact
//     table of the common Cyrillic, Greek, Armenian, Cherokee and Latin
//     look-alikes and punctuation, and every fullwidth, mathematical,
//     Roman-numeral and letterlike form whose compatibility decomposition
//     is ASCII), when its word reads wholly as ASCII, or holds an ASCII
//     letter or digit, or is mostly of another script: "exаmple" and "сор"
//     are marked, a Russian word that merely holds an "о" is not;
//   - MixedScript: a letter of another script than the rest of its word
//     (Latin and Cyrillic in one identifier), where the mix is not one
//     that writing uses (Latin with Han, Hiragana, Katakana, Hangul or
//     Bopomofo);
//   - Invalid: a byte that is not UTF-8.
//
// Each finding says why, in words a person reads ("Cyrillic "а" (U+0430
// CYRILLIC SMALL LETTER A) looks like Latin "a""). Mark renders text for a
// plain-text reader (a terminal, a chat message) with each finding written
// as its code point and name between ⟦ and ⟧; a ⟦ or ⟧ of the text itself
// is written so too, so every ⟦ in the output is a mark and the output
// reads back to the text exactly. The package is pure: no I/O, no state.
package lookalike
