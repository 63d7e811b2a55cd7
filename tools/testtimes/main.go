// Command testtimes turns `go test -json` into what a person reads, and says where the time went.
//
// `make test` pipes every `go test -json` step through `testtimes stream`, which prints what plain
// `go test` would (package lines, and the output of failed tests only) and appends the events to a
// file; `testtimes table` then prints, from those files, the packages and the top-level tests by
// time. So every change to the test suite shows its cost at the end of the run that made it, and the
// long poles are found from data, not guessed.
//
//	go test -json ./... | testtimes stream -o _output/test/go-test.json
//	testtimes table _output/test/*.json
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "testtimes:", err)
		os.Exit(2)
	}
}

const usage = "usage: testtimes stream -o FILE [-step NAME]  |  testtimes table [-top N] FILE..."

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("no subcommand\n%s", usage)
	}
	switch args[0] {
	case "stream":
		fs := flag.NewFlagSet("stream", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		file := fs.String("o", "", "append the events to this file")
		step := fs.String("step", "test", "the name the events are filed under")
		if err := fs.Parse(args[1:]); err != nil || *file == "" || fs.NArg() > 0 {
			return fmt.Errorf("stream: want -o FILE [-step NAME]\n%s", usage)
		}
		// Appended, not truncated: one make run pipes several steps (tests, then each fuzz target)
		// into the same file.
		f, err := os.OpenFile(*file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		return stream(stdin, stdout, f, *step)
	case "table":
		top, files := 25, args[1:]
		if len(files) >= 2 && files[0] == "-top" {
			if _, err := fmt.Sscan(files[1], &top); err != nil || top < 0 {
				return fmt.Errorf("table: -top %q: want a count", files[1])
			}
			files = files[2:]
		}
		if len(files) == 0 {
			return fmt.Errorf("table: no event files\n%s", usage)
		}
		var all []event
		for _, name := range files {
			evs, err := readEvents(name)
			if err != nil {
				return err
			}
			all = append(all, evs...)
		}
		return writeTable(stdout, summarize(all), top)
	default:
		return fmt.Errorf("unknown subcommand %q\n%s", args[0], usage)
	}
}
