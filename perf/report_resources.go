package perf

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/internal/markdown"
	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/results"
)

// resourceOrder puts the scheduler first, then its neighbours by how much they usually take.
var resourceOrder = []string{
	string(clusters.Scheduler), string(clusters.APIServer), string(clusters.Etcd), string(clusters.Kwok),
	string(clusters.ControllerManager), string(clusters.Kubelet), "containerd", "node-other", string(measure.Harness),
}

func resourceRank(c string) int {
	if i := slices.Index(resourceOrder, c); i >= 0 {
		return i
	}
	return len(resourceOrder)
}

// resourceRow is one component in one (scenario, repetition).
type resourceRow struct {
	scenario, rep, component string
	cpu, cores, rssMiB, wait float64
}

// resourceTable returns the resource rows in run order, components in resourceOrder, and the
// machine's busy cores per (scenario, repetition).
func resourceTable(r *results.Run) ([]resourceRow, map[string]string) {
	var out []resourceRow
	machine := map[string]string{}
	for _, it := range r.DataItems {
		key := it.Labels["scenario"] + "\x00" + it.Labels["repetition"]
		switch it.Name {
		case measure.ItemResources:
			out = append(out, resourceRow{scenario: it.Labels["scenario"], rep: it.Labels["repetition"], component: it.Labels["component"],
				cpu: it.Data["CPUSeconds"], cores: it.Data["CPUShare"], rssMiB: it.Data["PeakRSSMiB"], wait: it.Data["WaitSeconds"]})
		case measure.ItemMachineCPU:
			machine[key] = fmt.Sprintf("%.2f of %g cores busy over %.1f s", it.Data[measure.Value], it.Data["CPUs"], it.Data["WindowSeconds"])
			if st := it.Data["StealCores"]; st >= 0.005 {
				machine[key] += fmt.Sprintf(" (%.2f of them taken by the host: steal time)", st)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b resourceRow) int {
		if a.scenario != b.scenario || a.rep != b.rep {
			return 0 // keep run order between windows
		}
		return resourceRank(a.component) - resourceRank(b.component)
	})
	return out, machine
}

const resourceCaption = "resources in each measured window: CPU seconds, average share of one core, peak resident memory, and time runnable but waiting for a CPU (the scheduler starved when that is large)"

// writeResourcesText adds the resource table to the text report.
func writeResourcesText(b *strings.Builder, r *results.Run) {
	rows, machine := resourceTable(r)
	if len(rows) == 0 {
		return
	}
	b.WriteString("\n" + resourceCaption + "\n")
	fmt.Fprintf(b, "  %-24s %4s  %-24s %8s %6s %9s %9s\n", "scenario", "rep", "component", "cpu s", "cores", "peak MiB", "waited s")
	last := ""
	for _, rw := range rows {
		key := rw.scenario + "\x00" + rw.rep
		if key != last && last != "" && machine[last] != "" {
			fmt.Fprintf(b, "  %-24s %4s  machine: %s\n", "", "", machine[last])
		}
		last = key
		fmt.Fprintf(b, "  %-24s %4s  %-24s %8.1f %6.2f %9.0f %9.1f\n", rw.scenario, rw.rep, rw.component, rw.cpu, rw.cores, rw.rssMiB, rw.wait)
	}
	if machine[last] != "" {
		fmt.Fprintf(b, "  %-24s %4s  machine: %s\n", "", "", machine[last])
	}
}

// writeResourcesMarkdown adds the resource table to the markdown report.
func writeResourcesMarkdown(md *markdown.Writer, r *results.Run) {
	rows, machine := resourceTable(r)
	if len(rows) == 0 {
		return
	}
	md.Heading(2, "Resources")
	md.Paragraph(strings.ToUpper(resourceCaption[:1]) + resourceCaption[1:] + ".")
	md.Table(markdown.Col("scenario"), markdown.Num("rep"), markdown.Col("component"), markdown.Num("CPU s"),
		markdown.Num("cores"), markdown.Num("peak MiB"), markdown.Num("waited s"))
	for _, rw := range rows {
		md.Row(rw.scenario, rw.rep, rw.component,
			strconv.FormatFloat(rw.cpu, 'f', 1, 64), strconv.FormatFloat(rw.cores, 'f', 2, 64),
			strconv.FormatFloat(rw.rssMiB, 'f', 0, 64), strconv.FormatFloat(rw.wait, 'f', 1, 64))
	}
	var lines []string
	seen := map[string]bool{}
	for _, rw := range rows {
		key := rw.scenario + "\x00" + rw.rep
		if m := machine[key]; m != "" && !seen[key] {
			seen[key] = true
			lines = append(lines, fmt.Sprintf("%s rep %s: machine %s", rw.scenario, rw.rep, m))
		}
	}
	md.List(lines...)
}
