package signing

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// Limits on the parts of an allowed-signers line.
const (
	maxNameLen    = 64
	maxPatternLen = 256
	maxTargetLen  = 256
)

// AllowedSigners is a parsed OpenSSH allowed-signers file that follows the
// Harbormaster NAME@TARGET convention (see the package documentation). The
// parsed file is immutable; the only state that changes is the memory of
// signed requests VerifyRequest has accepted. It is safe for concurrent use.
type AllowedSigners struct {
	entries []entry
	byKey   map[string][]int // marshaled public key -> indexes into entries, in file order

	requests requestMemory // VerifyRequest's, in this process
}

// entry is one line of an allowed-signers file.
type entry struct {
	line        int
	principals  []string // NAME@TARGET patterns, some perhaps "!"-negated
	namespaces  []string // pattern list; nil means every namespace
	validAfter  int64    // Unix seconds; 0 means no bound
	validBefore int64    // Unix seconds; 0 means no bound
	key         ssh.PublicKey
}

// ParseError is a malformed line of an allowed-signers file.
type ParseError struct {
	// Path is the file's path, empty when parsed from memory.
	Path string
	// Line is the 1-based line number.
	Line int
	// Err says what is wrong.
	Err error
}

func (e *ParseError) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("%s:%d: %v", e.Path, e.Line, e.Err)
	}
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// ParseAllowedSigners parses an allowed-signers file. Every line must be
// well formed or the whole file is refused with a *ParseError naming the
// first bad line; blank lines and lines starting with # are skipped. A file
// with no entries is valid and authorizes nobody.
func ParseAllowedSigners(data []byte) (*AllowedSigners, error) {
	a, err := parseAllowedSigners(data, "")
	if err != nil {
		return nil, fmt.Errorf("signing: parse allowed signers: %w", err)
	}
	return a, nil
}

// LoadAllowedSigners reads and parses an allowed-signers file; errors name
// path and line.
func LoadAllowedSigners(path string) (*AllowedSigners, error) {
	data, err := readLimited(path, MaxAllowedSignersSize)
	if err != nil {
		return nil, fmt.Errorf("signing: load allowed signers: %w", err)
	}
	a, err := parseAllowedSigners(data, path)
	if err != nil {
		return nil, fmt.Errorf("signing: load allowed signers: %w", err)
	}
	return a, nil
}

func parseAllowedSigners(data []byte, path string) (*AllowedSigners, error) {
	if len(data) > MaxAllowedSignersSize {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(data), MaxAllowedSignersSize)
	}
	a := &AllowedSigners{byKey: make(map[string][]int)}
	for i, line := range strings.Split(string(data), "\n") {
		e, ok, err := parseLine(line)
		if err != nil {
			return nil, &ParseError{Path: path, Line: i + 1, Err: err}
		}
		if !ok {
			continue
		}
		e.line = i + 1
		k := string(e.key.Marshal())
		a.byKey[k] = append(a.byKey[k], len(a.entries))
		a.entries = append(a.entries, e)
	}
	return a, nil
}

// Len returns the number of entries (non-blank, non-comment lines).
func (a *AllowedSigners) Len() int {
	if a == nil {
		return 0
	}
	return len(a.entries)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }

func trimSpace(s string) string {
	for s != "" && isSpace(s[0]) {
		s = s[1:]
	}
	return s
}

// field splits s at its first whitespace, returning the field and the rest
// with leading whitespace removed.
func field(s string) (string, string) {
	for i := 0; i < len(s); i++ {
		if isSpace(s[i]) {
			return s[:i], trimSpace(s[i:])
		}
	}
	return s, ""
}

// parseLine parses one line: principals [options] keytype base64key [comment].
// ok is false for blank and comment lines.
func parseLine(line string) (e entry, ok bool, err error) {
	if strings.IndexByte(line, 0) >= 0 {
		return e, false, errors.New("NUL byte in line")
	}
	s := trimSpace(line)
	if s == "" || s[0] == '#' {
		return e, false, nil
	}

	// Principals, optionally in double quotes as OpenSSH allows.
	var princ string
	if s[0] == '"' {
		end := strings.IndexByte(s[1:], '"')
		if end < 0 {
			return e, false, errors.New("principals: missing end quote")
		}
		princ, s = s[1:1+end], s[2+end:]
		if s != "" && !isSpace(s[0]) {
			return e, false, errors.New("principals: text after end quote")
		}
		s = trimSpace(s)
	} else {
		princ, s = field(s)
	}
	if e.principals, err = parsePrincipals(princ); err != nil {
		return e, false, err
	}
	if s == "" {
		return e, false, errors.New("missing public key")
	}

	// Options, if the next field is not a key type. Options always hold an
	// '=' except cert-authority; key type names never do.
	if tok, _ := field(s); strings.Contains(tok, "=") || hasPrefixFold(tok, "cert-authority") {
		end, err := optionsEnd(s)
		if err != nil {
			return e, false, err
		}
		if err := e.parseOptions(s[:end]); err != nil {
			return e, false, err
		}
		s = trimSpace(s[end:])
		if s == "" {
			return e, false, errors.New("missing public key after options")
		}
	}

	keyType, rest := field(s)
	b64, _ := field(rest) // the rest is a comment
	if e.key, err = parseKey(keyType, b64); err != nil {
		return e, false, err
	}
	return e, true, nil
}

// parseKey parses the "keytype base64" fields of a line.
func parseKey(keyType, b64 string) (ssh.PublicKey, error) {
	switch {
	case isSupportedKeyType(keyType):
	case strings.HasSuffix(keyType, "-cert-v01@openssh.com"):
		return nil, fmt.Errorf("%w: certificates are not supported (%s)", ErrUnsupportedKey, clip(keyType))
	case keyType == ssh.KeyAlgoDSA || strings.HasPrefix(keyType, "sk-") || strings.HasPrefix(keyType, "ssh-") || strings.HasPrefix(keyType, "ecdsa-"):
		return nil, fmt.Errorf("%w: %s (want ssh-ed25519, ecdsa-sha2-nistp256/384/521 or ssh-rsa)", ErrUnsupportedKey, clip(keyType))
	default:
		return nil, fmt.Errorf("%s is neither a key type nor a supported option", clip(keyType))
	}
	if b64 == "" {
		return nil, fmt.Errorf("missing base64 key after key type %s", clip(keyType))
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("key: bad base64: %w", err)
	}
	pub, err := ssh.ParsePublicKey(raw)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	if pub.Type() != keyType {
		return nil, fmt.Errorf("key type field %s does not match the key (%s)", clip(keyType), pub.Type())
	}
	if err := checkKey(pub); err != nil {
		return nil, err
	}
	return pub, nil
}

func isSupportedKeyType(t string) bool {
	switch t {
	case ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521, ssh.KeyAlgoRSA:
		return true
	}
	return false
}

// parsePrincipals checks a comma-separated principals field against the
// NAME@TARGET convention.
func parsePrincipals(field string) ([]string, error) {
	if field == "" {
		return nil, errors.New("missing principals")
	}
	ps := strings.Split(field, ",")
	positive := false
	for _, p := range ps {
		if err := checkPrincipal(p); err != nil {
			return nil, err
		}
		if p[0] != '!' {
			positive = true
		}
	}
	if !positive {
		return nil, errors.New("principals: only negated patterns, so the line matches nobody")
	}
	return ps, nil
}

// checkPrincipal checks one [!]NAME@TARGET pattern.
func checkPrincipal(p string) error {
	body := strings.TrimPrefix(p, "!")
	if len(body) > maxPatternLen {
		return fmt.Errorf("principal %s: longer than %d bytes", clip(p), maxPatternLen)
	}
	name, target, ok := strings.Cut(body, "@")
	if !ok {
		return fmt.Errorf("principal %s: want NAME@TARGET, e.g. alice@shop or bob@*", clip(p))
	}
	if err := checkName(name); err != nil {
		return fmt.Errorf("principal %s: %w", clip(p), err)
	}
	if target == "" {
		return fmt.Errorf("principal %s: empty target pattern", clip(p))
	}
	for i := 0; i < len(target); i++ {
		if c := target[i]; !isTargetByte(c) && c != '*' && c != '?' {
			return fmt.Errorf("principal %s: target pattern may hold only A-Z a-z 0-9 . _ - * ?", clip(p))
		}
	}
	return nil
}

// checkName checks a literal human name: [A-Za-z0-9][A-Za-z0-9._-]*, at most
// maxNameLen bytes. Names compare exactly, case included, as in OpenSSH.
func checkName(name string) error {
	if name == "" {
		return errors.New("empty name")
	}
	if len(name) > maxNameLen {
		return fmt.Errorf("name longer than %d bytes", maxNameLen)
	}
	if !isAlnum(name[0]) {
		return errors.New("name must start with a letter or digit (names are literal, not patterns)")
	}
	for i := 1; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return errors.New("name may hold only A-Z a-z 0-9 . _ - (names are literal, not patterns)")
		}
	}
	return nil
}

// checkTarget checks a target name passed to Verify.
func checkTarget(t string) error {
	if t == "" || len(t) > maxTargetLen {
		return fmt.Errorf("target %s: want 1 to %d bytes", clip(t), maxTargetLen)
	}
	for i := 0; i < len(t); i++ {
		if !isTargetByte(t[i]) {
			return fmt.Errorf("target %s: may hold only A-Z a-z 0-9 . _ -", clip(t))
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isTargetByte(c byte) bool { return isAlnum(c) || c == '.' || c == '_' || c == '-' }

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// optionsEnd returns the index of the first whitespace outside double quotes
// (a \" inside quotes does not end them), as OpenSSH's
// sshkey_advance_past_options does.
func optionsEnd(s string) (int, error) {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s) && s[i+1] == '"':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && isSpace(c):
			return i, nil
		}
	}
	if quoted {
		return 0, errors.New("options: missing end quote")
	}
	return len(s), nil
}

// parseOptions parses the options field as OpenSSH's sshsigopt_parse does:
// names are case-insensitive, values are double-quoted, options are separated
// by commas, and each may appear once.
func (e *entry) parseOptions(opts string) error {
	var seenNS, seenAfter, seenBefore bool
	for opts != "" {
		var name string
		switch {
		case hasPrefixFold(opts, "cert-authority"):
			return errors.New("cert-authority is not supported: list each signer's own key")
		case hasPrefixFold(opts, "namespaces="):
			name = "namespaces"
		case hasPrefixFold(opts, "valid-after="):
			name = "valid-after"
		case hasPrefixFold(opts, "valid-before="):
			name = "valid-before"
		default:
			opt, _, _ := strings.Cut(opts, "=")
			return fmt.Errorf("unknown option %s (want namespaces, valid-after or valid-before)", clip(opt))
		}
		val, rest, err := dequote(opts[len(name)+1:])
		if err != nil {
			return fmt.Errorf("option %s: %w", name, err)
		}
		switch name {
		case "namespaces":
			if seenNS {
				return errors.New("more than one namespaces option")
			}
			seenNS = true
			if e.namespaces, err = parseNamespaces(val); err != nil {
				return err
			}
		case "valid-after":
			if seenAfter {
				return errors.New("more than one valid-after option")
			}
			seenAfter = true
			if e.validAfter, err = parseTime(val); err != nil {
				return fmt.Errorf("valid-after: %w", err)
			}
		case "valid-before":
			if seenBefore {
				return errors.New("more than one valid-before option")
			}
			seenBefore = true
			if e.validBefore, err = parseTime(val); err != nil {
				return fmt.Errorf("valid-before: %w", err)
			}
		}
		opts = rest
		if opts == "" {
			break
		}
		if opts[0] != ',' {
			return fmt.Errorf("options: want a comma after %s", name)
		}
		opts = opts[1:]
	}
	if e.validAfter != 0 && e.validBefore != 0 && e.validBefore <= e.validAfter {
		return errors.New("valid-before is not after valid-after")
	}
	return nil
}

// dequote reads a double-quoted option value, where \" stands for ".
func dequote(s string) (val, rest string, err error) {
	if s == "" || s[0] != '"' {
		return "", "", errors.New("value must be in double quotes")
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == '"':
			b.WriteByte('"')
			i++
		case s[i] == '"':
			return b.String(), s[i+1:], nil
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", errors.New("missing end quote")
}

// parseNamespaces checks a namespaces option: a comma-separated OpenSSH
// pattern list such as "harbormaster-delegation,harbormaster-approval" or
// "harbormaster-*".
func parseNamespaces(val string) ([]string, error) {
	ns := strings.Split(val, ",")
	for _, n := range ns {
		body := strings.TrimPrefix(n, "!")
		if body == "" || len(body) > maxPatternLen {
			return nil, fmt.Errorf("namespaces: bad entry %s", clip(n))
		}
		for i := 0; i < len(body); i++ {
			if c := body[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '!' {
				return nil, fmt.Errorf("namespaces: bad entry %s", clip(n))
			}
		}
	}
	return ns, nil
}

// parseTime parses an OpenSSH time, YYYYMMDD[HHMM[SS]], which must end in Z
// or UTC: OpenSSH reads a time without either in the verifying host's time
// zone, which would make the same file mean different things on different
// hosts. It returns Unix seconds.
func parseTime(v string) (int64, error) {
	u := v
	switch {
	case len(u) > 1 && (u[len(u)-1] == 'Z' || u[len(u)-1] == 'z'):
		u = u[:len(u)-1]
	case len(u) > 3 && strings.EqualFold(u[len(u)-3:], "UTC"):
		u = u[:len(u)-3]
	default:
		return 0, fmt.Errorf("time %s must end in Z (UTC), e.g. \"20261231Z\"", clip(v))
	}
	var layout string
	switch len(u) {
	case 8:
		layout = "20060102"
	case 12:
		layout = "200601021504"
	case 14:
		layout = "20060102150405"
	default:
		return 0, fmt.Errorf("time %s: want YYYYMMDD, YYYYMMDDHHMM or YYYYMMDDHHMMSS then Z", clip(v))
	}
	for i := 0; i < len(u); i++ {
		if u[i] < '0' || u[i] > '9' {
			return 0, fmt.Errorf("time %s: not all digits", clip(v))
		}
	}
	t, err := time.Parse(layout, u)
	if err != nil {
		return 0, fmt.Errorf("time %s: %w", clip(v), err)
	}
	if t.Unix() <= 0 {
		return 0, fmt.Errorf("time %s: must be after 1970-01-01", clip(v))
	}
	return t.Unix(), nil
}

// match returns, for each positive principal NAME@TARGET on the line such
// that ssh-keygen -Y verify -I NAME@target would accept the line's principals
// (the pattern matches and no negated pattern does), a Signer naming it.
func (e *entry) match(target, fingerprint string) []Signer {
	var out []Signer
	for _, p := range e.principals {
		if p[0] == '!' {
			continue
		}
		n, _, _ := strings.Cut(p, "@")
		id := n + "@" + target
		if matchPattern(id, p) && matchPatternList(id, e.principals) == 1 {
			out = append(out, Signer{Name: n, Principal: p, Fingerprint: fingerprint, Line: e.line})
		}
	}
	return out
}

// Verify checks armoredSig, an sshsig signature as ssh-keygen -Y sign writes,
// over msg in namespace, and returns the signer the file allows to sign in
// that namespace for target at time now.
//
// Verify only authorizes the signer for the target it is given: a signature
// does not name a target, so the caller must pass the target named inside
// msg.
//
// Every error wraps ErrBadSignature (malformed, oversized, another
// namespace, unsupported key, or not a signature of msg) or ErrUnknownSigner
// (a good signature whose key no line allows here and now, or whose key is
// listed under several names for target), with detail.
func (a *AllowedSigners) Verify(msg, armoredSig []byte, namespace, target string, now time.Time) (Signer, error) {
	const op = "signing: verify"
	if err := checkNamespace(namespace); err != nil {
		return Signer{}, fmt.Errorf("%s: %w: %w", op, ErrBadSignature, err)
	}
	sig, err := parseArmored(armoredSig)
	if err != nil {
		return Signer{}, fmt.Errorf("%s: %w: %w", op, ErrBadSignature, err)
	}
	if sig.Namespace != namespace {
		return Signer{}, fmt.Errorf("%s: %w: signature is for namespace %s, want %q", op, ErrBadSignature, clip(sig.Namespace), namespace)
	}
	if err := sshsig.Verify(bytes.NewReader(msg), sig, sig.PublicKey, sig.HashAlgorithm, namespace); err != nil {
		return Signer{}, fmt.Errorf("%s: %w: does not verify over the message: %w", op, ErrBadSignature, err)
	}
	s, err := a.authorize(sig.PublicKey, namespace, target, now)
	if err != nil {
		return Signer{}, fmt.Errorf("%s: %w", op, err)
	}
	return s, nil
}

// authorize finds who the file says pub is, for namespace and target at now.
func (a *AllowedSigners) authorize(pub ssh.PublicKey, namespace, target string, now time.Time) (Signer, error) {
	fp := Fingerprint(pub)
	if err := checkTarget(target); err != nil {
		return Signer{}, fmt.Errorf("%w: %w", ErrUnknownSigner, err)
	}
	var idx []int
	if a != nil {
		idx = a.byKey[string(pub.Marshal())]
	}
	if len(idx) == 0 {
		return Signer{}, fmt.Errorf("%w: key %s is not in the allowed signers", ErrUnknownSigner, fp)
	}
	t := now.Unix()
	var found []Signer
	var why []string
	for _, i := range idx {
		e := &a.entries[i]
		switch {
		case e.namespaces != nil && matchPatternList(namespace, e.namespaces) != 1:
			why = append(why, fmt.Sprintf("line %d: namespace %s not allowed", e.line, namespace))
		case e.validAfter != 0 && t < e.validAfter:
			why = append(why, fmt.Sprintf("line %d: not valid until %s", e.line, formatTime(e.validAfter)))
		case e.validBefore != 0 && t > e.validBefore:
			why = append(why, fmt.Sprintf("line %d: expired at %s", e.line, formatTime(e.validBefore)))
		default:
			m := e.match(target, fp)
			if len(m) == 0 {
				why = append(why, fmt.Sprintf("line %d: no principal for target %s", e.line, target))
			}
			found = append(found, m...)
		}
	}
	if len(found) == 0 {
		return Signer{}, fmt.Errorf("%w: key %s: %s", ErrUnknownSigner, fp, strings.Join(why, "; "))
	}
	// One key, one human: if the file gives this key two names for this
	// target, which human signed is unknown, so nobody did.
	for _, f := range found[1:] {
		if f.Name != found[0].Name {
			return Signer{}, fmt.Errorf("%w: key %s is listed under more than one name for target %s (%s on line %d, %s on line %d)",
				ErrUnknownSigner, fp, target, found[0].Name, found[0].Line, f.Name, f.Line)
		}
	}
	return found[0], nil
}

func formatTime(unix int64) string { return time.Unix(unix, 0).UTC().Format(time.RFC3339) }

// AllowedSignersLine formats one allowed-signers line for the public key in
// pubLine (an authorized_keys line, "keytype base64 [comment]", as
// GenerateEd25519 or a .pub file gives), allowed for principals (NAME@TARGET
// patterns) in namespaces (none means every namespace). The line has no
// trailing newline. It refuses anything that would not parse back, so a
// comment or principal can never smuggle in a second line.
func AllowedSignersLine(principals []string, namespaces []string, pubLine []byte) (string, error) {
	const op = "signing: allowed signers line"
	pl := strings.TrimSuffix(strings.TrimSuffix(string(pubLine), "\n"), "\r")
	if strings.ContainsAny(pl, "\n\r\x00") {
		return "", fmt.Errorf("%s: public key must be one line", op)
	}
	keyType, rest := field(trimSpace(pl))
	b64, comment := field(rest)
	if _, err := parseKey(keyType, b64); err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	if err := checkComment(comment); err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	if len(principals) == 0 {
		return "", fmt.Errorf("%s: no principals", op)
	}
	// Check each element alone, so that one holding a comma cannot pass as
	// two.
	for _, p := range principals {
		if err := checkPrincipal(p); err != nil {
			return "", fmt.Errorf("%s: %w", op, err)
		}
	}
	for _, n := range namespaces {
		if strings.Contains(n, ",") {
			return "", fmt.Errorf("%s: namespace %s holds a comma", op, clip(n))
		}
	}
	var b strings.Builder
	b.WriteString(strings.Join(principals, ","))
	if len(namespaces) > 0 {
		b.WriteString(` namespaces="`)
		b.WriteString(strings.Join(namespaces, ","))
		b.WriteString(`"`)
	}
	b.WriteString(" " + keyType + " " + b64)
	if comment != "" {
		b.WriteString(" " + comment)
	}
	line := b.String()
	if _, ok, err := parseLine(line); err != nil || !ok {
		if err == nil {
			err = errors.New("does not parse as an entry")
		}
		return "", fmt.Errorf("%s: %w", op, err)
	}
	return line, nil
}

// SignerKey returns the public key inside an armored signature, unverified:
// call it only after Verify accepted the signature, to ask Authorize what
// else the same key may do.
func SignerKey(armoredSig []byte) (ssh.PublicKey, error) {
	sig, err := parseArmored(armoredSig)
	if err != nil {
		return nil, fmt.Errorf("signing: signer key: %w: %w", ErrBadSignature, err)
	}
	return sig.PublicKey, nil
}

// Authorize says who the file allows pub to sign as in namespace for
// target at now, with no signature at hand: what a console session (one
// verified login signature) may show its holder. It is never authority
// for an act; each act carries its own signature, checked with Verify.
// Errors wrap ErrUnknownSigner.
func (a *AllowedSigners) Authorize(pub ssh.PublicKey, namespace, target string, now time.Time) (Signer, error) {
	if err := checkNamespace(namespace); err != nil {
		return Signer{}, fmt.Errorf("signing: authorize: %w: %w", ErrUnknownSigner, err)
	}
	if err := checkKey(pub); err != nil {
		return Signer{}, fmt.Errorf("signing: authorize: %w: %w", ErrUnknownSigner, err)
	}
	s, err := a.authorize(pub, namespace, target, now)
	if err != nil {
		return Signer{}, fmt.Errorf("signing: authorize: %w", err)
	}
	return s, nil
}
