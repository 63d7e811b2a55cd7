// Package mutants holds deliberately wrong builds of the control plane, each a patch of a line or two
// to k8s.io/kubernetes, and what proves the suites catch them: the suite a mutant is wrong for and
// the assertions that must fail against it. One mutant per file under patches/; the proof
// (suites' TestProofMutants) builds each with clusters/k8sbin, cached by patch content, and runs only
// the targeted suite against it.
package mutants

import (
	"embed"
	"fmt"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gangbench/gangbench/clusters/k8sbin"
)

//go:embed patches/*.yaml
var files embed.FS

// Mutant is one wrong build and the proof that the suites notice it.
type Mutant struct {
	Name string `json:"name"`
	// Suite is the suite the mutant is wrong for; only it runs against the mutant.
	Suite string `json:"suite"`
	// Feature, when set, narrows the run to that feature of the suite (the faults suite takes
	// minutes, and only one of its features is about what the mutant breaks). Unset, the proof runs
	// the suite's features that hold a CaughtBy assertion (all of them for STA-MON).
	Feature string `json:"feature,omitempty"`
	// Wrong says, in a user's words, what the build gets wrong.
	Wrong string `json:"wrong"`
	// CaughtBy are the assertion IDs that must fail against it (others may fail too). An entry
	// "A|B" is met when either fails: a feature stops at its first failed step, and which of two
	// steps a wrong build trips first can depend on timing.
	CaughtBy []string `json:"caughtBy"`
	// Upstream says upstream's own gang specs are about the behaviour this build breaks, so the
	// proof runs them against it too and reports whether they notice (they need not: that they
	// miss a wrong build is a finding about them). Elsewhere (conditions, metrics, GPU faults)
	// upstream has no spec to run.
	Upstream bool         `json:"upstream,omitempty"`
	Patch    k8sbin.Patch `json:"patch"`
	// File is where the mutant was read from.
	File string `json:"-"`
}

var idRE = regexp.MustCompile(`^[A-Z]{2,5}-[0-9A-Z][0-9A-Za-z]*$`)

// All reads every mutant, sorted by name. suites lists the suite names a mutant may target.
func All(suites []string) ([]Mutant, error) {
	entries, err := files.ReadDir("patches")
	if err != nil {
		return nil, err
	}
	var out []Mutant
	seen := map[string]string{}
	for _, e := range entries {
		file := path.Join("patches", e.Name())
		b, err := files.ReadFile(file)
		if err != nil {
			return nil, err
		}
		m, err := parse(file, b, suites)
		if err != nil {
			return nil, err
		}
		if prev, ok := seen[m.Name]; ok {
			return nil, fmt.Errorf("%s: name %q: already used by %s", file, m.Name, prev)
		}
		seen[m.Name] = file
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// parse decodes and checks one mutant file; errors name the file and the field.
func parse(file string, b []byte, suites []string) (Mutant, error) {
	var m Mutant
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		return m, fmt.Errorf("%s: %w", file, err)
	}
	m.File = file
	if want := strings.TrimSuffix(path.Base(file), ".yaml"); m.Name != want {
		return m, fmt.Errorf("%s: name %q: want the file's name, %q", file, m.Name, want)
	}
	if !slices.Contains(suites, m.Suite) {
		return m, fmt.Errorf("%s: suite %q: want one of %s", file, m.Suite, strings.Join(suites, ", "))
	}
	if strings.TrimSpace(m.Wrong) == "" {
		return m, fmt.Errorf("%s: wrong: empty (say what the build gets wrong)", file)
	}
	if len(m.CaughtBy) == 0 {
		return m, fmt.Errorf("%s: caughtBy: empty (a mutant no assertion must catch proves nothing)", file)
	}
	for i, alt := range m.CaughtBy {
		for _, id := range strings.Split(alt, "|") {
			if !idRE.MatchString(id) {
				return m, fmt.Errorf("%s: caughtBy[%d] %q: not an assertion ID like BAR-05 (or alternatives like MIN-04|MIN-05)", file, i, alt)
			}
		}
	}
	m.Patch.Name = m.Name
	if err := m.Patch.Validate(); err != nil {
		return m, fmt.Errorf("%s: %w", file, err)
	}
	return m, nil
}
