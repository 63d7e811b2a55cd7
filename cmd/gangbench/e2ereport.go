package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/gangbench/gangbench/results"
	"github.com/gangbench/gangbench/suites/framework"
)

// harnessCaseID is the case runSuites adds when the suite binary failed outside any assertion.
const harnessCaseID = "HARNESS"

// writeE2EReport writes the run's text report. When the suite binary failed before any assertion
// ran, the report is its cause and one line for the assertions: a line per assertion that did not
// run (143 of them) used to bury the cause, which then was only in suites.log.
func writeE2EReport(w io.Writer, r *results.Run) error {
	harness, notRun := noneRan(r.Cases)
	if harness == nil {
		return results.WriteText(w, r)
	}
	fmt.Fprintf(w, "e2e run %s: the suite binary failed before any assertion ran\n", r.ID)
	for _, l := range strings.Split(strings.TrimSpace(results.StripANSI(harness.Message)), "\n") {
		fmt.Fprintln(w, "  "+strings.TrimRight(l, " "))
	}
	fmt.Fprintf(w, "\nthe %d selected assertions did not run (each is listed as skipped in run.json, junit.xml and summary.md)\n", notRun)
	return nil
}

// noneRan returns the harness error of a run in which the suite binary reported no assertion, and
// how many assertions did not run; nil when any assertion (or anything but that error) reported.
func noneRan(cases []results.Case) (*results.Case, int) {
	var harness *results.Case
	n := 0
	for i, c := range cases {
		switch {
		case c.ID == harnessCaseID:
			harness = &cases[i]
		case c.Verdict == results.Skip && strings.HasPrefix(c.Message, framework.NotReported):
			n++
		default:
			return nil, 0
		}
	}
	return harness, n
}

// suitesLogTail is the last n lines of suites.log as the suite binary wrote them: test2json wraps
// the binary's stdout and stderr alike in JSON events, so its own error ("gangbench suites: …")
// would otherwise read as one JSON line among many. go test's framing lines say nothing of a cause.
func suitesLogTail(log []byte, n int) string {
	var out []string
	for _, l := range bytes.Split(log, []byte("\n")) {
		text := string(l)
		if bytes.HasPrefix(l, []byte("{")) {
			var ev struct{ Action, Output string }
			if json.Unmarshal(l, &ev) == nil && ev.Action != "" {
				if ev.Action != "output" {
					continue
				}
				text = ev.Output
			}
		}
		for _, t := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
			trimmed := strings.TrimSpace(t)
			if trimmed == "" || trimmed == "FAIL" || trimmed == "PASS" || strings.HasPrefix(trimmed, "FAIL\t") || strings.HasPrefix(trimmed, "=== ") ||
				strings.HasPrefix(trimmed, "--- ") || strings.HasPrefix(trimmed, "exit status ") {
				continue
			}
			out = append(out, strings.TrimRight(t, " \r"))
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, "\n")
}
