// Package strictyaml decodes gangbench's own YAML files (perf scenarios, SLO files) strictly, from the
// yaml.v3 node tree, so that every error can name the file, the line and the field: unknown fields,
// duplicate keys, wrong types, undefined and unused $params. Errors are collected, not returned at
// the first one, so a user fixes a file in one round.
package strictyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Error is one problem in a file. Line is 1-based; 0 means the problem is not at one place (e.g. a
// --param given on the command line that no file declares).
type Error struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e Error) Error() string {
	switch {
	case e.Line > 0 && e.Field != "":
		return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Field, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	case e.Field != "":
		return fmt.Sprintf("%s: %s: %s", e.File, e.Field, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Errors is every problem found in one file, in line order. Its Error is one problem per line.
type Errors []Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Parse reads exactly one YAML document. Syntax errors carry the file name and yaml's line.
func Parse(file string, data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	// A node tree has no Go type to check fields against; KnownFields is set anyway so that nothing
	// decoded straight into a struct through this decoder can ever be lenient. Unknown keys are
	// checked by Decoder.Map against the fields each level accepts.
	dec.KnownFields(true)
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, Errors{{File: file, Msg: "empty file"}}
		}
		return nil, Errors{{File: file, Line: yamlErrLine(err), Msg: yamlErrMsg(err)}}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, Errors{{File: file, Line: extra.Line, Msg: "more than one YAML document; put one per file"}}
	} else if !errors.Is(err, io.EOF) {
		return nil, Errors{{File: file, Line: yamlErrLine(err), Msg: yamlErrMsg(err)}}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, Errors{{File: file, Msg: "not a YAML document"}}
	}
	return doc.Content[0], nil
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

// yamlErrMsg is a yaml syntax error without the "yaml: line N: " the location already says.
func yamlErrMsg(err error) string { return yamlPrefixRE.ReplaceAllString(err.Error(), "") }

var yamlPrefixRE = regexp.MustCompile(`^(yaml: )?(line \d+: )?`)

// yamlErrLine digs the line out of a yaml syntax error, whose text is the only place it is kept.
func yamlErrLine(err error) int {
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// Param is one $param: its value node and whether any field used it.
type Param struct {
	Name string
	// Value is the scalar the $param stands for: the file's default, or a synthetic node holding the
	// command-line override (with the default's line, so errors still point into the file).
	Value *yaml.Node
	// Line is where the param is declared.
	Line int
	// Override is true when the value came from the command line.
	Override bool
	used     bool
}

// Decoder walks one file's node tree. The zero value is not usable; call NewDecoder.
type Decoder struct {
	file   string
	params map[string]*Param
	errs   Errors
}

// NewDecoder returns a decoder for file with no params.
func NewDecoder(file string) *Decoder {
	return &Decoder{file: file, params: map[string]*Param{}}
}

// File is the name errors carry.
func (d *Decoder) File() string { return d.file }

var paramNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

// DeclareParams reads a `params:` mapping of name → scalar default and applies overrides (name →
// value from the command line). Overrides for names the file does not declare are left to the
// caller, which may load several files with one set of overrides; Declared tells it which were used.
func (d *Decoder) DeclareParams(n *yaml.Node, field string, overrides map[string]string) {
	d.Map(n, field, nil, func(key string, k, v *yaml.Node) {
		f := field + "." + key
		if !paramNameRE.MatchString(key) {
			d.Errorf(k, f, "parameter names are letters, digits and _, starting with a letter")
			return
		}
		if v.Kind != yaml.ScalarNode {
			d.Errorf(v, f, "a parameter's default must be a scalar (number, string or duration)")
			return
		}
		p := &Param{Name: key, Value: v, Line: k.Line}
		if o, ok := overrides[key]; ok {
			p.Value = &yaml.Node{Kind: yaml.ScalarNode, Value: o, Line: v.Line, Column: v.Column}
			p.Override = true
		}
		d.params[key] = p
	})
}

// Declared returns the declared params, sorted by name.
func (d *Decoder) Declared() []*Param {
	out := slices.Collect(maps.Values(d.params))
	slices.SortFunc(out, func(a, b *Param) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// CheckUnusedParams reports declared params no field referred to, the way scheduler_perf rejects
// unused parameters: an unused param is almost always a typo in the name of a used one.
func (d *Decoder) CheckUnusedParams(field string) {
	for _, p := range d.Declared() {
		if !p.used {
			d.errs = append(d.errs, Error{File: d.file, Line: p.Line, Field: field + "." + p.Name, Msg: "declared but never used (no field says $" + p.Name + "; typo?)"})
		}
	}
}

// Errorf records a problem at n.
func (d *Decoder) Errorf(n *yaml.Node, field, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	d.errs = append(d.errs, Error{File: d.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// Failed reports whether a problem was already recorded for field, so checks that build on its
// value (ranges, cross-field rules) can stay quiet instead of repeating the cause as a symptom.
func (d *Decoder) Failed(field string) bool {
	for _, e := range d.errs {
		if e.Field == field {
			return true
		}
	}
	return false
}

// Err returns the collected errors sorted by line (stable), or nil.
func (d *Decoder) Err() error {
	if len(d.errs) == 0 {
		return nil
	}
	es := slices.Clone(d.errs)
	slices.SortStableFunc(es, func(a, b Error) int { return a.Line - b.Line })
	return es
}

// Map walks a mapping node. accepted lists the keys it may have (nil accepts any, for maps whose keys
// are data, like params); each key is handed to fn with its key and value nodes. Unknown and
// duplicate keys are errors that name the accepted ones.
func (d *Decoder) Map(n *yaml.Node, field string, accepted []string, fn func(key string, k, v *yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		d.Errorf(n, field, "want a mapping, got %s", describe(n))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := k.Value
		f := join(field, key)
		if k.Kind != yaml.ScalarNode {
			d.Errorf(k, field, "keys must be plain names")
			continue
		}
		if prev, dup := seen[key]; dup {
			d.Errorf(k, f, "duplicate key (first at line %d)", prev)
			continue
		}
		seen[key] = k.Line
		if accepted != nil && !slices.Contains(accepted, key) {
			d.Errorf(k, f, "unknown field (accepted: %s)", strings.Join(accepted, ", "))
			continue
		}
		fn(key, k, v)
	}
}

// Seq walks a sequence node.
func (d *Decoder) Seq(n *yaml.Node, field string, fn func(i int, item *yaml.Node, field string)) {
	if n.Kind != yaml.SequenceNode {
		d.Errorf(n, field, "want a list, got %s", describe(n))
		return
	}
	for i, item := range n.Content {
		fn(i, item, fmt.Sprintf("%s[%d]", field, i))
	}
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

// resolve follows a $param reference. It returns the node to read, a suffix for error messages
// that says where the value came from, and false if the reference is broken (already reported).
func (d *Decoder) resolve(n *yaml.Node, field string) (*yaml.Node, string, bool) {
	if n.Kind != yaml.ScalarNode || n.Style != 0 || !strings.HasPrefix(n.Value, "$") {
		return n, "", true
	}
	name := n.Value[1:]
	p, ok := d.params[name]
	if !ok {
		names := make([]string, 0, len(d.params))
		for _, p := range d.Declared() {
			names = append(names, "$"+p.Name)
		}
		accepted := "none declared"
		if len(names) > 0 {
			accepted = "declared: " + strings.Join(names, ", ")
		}
		d.Errorf(n, field, "undefined parameter $%s (%s)", name, accepted)
		return nil, "", false
	}
	p.used = true
	from := fmt.Sprintf(" (from $%s, declared at line %d)", name, p.Line)
	if p.Override {
		from = fmt.Sprintf(" (from $%s = %q given with --param)", name, p.Value.Value)
	}
	// The value keeps the use site's line: that is where the user looks for the field.
	v := *p.Value
	v.Line, v.Column = n.Line, n.Column
	return &v, from, true
}

// Int reads an integer (or a $param holding one).
func (d *Decoder) Int(n *yaml.Node, field string) (int, bool) {
	v, from, ok := d.resolve(n, field)
	if !ok {
		return 0, false
	}
	if v.Kind != yaml.ScalarNode || (v.Tag != "" && v.Tag != "!!int" && v.Tag != "!!str") || (v.Tag == "!!str" && v.Style != 0) {
		d.Errorf(v, field, "want an integer, got %s%s", describe(v), from)
		return 0, false
	}
	i, err := strconv.Atoi(strings.ReplaceAll(v.Value, "_", ""))
	if err != nil {
		d.Errorf(v, field, "want an integer, got %q%s", v.Value, from)
		return 0, false
	}
	return i, true
}

// Float reads a number (or a $param holding one).
func (d *Decoder) Float(n *yaml.Node, field string) (float64, bool) {
	v, from, ok := d.resolve(n, field)
	if !ok {
		return 0, false
	}
	if v.Kind != yaml.ScalarNode || (v.Tag == "!!str" && v.Style != 0) {
		d.Errorf(v, field, "want a number, got %s%s", describe(v), from)
		return 0, false
	}
	f, err := strconv.ParseFloat(v.Value, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		d.Errorf(v, field, "want a number, got %q%s", v.Value, from)
		return 0, false
	}
	return f, true
}

// Bool reads true or false.
func (d *Decoder) Bool(n *yaml.Node, field string) (bool, bool) {
	v, from, ok := d.resolve(n, field)
	if !ok {
		return false, false
	}
	if v.Kind == yaml.ScalarNode {
		switch v.Value {
		case "true":
			return true, true
		case "false":
			return false, true
		}
	}
	d.Errorf(v, field, "want true or false, got %s%s", describe(v), from)
	return false, false
}

// String reads a scalar as a string.
func (d *Decoder) String(n *yaml.Node, field string) (string, bool) {
	v, from, ok := d.resolve(n, field)
	if !ok {
		return "", false
	}
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		d.Errorf(v, field, "want a string, got %s%s", describe(v), from)
		return "", false
	}
	return v.Value, true
}

// Duration reads a Go duration such as 30s or 5m.
func (d *Decoder) Duration(n *yaml.Node, field string) (time.Duration, bool) {
	v, from, ok := d.resolve(n, field)
	if !ok {
		return 0, false
	}
	if v.Kind != yaml.ScalarNode {
		d.Errorf(v, field, "want a duration such as 30s or 5m, got %s%s", describe(v), from)
		return 0, false
	}
	dur, err := time.ParseDuration(v.Value)
	if err != nil {
		d.Errorf(v, field, "want a duration such as 30s or 5m, got %q%s", v.Value, from)
		return 0, false
	}
	return dur, true
}

// Strings reads a list of strings, rejecting duplicates.
func (d *Decoder) Strings(n *yaml.Node, field string) []string {
	var out []string
	d.Seq(n, field, func(_ int, item *yaml.Node, f string) {
		s, ok := d.String(item, f)
		if !ok {
			return
		}
		if slices.Contains(out, s) {
			d.Errorf(item, f, "%q listed twice", s)
			return
		}
		out = append(out, s)
	})
	return out
}

// describe names a node's kind for "want X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "null"
		case "!!bool":
			return "a boolean (" + n.Value + ")"
		case "!!str":
			return fmt.Sprintf("the string %q", n.Value)
		}
		return strconv.Quote(n.Value)
	}
	return "nothing"
}

// Header reads apiVersion and kind, which every gangbench file starts with, so a file of the wrong
// kind fails with one clear error rather than a list of unknown fields.
func Header(file string, root *yaml.Node, apiVersion, kind string) error {
	if root.Kind != yaml.MappingNode {
		return Errors{{File: file, Line: root.Line, Msg: "want a mapping with apiVersion and kind at the top"}}
	}
	var av, k *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		switch root.Content[i].Value {
		case "apiVersion":
			av = root.Content[i+1]
		case "kind":
			k = root.Content[i+1]
		}
	}
	var errs Errors
	switch {
	case av == nil:
		errs = append(errs, Error{File: file, Line: root.Line, Field: "apiVersion", Msg: "missing; want " + apiVersion})
	case av.Value != apiVersion:
		errs = append(errs, Error{File: file, Line: av.Line, Field: "apiVersion", Msg: fmt.Sprintf("%q is not supported; want %s", av.Value, apiVersion)})
	}
	switch {
	case k == nil:
		errs = append(errs, Error{File: file, Line: root.Line, Field: "kind", Msg: "missing; want " + kind})
	case k.Value != kind:
		errs = append(errs, Error{File: file, Line: k.Line, Field: "kind", Msg: fmt.Sprintf("%q where a %s is expected", k.Value, kind)})
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}
