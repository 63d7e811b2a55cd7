package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/gangbench/gangbench/results"
	"github.com/gangbench/gangbench/results/report"
)

// newReportCmd renders any finished run (conformance or benchmark) from its files: no cluster needed.
func newReportCmd(stdout io.Writer) *cobra.Command {
	var format, out string
	cmd := &cobra.Command{
		Use:   "report RUN_DIR",
		Short: "Render a finished run as text, markdown, JSON or one self-contained HTML page",
		Example: `  gangbench report _output/runs/20261129-161843-3317
  gangbench report _output/runs/20261129-161843-3317 --format html -o report.html`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := results.Read(args[0])
			if err != nil {
				return err
			}
			w := stdout
			if out != "" {
				f, err := os.Create(out)
				if err != nil {
					return err
				}
				defer f.Close()
				w = f
			}
			switch format {
			case "text":
				return results.WriteText(w, r)
			case "markdown":
				return results.WriteMarkdown(w, r)
			case "json":
				b, err := os.ReadFile(filepath.Join(args[0], results.FileName))
				if err != nil {
					return err
				}
				_, err = w.Write(b)
				return err
			case "html":
				return report.WriteHTML(w, report.Page{Title: fmt.Sprintf("gangbench %s %s", r.Command, r.ID), Runs: []*results.Run{r}})
			}
			return usageError{fmt.Errorf("--format %q: accepted text, markdown, json, html", format)}
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "text, markdown, json or html")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to this file instead of stdout")
	return cmd
}
