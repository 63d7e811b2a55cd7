package lab

import (
	"bytes"
	"embed"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// The lab's three manifests, in the file names the lab applies them by.
//
//go:embed manifests/*.yaml
var manifestFS embed.FS

// Manifest names, in the order the lab applies them.
const (
	BasicControl = "02-basic-control.yaml"
	NativeGang   = "01-native-gang.yaml"
	Elastic      = "03-elastic.yaml"
)

// imagePlaceholder is what the manifests say where the pause image goes: the image a node holds
// depends on the node image, so it is filled in at load time.
const imagePlaceholder = "IMAGE"

// Manifest returns the text of a lab manifest with image filled in.
func Manifest(name, image string) ([]byte, error) {
	b, err := manifestFS.ReadFile("manifests/" + name)
	if err != nil {
		return nil, fmt.Errorf("lab manifest %s: %w", name, err)
	}
	return bytes.ReplaceAll(b, []byte("image: "+imagePlaceholder), []byte("image: "+image)), nil
}

// Decode splits a manifest into its objects, in order, decoded strictly into the types the lab
// uses (Namespace, PodGroup, Pod): a misspelled field or another kind is an error naming the file,
// the document and the kind.
func Decode(file string, b []byte) ([]runtime.Object, error) {
	var out []runtime.Object
	for i, doc := range splitDocs(b) {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, i+1, err)
		}
		var obj runtime.Object
		switch meta.APIVersion + " " + meta.Kind {
		case "v1 Namespace":
			obj = &corev1.Namespace{}
		case "v1 Pod":
			obj = &corev1.Pod{}
		case schedv1beta1.SchemeGroupVersion.String() + " PodGroup":
			obj = &schedv1beta1.PodGroup{}
		default:
			return nil, fmt.Errorf("%s: document %d: apiVersion %q kind %q is not one the lab uses (v1 Namespace, v1 Pod, %s PodGroup)", file, i+1, meta.APIVersion, meta.Kind, schedv1beta1.SchemeGroupVersion)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("%s: document %d (%s): %w", file, i+1, meta.Kind, err)
		}
		out = append(out, obj)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no objects", file)
	}
	return out, nil
}

// splitDocs splits YAML at document separators and drops documents that hold only comments.
func splitDocs(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range strings.Split("\n"+string(b), "\n---") {
		body := false
		for _, l := range strings.Split(d, "\n") {
			if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
				body = true
				break
			}
		}
		if body {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}
