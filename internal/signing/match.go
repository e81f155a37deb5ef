package signing

import "strings"

// matchPattern reports whether s matches the OpenSSH glob pattern p, where
// '*' matches any run of bytes and '?' any one byte, over the whole of s. It
// gives the same answers as OpenSSH's match_pattern, in O(len(s)*len(p)) time
// rather than OpenSSH's exponential worst case.
func matchPattern(s, p string) bool {
	si, pi := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == s[si]):
			si++
			pi++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			mark++
			si, pi = mark, star+1
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// matchPatternList evaluates a comma-separated OpenSSH pattern list against s
// as OpenSSH's match_pattern_list does (case-sensitively): -1 if any negated
// ("!pattern") entry matches, 1 if otherwise any plain entry matches, else 0.
func matchPatternList(s string, list []string) int {
	got := 0
	for _, p := range list {
		if neg, ok := strings.CutPrefix(p, "!"); ok {
			if matchPattern(s, neg) {
				return -1
			}
			continue
		}
		if matchPattern(s, p) {
			got = 1
		}
	}
	return got
}
