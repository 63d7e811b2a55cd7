// Package procstat reads what a process and the machine spent, from /proc: CPU time, resident
// memory, and the time a process's threads were runnable but waiting for a CPU (schedstat). perf
// uses it to say where a run's CPU seconds went and whether the scheduler under test was starved.
// The stat line itself is parsed by internal/proc, the process toolkit the cluster providers share.
package procstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gangbench/gangbench/internal/proc"
)

// userHZ is the unit of the utime and stime fields of /proc/<pid>/stat. Linux reports them in
// USER_HZ, which the kernel ABI fixes at 100 on every architecture Go supports (sysconf(_SC_CLK_TCK)
// would need cgo to ask).
const userHZ = 100

// Root is the proc filesystem; tests point it at a directory of fixtures.
type Root string

// Proc is the machine's own /proc.
const Proc Root = "/proc"

func (r Root) path(parts ...string) string { return proc.Root(r).Path(parts...) }

// Usage is one reading of one process.
type Usage struct {
	// CPU is user plus system time since the process started (all its threads, not its children).
	CPU time.Duration
	// RSS is the resident set now; Peak the largest since the process started (VmHWM).
	RSS, Peak int64
	// Wait is the time its threads have spent runnable but not running, summed over the threads
	// alive now (schedstat's run_delay); zero where the kernel has no schedstats.
	Wait time.Duration
	// Start is the process's start time in clock ticks since boot: a pid whose Start changed is
	// another process.
	Start uint64
}

// Read reads one process.
func (r Root) Read(pid int) (Usage, error) {
	var u Usage
	st, err := proc.Root(r).Stat(pid)
	if err != nil {
		return u, err
	}
	u.CPU = time.Duration(st.UTime+st.STime) * time.Second / userHZ
	u.Start = st.StartTime
	status, err := os.ReadFile(r.path(strconv.Itoa(pid), "status"))
	if err != nil {
		return u, err
	}
	u.RSS, u.Peak = statusKB(status, "VmRSS:")*1024, statusKB(status, "VmHWM:")*1024
	tasks, _ := os.ReadDir(r.path(strconv.Itoa(pid), "task"))
	for _, t := range tasks {
		b, err := os.ReadFile(r.path(strconv.Itoa(pid), "task", t.Name(), "schedstat"))
		if err != nil {
			continue // a thread that just exited
		}
		// "<on-cpu ns> <run_delay ns> <timeslices>"
		if fs := strings.Fields(string(b)); len(fs) >= 2 {
			if d, err := strconv.ParseInt(fs[1], 10, 64); err == nil {
				u.Wait += time.Duration(d)
			}
		}
	}
	return u, nil
}

func statusKB(b []byte, key string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// Comm is a process's command name (at most 15 bytes, as the kernel keeps it).
func (r Root) Comm(pid int) (string, error) { return proc.Root(r).Comm(pid) }

// Descendants returns every process below pid (children, their children, …): how perf finds the
// processes of a tree it accounts for.
func (r Root) Descendants(pid int) ([]int, error) { return proc.Root(r).Descendants(pid) }

// Machine is one reading of the machine's CPUs.
type Machine struct {
	// Busy and Total are summed over all CPUs since boot; Busy leaves out idle and iowait.
	Busy, Total time.Duration
	// Steal is the part of Busy the hypervisor ran something else on this machine's CPUs: time a
	// virtual machine's processes were ready to run and could not, though no process here ran.
	Steal time.Duration
	CPUs  int
}

// ReadMachine reads /proc/stat.
func (r Root) ReadMachine() (Machine, error) {
	var m Machine
	b, err := os.ReadFile(r.path("stat"))
	if err != nil {
		return m, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "cpu "):
			// user nice system idle iowait irq softirq steal (guest time is inside user already)
			f := strings.Fields(line)[1:]
			for i, s := range f {
				if i >= 8 {
					break
				}
				v, err := strconv.ParseUint(s, 10, 64)
				if err != nil {
					return m, fmt.Errorf("%s: cpu field %d: %q", r.path("stat"), i+1, s)
				}
				d := time.Duration(v) * time.Second / userHZ
				m.Total += d
				if i != 3 && i != 4 {
					m.Busy += d
				}
				if i == 7 {
					m.Steal = d
				}
			}
		case strings.HasPrefix(line, "cpu"):
			m.CPUs++
		}
	}
	if m.Total == 0 {
		return m, fmt.Errorf("%s: no cpu line", r.path("stat"))
	}
	return m, sc.Err()
}
