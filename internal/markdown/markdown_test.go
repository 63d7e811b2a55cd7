package markdown

import "testing"

func TestInline(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"a | b", `a \| b`},
		{"<b>x</b>", "&lt;b&gt;x&lt;/b&gt;"},
		{"one\ntwo\r\nthree\rfour", "one two three four"},
		{"**bold** and `code`", "**bold** and `code`"},
		{"tab\tstays", "tab\tstays"},
	}
	for _, tt := range tests {
		if got := Inline(tt.in); got != tt.want {
			t.Errorf("Inline(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestWriterBlocks(t *testing.T) {
	var w Writer
	w.Heading(1, "run: FAIL")
	w.Paragraph("**2 of 3** passed.\n")
	w.Heading(2, "Suites | all")
	w.Table(Col("suite"), Num("passed"), Col(""))
	w.Row("a|b", "2", "")
	w.Row("**total**", "3", "x\ny")
	w.List()
	w.List("one", "<two>")
	w.Heading(9, "deep")
	w.Heading(0, "shallow")
	w.Code("text", "has ``` inside\n")
	w.Paragraph("end")
	want := "# run: FAIL\n" +
		"\n**2 of 3** passed.\n" +
		"\n## Suites \\| all\n" +
		"\n| suite | passed | |\n|---|---:|---|\n" +
		"| a\\|b | 2 |  |\n" +
		"| **total** | 3 | x y |\n" +
		"\n- one\n- &lt;two&gt;\n" +
		"\n###### deep\n" +
		"\n# shallow\n" +
		"\n````text\nhas ``` inside\n````\n" +
		"\nend\n"
	if got := w.String(); got != want {
		t.Errorf("document:\n%s\nwant:\n%s", got, want)
	}
}

func TestEmptyWriter(t *testing.T) {
	var w Writer
	w.List()
	if got := w.String(); got != "" {
		t.Errorf("a list of no items wrote %q", got)
	}
	w.Paragraph("first")
	if got := w.String(); got != "first\n" {
		t.Errorf("the first block is not preceded by a blank line: %q", got)
	}
}
