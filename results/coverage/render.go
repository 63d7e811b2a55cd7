package coverage

import (
	"fmt"
	"html"
	"os"
	"path/filepath"
	"strings"

	"github.com/gangbench/gangbench/internal/markdown"
)

// Markdown renders the reports: the table per file with the total, then each file's blocks that
// never ran with their function, the condition around them, and why they did not run (Explain), so a
// reader can check each reason and see the gaps left.
func Markdown(title string, rs []FileReport) string {
	var w markdown.Writer
	w.Heading(1, title)
	stmts, cov := Total(rs)
	reach, kinds := Unrun(rs)
	w.Paragraph(fmt.Sprintf("Statements of the scheduler's gang code the run executed: **%d of %d (%.1f %%)**; "+
		"of the %d that run with the default feature gates, **%.1f %%**. Of those never run, %d are behind gates, "+
		"%d only handle internal errors, %d only log, %d are not observable from outside, and **%d are gaps** no suite reaches yet. "+
		"Go's coverage counts statements in basic blocks; a branch shows as the block it leads to.",
		cov, stmts, pct(cov, stmts), reach, pct(cov, reach), kinds[Gated], kinds[InternalError], kinds[Logging], kinds[Unobservable], kinds[Gap]))
	w.Table(markdown.Col("file"), markdown.Col("what"), markdown.Num("statements"), markdown.Num("covered"), markdown.Num("%"),
		markdown.Num("gated"), markdown.Num("% of default-gate code"), markdown.Num("explained"), markdown.Num("gaps"))
	for _, r := range rs {
		if r.Missing {
			w.Row(r.Path+scope(r.Target), r.What, "–", "–", "not in this source", "–", "–", "–", "–")
			continue
		}
		k := r.Uncounted()
		w.Row(r.Path+scope(r.Target), r.What, fmt.Sprint(r.Statements), fmt.Sprint(r.Covered), fmt.Sprintf("%.1f", r.Percent()),
			fmt.Sprint(k[Gated]), fmt.Sprintf("%.1f", pct(r.Covered, r.Reachable())), fmt.Sprint(k[InternalError]+k[Logging]+k[Unobservable]), fmt.Sprint(k[Gap]))
	}
	w.Row("**total**", "", fmt.Sprint(stmts), fmt.Sprint(cov), fmt.Sprintf("%.1f", pct(cov, stmts)),
		fmt.Sprint(kinds[Gated]), fmt.Sprintf("%.1f", pct(cov, reach)), fmt.Sprint(kinds[InternalError]+kinds[Logging]+kinds[Unobservable]), fmt.Sprint(kinds[Gap]))
	for _, r := range rs {
		if len(r.Uncovered) == 0 {
			continue
		}
		w.Heading(2, r.Path)
		w.Table(markdown.Col("function"), markdown.Col("lines"), markdown.Num("statements"), markdown.Col("runs when"), markdown.Col("kind"), markdown.Col("why it did not run"))
		for _, u := range r.Uncovered {
			w.Row(orPackage(u.Func), fmt.Sprintf("%d-%d", u.StartLine, u.EndLine), fmt.Sprint(u.Statements), code(u.Cond), string(u.Kind), u.Why)
		}
	}
	return w.String()
}

// code shows a condition in a table cell as plain text (a code span would show Inline's escaped
// < and > literally), with emphasis markers escaped; "" is the function's own body.
func code(cond string) string {
	if cond == "" {
		return "(function entry)"
	}
	return emphasis.Replace(cond)
}

var emphasis = strings.NewReplacer("*", `\*`, "_", `\_`, "`", "\\`")

func scope(t Target) string {
	if t.Funcs == nil {
		return ""
	}
	return " (pod-group functions)"
}

func orPackage(f string) string {
	if f == "" {
		return "(package level)"
	}
	return f
}

func pct(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

// HTML renders each target's source with the lines of blocks that ran in green and those that
// never ran in red (lines outside any block, or outside the gang functions of a shared file, stay
// plain), read from srcRoot.
func HTML(title string, rs []FileReport, blocks []Block, srcRoot string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "<!doctype html>\n<meta charset=\"utf-8\">\n<title>%s</title>\n", html.EscapeString(title))
	b.WriteString("<style>body{font-family:sans-serif} pre{font-size:12px} .r{background:#fdd} .c{background:#dfd} .n{color:#888}</style>\n")
	fmt.Fprintf(&b, "<h1>%s</h1>\n", html.EscapeString(title))
	byFile := map[string][]Block{}
	for _, bl := range blocks {
		byFile[bl.File] = append(byFile[bl.File], bl)
	}
	for _, r := range rs {
		if r.Missing {
			continue
		}
		src, err := os.ReadFile(filepath.Join(srcRoot, filepath.FromSlash(r.Path)))
		if err != nil {
			return "", err
		}
		lines := strings.Split(string(src), "\n")
		class := make([]string, len(lines)+1)
		uncovered := map[int]bool{}
		for _, u := range r.Uncovered {
			for l := u.StartLine; l <= u.EndLine; l++ {
				uncovered[l] = true
			}
		}
		pf, err := parse(filepath.Join(srcRoot, filepath.FromSlash(r.Path)))
		if err != nil {
			return "", err
		}
		for _, bl := range byFile[Module+"/"+r.Path] {
			if r.Funcs != nil && !r.Funcs.MatchString(enclosing(pf.funcs, bl.StartLine)) {
				continue
			}
			for l := bl.StartLine; l <= bl.EndLine && l < len(class); l++ {
				switch {
				case uncovered[l]:
					class[l] = "r"
				case class[l] == "":
					class[l] = "c"
				}
			}
		}
		fmt.Fprintf(&b, "<h2 id=%q>%s — %.1f %% of %d statements</h2>\n<pre>", r.Path, html.EscapeString(r.Path+scope(r.Target)), r.Percent(), r.Statements)
		for i, l := range lines {
			n := i + 1
			fmt.Fprintf(&b, "<span class=n>%5d</span> ", n)
			if c := class[n]; c != "" {
				fmt.Fprintf(&b, "<span class=%s>%s</span>\n", c, html.EscapeString(l))
			} else {
				fmt.Fprintf(&b, "%s\n", html.EscapeString(l))
			}
		}
		b.WriteString("</pre>\n")
	}
	return b.String(), nil
}
