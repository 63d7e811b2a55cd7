// Package coverage reads a Go coverage profile of the scheduler under test and reports how much of
// its gang code the suites ran: per file (or per the functions of a file that belong to the gang
// code), statements covered, and the blocks that never ran with the function they are in.
package coverage

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Block is one basic block of a profile: a range of source and how many statements it holds.
type Block struct {
	File                string // import path of the package plus the file name
	StartLine, StartCol int
	EndLine, EndCol     int
	Statements          int
	Count               int
}

// ParseProfile reads the text profile `go tool covdata textfmt` writes. A block listed more than
// once (one entry per counter file merged) counts as run when any entry ran.
func ParseProfile(r io.Reader) ([]Block, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1024*1024), 1024*1024)
	merged := map[string]*Block{}
	var order []string
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || line == 1 && strings.HasPrefix(text, "mode:") {
			continue
		}
		b, err := parseLine(text)
		if err != nil {
			return nil, fmt.Errorf("profile line %d: %w", line, err)
		}
		key := text[:strings.LastIndexByte(text[:strings.LastIndexByte(text, ' ')], ' ')]
		if m, ok := merged[key]; ok {
			m.Count = max(m.Count, b.Count)
			continue
		}
		merged[key] = &b
		order = append(order, key)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	out := make([]Block, 0, len(order))
	for _, k := range order {
		out = append(out, *merged[k])
	}
	return out, nil
}

var lineRE = regexp.MustCompile(`^(.+):([0-9]+)\.([0-9]+),([0-9]+)\.([0-9]+) ([0-9]+) ([0-9]+)$`)

func parseLine(s string) (Block, error) {
	m := lineRE.FindStringSubmatch(s)
	if m == nil {
		return Block{}, fmt.Errorf("%q: want file:line.col,line.col statements count", s)
	}
	n := make([]int, 6)
	for i := range n {
		n[i], _ = strconv.Atoi(m[i+2]) // digits only, by the expression
	}
	return Block{File: m[1], StartLine: n[0], StartCol: n[1], EndLine: n[2], EndCol: n[3], Statements: n[4], Count: n[5]}, nil
}

// Target is a file of the gang code, whole or only its functions whose names match Funcs.
type Target struct {
	// Path is the file's path in the k8s.io/kubernetes module.
	Path string
	// Funcs, when set, keeps only the functions (and methods) whose names match it: the gang parts
	// of a file that is mostly about something else.
	Funcs *regexp.Regexp
	// What says in a few words what the file does for gangs.
	What string
}

// Module is the import path the profile's file names start with.
const Module = "k8s.io/kubernetes"

// gangFuncs picks the gang parts of shared files by name.
var gangFuncs = regexp.MustCompile(`(?i)podgroup|gang|workload|entity|placement`)

// GangCode lists the scheduler's gang code in v1.37 (gang-semantics-v1.37.md): the gang plugin
// with its queueing hints, the pod-group cycle, workload-aware preemption, and the pod-group parts
// of the queue, the cache, the event handlers and the metrics. schedule_one.go is not listed: its
// pod-group branches sit inside the single-pod cycle's functions, which a name cannot pick out.
func GangCode() []Target {
	return []Target{
		{Path: "pkg/scheduler/schedule_one_podgroup.go", What: "the pod-group scheduling cycle"},
		{Path: "pkg/scheduler/framework/plugins/gangscheduling/gangscheduling.go", What: "the gang plugin: PreEnqueue, Permit, queueing hints"},
		{Path: "pkg/scheduler/framework/preemption/podgrouppreemption.go", What: "workload-aware preemption"},
		{Path: "pkg/scheduler/backend/cache/podgroupstate.go", What: "the cache's pod-group state (counts of members)"},
		{Path: "pkg/scheduler/backend/queue/workload_forest.go", What: "the queue's workload forest"},
		{Path: "pkg/scheduler/backend/queue/pod_group_member_pods.go", What: "the queue's pod-group members"},
		{Path: "pkg/scheduler/framework/plugins/helper/podgroup.go", What: "pod-group helpers of the plugins"},
		{Path: "pkg/scheduler/backend/queue/scheduling_queue.go", Funcs: gangFuncs, What: "the queue's pod-group functions"},
		{Path: "pkg/scheduler/backend/queue/active_queue.go", Funcs: gangFuncs, What: "the active queue's pod-group functions"},
		{Path: "pkg/scheduler/backend/cache/cache.go", Funcs: gangFuncs, What: "the cache's pod-group functions"},
		{Path: "pkg/scheduler/eventhandlers.go", Funcs: gangFuncs, What: "the PodGroup and member event handlers"},
		{Path: "pkg/scheduler/metrics/metrics.go", Funcs: gangFuncs, What: "the pod-group metrics"},
	}
}

// FileReport is the coverage of one target.
type FileReport struct {
	Target
	// Missing: the file is not in this source (another Kubernetes version).
	Missing             bool
	Statements, Covered int
	// Uncovered are the blocks that never ran, in source order, with their function.
	Uncovered []Uncovered
}

// Uncovered is a block that never ran.
type Uncovered struct {
	Func               string
	StartLine, EndLine int
	Statements         int
	// Cond is the condition that decides whether the block runs, as source text: the innermost
	// if, case or loop around it; "" when the block is a function's own body.
	Cond string
	// Gate is the condition of an enclosing if, at any depth, that holds only with a feature gate
	// on; "" when none.
	Gate string
	// Kind and Why explain why it did not run (Explain).
	Kind Kind
	Why  string
}

// Percent is the share of statements covered, 0 for a file with none.
func (f FileReport) Percent() float64 {
	if f.Statements == 0 {
		return 0
	}
	return 100 * float64(f.Covered) / float64(f.Statements)
}

// Report computes each target's coverage from the profile's blocks; srcRoot is the module's source
// directory, read to find function boundaries and the conditions around blocks that never ran,
// which rules (then the conditions themselves) explain.
func Report(blocks []Block, targets []Target, rules []Rule, srcRoot string) ([]FileReport, error) {
	byFile := map[string][]Block{}
	for _, b := range blocks {
		byFile[b.File] = append(byFile[b.File], b)
	}
	var out []FileReport
	for _, t := range targets {
		fr := FileReport{Target: t}
		pf, err := parse(filepath.Join(srcRoot, filepath.FromSlash(t.Path)))
		if os.IsNotExist(err) {
			fr.Missing = true
			out = append(out, fr)
			continue
		}
		if err != nil {
			return nil, err
		}
		bs := byFile[Module+"/"+t.Path]
		sort.Slice(bs, func(i, j int) bool { return bs[i].StartLine < bs[j].StartLine })
		for _, b := range bs {
			fn := enclosing(pf.funcs, b.StartLine)
			if t.Funcs != nil && !t.Funcs.MatchString(fn) {
				continue
			}
			fr.Statements += b.Statements
			if b.Count > 0 {
				fr.Covered += b.Statements
				continue
			}
			if b.Statements > 0 {
				u := Uncovered{Func: fn, StartLine: b.StartLine, EndLine: b.EndLine, Statements: b.Statements}
				u.Cond, u.Gate = controlling(pf.fset, pf.file, pf.pos(b.StartLine, b.StartCol))
				u.Kind, u.Why = Explain(rules, t.Path, u)
				fr.Uncovered = append(fr.Uncovered, u)
			}
		}
		out = append(out, fr)
	}
	return out, nil
}

// Uncounted is how many of the file's statements never ran, by kind.
func (f FileReport) Uncounted() map[Kind]int {
	out := map[Kind]int{}
	for _, u := range f.Uncovered {
		out[u.Kind] += u.Statements
	}
	return out
}

// Reachable is the number of statements that run with the default feature gates: the target's
// denominator.
func (f FileReport) Reachable() int {
	return f.Statements - f.Uncounted()[Gated]
}

// Unrun sums the reports' statements that run with the default gates (the target's denominator)
// and their never-run statements by kind.
func Unrun(rs []FileReport) (reachable int, kinds map[Kind]int) {
	kinds = map[Kind]int{}
	for _, r := range rs {
		reachable += r.Reachable()
		for k, n := range r.Uncounted() {
			kinds[k] += n
		}
	}
	return reachable, kinds
}

// Total sums the reports.
func Total(rs []FileReport) (statements, covered int) {
	for _, r := range rs {
		statements += r.Statements
		covered += r.Covered
	}
	return statements, covered
}

type funcRange struct {
	name       string
	start, end int
}

// parsedFile is a source file with its functions ("Type.Method") and their line ranges.
type parsedFile struct {
	fset  *token.FileSet
	file  *ast.File
	tf    *token.File
	funcs []funcRange
}

// pos is the position of a profile's line and column (1-based, in bytes), clamped to the file.
func (p parsedFile) pos(line, col int) token.Pos {
	if line < 1 || line > p.tf.LineCount() {
		return token.NoPos
	}
	off := int(p.tf.LineStart(line)-token.Pos(p.tf.Base())) + col - 1
	return p.tf.Pos(min(max(off, 0), p.tf.Size()))
}

func parse(path string) (parsedFile, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return parsedFile{}, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return parsedFile{}, err
	}
	var out []funcRange
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			name = recvName(fd.Recv.List[0].Type) + "." + name
		}
		out = append(out, funcRange{name: name, start: fset.Position(fd.Pos()).Line, end: fset.Position(fd.End()).Line})
	}
	return parsedFile{fset: fset, file: f, tf: fset.File(f.Pos()), funcs: out}, nil
}

func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}

// enclosing names the function holding line; "" outside any (package-level var initialisers).
func enclosing(fs []funcRange, line int) string {
	for _, f := range fs {
		if f.start <= line && line <= f.end {
			return f.name
		}
	}
	return ""
}
