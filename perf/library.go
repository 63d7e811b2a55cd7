package perf

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/perf/scenario"
	"github.com/gangbench/gangbench/perf/slo"
)

// library holds the shipped scenarios, so the binary runs them without the source tree.
//
//go:embed scenarios/*.yaml
var library embed.FS

// LibraryDir is where the shipped scenarios live in the repository; errors name files by it.
const LibraryDir = "perf/scenarios"

// DefaultLabel selects the default set (`make perf`).
const DefaultLabel = "default"

// LibraryEntry is one shipped scenario file.
type LibraryEntry struct {
	Name   string // metadata.name, also the file's base name
	File   string // perf/scenarios/<name>.yaml
	Labels []string
	Data   []byte
}

// Library lists the shipped scenarios, sorted by name.
func Library() ([]LibraryEntry, error) {
	ents, err := fs.Glob(library, "scenarios/*.yaml")
	if err != nil {
		return nil, err
	}
	var out []LibraryEntry
	for _, e := range ents {
		b, err := library.ReadFile(e)
		if err != nil {
			return nil, err
		}
		name, labels := scenario.Peek(b)
		out = append(out, LibraryEntry{Name: name, File: path.Join(LibraryDir, path.Base(e)), Labels: labels, Data: b})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Selection says which scenarios to load.
type Selection struct {
	// Refs are files (anything with a '/' or a .yaml/.yml suffix, or an existing path) or names of
	// shipped scenarios. Empty means the shipped scenarios matching Labels.
	Refs []string
	// Labels filter the shipped scenarios when Refs is empty: "x" or "+x" requires label x, "-x"
	// excludes it (scheduler_perf's filter syntax). Empty means DefaultLabel.
	Labels []string
}

// Skipped is a scenario of a label-selected set that does not fit the requested cluster.
type Skipped struct {
	Name, File string
	// Reason is the decoder's error for the requested cluster (file, line, field and value).
	Reason string
}

// LoadScenarios resolves a selection into decoded scenarios. Every --param must be declared by at
// least one selected scenario, or it is an error (a typo would otherwise silently do nothing).
//
// A scenario the user named is loaded or refused. A scenario of a label-selected set (the default
// set of `make perf NODES=50`) that fits its own cluster but not the requested one (--nodes,
// --gpus-per-node) is returned as skipped with the reason instead: a smaller first try then runs
// what fits rather than nothing. Only when nothing fits is that an error.
func LoadScenarios(sel Selection, opts scenario.Options) ([]*scenario.Scenario, []Skipped, error) {
	if opts.Measurements == nil {
		opts.Measurements = measure.Names()
	}
	type src struct {
		file string
		data []byte
		// bySet: selected by label, so it may be skipped when it does not fit the cluster.
		bySet bool
	}
	var srcs []src
	lib, err := Library()
	if err != nil {
		return nil, nil, err
	}
	if len(sel.Refs) == 0 {
		labels := sel.Labels
		if len(labels) == 0 {
			labels = []string{DefaultLabel}
		}
		for _, e := range lib {
			if matchLabels(e.Labels, labels) {
				srcs = append(srcs, src{e.File, e.Data, true})
			}
		}
		if len(srcs) == 0 {
			return nil, nil, fmt.Errorf("no shipped scenario has labels %s (shipped: %s)", strings.Join(labels, ","), names(lib))
		}
	}
	for _, ref := range sel.Refs {
		if isPath(ref) {
			b, err := os.ReadFile(ref)
			if err != nil {
				return nil, nil, fmt.Errorf("scenario %s: %w", ref, err)
			}
			srcs = append(srcs, src{ref, b, false})
			continue
		}
		i := slices.IndexFunc(lib, func(e LibraryEntry) bool { return e.Name == ref })
		if i < 0 {
			return nil, nil, fmt.Errorf("no scenario file or shipped scenario named %q (shipped: %s)", ref, names(lib))
		}
		srcs = append(srcs, src{lib[i].File, lib[i].Data, false})
	}
	var out []*scenario.Scenario
	var skipped []Skipped
	var errs []error
	declared := map[string]bool{}
	seen := map[string]string{}
	for _, s := range srcs {
		sc, err := scenario.Load(s.file, s.data, opts)
		if err != nil && s.bySet && fitsOwnCluster(s.file, s.data, opts) {
			name, _ := scenario.Peek(s.data)
			skipped = append(skipped, Skipped{Name: name, File: s.file, Reason: err.Error()})
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := seen[sc.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: metadata.name: %q is also the name of %s; results are keyed by it", s.file, sc.Name, prev))
			continue
		}
		seen[sc.Name] = s.file
		for k := range sc.Params {
			declared[k] = true
		}
		out = append(out, sc)
	}
	for k := range opts.Params {
		if !declared[k] && len(errs) == 0 {
			errs = append(errs, fmt.Errorf("--param %s: no selected scenario declares a parameter %q", k, k))
		}
	}
	if len(out) == 0 && len(skipped) > 0 && len(errs) == 0 {
		var why []string
		for _, sk := range skipped {
			why = append(why, sk.Reason)
		}
		errs = append(errs, fmt.Errorf("no selected scenario fits the requested cluster:\n%s", strings.Join(why, "\n")))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return out, skipped, nil
}

// fitsOwnCluster reports whether a scenario that failed for the requested cluster loads with its
// own cluster shape: then the cluster, not the file, is what does not fit. The GPU API is part of
// the shape: a scenario written for DRA only does not fit a --gpu-api device-plugin run.
func fitsOwnCluster(file string, data []byte, opts scenario.Options) bool {
	if opts.Nodes == 0 && opts.GPUsPerNode == 0 && opts.GPUAPI == "" {
		return false
	}
	own := opts
	own.Nodes, own.GPUsPerNode, own.GPUAPI = 0, 0, ""
	_, err := scenario.Load(file, data, own)
	return err == nil
}

func isPath(ref string) bool {
	if strings.ContainsRune(ref, '/') || strings.HasSuffix(ref, ".yaml") || strings.HasSuffix(ref, ".yml") {
		return true
	}
	_, err := os.Stat(ref)
	return err == nil
}

func matchLabels(have, filter []string) bool {
	for _, f := range filter {
		switch {
		case strings.HasPrefix(f, "-"):
			if slices.Contains(have, f[1:]) {
				return false
			}
		default:
			if !slices.Contains(have, strings.TrimPrefix(f, "+")) {
				return false
			}
		}
	}
	return true
}

func names(lib []LibraryEntry) string {
	var n []string
	for _, e := range lib {
		n = append(n, e.Name)
	}
	return strings.Join(n, ", ")
}

// ItemNames are the DataItem names an SLO may refer to.
func ItemNames() []string {
	names := []string{
		measure.ItemBindingRate, measure.ItemAPIServerBindingRate, measure.ItemBindCountMismatch,
		measure.ItemGangLatency, measure.ItemPhaseGangLatency, measure.ItemBindSpread,
		measure.ItemPartialGangs, measure.ItemUnboundFitting, measure.ItemStatusRegressions,
		measure.ItemCreationRate, ItemHarness, ItemQuietWait, measure.ItemAPIRequests, measure.ItemAPIErrors, measure.ItemWatchEvents, measure.ItemWatches,
		measure.ItemOneDomainShare, measure.ItemPlacementsPerCycle, measure.ItemSchedulerCPUPerPod, measure.ItemTopologyCPURatio,
		measure.ItemJobLatency, measure.ItemJobToPodGroup, measure.ItemClaimAllocationRate, ItemGPUAPIRatio,
	}
	names = append(names, FaultItemNames()...)
	for _, h := range measure.SchedulerHistograms() {
		names = append(names, h.Item)
	}
	for _, c := range measure.SchedulerCounters() {
		names = append(names, c.Item)
	}
	return names
}

// LoadSLO reads an SLO file, or the shipped default for "default".
func LoadSLO(ref string) ([]slo.Objective, error) {
	opts := slo.Options{Items: ItemNames()}
	if ref == "default" {
		return slo.Load(slo.DefaultFile, slo.Default(), opts)
	}
	return slo.LoadFile(ref, opts)
}

// BuiltinObjectives are judged in every run: they are gang semantics, not performance, so no SLO
// file can leave them out (a file may repeat them; duplicates are dropped).
func BuiltinObjectives() []slo.Objective {
	zero := func(item, source string) slo.Objective {
		return slo.Objective{Expr: item + " == 0", Item: item, Bucket: measure.Value, Op: "==", Value: 0, Source: source, File: "built-in"}
	}
	return []slo.Objective{
		zero(measure.ItemPartialGangs, "gang semantics: a gang is bound whole (at least minCount) or not at all (gang-semantics-v1.37.md §3.4, §3.6)"),
		zero(measure.ItemUnboundFitting, "gang semantics: every pod that fits is bound, not just minCount (gang-semantics-v1.37.md §3.4)"),
		zero(measure.ItemStatusRegressions, "PodGroupInitiallyScheduled never returns from True (gang-semantics-v1.37.md §4)"),
	}
}
