package k8sbin

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// goModFile is the part of a go.mod this package needs. A small hand parser
// is enough for the machine-generated go.mod of k8s.io/kubernetes and
// avoids another dependency.
type goModFile struct {
	Module  string
	Go      string            // e.g. "1.26.0"
	Godebug []string          // e.g. "default=go1.26"
	Require map[string]string // module path -> version
	Replace []replaceDirective
}

type replaceDirective struct {
	Old string // "path" or "path version"
	New string // "./local/dir" or "path version"
}

func (r replaceDirective) oldPath() string {
	f := strings.Fields(r.Old)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// isLocal reports whether the replacement is a filesystem path, the form
// kubernetes uses for its staging repos.
func (r replaceDirective) isLocal() bool {
	return strings.HasPrefix(r.New, "./") || strings.HasPrefix(r.New, "../") || strings.HasPrefix(r.New, "/")
}

func parseGoMod(data []byte) (*goModFile, error) {
	mf := &goModFile{Require: map[string]string{}}
	block := "" // verb of the open "verb (" block, if any
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		var verb, rest string
		if block != "" {
			if line == ")" {
				block = ""
				continue
			}
			verb, rest = block, line
		} else {
			verb, rest, _ = strings.Cut(line, " ")
			rest = strings.TrimSpace(rest)
			if rest == "(" {
				block = verb
				continue
			}
		}
		switch verb {
		case "module":
			mf.Module = strings.Trim(rest, `"`)
		case "go":
			mf.Go = rest
		case "godebug":
			mf.Godebug = append(mf.Godebug, rest)
		case "require":
			f := strings.Fields(rest)
			if len(f) != 2 {
				return nil, fmt.Errorf("go.mod line %d: malformed require %q", lineNo, rest)
			}
			mf.Require[f[0]] = f[1]
		case "replace":
			oldSide, newSide, ok := strings.Cut(rest, "=>")
			if !ok {
				return nil, fmt.Errorf("go.mod line %d: malformed replace %q", lineNo, rest)
			}
			mf.Replace = append(mf.Replace, replaceDirective{
				Old: strings.Join(strings.Fields(oldSide), " "),
				New: strings.Join(strings.Fields(newSide), " "),
			})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if block != "" {
		return nil, fmt.Errorf("go.mod: unterminated %s block", block)
	}
	return mf, nil
}

// stagingVersion maps a Kubernetes version to the version its staging
// repos are published under: v1.37.2 -> v0.37.2, v1.38.0-rc.1 -> v0.38.0-rc.1.
func stagingVersion(kubeVersion string) string {
	_, minor, patch, pre := splitVersion(kubeVersion)
	return "v0." + minor + "." + patch + pre
}

// wrapperGoMod renders the go.mod of the throwaway module that builds
// kubernetes' commands. k8s.io/kubernetes cannot be `go install`ed
// directly: its go.mod replaces every k8s.io/<staging> module with
// ./staging/src/k8s.io/<staging>, and replace directives only apply in the
// main module. So the wrapper requires k8s.io/kubernetes and repeats those
// replaces, pointed at the published staging modules instead. It copies
// kubernetes' go and godebug lines so the build behaves as upstream's does.
func wrapperGoMod(kubeVersion string, k *goModFile) string {
	var b strings.Builder
	b.WriteString("module gangbench.local/k8sbuild\n")
	if k.Go != "" {
		fmt.Fprintf(&b, "\ngo %s\n", k.Go)
	}
	switch len(k.Godebug) {
	case 0:
	case 1:
		fmt.Fprintf(&b, "\ngodebug %s\n", k.Godebug[0])
	default:
		b.WriteString("\ngodebug (\n")
		for _, g := range k.Godebug {
			fmt.Fprintf(&b, "\t%s\n", g)
		}
		b.WriteString(")\n")
	}
	fmt.Fprintf(&b, "\nrequire k8s.io/kubernetes %s\n", kubeVersion)
	if len(k.Replace) > 0 {
		sv := stagingVersion(kubeVersion)
		b.WriteString("\nreplace (\n")
		for _, r := range k.Replace {
			to := r.New
			if r.isLocal() {
				to = r.oldPath() + " " + sv
			}
			fmt.Fprintf(&b, "\t%s => %s\n", r.Old, to)
		}
		b.WriteString(")\n")
	}
	return b.String()
}
