package logbook

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// Checkpoint is a signed statement that the logbook held Size entries whose
// chain head (the hash of entry Size) was Hash.
type Checkpoint struct {
	Size int64     `json:"size"`
	Hash string    `json:"hash"` // hex; convenience copy of the signed body's hash
	Time time.Time `json:"time"` // when it was made; not signed
	Note string    `json:"note"` // the C2SP signed note; the only part that is authoritative
}

// checkpointBody is the signed text, in the C2SP tlog-checkpoint layout:
//
//	<origin>\n<size>\n<base64 of the 32-byte chain head hash>\n
func checkpointBody(origin string, size int64, head [32]byte) string {
	return origin + "\n" + strconv.FormatInt(size, 10) + "\n" + base64.StdEncoding.EncodeToString(head[:]) + "\n"
}

// parseCheckpointBody parses a checkpoint body. Extension lines after the
// hash are refused: this logbook writes none.
func parseCheckpointBody(text string) (origin string, size int64, head [32]byte, err error) {
	lines := strings.SplitAfter(text, "\n")
	if len(lines) != 4 || lines[3] != "" {
		return "", 0, head, errors.New("checkpoint body is not three lines")
	}
	origin = strings.TrimSuffix(lines[0], "\n")
	sizeText := strings.TrimSuffix(lines[1], "\n")
	size, err = strconv.ParseInt(sizeText, 10, 64)
	if err != nil || size < 1 || strconv.FormatInt(size, 10) != sizeText {
		return "", 0, head, fmt.Errorf("checkpoint size %q is not a positive decimal", sizeText)
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(strings.TrimSuffix(lines[2], "\n"))
	if err != nil || len(raw) != 32 {
		return "", 0, head, errors.New("checkpoint hash is not 32 bytes of base64")
	}
	copy(head[:], raw)
	return origin, size, head, nil
}

func signCheckpoint(signer note.Signer, origin string, size int64, head [32]byte, t time.Time) (Checkpoint, error) {
	msg, err := note.Sign(&note.Note{Text: checkpointBody(origin, size, head)}, signer)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("sign checkpoint: %w", err)
	}
	return Checkpoint{Size: size, Hash: hex.EncodeToString(head[:]), Time: t.UTC(), Note: string(msg)}, nil
}

// openCheckpoint verifies cp's note with v and returns what it signs. It
// trusts none of cp's other fields.
func openCheckpoint(cp Checkpoint, v note.Verifier, origin string) (int64, [32]byte, error) {
	var zero [32]byte
	n, err := note.Open([]byte(cp.Note), note.VerifierList(v))
	if err != nil {
		return 0, zero, fmt.Errorf("signature: %w", err)
	}
	o, size, head, err := parseCheckpointBody(n.Text)
	if err != nil {
		return 0, zero, err
	}
	if o != origin {
		return 0, zero, fmt.Errorf("origin %q, want %q", o, origin)
	}
	return size, head, nil
}

// GenerateKey makes a new Ed25519 key pair for signing checkpoints.
func GenerateKey(rand io.Reader) (ed25519.PublicKey, ed25519.PrivateKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand)
	if err != nil {
		return nil, nil, fmt.Errorf("logbook: generate key: %w", err)
	}
	return pub, priv, nil
}

// NewCheckpointSigner returns a note signer named name (the key name that
// appears in every signature line) for the control-plane key priv.
func NewCheckpointSigner(name string, priv ed25519.PrivateKey) (note.Signer, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, errors.New("logbook: checkpoint signer: not an Ed25519 private key")
	}
	vkey, err := note.NewEd25519VerifierKey(name, priv.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, fmt.Errorf("logbook: checkpoint signer: %w", err)
	}
	// vkey is name+hash+base64(alg||pub); the signer key has the same shape
	// around the seed.
	parts := strings.SplitN(vkey, "+", 3) // names never hold "+"; base64 may
	if len(parts) != 3 {
		return nil, errors.New("logbook: checkpoint signer: unexpected verifier key form")
	}
	skey := "PRIVATE+KEY+" + parts[0] + "+" + parts[1] + "+" +
		base64.StdEncoding.EncodeToString(append([]byte{1}, priv.Seed()...)) // 1: Ed25519
	s, err := note.NewSigner(skey)
	if err != nil {
		return nil, fmt.Errorf("logbook: checkpoint signer: %w", err)
	}
	return s, nil
}

// NewCheckpointVerifier returns the note verifier for checkpoints signed by
// NewCheckpointSigner(name, priv) where pub is priv's public key.
func NewCheckpointVerifier(name string, pub ed25519.PublicKey) (note.Verifier, error) {
	vkey, err := CheckpointVerifierKey(name, pub)
	if err != nil {
		return nil, err
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("logbook: checkpoint verifier: %w", err)
	}
	return v, nil
}

// CheckpointVerifierKey encodes pub as a note verifier key
// ("name+hash+base64"), the form to publish so that anyone can check
// exported checkpoints with golang.org/x/mod/sumdb/note.
func CheckpointVerifierKey(name string, pub ed25519.PublicKey) (string, error) {
	if len(pub) != ed25519.PublicKeySize {
		return "", errors.New("logbook: checkpoint verifier: not an Ed25519 public key")
	}
	vkey, err := note.NewEd25519VerifierKey(name, pub)
	if err != nil {
		return "", fmt.Errorf("logbook: checkpoint verifier: %w", err)
	}
	return vkey, nil
}

// maxCheckpointLine bounds one line of an exported checkpoint file.
const maxCheckpointLine = 64 << 10

// ReadCheckpoints parses checkpoints as ExportCheckpoints writes them: one
// JSON object per line. Blank lines are skipped. Nothing is verified here;
// Verify checks each note's signature.
func ReadCheckpoints(r io.Reader) ([]Checkpoint, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxCheckpointLine)
	var cps []Checkpoint
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var cp Checkpoint
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cp); err != nil {
			return nil, fmt.Errorf("logbook: read checkpoints: line %d: %w", line, err)
		}
		cps = append(cps, cp)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("logbook: read checkpoints: %w", err)
	}
	return cps, nil
}
