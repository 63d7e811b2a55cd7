package strictyaml

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// maxFuzzInput bounds what FuzzStrictYAML decodes ("no hang" is a promise about bounded input).
const maxFuzzInput = 64 << 10

// fuzzDeadline is how long one parse and walk may take; the margin is for a loaded 2-core CI
// machine running the fuzzer's workers.
const fuzzDeadline = 5 * time.Second

// FuzzStrictYAML parses arbitrary bytes and walks whatever tree comes out with every typed
// accessor, the way the scenario and SLO decoders do, with a `params:` mapping declared first. No
// input may panic or hang; every error must be an Error naming the file, and Err must list them in
// line order.
func FuzzStrictYAML(f *testing.F) {
	for _, s := range []string{
		"params: {n: 3, flag: true, d: 5s, x: 0.5, unused: 1}\na: $n\nb: $flag\nc: $d\ne: $x\nl: [p, q, p]\ns: \"$n\"\n",
		"apiVersion: gangbench.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\n",
		"a: &x {b: *x}\nc: !!binary aGk=\nd: 0x1F\ne: 1_000\nf: .inf\ng: ~\n? [k]\n: v\n",
		"--- a\n--- b\n",
		"a: [\n",
		"",
	} {
		f.Add([]byte(s), "n=7")
	}
	f.Fuzz(func(t *testing.T, data []byte, override string) {
		if len(data) > maxFuzzInput {
			t.Skip("larger than any gangbench file")
		}
		const file = "fuzz.yaml"
		// walk runs on another goroutine, where t.Fatal must not be called, so it returns its failure.
		done := make(chan error, 1)
		go func() { done <- walk(file, data, override) }()
		timer := time.NewTimer(fuzzDeadline)
		defer timer.Stop()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-timer.C:
			t.Fatalf("parse and walk did not return within %s", fuzzDeadline)
		}
	})
}

func walk(file string, data []byte, override string) error {
	root, err := Parse(file, data)
	if err != nil {
		return checkErrs(file, err)
	}
	if err := Header(file, root, "v", "K"); err != nil {
		if err := checkErrs(file, err); err != nil {
			return err
		}
	}
	d := NewDecoder(file)
	overrides := map[string]string{}
	if k, v, ok := strings.Cut(override, "="); ok {
		overrides[k] = v
	}
	if root.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(root.Content); i += 2 {
			if root.Content[i].Value == "params" {
				d.DeclareParams(root.Content[i+1], "params", overrides)
			}
		}
	}
	var visit func(n *yaml.Node, field string, depth int)
	visit = func(n *yaml.Node, field string, depth int) {
		// Aliases are not followed (the decoders do not either), so the tree is finite; the depth
		// bound is only a guard for this test's own recursion.
		if depth > 100 {
			return
		}
		switch n.Kind {
		case yaml.MappingNode:
			d.Map(n, field, nil, func(key string, _, v *yaml.Node) { visit(v, join(field, key), depth+1) })
		case yaml.SequenceNode:
			d.Strings(n, field)
			d.Seq(n, field, func(_ int, item *yaml.Node, f string) { visit(item, f, depth+1) })
		default:
			d.Int(n, field)
			d.Float(n, field)
			d.Bool(n, field)
			d.String(n, field)
			d.Duration(n, field)
		}
	}
	visit(root, "", 0)
	d.CheckUnusedParams("params")
	d.Declared()
	err = d.Err()
	if err == nil {
		return nil
	}
	if err := checkErrs(file, err); err != nil {
		return err
	}
	var es Errors
	errors.As(err, &es)
	if !slices.IsSortedFunc(es, func(a, b Error) int { return a.Line - b.Line }) {
		return fmt.Errorf("errors not in line order: %v", es)
	}
	return nil
}

// checkErrs reports whether err breaks the contract: Errors, every entry naming the file.
func checkErrs(file string, err error) error {
	var es Errors
	if !errors.As(err, &es) || len(es) == 0 {
		return fmt.Errorf("error %T is not Errors: %v", err, err)
	}
	for _, e := range es {
		if e.File != file || e.Line < 0 || e.Msg == "" {
			return fmt.Errorf("error does not name the file, a line and a message: %+v", e)
		}
		if !strings.HasPrefix(e.Error(), file+":") {
			return fmt.Errorf("error %q does not start with the file name", e.Error())
		}
	}
	return nil
}
