package results

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// FileName is the name of the result file in a run directory.
const FileName = "run.json"

// Write writes r to dir/run.json atomically (temporary file, then rename), mode 0644, creating dir.
// An empty APIVersion or Kind is written as SchemaVersion and "Run"; r itself is not modified.
func Write(dir string, r *Run) error {
	path := filepath.Join(dir, FileName)
	if r == nil {
		return fmt.Errorf("writing %s: nil run", path)
	}
	out := *r
	if out.APIVersion == "" {
		out.APIVersion = SchemaVersion
	}
	if out.Kind == "" {
		out.Kind = Kind
	}
	if err := out.Validate(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	data, err := json.MarshalIndent(&out, "", "  ")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	data = append(data, '\n')
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(dir, "."+FileName+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Read reads dir/run.json. It rejects other schema versions, files without apiVersion or kind,
// unknown fields and invalid content, naming the file in every error.
func Read(dir string) (*Run, error) {
	path := filepath.Join(dir, FileName)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading run: %w", err) // names path; errors.Is(err, fs.ErrNotExist) works
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(data, &head); err != nil { // also rejects trailing data
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	switch {
	case head.APIVersion == "":
		return nil, fmt.Errorf("%s has no apiVersion; is it a gangbench run file?", path)
	case head.APIVersion != SchemaVersion:
		return nil, fmt.Errorf("%s in %s has apiVersion %s; this gangbench reads %s", FileName, dir, head.APIVersion, SchemaVersion)
	case head.Kind == "":
		return nil, fmt.Errorf("%s has no kind; is it a gangbench run file?", path)
	case head.Kind != Kind:
		return nil, fmt.Errorf("%s has kind %q; want %q", path, head.Kind, Kind)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	r := new(Run)
	if err := dec.Decode(r); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("invalid %s: %w", path, err)
	}
	return r, nil
}
