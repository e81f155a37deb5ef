package bench

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// tick is a clock tick of /proc: USER_HZ is 100 on Linux.
const tick = 10 * time.Millisecond

// procStat is the part of /proc/PID/stat the benchmark reads.
type procStat struct {
	comm     string
	ppid     int
	own      time.Duration // utime+stime
	children time.Duration // cutime+cstime: children that exited and were waited for
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(string(b))
}

// parseProcStat reads a /proc/PID/stat line. The command name is in
// parentheses and may itself hold spaces and parentheses, so the fields
// are counted from the last ')'.
func parseProcStat(s string) (procStat, error) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return procStat{}, errors.New("bench: /proc stat: no command name")
	}
	f := strings.Fields(s[end+1:])
	// f[0] is the state, f[1] the parent, f[11..14] utime, stime, cutime, cstime.
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("bench: /proc stat: %d fields after the command name, want at least 15", len(f))
	}
	var n [5]int64
	for i, j := range []int{1, 11, 12, 13, 14} {
		v, err := strconv.ParseInt(f[j], 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("bench: /proc stat: field %d: %w", j+3, err)
		}
		n[i] = v
	}
	return procStat{comm: s[open+1 : end], ppid: int(n[0]), own: time.Duration(n[1]+n[2]) * tick, children: time.Duration(n[3]+n[4]) * tick}, nil
}

// childPIDs lists pid's children, from /proc/PID/task/PID/children where
// the kernel has it (PostgreSQL's postmaster is single-threaded), else by
// scanning /proc.
func childPIDs(pid int) []int {
	var out []int
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid)); err == nil {
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
		return out
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readProcStat(c); err == nil && st.ppid == pid {
			out = append(out, c)
		}
	}
	return out
}

// postgresCPU is the CPU time of a PostgreSQL server so far: the
// postmaster's own, that of its live children (backends, the checkpointer,
// the WAL writer, autovacuum...), and that of its children that have
// exited, which it has reaped. A backend that exits between two readings
// moves from the second term to the third, so the sum only grows.
func postgresCPU(postmaster int) (time.Duration, error) {
	p, err := readProcStat(postmaster)
	if err != nil {
		return 0, err
	}
	total := p.own + p.children
	for _, c := range childPIDs(postmaster) {
		if st, err := readProcStat(c); err == nil { // one that exited meanwhile is in p.children once reaped
			total += st.own + st.children
		}
	}
	return total, nil
}

// processCPU is one process's own CPU time so far (not its children's: the
// test binary that runs the node is the parent of its load generator).
func processCPU(pid int) (time.Duration, error) {
	p, err := readProcStat(pid)
	if err != nil {
		return 0, err
	}
	return p.own, nil
}

// machineBusy is the CPU time every process on the machine has spent so
// far: /proc/stat's first line, user, nice, system, irq and softirq (not
// idle or iowait; not steal, which the hypervisor gave to others; not
// guest, which user already counts).
func machineBusy() (time.Duration, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	return parseMachineBusy(string(data))
}

func parseMachineBusy(data string) (time.Duration, error) {
	line, _, _ := strings.Cut(data, "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, errors.New("bench: /proc/stat: no cpu line")
	}
	var busy int64
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: /proc/stat: %w", err)
		}
		if i <= 2 || i == 5 || i == 6 {
			busy += n
		}
	}
	return time.Duration(busy) * tick, nil
}

// meter reads the three parts of the CPU split and the machine's total.
// A pid of 0 is a part it does not know.
type meter struct {
	postgres, self int
	// node is every Harbormaster process: the nodes and a Pilot of its own.
	node []int
}

// reading is one meter reading; a part it could not read is negative.
type reading struct {
	postgres, node, self, machine time.Duration
}

func (m meter) read() reading {
	r := reading{postgres: -1, node: -1, self: -1, machine: -1}
	if d, err := machineBusy(); err == nil {
		r.machine = d
	}
	if m.postgres > 0 {
		if d, err := postgresCPU(m.postgres); err == nil {
			r.postgres = d
		}
	}
	if len(m.node) > 0 {
		var sum time.Duration
		for _, pid := range m.node {
			d, err := processCPU(pid)
			if err != nil {
				sum = -1
				break
			}
			sum += d
		}
		r.node = sum
	}
	if d, err := processCPU(m.self); err == nil {
		r.self = d
	}
	return r
}

// CPU is the CPU time per statement of one phase, in microseconds, by
// process; a part that is not known is absent.
type CPU struct {
	// Postgres is the target's server processes.
	Postgres *float64 `json:"postgres,omitempty"`
	// Harbormaster is the node's process (every node's, and a Pilot's of
	// its own, summed).
	Harbormaster *float64 `json:"harbormaster,omitempty"`
	// Clients is the load generator's process.
	Clients *float64 `json:"clients,omitempty"`
	// Machine is every process on the machine (/proc/stat), the cross-check.
	Machine *float64 `json:"machine,omitempty"`
	// Other is Machine less the three: processes outside the benchmark.
	Other *float64 `json:"other,omitempty"`
}

// perStatement divides the CPU between two readings by n statements.
func perStatement(a, b reading, n int64) CPU {
	var c CPU
	if n <= 0 {
		return c
	}
	per := func(x, y time.Duration) *float64 {
		if x < 0 || y < 0 {
			return nil
		}
		v := float64((y - x).Microseconds()) / float64(n)
		return &v
	}
	c.Postgres, c.Harbormaster = per(a.postgres, b.postgres), per(a.node, b.node)
	c.Clients, c.Machine = per(a.self, b.self), per(a.machine, b.machine)
	if c.Postgres != nil && c.Harbormaster != nil && c.Clients != nil && c.Machine != nil {
		v := *c.Machine - *c.Postgres - *c.Harbormaster - *c.Clients
		c.Other = &v
	}
	return c
}
