// Package proc is the process toolkit both cluster providers and the resource measurements use:
// reading /proc/<pid>/stat (state, parent, CPU time, start time), recognising a recorded process
// across pid reuse, finding a process's descendants, and stopping a process with SIGTERM, a
// bounded wait and then SIGKILL, whether it is our child or only known by a recorded pid.
// It is Linux-only, as gangbench is.
package proc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Root is a proc filesystem; tests point it at a directory of fixtures.
type Root string

// Proc is the machine's own /proc.
const Proc Root = "/proc"

// Path joins parts below the root: Path("42", "stat") is /proc/42/stat.
func (r Root) Path(parts ...string) string {
	return filepath.Join(append([]string{string(r)}, parts...)...)
}

// Stat is the part of /proc/<pid>/stat gangbench reads.
type Stat struct {
	// State is the one-letter state: R running, S sleeping, Z zombie, …
	State string
	PPID  int
	// UTime and STime are the user and system CPU time of all the process's threads (not its
	// children's), in clock ticks (USER_HZ).
	UTime, STime uint64
	// StartTime is when the process started, in clock ticks since boot: a pid whose StartTime
	// changed is another process.
	StartTime uint64
}

// Zombie reports whether the process has exited and waits only to be reaped: it runs no more.
func (s Stat) Zombie() bool { return s.State == "Z" }

// ParseStat parses the content of a /proc/<pid>/stat file.
func ParseStat(b []byte) (Stat, error) {
	// The command (field 2) may contain spaces and parentheses, so it ends at the last ')'; the
	// fields after it are fixed, counted from field 3 (state) at index 0.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, fmt.Errorf("no command in %q", b)
	}
	f := strings.Fields(string(b[i+1:]))
	const want = 22 - 3 + 1 // up to starttime
	if len(f) < want {
		return Stat{}, fmt.Errorf("%d fields after the command, want at least %d", len(f), want)
	}
	field := func(n int) string { return f[n-3] }
	ppid, err1 := strconv.Atoi(field(4))
	utime, err2 := strconv.ParseUint(field(14), 10, 64)
	stime, err3 := strconv.ParseUint(field(15), 10, 64)
	start, err4 := strconv.ParseUint(field(22), 10, 64)
	if err := firstErr(err1, err2, err3, err4); err != nil {
		return Stat{}, fmt.Errorf("ppid %q utime %q stime %q starttime %q: %w", field(4), field(14), field(15), field(22), err)
	}
	return Stat{State: field(3), PPID: ppid, UTime: utime, STime: stime, StartTime: start}, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Stat reads and parses /proc/<pid>/stat.
func (r Root) Stat(pid int) (Stat, error) {
	p := r.Path(strconv.Itoa(pid), "stat")
	b, err := os.ReadFile(p)
	if err != nil {
		return Stat{}, err
	}
	s, err := ParseStat(b)
	if err != nil {
		return Stat{}, fmt.Errorf("%s: %w", p, err)
	}
	return s, nil
}

// StartTime is the start time of a running process (see Stat.StartTime). A zombie is an error: it
// has exited, and only its parent's wait keeps its pid.
func StartTime(pid int) (uint64, error) {
	s, err := Proc.Stat(pid)
	if err != nil {
		return 0, err
	}
	if s.Zombie() {
		return 0, fmt.Errorf("process %d is a zombie", pid)
	}
	return s.StartTime, nil
}

// Comm is a process's command name (at most 15 bytes, as the kernel keeps it).
func (r Root) Comm(pid int) (string, error) {
	b, err := os.ReadFile(r.Path(strconv.Itoa(pid), "comm"))
	return strings.TrimSpace(string(b)), err
}

// Descendants returns every process below pid (children, their children, …), from the parent
// links in /proc/<pid>/stat: how a container's processes are found from its init's host pid.
func (r Root) Descendants(pid int) ([]int, error) {
	ents, err := os.ReadDir(string(r))
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		s, err := r.Stat(p)
		if err != nil {
			continue // gone since the listing
		}
		children[s.PPID] = append(children[s.PPID], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out, nil
}
