package lab

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
)

// table renders rows as kubectl's custom-columns output does: columns separated by at least three
// spaces, left-aligned.
func table(rows [][]string) []string { return columns(rows, 3) }

// columns renders rows left-aligned with at least pad spaces between columns, without trailing
// blanks.
func columns(rows [][]string, pad int) []string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 8, pad, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return lines
}

// podsTable is `get pods -o custom-columns=NAME,GROUP,PHASE,NODE` (GROUP left out when group is
// false, as experiment 4's command does).
func podsTable(s snapshot, group bool) []string {
	head := []string{"NAME", "GROUP", "PHASE", "NODE"}
	if !group {
		head = []string{"NAME", "PHASE", "NODE"}
	}
	rows := [][]string{head}
	for _, p := range s.Pods {
		if group {
			rows = append(rows, []string{p.Name, p.Group, p.Phase, orNone(p.Node)})
		} else {
			rows = append(rows, []string{p.Name, p.Phase, orNone(p.Node)})
		}
	}
	return table(rows)
}

// gpuLine is `kubectl describe node <worker> | grep -E "^  nvidia.com/gpu "`: requests and limits,
// which are equal for pods that set limits only.
func gpuLine(n int64) []string {
	return []string{fmt.Sprintf("  %-19s%-13d%d", gpuResource, n, n)}
}

// goValue prints v as kubectl's custom-columns prints a non-scalar field: Go's %v of the decoded
// JSON (maps with sorted keys).
func goValue(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	var m any
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return fmt.Sprint(m)
}

// basicGroupsTable is `get podgroups -o custom-columns=NAME,POLICY:.spec.schedulingPolicy,STATUS:.status`.
func basicGroupsTable(groups []schedv1beta1.PodGroup) []string {
	rows := [][]string{{"NAME", "POLICY", "STATUS"}}
	for _, g := range groups {
		rows = append(rows, []string{g.Name, goValue(g.Spec.SchedulingPolicy), goValue(g.Status)})
	}
	return table(rows)
}

// gangGroupsLines condense the lab's `get podgroups -o yaml | grep -E "name:|minCount|reason:|…"`
// to one line per group.
func gangGroupsLines(groups []schedv1beta1.PodGroup) []string {
	var rows [][]string
	for _, g := range groups {
		min := "-"
		if gp := g.Spec.SchedulingPolicy.Gang; gp != nil {
			min = fmt.Sprint(gp.MinCount)
		}
		row := []string{g.Name, "minCount " + min}
		if c := condition(&g); c != nil {
			row = append(row, c.Type, string(c.Status), c.Reason, fmt.Sprintf("%q", c.Message))
		} else {
			row = append(row, "(no condition yet)")
		}
		rows = append(rows, row)
	}
	return columns(rows, 2)
}

// elasticGroupsTable is `get podgroups -o custom-columns=NAME,MIN:…gang.minCount,STATUS:.status.conditions[0].reason`.
func elasticGroupsTable(groups []schedv1beta1.PodGroup) []string {
	rows := [][]string{{"NAME", "MIN", "STATUS"}}
	for _, g := range groups {
		min, reason := "<none>", "<none>"
		if gp := g.Spec.SchedulingPolicy.Gang; gp != nil {
			min = fmt.Sprint(gp.MinCount)
		}
		if len(g.Status.Conditions) > 0 {
			reason = g.Status.Conditions[0].Reason
		}
		rows = append(rows, []string{g.Name, min, reason})
	}
	return table(rows)
}

// eventsTable is `get events --field-selector reason=FailedScheduling -o
// custom-columns=POD:.involvedObject.name,MSG:.message | sort -u`.
func eventsTable(events []corev1.Event) []string {
	seen := map[string]bool{}
	var rows [][]string
	for _, e := range events {
		if e.Reason != "FailedScheduling" {
			continue
		}
		k := e.InvolvedObject.Name + "\x00" + e.Message
		if seen[k] {
			continue
		}
		seen[k] = true
		rows = append(rows, []string{e.InvolvedObject.Name, e.Message})
	}
	// sort -u sorts whole lines; the header sorts first as in the lab (capitals before lower case).
	slices.SortFunc(rows, func(a, b []string) int { return strings.Compare(a[0]+" "+a[1], b[0]+" "+b[1]) })
	return table(append([][]string{{"POD", "MSG"}}, rows...))
}

// sideBySide prints here and lab in two columns when both fit in width, else one above the other.
func sideBySide(here, lab []string, hereTitle string, width int) []string {
	w := len(hereTitle) + 2
	for _, l := range here {
		w = max(w, len(l))
	}
	lw := len("[the lab]")
	for _, l := range lab {
		lw = max(lw, len(l))
	}
	if w+3+lw > width {
		out := []string{"  [" + hereTitle + "]"}
		for _, l := range here {
			out = append(out, "  "+l)
		}
		out = append(out, "  [the lab]")
		for _, l := range lab {
			out = append(out, "  "+l)
		}
		return out
	}
	rowsN := max(len(here), len(lab))
	out := []string{fmt.Sprintf("  %-*s | %s", w, "["+hereTitle+"]", "[the lab]")}
	for i := range rowsN {
		var h, l string
		if i < len(here) {
			h = here[i]
		}
		if i < len(lab) {
			l = lab[i]
		}
		if l == "" {
			out = append(out, strings.TrimRight("  "+h, " "))
			continue
		}
		out = append(out, fmt.Sprintf("  %-*s | %s", w, h, l))
	}
	return out
}
