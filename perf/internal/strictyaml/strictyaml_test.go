package strictyaml

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestDecoder(t *testing.T) {
	root, err := Parse("f.yaml", []byte(`params: {n: 3, flag: true, d: 5s, x: 0.5, unused: 1}
a: $n
b: $flag
c: $d
e: $x
l: [p, q, p]
s: "$n"
`))
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder("f.yaml")
	d.DeclareParams(root.Content[1], "params", map[string]string{"n": "7"})
	var got []any
	d.Map(root, "", []string{"params", "a", "b", "c", "e", "l", "s"}, func(key string, _, v *yaml.Node) {
		switch key {
		case "a":
			n, _ := d.Int(v, key)
			got = append(got, n)
		case "b":
			b, _ := d.Bool(v, key)
			got = append(got, b)
		case "c":
			x, _ := d.Duration(v, key)
			got = append(got, x)
		case "e":
			f, _ := d.Float(v, key)
			got = append(got, f)
		case "l":
			got = append(got, strings.Join(d.Strings(v, key), ","))
		case "s":
			s, _ := d.String(v, key) // a quoted "$n" is a string, not a reference
			got = append(got, s)
		}
	})
	d.CheckUnusedParams("params")
	want := []any{7, true, 5 * time.Second, 0.5, "p,q", "$n"}
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Fatalf("decoded %v, want %v", got, want)
		}
	}
	wantErr := "f.yaml:1: params.unused: declared but never used (no field says $unused; typo?)\n" +
		`f.yaml:6: l[2]: "p" listed twice`
	if err := d.Err(); err == nil || err.Error() != wantErr {
		t.Errorf("errors:\n%v\nwant:\n%s", err, wantErr)
	}
	if !d.Failed("l[2]") || d.Failed("a") {
		t.Error("Failed reports the fields that had errors")
	}
}

func TestErrorForms(t *testing.T) {
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{File: "f", Line: 3, Field: "a.b", Msg: "bad"}, "f:3: a.b: bad"},
		{Error{File: "f", Line: 3, Msg: "bad"}, "f:3: bad"},
		{Error{File: "f", Field: "a", Msg: "bad"}, "f: a: bad"},
		{Error{File: "f", Msg: "bad"}, "f: bad"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%q, want %q", got, tc.want)
		}
	}
}
