package results

import (
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string           `xml:"name,attr"`
	Tests      int              `xml:"tests,attr"`
	Failures   int              `xml:"failures,attr"`
	Errors     int              `xml:"errors,attr"`
	Skipped    int              `xml:"skipped,attr"`
	Time       string           `xml:"time,attr"`
	Timestamp  string           `xml:"timestamp,attr,omitempty"`
	Hostname   string           `xml:"hostname,attr,omitempty"`
	Properties *junitProperties `xml:"properties"`
	Cases      []junitCase      `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name       string           `xml:"name,attr"`
	Classname  string           `xml:"classname,attr"`
	Time       string           `xml:"time,attr"`
	Properties *junitProperties `xml:"properties"`
	Failure    *junitResult     `xml:"failure"`
	Error      *junitResult     `xml:"error"`
	Skipped    *junitResult     `xml:"skipped"`
	SystemOut  *junitResult     `xml:"system-out"`
}

type junitProperties struct {
	List []junitProperty `xml:"property"`
}

type junitResult struct {
	Message string `xml:"message,attr,omitempty"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",cdata"`
}

// WriteJUnit writes r as JUnit XML: a <testsuite> per suite (in order of first appearance) carrying the
// environment as properties, a <testcase> per case. fail and slo-violation become <failure>, error
// becomes <error>, skip <skipped>. An interrupted run gets an extra "gangbench" suite with an <error>
// so CI cannot mistake partial results for a pass. Text is stripped of ANSI escapes and characters XML
// cannot hold.
func WriteJUnit(w io.Writer, r *Run) error {
	sum := r.Summary()
	props := junitEnvProperties(r)
	doc := junitSuites{Name: title(r), Time: junitTime(sum.Duration)}
	for _, name := range sum.Suites {
		ss := sum.BySuite[name]
		s := junitSuite{
			Name: name, Tests: ss.Total, Failures: ss.Failed + ss.SLOViolations, Errors: ss.Errors,
			Skipped: ss.Skipped, Time: junitTime(ss.Duration), Hostname: xmlText(r.Environment.Host.Hostname),
			Properties: props,
		}
		if !r.Started.IsZero() {
			s.Timestamp = r.Started.UTC().Format("2006-01-02T15:04:05")
		}
		for _, c := range r.Cases {
			if suiteName(c) == name {
				s.Cases = append(s.Cases, junitCaseOf(c))
			}
		}
		doc.Suites = append(doc.Suites, s)
	}
	if r.Interrupted {
		doc.Suites = append(doc.Suites, junitSuite{
			Name: "gangbench", Tests: 1, Errors: 1, Time: junitTime(0), Properties: props,
			Cases: []junitCase{{
				Name: "run completed", Classname: "gangbench", Time: junitTime(0),
				Error: &junitResult{Message: "INTERRUPTED: partial results", Type: "interrupted",
					Text: "the run was stopped by a signal; cases that did not run are missing from this report"},
			}},
		})
	}
	for _, s := range doc.Suites {
		doc.Tests += s.Tests
		doc.Failures += s.Failures
		doc.Errors += s.Errors
		doc.Skipped += s.Skipped
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("writing JUnit XML: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func junitCaseOf(c Case) junitCase {
	jc := junitCase{
		Name:      xmlText(strings.TrimSpace(c.ID + " " + firstLine(c.Name))),
		Classname: "gangbench." + xmlText(suiteName(c)),
		Time:      junitTime(c.Duration),
	}
	var props []junitProperty
	if c.Ref != "" {
		props = append(props, junitProperty{"ref", xmlText(c.Ref)})
	}
	for _, k := range sortedKeys(c.Measurements) {
		props = append(props, junitProperty{"measurement." + xmlText(k), strconv.FormatFloat(c.Measurements[k], 'g', -1, 64)})
	}
	if props != nil {
		jc.Properties = &junitProperties{props}
	}
	msg := xmlText(c.Message)
	res := &junitResult{Message: firstLine(msg), Type: string(c.Verdict), Text: msg}
	switch c.Verdict {
	case Pass:
	case Skip:
		res.Type = ""
		jc.Skipped = res
	case Fail, SLOViolation:
		jc.Failure = res
	default:
		jc.Error = res
	}
	if len(c.Artifacts) > 0 {
		jc.SystemOut = &junitResult{Text: "artifacts:\n" + xmlText(strings.Join(c.Artifacts, "\n"))}
	}
	return jc
}

func junitEnvProperties(r *Run) *junitProperties {
	e := r.Environment
	var ps []junitProperty
	add := func(name, value string) {
		if value != "" && value != "0" {
			ps = append(ps, junitProperty{xmlText(name), xmlText(value)})
		}
	}
	add("runID", r.ID)
	add("command", r.Command)
	add("provider", e.Provider)
	add("kubernetesVersion", e.KubernetesVersion)
	add("schedulerVersion", e.SchedulerVersion)
	add("schedulerBinary", e.SchedulerBinary)
	add("nodes", strconv.Itoa(e.Nodes))
	add("gpusPerNode", strconv.Itoa(e.GPUsPerNode))
	add("host.hostname", e.Host.Hostname)
	add("host.cores", strconv.Itoa(e.Host.Cores))
	add("host.platform", strings.Trim(e.Host.GOOS+"/"+e.Host.GOARCH, "/"))
	for _, k := range sortedKeys(e.FeatureGates) {
		add("featureGate."+k, e.FeatureGates[k])
	}
	for _, k := range sortedKeys(e.Extra) {
		add("extra."+k, e.Extra[k])
	}
	if r.Interrupted {
		add("interrupted", "true")
	}
	if ps == nil {
		return nil
	}
	return &junitProperties{ps}
}

func junitTime(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// xmlText strips ANSI escapes and replaces characters that XML 1.0 cannot represent (other control
// characters, invalid UTF-8) with U+FFFD, so the text is safe even inside CDATA.
func xmlText(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' || r >= 0x20 && r <= 0xD7FF ||
			r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF {
			return r
		}
		return '\uFFFD'
	}, strings.ToValidUTF8(strings.ReplaceAll(StripANSI(s), "\r\n", "\n"), "\uFFFD"))
}
