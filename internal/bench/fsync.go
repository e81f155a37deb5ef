package bench

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"
)

// Fsync is the latency of the smallest durable write a directory's device
// gives: a 4 KiB block overwritten in a preallocated file, then fsync.
// Every governed statement waits for one durable commit of the store (its
// decision, DESIGN.md invariant 7) that the direct statement does not, so
// this figure is the part of the added latency the store's device decides.
type Fsync struct {
	Dir     string  `json:"dir"`
	Samples int     `json:"samples"`
	P50Us   float64 `json:"p50_us"`
	P90Us   float64 `json:"p90_us"`
}

// fsyncFile is the probe's preallocated file size: the writes cycle
// through it, as SQLite's write-ahead log is reused after a checkpoint, so
// no sample pays for the file growing.
const fsyncFile = 1 << 20

// ProbeFsync measures Fsync in dir with n samples, in a file of its own
// that it removes. It uses fsync, not fdatasync, because that is what the
// store's SQLite calls.
func ProbeFsync(dir string, n int) (_ *Fsync, err error) {
	if n < 1 {
		return nil, fmt.Errorf("bench: fsync probe: %d samples, want at least 1", n)
	}
	f, err := os.CreateTemp(dir, ".harbormaster-fsync-probe-*")
	if err != nil {
		return nil, fmt.Errorf("bench: fsync probe: %w", err)
	}
	defer func() {
		err = errors.Join(err, f.Close(), os.Remove(f.Name()))
	}()
	block := make([]byte, 4096)
	if _, err := f.Write(make([]byte, fsyncFile)); err != nil {
		return nil, fmt.Errorf("bench: fsync probe: %w", err)
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("bench: fsync probe: %w", err)
	}
	d := make([]time.Duration, n)
	for i := range d {
		block[0] = byte(i) // a different block each time: the page is dirty
		if _, err := f.WriteAt(block, int64(i*len(block))%fsyncFile); err != nil {
			return nil, fmt.Errorf("bench: fsync probe: %w", err)
		}
		t := time.Now()
		if err := f.Sync(); err != nil {
			return nil, fmt.Errorf("bench: fsync probe: %w", err)
		}
		d[i] = time.Since(t)
	}
	slices.Sort(d)
	us := func(q float64) float64 { return float64(d[int(q*float64(n-1))].Nanoseconds()) / 1e3 }
	return &Fsync{Dir: dir, Samples: n, P50Us: us(0.5), P90Us: us(0.9)}, nil
}
