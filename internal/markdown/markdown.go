// Package markdown writes the GitHub-flavoured markdown of gangbench's reports (the perf report,
// the run summary and the comparison): headings, paragraphs, lists, code blocks and tables, one
// blank line between blocks, and text from run files escaped so that it cannot break a table row,
// a list item or a heading. It is a leaf package (the standard library only), so results, which
// imports no other package of ours except leaf helpers, can use it.
package markdown

import (
	"strings"
)

// inline is what Inline replaces: line breaks (CommonMark ends a line at a lone CR too), the pipe
// that ends a table cell, and the angle brackets that would start inline HTML.
var inline = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "|", `\|`, "<", "&lt;", ">", "&gt;")

// Inline makes s safe on one markdown line or in a table cell: no line breaks, no pipes, no HTML.
// Emphasis and code markers are left alone, so a caller may wrap escaped text in them. It does not
// strip terminal escapes; callers that show text from run files strip them first.
func Inline(s string) string { return inline.Replace(s) }

// Align is a table column's alignment.
type Align int

const (
	// AlignNone leaves the alignment to the renderer (left in GitHub's): "---".
	AlignNone Align = iota
	// AlignRight suits numbers: "---:".
	AlignRight
)

// Column is one column of a table.
type Column struct {
	Head  string
	Align Align
}

// Col is a column with the default alignment.
func Col(head string) Column { return Column{Head: head} }

// Num is a right-aligned column, for numbers.
func Num(head string) Column { return Column{Head: head, Align: AlignRight} }

// Writer builds a markdown document block by block. Every block method starts its block on a new
// paragraph (a blank line after whatever came before) and ends it with a newline; Row and Item
// continue the table or list before them. The zero Writer is ready to use.
type Writer struct {
	b strings.Builder
}

// String is the document so far.
func (w *Writer) String() string { return w.b.String() }

// block separates a new block from the one before it.
func (w *Writer) block() {
	if w.b.Len() > 0 {
		w.b.WriteByte('\n')
	}
}

// Heading writes a heading of level 1 to 6 (clamped); text is escaped.
func (w *Writer) Heading(level int, text string) {
	w.block()
	w.b.WriteString(strings.Repeat("#", min(max(level, 1), 6)) + " " + Inline(text) + "\n")
}

// Paragraph writes a block of markdown as it is (emphasis, links, inline HTML, several lines): the
// caller escapes what came from elsewhere with Inline.
func (w *Writer) Paragraph(md string) {
	w.block()
	w.b.WriteString(strings.TrimSuffix(md, "\n") + "\n")
}

// List writes a bulleted list of items, each escaped onto one line. No items, no block.
func (w *Writer) List(items ...string) {
	if len(items) == 0 {
		return
	}
	w.block()
	for _, it := range items {
		w.b.WriteString("- " + Inline(it) + "\n")
	}
}

// Code writes text as a fenced code block with an info string (e.g. "text"). The fence is longer
// than any run of backticks in text, so the text cannot close it.
func (w *Writer) Code(info, text string) {
	w.block()
	fence := "```"
	for strings.Contains(text, fence) {
		fence += "`"
	}
	w.b.WriteString(fence + info + "\n" + strings.TrimSuffix(text, "\n") + "\n" + fence + "\n")
}

// Table starts a table: the head row and the delimiter row. A column without a heading is written
// "| |". Rows follow with Row.
func (w *Writer) Table(cols ...Column) {
	w.block()
	w.b.WriteByte('|')
	for _, c := range cols {
		if c.Head == "" {
			w.b.WriteString(" |")
		} else {
			w.b.WriteString(" " + Inline(c.Head) + " |")
		}
	}
	w.b.WriteString("\n|")
	for _, c := range cols {
		if c.Align == AlignRight {
			w.b.WriteString("---:|")
		} else {
			w.b.WriteString("---|")
		}
	}
	w.b.WriteByte('\n')
}

// Row writes one row of the table Table started; each cell is escaped (emphasis markers pass, so
// "**" + s + "**" is a bold cell).
func (w *Writer) Row(cells ...string) {
	w.b.WriteByte('|')
	for _, c := range cells {
		w.b.WriteString(" " + Inline(c) + " |")
	}
	w.b.WriteByte('\n')
}
