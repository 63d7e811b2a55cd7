package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent), plus the step that produced it.
type event struct {
	Time    time.Time `json:",omitempty"`
	Action  string
	Package string  `json:",omitempty"`
	Test    string  `json:",omitempty"`
	Elapsed float64 `json:",omitempty"`
	Output  string  `json:",omitempty"`
	// Step names the command the event came from when one file holds several (the tests, then each
	// fuzz target, which runs its package again): `stream -step NAME` sets it.
	Step string `json:",omitempty"`
}

// topLevel is the name of the top-level test a (sub)test belongs to.
func topLevel(test string) string {
	name, _, _ := strings.Cut(test, "/")
	return name
}

// stream prints what plain `go test` prints for the events on in (package lines, build errors and
// the whole output of every failed top-level test, nothing of passed ones) and writes each event,
// tagged with step, to record. A line that is not an event (a toolchain message) is printed as is.
func stream(in io.Reader, out, record io.Writer, step string) error {
	type key struct{ pkg, test string }
	held := map[key][]string{} // output of running top-level tests, printed only if they fail
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	enc := json.NewEncoder(record)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Action == "" {
			fmt.Fprintln(out, sc.Text())
			continue
		}
		ev.Step = step
		if err := enc.Encode(ev); err != nil {
			return err
		}
		k := key{ev.Package, topLevel(ev.Test)}
		switch {
		case ev.Action == "build-output":
			fmt.Fprint(out, ev.Output)
		case ev.Test == "":
			// Package-level output comes before the first test or after the last one, except when
			// the binary panics or times out inside a test: a test still held then never finished,
			// and its output explains the package's failure, so it goes first.
			for hk, lines := range held {
				if hk.pkg == ev.Package {
					fmt.Fprint(out, strings.Join(lines, ""))
					delete(held, hk)
				}
			}
			// "PASS" is -json's verbose framing; plain go test prints only the "ok" line after it.
			if ev.Action == "output" && ev.Output != "PASS\n" {
				fmt.Fprint(out, ev.Output)
			}
		case ev.Action == "output":
			held[k] = append(held[k], ev.Output)
		case ev.Test == k.test && ev.Action == "fail":
			fmt.Fprint(out, strings.Join(held[k], ""))
			delete(held, k)
		case ev.Test == k.test && (ev.Action == "pass" || ev.Action == "skip"):
			delete(held, k)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	for _, lines := range held {
		fmt.Fprint(out, strings.Join(lines, ""))
	}
	return nil
}

func readEvents(name string) ([]event, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for line := 1; sc.Scan(); line++ {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("%s:%d: not a test event: %w", name, line, err)
		}
		out = append(out, ev)
	}
	return out, sc.Err()
}
